#include "eplb/formats/torch_pickle.h"

#include <array>
#include <bit>
#include <cstring>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "eplb/base/excerpt.h"

namespace eplb {
namespace {

// A pickle that builds more values than this is no load dump (a dump's structure is a few
// values per tensor; its numbers live in the archive's data entries).
constexpr size_t kMaxNodes = size_t{8} << 20;
constexpr size_t kMaxTensorDims = 16;
// Every tensor's elements fit comfortably in int64 byte offsets.
constexpr int64_t kMaxElements = int64_t{1} << 40;
// torch.save names storages by number; a longer key is no storage of a dump (and is copied into
// every tensor view of it).
constexpr size_t kMaxStorageKey = 64;
// REDUCE's callables take at most this many arguments (_rebuild_tensor_v2 with its metadata).
constexpr size_t kMaxReduceArgs = 7;

// Storage types torch.save names (torch.<X>Storage) and the dtype each holds.
constexpr std::array<std::pair<std::string_view, std::string_view>, 12> kStorageTypes{{
    {"DoubleStorage", "F64"},
    {"FloatStorage", "F32"},
    {"HalfStorage", "F16"},
    {"BFloat16Storage", "BF16"},
    {"LongStorage", "I64"},
    {"IntStorage", "I32"},
    {"ShortStorage", "I16"},
    {"CharStorage", "I8"},
    {"ByteStorage", "U8"},
    {"BoolStorage", "BOOL"},
    {"ComplexFloatStorage", "C64"},
    {"ComplexDoubleStorage", "C128"},
}};
// torch dtypes as globals (a pickled torch.float32 is GLOBAL torch float32).
constexpr std::array<std::pair<std::string_view, std::string_view>, 10> kDtypes{{
    {"float64", "F64"},
    {"float32", "F32"},
    {"float16", "F16"},
    {"bfloat16", "BF16"},
    {"int64", "I64"},
    {"int32", "I32"},
    {"int16", "I16"},
    {"int8", "I8"},
    {"uint8", "U8"},
    {"bool", "BOOL"},
}};

std::string OpcodeName(uint8_t op) {
  switch (op) {
    case 'b':
      return "BUILD (sets an object's state)";
    case 'i':
      return "INST (creates an object)";
    case 'o':
      return "OBJ (creates an object)";
    case 0x81:
      return "NEWOBJ (creates an object)";
    case 0x92:
      return "NEWOBJ_EX (creates an object)";
    case 0x82:
    case 0x83:
    case 0x84:
      return "EXT (a registered extension)";
    case 'P':
      return "PERSID (a text persistent id)";
    case 0x97:
    case 0x98:
      return "an out-of-band buffer";
    case 0x8f:
    case 0x90:
    case 0x91:
      return "a set";
    case 'I':
    case 'L':
    case 'F':
    case 'S':
    case 'V':
    case 'p':
    case 'g':
      return "a protocol-0 text opcode";
    default:
      return fmt::format("opcode 0x{:02x}", op);
  }
}

// Whether `op` is an opcode of any pickle protocol (0 to 5): one that is not means damage, not a
// refused construct.
bool IsPickleOpcode(uint8_t op) {
  constexpr std::string_view kText = "().012FIJKLMNPQRSTUVXabcde}ghijl]opqrstu)G";
  return (op >= 0x80 && op <= 0x98) || kText.find(static_cast<char>(op)) != std::string_view::npos;
}

class Unpickler {
 public:
  Unpickler(std::string_view data, const std::string& name) : data_(data), name_(name) {}

  Result<PickleGraph> Run() {
    while (true) {
      if (pos_ >= data_.size()) return Bad("the pickle ends before its STOP opcode");
      const size_t at = pos_;
      const uint8_t op = static_cast<uint8_t>(data_[pos_++]);
      Status s = Step(op, at);
      if (!s.ok()) return s;
      if (stopped_) break;
      if (graph_.nodes.size() > kMaxNodes) {
        return Bad(fmt::format("the pickle builds over {} values; not a load dump", kMaxNodes));
      }
    }
    if (stack_.size() != 1 || !marks_.empty()) {
      return Bad("the pickle leaves other values on its stack; a damaged pickle");
    }
    graph_.root = stack_.back();
    return std::move(graph_);
  }

 private:
  Status Bad(const std::string& what) const {
    return Status::InvalidArgument(fmt::format("{}: {}", name_, what));
  }
  Status BadAt(size_t at, const std::string& what) const {
    return Bad(fmt::format("byte {}: {}", at, what));
  }

  Result<std::string_view> Take(size_t n, size_t at) {
    if (n > data_.size() - pos_) return BadAt(at, "the pickle is truncated inside an opcode");
    std::string_view out = data_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  Result<uint64_t> Uint(int width, size_t at) {
    EPLB_ASSIGN_OR_RETURN(std::string_view b, Take(static_cast<size_t>(width), at));
    uint64_t v = 0;
    for (int i = width - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(b[i]);
    return v;
  }

  int32_t Add(PickleNode node) {
    graph_.nodes.push_back(std::move(node));
    return static_cast<int32_t>(graph_.nodes.size() - 1);
  }
  int32_t AddInt(int64_t v) {
    PickleNode n;
    n.kind = PickleKind::kInt;
    n.integer = v;
    return Add(std::move(n));
  }
  int32_t AddString(std::string_view s) {
    PickleNode n;
    n.kind = PickleKind::kString;
    n.text = std::string(s);
    return Add(std::move(n));
  }
  int32_t AddContainer(PickleKind kind, std::vector<int32_t> items = {}) {
    PickleNode n;
    n.kind = kind;
    n.items = std::move(items);
    return Add(std::move(n));
  }

  Result<int32_t> Pop(size_t at) {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) {
      return BadAt(at, "an opcode pops an empty stack; a damaged pickle");
    }
    int32_t v = stack_.back();
    stack_.pop_back();
    return v;
  }
  Result<std::vector<int32_t>> PopToMark(size_t at) {
    if (marks_.empty()) return BadAt(at, "an opcode needs a MARK that is not there");
    std::vector<int32_t> items(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()),
                               stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }
  Result<int32_t> Top(size_t at) {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) {
      return BadAt(at, "an opcode reads an empty stack; a damaged pickle");
    }
    return stack_.back();
  }

  Status Push(int32_t v) {
    stack_.push_back(v);
    return Status::Ok();
  }

  // dict[key] = value, as Python sets it: a string key already there keeps its place and takes
  // the new value, so that a pickle repeating a key millions of times builds a dict of one item.
  // Other keys (never looked up) are kept as they come.
  void SetItem(int32_t dict, int32_t key, int32_t value) {
    PickleNode& node = graph_.nodes[static_cast<size_t>(dict)];
    const PickleNode& k = graph_.at(key);
    if (k.kind == PickleKind::kString) {
      auto [id, fresh_id] =
          graph_.key_ids.try_emplace(k.text, static_cast<uint32_t>(graph_.key_ids.size()));
      const uint64_t slot = (static_cast<uint64_t>(static_cast<uint32_t>(dict)) << 32) | id->second;
      auto [it, fresh] =
          graph_.key_slots.try_emplace(slot, static_cast<uint32_t>(node.items.size()));
      if (!fresh) {
        node.items[it->second + 1] = value;
        return;
      }
    }
    node.items.push_back(key);
    node.items.push_back(value);
  }

  // Appends `items` to the list, or key/value pairs to the dict, at the top of the stack.
  Status Extend(PickleKind want, const std::vector<int32_t>& items, size_t at) {
    EPLB_ASSIGN_OR_RETURN(int32_t target, Top(at));
    PickleNode& node = graph_.nodes[static_cast<size_t>(target)];
    if (node.kind != want) {
      return BadAt(at, fmt::format("adds items to {}; only {} takes them",
                                   PickleGraph::KindName(node.kind), PickleGraph::KindName(want)));
    }
    if (want == PickleKind::kDict) {
      if (items.size() % 2 != 0) return BadAt(at, "a dict's items come in key, value pairs");
      for (size_t i = 0; i < items.size(); i += 2) SetItem(target, items[i], items[i + 1]);
      return Status::Ok();
    }
    node.items.insert(node.items.end(), items.begin(), items.end());
    return Status::Ok();
  }

  Status Global(std::string_view module, std::string_view name, size_t at) {
    PickleNode n;
    n.kind = PickleKind::kCallable;
    if (module == "torch._utils" && (name == "_rebuild_tensor_v2" || name == "_rebuild_tensor")) {
      n.text = std::string(name);
    } else if (module == "collections" && name == "OrderedDict") {
      n.text = "OrderedDict";
    } else if (module == "torch" && name == "Size") {
      n.text = "Size";
    } else {
      n.kind = PickleKind::kDtype;
      if (module == "torch") {
        for (const auto& [storage, dtype] : kStorageTypes) {
          if (name == storage) n.text = std::string(dtype);
        }
        for (const auto& [torch_name, dtype] : kDtypes) {
          if (name == torch_name) n.text = std::string(dtype);
        }
      }
      if (n.text.empty() && module == "torch._utils" && name == "_rebuild_parameter") {
        return BadAt(at,
                     "holds an nn.Parameter; eplb reads plain tensors (and runs no code from a "
                     "file): save t.detach() instead");
      }
      if (n.text.empty() && module.starts_with("numpy")) {
        return BadAt(at, fmt::format("holds a numpy object ({}.{}); eplb reads torch tensors (and "
                                     "runs no code from a file): save torch.from_numpy(a) instead",
                                     Excerpt(module), Excerpt(name)));
      }
      if (n.text.empty()) {
        return BadAt(at, fmt::format("refused to load {}.{}: a dump of expert load holds only "
                                     "tensors, numbers, strings and containers, and eplb runs no "
                                     "code from a file",
                                     Excerpt(module), Excerpt(name)));
      }
    }
    return Push(Add(std::move(n)));
  }

  Result<int64_t> IntArg(int32_t v, const char* what, size_t at) {
    const PickleNode& n = graph_.at(v);
    if (n.kind != PickleKind::kInt) {
      return BadAt(at, fmt::format("a tensor's {} is {}; expected an int", what,
                                   PickleGraph::KindName(n.kind)));
    }
    return n.integer;
  }
  Result<std::vector<int64_t>> IntTuple(int32_t v, const char* what, size_t at) {
    const PickleNode& n = graph_.at(v);
    if (n.kind != PickleKind::kTuple || n.items.size() > kMaxTensorDims) {
      return BadAt(at, fmt::format("a tensor's {} is {}; expected a tuple of at most {} ints", what,
                                   PickleGraph::KindName(n.kind), kMaxTensorDims));
    }
    std::vector<int64_t> out;
    for (int32_t item : n.items) {
      EPLB_ASSIGN_OR_RETURN(int64_t x, IntArg(item, what, at));
      if (x < 0) return BadAt(at, fmt::format("a tensor's {} holds {}; expected ≥ 0", what, x));
      out.push_back(x);
    }
    return out;
  }

  // torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, meta])
  // and _rebuild_tensor(storage, offset, size, stride), checked against the storage.
  Result<int32_t> RebuildTensor(const std::vector<int32_t>& args, bool v2, size_t at) {
    const size_t want = v2 ? 6 : 4;
    if (args.size() != want && !(v2 && args.size() == 7)) {
      return BadAt(
          at, fmt::format("a tensor is rebuilt from {} arguments; expected {}", args.size(), want));
    }
    const PickleNode& storage = graph_.at(args[0]);
    if (storage.kind != PickleKind::kStorage) {
      return BadAt(at, fmt::format("a tensor's storage is {}; expected a persistent storage",
                                   PickleGraph::KindName(storage.kind)));
    }
    TorchTensorView t = graph_.tensors[static_cast<size_t>(storage.tensor)];
    EPLB_ASSIGN_OR_RETURN(t.offset, IntArg(args[1], "storage offset", at));
    EPLB_ASSIGN_OR_RETURN(t.shape, IntTuple(args[2], "size", at));
    EPLB_ASSIGN_OR_RETURN(t.stride, IntTuple(args[3], "stride", at));
    if (t.offset < 0 || t.shape.size() != t.stride.size()) {
      return BadAt(at, fmt::format("a tensor of size ({}) has stride ({}) and offset {}; expected "
                                   "one stride per dimension and an offset ≥ 0",
                                   fmt::join(t.shape, ", "), fmt::join(t.stride, ", "), t.offset));
    }
    int64_t numel = 1, last = t.offset;
    for (size_t d = 0; d < t.shape.size(); ++d) {
      int64_t reach = 0;
      if (__builtin_mul_overflow(numel, t.shape[d], &numel) || numel > kMaxElements ||
          (t.shape[d] > 0 && (__builtin_mul_overflow(t.shape[d] - 1, t.stride[d], &reach) ||
                              __builtin_add_overflow(last, reach, &last)))) {
        return BadAt(at,
                     fmt::format("a tensor of size ({}) is too large", fmt::join(t.shape, ", ")));
      }
    }
    if (numel > 0 && last >= t.storage_numel) {
      return BadAt(at, fmt::format("a tensor of size ({}), stride ({}) and offset {} reaches "
                                   "element {} of a storage of {}",
                                   fmt::join(t.shape, ", "), fmt::join(t.stride, ", "), t.offset,
                                   last, t.storage_numel));
    }
    graph_.tensors.push_back(std::move(t));
    PickleNode n;
    n.kind = PickleKind::kTensor;
    n.tensor = static_cast<int32_t>(graph_.tensors.size() - 1);
    return Add(std::move(n));
  }

  Status Reduce(size_t at) {
    EPLB_ASSIGN_OR_RETURN(int32_t args_ref, Pop(at));
    EPLB_ASSIGN_OR_RETURN(int32_t callable_ref, Pop(at));
    const PickleNode& callable = graph_.at(callable_ref);
    const PickleNode& args_node = graph_.at(args_ref);
    if (callable.kind != PickleKind::kCallable) {
      return BadAt(at, fmt::format("REDUCE calls {}; only tensor rebuilds, OrderedDict and "
                                   "torch.Size are allowed",
                                   PickleGraph::KindName(callable.kind)));
    }
    if (args_node.kind != PickleKind::kTuple) {
      return BadAt(at, "REDUCE's arguments are not a tuple; a damaged pickle");
    }
    // Checked before the copy below, so that a huge tuple recalled for every REDUCE costs nothing.
    if (args_node.items.size() > kMaxReduceArgs) {
      return BadAt(at, fmt::format("REDUCE calls {} with {} arguments; it takes at most {}",
                                   callable.text, args_node.items.size(), kMaxReduceArgs));
    }
    const std::vector<int32_t> args = args_node.items;
    const std::string what = callable.text;
    if (what == "OrderedDict") {
      if (!args.empty()) return BadAt(at, "OrderedDict is called with arguments");
      return Push(AddContainer(PickleKind::kDict));
    }
    if (what == "Size") {
      if (args.size() != 1 || graph_.at(args[0]).kind != PickleKind::kTuple) {
        return BadAt(at, "torch.Size is called without one tuple");
      }
      // The tuple itself (tuples never change), not a copy: recalling a long tuple for many
      // Size calls costs one node.
      return Push(args[0]);
    }
    EPLB_ASSIGN_OR_RETURN(int32_t tensor, RebuildTensor(args, what == "_rebuild_tensor_v2", at));
    return Push(tensor);
  }

  // ('storage', torch.<X>Storage, key, location, numel)
  Status PersistentLoad(size_t at) {
    EPLB_ASSIGN_OR_RETURN(int32_t pid_ref, Pop(at));
    const PickleNode& pid = graph_.at(pid_ref);
    auto field = [&](size_t i, PickleKind kind) {
      return pid.items.size() == 5 && graph_.at(pid.items[i]).kind == kind;
    };
    if (pid.kind != PickleKind::kTuple || !field(0, PickleKind::kString) ||
        graph_.at(pid.items[0]).text != "storage" || !field(1, PickleKind::kDtype) ||
        !field(2, PickleKind::kString) || !field(4, PickleKind::kInt) ||
        graph_.at(pid.items[4]).integer < 0) {
      return BadAt(at,
                   "a persistent id is not ('storage', torch.<type>Storage, key, location, "
                   "element count), as torch.save writes them");
    }
    if (graph_.at(pid.items[2]).text.size() > kMaxStorageKey) {
      return BadAt(at, fmt::format("a storage key of {} bytes; torch.save names storages by "
                                   "number (at most {} bytes)",
                                   graph_.at(pid.items[2]).text.size(), kMaxStorageKey));
    }
    TorchTensorView t;
    t.dtype = graph_.at(pid.items[1]).text;
    t.storage = graph_.at(pid.items[2]).text;
    t.storage_numel = graph_.at(pid.items[4]).integer;
    graph_.tensors.push_back(std::move(t));
    PickleNode n;
    n.kind = PickleKind::kStorage;
    n.tensor = static_cast<int32_t>(graph_.tensors.size() - 1);
    return Push(Add(std::move(n)));
  }

  Status Memo(uint64_t key, size_t at) {
    EPLB_ASSIGN_OR_RETURN(int32_t v, Top(at));
    memo_[key] = v;
    return Status::Ok();
  }
  Status Recall(uint64_t key, size_t at) {
    auto it = memo_.find(key);
    if (it == memo_.end()) return BadAt(at, fmt::format("memo {} is read before it is set", key));
    return Push(it->second);
  }

  Status PushString(int width, size_t at) {
    EPLB_ASSIGN_OR_RETURN(uint64_t len, Uint(width, at));
    if (len > data_.size() - pos_) return BadAt(at, "a string runs past the pickle's end");
    EPLB_ASSIGN_OR_RETURN(std::string_view s, Take(len, at));
    return Push(AddString(s));
  }

  Status Step(uint8_t op, size_t at) {
    switch (op) {
      case 0x80: {  // PROTO
        EPLB_ASSIGN_OR_RETURN(uint64_t proto, Uint(1, at));
        if (proto < 2 || proto > 5) {
          return BadAt(at, fmt::format("pickle protocol {}; torch.save writes 2 to 5", proto));
        }
        return Status::Ok();
      }
      case 0x95:  // FRAME: a length hint
        return Take(8, at).status();
      case '.':  // STOP
        stopped_ = true;
        return Status::Ok();
      case '(':  // MARK
        marks_.push_back(stack_.size());
        return Status::Ok();
      case '0':  // POP
        return Pop(at).status();
      case '1':  // POP_MARK
        return PopToMark(at).status();
      case '2': {  // DUP
        EPLB_ASSIGN_OR_RETURN(int32_t v, Top(at));
        return Push(v);
      }
      case 'N':
        return Push(Add(PickleNode{}));
      case 0x88:
      case 0x89: {  // NEWTRUE, NEWFALSE
        PickleNode n;
        n.kind = PickleKind::kBool;
        n.boolean = op == 0x88;
        return Push(Add(std::move(n)));
      }
      case 'J': {  // BININT
        EPLB_ASSIGN_OR_RETURN(uint64_t v, Uint(4, at));
        return Push(AddInt(static_cast<int32_t>(static_cast<uint32_t>(v))));
      }
      case 'K': {  // BININT1
        EPLB_ASSIGN_OR_RETURN(uint64_t v, Uint(1, at));
        return Push(AddInt(static_cast<int64_t>(v)));
      }
      case 'M': {  // BININT2
        EPLB_ASSIGN_OR_RETURN(uint64_t v, Uint(2, at));
        return Push(AddInt(static_cast<int64_t>(v)));
      }
      case 0x8a:
      case 0x8b: {  // LONG1, LONG4: little-endian two's complement
        EPLB_ASSIGN_OR_RETURN(uint64_t n, Uint(op == 0x8a ? 1 : 4, at));
        if (n > 8) return BadAt(at, fmt::format("an integer of {} bytes is beyond int64", n));
        EPLB_ASSIGN_OR_RETURN(std::string_view b, Take(n, at));
        uint64_t v = 0;
        for (size_t i = n; i-- > 0;) v = (v << 8) | static_cast<uint8_t>(b[i]);
        if (n > 0 && n < 8 && (static_cast<uint8_t>(b[n - 1]) & 0x80)) v |= ~uint64_t{0} << (8 * n);
        return Push(AddInt(static_cast<int64_t>(v)));
      }
      case 'G': {  // BINFLOAT: big-endian double
        EPLB_ASSIGN_OR_RETURN(std::string_view b, Take(8, at));
        uint64_t bits = 0;
        for (char c : b) bits = (bits << 8) | static_cast<uint8_t>(c);
        PickleNode n;
        n.kind = PickleKind::kFloat;
        n.number = std::bit_cast<double>(bits);
        return Push(Add(std::move(n)));
      }
      case 'X':  // BINUNICODE
      case 'B':  // BINBYTES
        return PushString(4, at);
      case 0x8c:  // SHORT_BINUNICODE
      case 'C':   // SHORT_BINBYTES
      case 'U':   // SHORT_BINSTRING
        return PushString(1, at);
      case 0x8d:  // BINUNICODE8
      case 0x8e:  // BINBYTES8
      case 0x96:  // BYTEARRAY8
        return PushString(8, at);
      case 'T': {  // BINSTRING: a signed 4-byte length
        EPLB_ASSIGN_OR_RETURN(uint64_t len, Uint(4, at));
        if (len > 0x7FFFFFFF) return BadAt(at, "a string of negative length");
        pos_ -= 4;
        return PushString(4, at);
      }
      case ']':
        return Push(AddContainer(PickleKind::kList));
      case ')':
        return Push(AddContainer(PickleKind::kTuple));
      case '}':
        return Push(AddContainer(PickleKind::kDict));
      case 'l':
      case 't':
      case 'd': {  // LIST, TUPLE, DICT from the items above the mark
        EPLB_ASSIGN_OR_RETURN(std::vector<int32_t> items, PopToMark(at));
        if (op == 'd' && items.size() % 2 != 0) {
          return BadAt(at, "a dict's items come in key, value pairs");
        }
        if (op == 'd') {
          const int32_t dict = AddContainer(PickleKind::kDict);
          for (size_t i = 0; i < items.size(); i += 2) SetItem(dict, items[i], items[i + 1]);
          return Push(dict);
        }
        return Push(
            AddContainer(op == 'l' ? PickleKind::kList : PickleKind::kTuple, std::move(items)));
      }
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1..3
        std::vector<int32_t> items(static_cast<size_t>(op - 0x84));
        for (size_t i = items.size(); i-- > 0;) {
          EPLB_ASSIGN_OR_RETURN(items[i], Pop(at));
        }
        return Push(AddContainer(PickleKind::kTuple, std::move(items)));
      }
      case 'a': {  // APPEND
        EPLB_ASSIGN_OR_RETURN(int32_t v, Pop(at));
        return Extend(PickleKind::kList, {v}, at);
      }
      case 'e': {  // APPENDS
        EPLB_ASSIGN_OR_RETURN(std::vector<int32_t> items, PopToMark(at));
        return Extend(PickleKind::kList, items, at);
      }
      case 's': {  // SETITEM
        EPLB_ASSIGN_OR_RETURN(int32_t value, Pop(at));
        EPLB_ASSIGN_OR_RETURN(int32_t key, Pop(at));
        return Extend(PickleKind::kDict, {key, value}, at);
      }
      case 'u': {  // SETITEMS
        EPLB_ASSIGN_OR_RETURN(std::vector<int32_t> items, PopToMark(at));
        return Extend(PickleKind::kDict, items, at);
      }
      case 'q': {  // BINPUT
        EPLB_ASSIGN_OR_RETURN(uint64_t key, Uint(1, at));
        return Memo(key, at);
      }
      case 'r': {  // LONG_BINPUT
        EPLB_ASSIGN_OR_RETURN(uint64_t key, Uint(4, at));
        return Memo(key, at);
      }
      case 0x94:  // MEMOIZE
        return Memo(memo_.size(), at);
      case 'h': {  // BINGET
        EPLB_ASSIGN_OR_RETURN(uint64_t key, Uint(1, at));
        return Recall(key, at);
      }
      case 'j': {  // LONG_BINGET
        EPLB_ASSIGN_OR_RETURN(uint64_t key, Uint(4, at));
        return Recall(key, at);
      }
      case 'c': {  // GLOBAL "module\nname\n"
        std::string_view parts[2];
        for (std::string_view& part : parts) {
          const size_t end = data_.find('\n', pos_);
          if (end == std::string_view::npos || end - pos_ > 256) {
            return BadAt(at,
                         "damaged or truncated: a class name runs past the end or over 256 "
                         "bytes; save the dump again");
          }
          part = data_.substr(pos_, end - pos_);
          pos_ = end + 1;
        }
        return Global(parts[0], parts[1], at);
      }
      case 0x93: {  // STACK_GLOBAL: module and name from the stack
        EPLB_ASSIGN_OR_RETURN(int32_t name, Pop(at));
        EPLB_ASSIGN_OR_RETURN(int32_t module, Pop(at));
        if (graph_.at(name).kind != PickleKind::kString ||
            graph_.at(module).kind != PickleKind::kString) {
          return BadAt(at, "STACK_GLOBAL's module and name are not strings");
        }
        return Global(graph_.at(module).text, graph_.at(name).text, at);
      }
      case 'R':
        return Reduce(at);
      case 'Q':
        return PersistentLoad(at);
      default:
        if (!IsPickleOpcode(op)) {
          return BadAt(at, fmt::format("0x{:02x} is not a pickle opcode: data.pkl is damaged; "
                                       "save the dump again",
                                       op));
        }
        return BadAt(at, fmt::format("refused {}: a dump of expert load needs only tensors, "
                                     "numbers, strings and containers, and eplb runs no code "
                                     "from a file",
                                     OpcodeName(op)));
    }
  }

  std::string_view data_;
  const std::string& name_;
  size_t pos_ = 0;
  bool stopped_ = false;
  PickleGraph graph_;
  std::vector<int32_t> stack_;
  std::vector<size_t> marks_;
  std::map<uint64_t, int32_t> memo_;  // ordered: no chosen keys make it degrade
};

}  // namespace

int64_t TorchTensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int32_t PickleGraph::Get(int32_t dict, std::string_view key) const {
  const PickleNode& d = at(dict);
  if (d.kind != PickleKind::kDict) return -1;
  const auto id = key_ids.find(key);
  if (id == key_ids.end()) return -1;
  const auto slot =
      key_slots.find((static_cast<uint64_t>(static_cast<uint32_t>(dict)) << 32) | id->second);
  if (slot == key_slots.end()) return -1;
  // SetItem kept the key's first place and its last value, as Python does.
  return d.items[slot->second + 1];
}

std::string PickleGraph::KindName(PickleKind kind) {
  switch (kind) {
    case PickleKind::kNone:
      return "None";
    case PickleKind::kBool:
      return "a bool";
    case PickleKind::kInt:
      return "an int";
    case PickleKind::kFloat:
      return "a float";
    case PickleKind::kString:
      return "a string";
    case PickleKind::kList:
      return "a list";
    case PickleKind::kTuple:
      return "a tuple";
    case PickleKind::kDict:
      return "a dict";
    case PickleKind::kTensor:
      return "a tensor";
    case PickleKind::kStorage:
      return "a storage";
    case PickleKind::kDtype:
      return "a dtype";
    case PickleKind::kCallable:
      return "a class";
  }
  return "a value";
}

Result<PickleGraph> Unpickle(std::string_view data, const std::string& name) {
  return Unpickler(data, name).Run();
}

}  // namespace eplb
