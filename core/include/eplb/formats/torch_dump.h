// What reading a PyTorch `.pt` dump of expert load costs (torch_dump.cpp; the reader itself is
// ReadTorchDump in load_file.h).
//
// A dump's pickle can recall one value any number of times (its memo), so a small file can name
// one huge tensor a million times. The reader stays linear in the file: a memoised record or
// tensor is converted once (cached by its node in the pickle's graph), each archive entry is read
// and its CRC-32 checked once however many tensors view it, a record listed many times is summed
// once times its count, and the values a dump makes eplb materialise or add up are bounded by
// TorchDumpWorkBudget of its size: a dump over it is refused, naming the file, before the work.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "eplb/base/status.h"
#include "eplb/formats/load_file.h"

namespace eplb {

// Counted while reading, summed over the dumps read: what tests hold to linear.
struct TorchDumpWork {
  int64_t entries_checked = 0;  // archive entries read, their CRC-32 checked
  int64_t bytes_checked = 0;    // and their bytes
  int64_t tensors_read = 0;     // tensors converted to values
  int64_t values = 0;           // values materialised from tensors or added into counts
};

// Values per byte of a dump, and a floor for small files. An engine's dump materialises each of
// its stored values about once and adds it once; a forward pass's counts (layers × slots) are
// allocated once per pass, which for per_token records of one token in top-8 over 1,024 slots
// is ~16 values per byte of ids. A file that needs more than 32 is built to make eplb work, not
// a recording.
inline constexpr int64_t kTorchDumpValuesPerByte = 32;
inline constexpr int64_t kTorchDumpMinValues = int64_t{1} << 24;

// The most values a dump of `file_bytes` bytes may make eplb materialise or add up.
inline int64_t TorchDumpWorkBudget(int64_t file_bytes) {
  return kTorchDumpMinValues + kTorchDumpValuesPerByte * file_bytes;
}

// ReadTorchDump, adding what it did to `work` (when not null), also when it fails.
Result<LoadSeries> ReadTorchDump(const std::string& path, TorchDumpWork* work);

// The `physical_to_logical_map` ([layers][slots], -1 empty) of a torch.save'd dict: SGLang's
// --init-expert-location .pt form, vLLM's EPLB state. Read as ReadTorchDump reads a dump.
Result<std::vector<std::vector<int32_t>>> ReadTorchPlacementMap(const std::string& path);

}  // namespace eplb
