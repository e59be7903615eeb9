// The pickles inside PyTorch's `.pt` archives, read as data: no code in a file ever runs.
//
// Python's pickle is a program for a stack machine whose GLOBAL and REDUCE opcodes import and
// call anything. This reader interprets the opcodes that torch.save emits for plain containers
// and tensors (protocols 2 to 5) and nothing else: it calls no function and imports nothing.
// A GLOBAL is accepted only when its (module, name) pair is one of an exact list, compared as
// whole strings (no dotted names, no attribute lookups):
//
//   torch._utils   _rebuild_tensor_v2, _rebuild_tensor   -> a tensor view of a storage
//   collections    OrderedDict                           -> a dict
//   torch          Size                                  -> a tuple
//   torch          DoubleStorage, FloatStorage, ...      -> the dtype of a persistent storage
//   torch          float64, int32, bool, ...             -> a dtype value
//
// and every other global, opcode (BUILD, INST, OBJ, NEWOBJ, EXT*, PERSID, ...) or REDUCE of
// anything but those callables is refused, naming it and its byte offset. Persistent ids (torch's
// storages) must be `('storage', StorageType, key, location, numel)`.
//
// The result is a graph of values in one arena, addressed by index, so that a hostile file can
// neither recurse the reader nor its destructor, and its size is bounded by the pickle's. Work
// stays linear in the pickle too: a memoised value is one node however often the pickle recalls
// it (readers cache what they derive from it by index), a dict's repeated string keys collapse
// as they are set (the last value wins, as in Python), and Get is a lookup in ordered maps, so no
// dict of millions of keys, recalled thousands of times, is scanned per lookup. The maps are
// ordered, not hashed, so that no choice of keys or indices can make them degrade.
//
// Thread-safety: pure functions; a PickleGraph is immutable after Unpickle.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "eplb/base/status.h"

namespace eplb {

// A tensor as the pickle describes it: a strided view of one storage in the archive.
struct TorchTensorView {
  std::string dtype;    // safetensors' names: F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL,
                        // C64, C128
  std::string storage;  // the storage's key: its data is the archive's entry data/KEY
  int64_t storage_numel = 0;  // elements in the storage, as the persistent id says
  int64_t offset = 0;         // in elements
  std::vector<int64_t> shape, stride;
  int64_t numel() const;  // product of the shape (checked to fit in Unpickle)
};

enum class PickleKind {
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,  // str and bytes alike
  kList,
  kTuple,
  kDict,  // items hold key, value, key, value, ...
  kTensor,
  kStorage,   // a persistent storage, before a tensor wraps it
  kDtype,     // a torch dtype (text: safetensors' name) or a storage type (text: its dtype)
  kCallable,  // an allowed global that REDUCE may call (text: its name)
};

struct PickleNode {
  PickleKind kind = PickleKind::kNone;
  bool boolean = false;
  int64_t integer = 0;
  double number = 0;
  std::string text;
  std::vector<int32_t> items;
  int32_t tensor = -1;  // index into PickleGraph::tensors for kTensor and kStorage
};

struct PickleGraph {
  std::vector<PickleNode> nodes;
  std::vector<TorchTensorView> tensors;
  int32_t root = -1;

  const PickleNode& at(int32_t i) const { return nodes[static_cast<size_t>(i)]; }
  // The value under string key `key` of the dict `dict`, or -1: O(log n), whatever the dict.
  int32_t Get(int32_t dict, std::string_view key) const;
  // "a dict", "a list", "an int", ... for errors.
  static std::string KindName(PickleKind kind);

  // Filled by Unpickle: the texts of the strings used as dict keys, each with an id, and where in
  // its dict's items each (dict << 32 | key id) pair's key sits.
  std::map<std::string, uint32_t, std::less<>> key_ids;
  std::map<uint64_t, uint32_t> key_slots;
};

// The value `data` (a pickle, e.g. a `.pt` archive's data.pkl) describes. `name` (the file and
// entry) prefixes errors.
Result<PickleGraph> Unpickle(std::string_view data, const std::string& name);

}  // namespace eplb
