// PyTorch `.pt` dumps of expert load (SGLang's recorder, vLLM's EPLB window), read without
// Python: the zip container (zip_archive.h), its pickle as data (torch_pickle.h), and each
// tensor's bytes from the archive, every shape, stride and id checked before anything is
// allocated from it. The work stays linear in the file (torch_dump.h).
#include "eplb/formats/torch_dump.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "eplb/base/excerpt.h"

#include "eplb/formats/load_file.h"
#include "eplb/formats/safetensors.h"
#include "eplb/formats/torch_pickle.h"
#include "eplb/formats/zip_archive.h"

namespace fs = std::filesystem;

namespace eplb {
namespace {

// torch.save's pre-1.6 format: a bare pickle (protocol 2) that starts with a LONG1 magic number.
constexpr std::string_view kLegacyMagic =
    "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19";
constexpr int64_t kMaxPickleBytes = int64_t{64} << 20;
constexpr int64_t kMaxSeriesValues = kMaxSeriesBytes / static_cast<int64_t>(sizeof(double));
// As many experts as TensorRT-LLM's statistics reader allows.
constexpr int64_t kMaxExperts = int64_t{1} << 24;

// A tensor's values, row-major, as doubles.
struct Array {
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<double> values;
};

// One `.pt` archive: the file's bytes, its directory and its pickle, and what has been read of
// it, so that a value the pickle recalls many times is read once.
struct Dump {
  std::string path;
  std::string bytes;
  std::string prefix;  // the archive's top folder, with its '/'
  std::unique_ptr<ZipArchive> archive;
  PickleGraph graph;
  TorchDumpWork* work = nullptr;  // shared by the dumps of one read
  int64_t budget = 0;             // TorchDumpWorkBudget of the file's size
  mutable int64_t spent = 0;
  // Entries whose CRC-32 was checked, by their place in the directory, and tensors converted,
  // by their node in the graph: indexed, not hashed, so that no file makes a lookup degrade.
  mutable std::vector<std::optional<std::string_view>> entries;
  mutable std::vector<std::unique_ptr<Array>> arrays;
};

// Counts `values` against the dump's budget before they are materialised or added up.
Status Spend(const Dump& dump, int64_t values, const std::string& what) {
  if (values > dump.budget - dump.spent) {
    return Status::InvalidArgument(fmt::format(
        "{}: reading {} would take over {} values in all, the most a dump of {} may make eplb "
        "read or add up ({} per byte, at least {}); the dump recalls its tensors or records more "
        "often than a recording does",
        dump.path, what, dump.budget, FormatBytes(static_cast<int64_t>(dump.bytes.size())),
        kTorchDumpValuesPerByte, kTorchDumpMinValues));
  }
  dump.spent += values;
  dump.work->values += values;
  return Status::Ok();
}

// An entry's data, its CRC-32 checked the first time only.
Result<std::string_view> ReadEntry(const Dump& dump, const ZipArchive::Entry& entry) {
  const auto index = static_cast<size_t>(&entry - dump.archive->entries().data());
  dump.entries.resize(dump.archive->entries().size());
  if (dump.entries[index]) return *dump.entries[index];
  EPLB_ASSIGN_OR_RETURN(std::string_view data, dump.archive->Read(entry));
  ++dump.work->entries_checked;
  dump.work->bytes_checked += static_cast<int64_t>(data.size());
  dump.entries[index] = data;
  return data;
}

Result<std::unique_ptr<Dump>> OpenDump(const std::string& path, TorchDumpWork* work) {
  auto dump = std::make_unique<Dump>();
  dump->path = path;
  dump->work = work;
  EPLB_ASSIGN_OR_RETURN(dump->bytes, ReadTextFile(path));
  dump->budget = TorchDumpWorkBudget(static_cast<int64_t>(dump->bytes.size()));
  const std::string_view bytes = dump->bytes;
  if (bytes.starts_with(kLegacyMagic)) {
    return Status::InvalidArgument(
        path +
        ": saved in PyTorch's legacy format (torch.save with "
        "_use_new_zipfile_serialization=False, or torch before 1.6); eplb reads the zip "
        "format torch.save writes by default: load and save it again with a current torch");
  }
  if (!bytes.starts_with("PK\x03\x04")) {
    return Status::InvalidArgument(
        path + ": not a PyTorch archive (torch.save writes a zip file, which starts with 'PK')");
  }
  EPLB_ASSIGN_OR_RETURN(ZipArchive archive, ZipArchive::Open(bytes, path));
  dump->archive = std::make_unique<ZipArchive>(std::move(archive));

  // The pickle is TOP/data.pkl. TorchScript archives (torch.jit.save) keep code beside it:
  // refused before anything of them is read.
  const ZipArchive::Entry* pickle = nullptr;
  for (const ZipArchive::Entry& e : dump->archive->entries()) {
    const size_t slash = e.name.find('/');
    if (slash == std::string::npos) continue;
    const std::string_view rest = std::string_view(e.name).substr(slash + 1);
    if (rest.starts_with("code/") || rest == "constants.pkl" || rest.ends_with(".py")) {
      return Status::InvalidArgument(fmt::format(
          "{}: a TorchScript archive (torch.jit.save; it holds '{}'); eplb reads torch.save "
          "dumps of tensors and runs no code from a file",
          path, Excerpt(e.name)));
    }
    if (rest == "data.pkl") {
      if (pickle != nullptr) {
        return Status::InvalidArgument(path +
                                       ": holds two data.pkl entries; torch.save writes one");
      }
      pickle = &e;
      dump->prefix = e.name.substr(0, slash + 1);
    }
  }
  if (pickle == nullptr) {
    return Status::InvalidArgument(path +
                                   ": a zip archive without data.pkl; not a file torch.save wrote");
  }
  if (const ZipArchive::Entry* order = dump->archive->Find(dump->prefix + "byteorder")) {
    EPLB_ASSIGN_OR_RETURN(std::string_view text, ReadEntry(*dump, *order));
    if (text != "little") {
      return Status::InvalidArgument(fmt::format(
          "{}: its byteorder entry is '{}'; eplb reads dumps saved on little-endian machines", path,
          Excerpt(text)));
    }
  }
  if (pickle->size > static_cast<uint64_t>(kMaxPickleBytes)) {
    return Status::InvalidArgument(
        fmt::format("{}: data.pkl is {}; a load dump's structure takes far less (at most {})", path,
                    FormatBytes(static_cast<int64_t>(pickle->size)), FormatBytes(kMaxPickleBytes)));
  }
  EPLB_ASSIGN_OR_RETURN(std::string_view pickled, ReadEntry(*dump, *pickle));
  EPLB_ASSIGN_OR_RETURN(dump->graph, Unpickle(pickled, path + " (data.pkl)"));
  return dump;
}

// The tensor at `ref` as doubles; `what` names it in errors. Refuses complex and bool tensors,
// and with `ids` every dtype but an integer one. Converted once per tensor node however often the
// pickle recalls it; the result lives as long as `dump`.
Result<const Array*> ReadTensor(const Dump& dump, int32_t ref, const std::string& what,
                                bool ids = false) {
  const PickleNode& node = dump.graph.at(ref);
  if (node.kind != PickleKind::kTensor) {
    return Status::InvalidArgument(fmt::format("{}: {} is {}; expected a tensor", dump.path, what,
                                               PickleGraph::KindName(node.kind)));
  }
  const TorchTensorView& t = dump.graph.tensors[static_cast<size_t>(node.tensor)];
  const bool integer = t.dtype.starts_with("I") || t.dtype == "U8";
  if (t.dtype.starts_with("C") || t.dtype == "BOOL" || (ids && !integer)) {
    return Status::InvalidArgument(
        fmt::format("{}: {} is a tensor of {}; expected {}", dump.path, what,
                    t.dtype == "BOOL"          ? "bools"
                    : t.dtype.starts_with("C") ? "complex numbers"
                                               : t.dtype,
                    ids ? "integer ids (int64, int32, int16, int8 or uint8)" : "real counts"));
  }
  if (t.numel() > kMaxSeriesValues) {
    return Status::InvalidArgument(fmt::format("{}: {} holds {} values; eplb reads at most {}",
                                               dump.path, what, t.numel(), kMaxSeriesValues));
  }
  dump.arrays.resize(dump.graph.nodes.size());
  if (const auto& cached = dump.arrays[static_cast<size_t>(ref)]) return cached.get();
  const ZipArchive::Entry* entry = dump.archive->Find(dump.prefix + "data/" + t.storage);
  if (entry == nullptr) {
    return Status::InvalidArgument(fmt::format("{}: {}'s storage '{}' is not in the archive",
                                               dump.path, what, Excerpt(t.storage)));
  }
  const int width = DtypeBytes(t.dtype);
  if (entry->size / static_cast<uint64_t>(width) < static_cast<uint64_t>(t.storage_numel)) {
    return Status::InvalidArgument(
        fmt::format("{}: {}'s storage holds {} bytes, less than its {} elements of {} need",
                    dump.path, what, entry->size, t.storage_numel, t.dtype));
  }
  EPLB_RETURN_IF_ERROR(Spend(dump, std::max<int64_t>(t.numel(), 1), what));
  EPLB_ASSIGN_OR_RETURN(std::string_view data, ReadEntry(dump, *entry));
  ++dump.work->tensors_read;
  auto& slot = dump.arrays[static_cast<size_t>(ref)];
  slot = std::make_unique<Array>();
  Array& out = *slot;
  out.dtype = t.dtype;
  out.shape = t.shape;
  out.values.resize(static_cast<size_t>(t.numel()));
  // Walk the strided view in row-major order with one index per dimension.
  std::vector<int64_t> index(t.shape.size(), 0);
  for (double& v : out.values) {
    int64_t element = t.offset;
    for (size_t d = 0; d < index.size(); ++d) element += index[d] * t.stride[d];
    v = DecodeElement(t.dtype, data.data() + element * width);
    for (size_t d = index.size(); d-- > 0;) {
      if (++index[d] < t.shape[d]) break;
      index[d] = 0;
    }
  }
  return &out;
}

Result<int32_t> Need(const Dump& dump, int32_t dict, std::string_view key, const std::string& in) {
  const int32_t v = dump.graph.Get(dict, key);
  if (v < 0) {
    return Status::InvalidArgument(fmt::format("{}: {} has no '{}'", dump.path, in, key));
  }
  return v;
}

// [layers, slots] physical-to-logical map: ids ≥ -1, at least one expert.
struct SlotMap {
  int64_t layers = 0, slots = 0, experts = 0;
  std::vector<int64_t> ids;
};

Result<SlotMap> ReadSlotMap(const Dump& dump, int32_t ref, const std::string& what) {
  EPLB_ASSIGN_OR_RETURN(const Array* read, ReadTensor(dump, ref, what, /*ids=*/true));
  const Array& a = *read;
  if (a.shape.size() != 2 || a.shape[0] < 1 || a.shape[1] < 1) {
    return Status::InvalidArgument(fmt::format("{}: {} is shaped [{}]; expected [layers, slots]",
                                               dump.path, what, fmt::join(a.shape, ", ")));
  }
  SlotMap m{a.shape[0], a.shape[1], 0, {}};
  for (double v : a.values) {
    if (v < -1 || v >= static_cast<double>(kMaxExperts)) {
      return Status::InvalidArgument(
          fmt::format("{}: {} holds expert id {:.0f}; expected -1 (an empty slot) to {}", dump.path,
                      what, v, kMaxExperts - 1));
    }
    m.ids.push_back(static_cast<int64_t>(v));
    m.experts = std::max(m.experts, m.ids.back() + 1);
  }
  if (m.experts < 1) {
    return Status::InvalidArgument(fmt::format("{}: {} holds no expert", dump.path, what));
  }
  return m;
}

// A count as the CSV reader takes one: finite, ≥ 0 and at most kMaxLoad. Checked per physical
// slot before replicas of one expert are added (or ranks summed), where -7 beside +10 would
// fold to an acceptable 3, and 1e300 beside -1e300 to 0.
bool IsCount(double c) {
  return c >= 0 && c <= kMaxLoad;
}

Status BadCount(const std::string& name, const std::string& what, int64_t layer, int64_t slot,
                double c) {
  return Status::InvalidArgument(
      fmt::format("{}: {} counts {} at layer {}, slot {}; counts must be finite, non-negative and "
                  "at most {:g} tokens",
                  name, what, c, layer, slot, kMaxLoad));
}

// Per-slot counts [steps][layers × slots] folded to logical experts through `map`; `what(step)`
// names a step's counts in errors.
Result<LoadSeries> Fold(const std::vector<std::vector<double>>& physical, const SlotMap& map,
                        const std::string& name, const std::function<std::string(size_t)>& what) {
  if (static_cast<int64_t>(physical.size()) * map.layers * map.experts > kMaxSeriesValues) {
    return Status::InvalidArgument(
        fmt::format("{}: {} steps of {} layers × {} experts would take over {}", name,
                    physical.size(), map.layers, map.experts, FormatBytes(kMaxSeriesBytes)));
  }
  LoadSeries series;
  for (size_t step = 0; step < physical.size(); ++step) {
    LoadMatrix m = LoadMatrix::Zero(map.layers, map.experts);
    for (int64_t l = 0; l < map.layers; ++l) {
      for (int64_t s = 0; s < map.slots; ++s) {
        const double c = physical[step][static_cast<size_t>(l * map.slots + s)];
        const int64_t e = map.ids[static_cast<size_t>(l * map.slots + s)];
        if (!IsCount(c)) return BadCount(name, what(step), l, s, c);
        if (e >= 0) {
          m(l, e) += c;
        } else if (c != 0) {
          return Status::InvalidArgument(fmt::format(
              "{}: layer {}, slot {} is empty in the physical-to-logical map but has load {:g}",
              name, l, s, c));
        }
      }
    }
    Status ok = ValidateLoad(m);
    if (!ok.ok()) return ok.WithContext(fmt::format("{}: step {}: ", name, step));
    series.steps.push_back(std::move(m));
  }
  return series;
}

// A [steps, layers, experts] (or [layers, experts]) array appended to `series`.
Status AppendSteps(const Array& a, const std::string& where, LoadSeries& series) {
  std::vector<int64_t> shape = a.shape;
  if (shape.size() == 2) shape.insert(shape.begin(), 1);
  if (shape.size() != 3 || shape[0] < 1 || shape[1] < 1 || shape[2] < 1) {
    return Status::InvalidArgument(
        fmt::format("{} is shaped [{}]; expected [steps, layers, experts], each at least 1", where,
                    fmt::join(a.shape, ", ")));
  }
  if (!series.steps.empty() && (shape[1] != series.layers() || shape[2] != series.experts())) {
    return Status::InvalidArgument(
        fmt::format("{} is shaped [{}] but the dumps before it hold {} layers × {} experts", where,
                    fmt::join(a.shape, ", "), series.layers(), series.experts()));
  }
  const size_t cells = static_cast<size_t>(shape[1] * shape[2]);
  for (int64_t s = 0; s < shape[0]; ++s) {
    LoadMatrix m = Eigen::Map<const LoadMatrix>(a.values.data() + s * cells, shape[1], shape[2]);
    Status ok = ValidateLoad(m);
    if (!ok.ok()) return ok.WithContext(fmt::format("{}: step {}: ", where, s));
    series.steps.push_back(std::move(m));
  }
  if (static_cast<int64_t>(series.steps.size() * cells) > kMaxSeriesValues) {
    return Status::InvalidArgument(
        fmt::format("{}: the dumps hold over {} of load", where, FormatBytes(kMaxSeriesBytes)));
  }
  return Status::Ok();
}

// SGLang's per_pass / per_token records, summed over ranks per forward pass.
Result<LoadSeries> ReadPerPass(const std::vector<std::unique_ptr<Dump>>& dumps,
                               const std::string& name) {
  std::map<int64_t, std::vector<double>> passes;
  std::optional<SlotMap> map;
  for (const auto& dump : dumps) {
    EPLB_ASSIGN_OR_RETURN(
        int32_t map_ref, Need(*dump, dump->graph.root, "last_physical_to_logical_map", "the dump"));
    EPLB_ASSIGN_OR_RETURN(SlotMap m, ReadSlotMap(*dump, map_ref, "last_physical_to_logical_map"));
    if (map && m.ids != map->ids) {
      return Status::InvalidArgument(fmt::format(
          "{}: its last_physical_to_logical_map differs from {}'s; the ranks' dumps of one "
          "recording share one map",
          dump->path, dumps.front()->path));
    }
    map = std::move(m);
    const size_t cells = static_cast<size_t>(map->layers * map->slots);
    EPLB_ASSIGN_OR_RETURN(int32_t records_ref,
                          Need(*dump, dump->graph.root, "records", "the dump"));
    const PickleNode& records = dump->graph.at(records_ref);
    if (records.kind != PickleKind::kList) {
      return Status::InvalidArgument(fmt::format("{}: records is {}; expected a list", dump->path,
                                                 PickleGraph::KindName(records.kind)));
    }
    // A record the list names many times (the pickle's memo) is read once and counted as many
    // times as it is named: the work is the distinct records', not the references'.
    std::vector<std::pair<int32_t, size_t>> distinct;          // record, first index, in list order
    std::vector<uint32_t> times(dump->graph.nodes.size(), 0);  // by node: indexed, not hashed
    for (size_t i = 0; i < records.items.size(); ++i) {
      if (times[static_cast<size_t>(records.items[i])]++ == 0) {
        distinct.emplace_back(records.items[i], i);
      }
    }
    for (const auto& [record, i] : distinct) {
      const std::string where = fmt::format("records[{}]", i);
      const double mult = static_cast<double>(times[static_cast<size_t>(record)]);
      EPLB_RETURN_IF_ERROR(Spend(*dump, 1, where));  // each record costs something, even empty
      if (dump->graph.at(record).kind != PickleKind::kDict) {
        return Status::InvalidArgument(fmt::format(
            "{}: {} is {}; expected a dict with forward_pass_id and global_physical_count or "
            "topk_ids_of_layer",
            dump->path, where, PickleGraph::KindName(dump->graph.at(record).kind)));
      }
      EPLB_ASSIGN_OR_RETURN(int32_t id_ref, Need(*dump, record, "forward_pass_id", where));
      if (dump->graph.at(id_ref).kind != PickleKind::kInt) {
        return Status::InvalidArgument(
            fmt::format("{}: {}'s forward_pass_id is {}; expected an "
                        "int",
                        dump->path, where, PickleGraph::KindName(dump->graph.at(id_ref).kind)));
      }
      auto [it, fresh] = passes.try_emplace(dump->graph.at(id_ref).integer);
      if (fresh) {
        if (static_cast<int64_t>(passes.size() * cells) > kMaxSeriesValues) {
          return Status::InvalidArgument(fmt::format("{}: the records hold over {} of load", name,
                                                     FormatBytes(kMaxSeriesBytes)));
        }
        // Counted too: records of empty tensors must not make a small file allocate passes.
        EPLB_RETURN_IF_ERROR(Spend(*dump, static_cast<int64_t>(cells), where));
        it->second.assign(cells, 0.0);
      }
      std::vector<double>& counts = it->second;
      if (const int32_t c = dump->graph.Get(record, "global_physical_count"); c >= 0) {
        const std::string what = where + ".global_physical_count";
        EPLB_ASSIGN_OR_RETURN(const Array* read, ReadTensor(*dump, c, what));
        const Array& a = *read;
        if (a.shape != std::vector<int64_t>{map->layers, map->slots}) {
          return Status::InvalidArgument(fmt::format(
              "{}: {}.global_physical_count is shaped [{}]; the map says [{}, {}] (layers, slots)",
              dump->path, where, fmt::join(a.shape, ", "), map->layers, map->slots));
        }
        EPLB_RETURN_IF_ERROR(Spend(*dump, static_cast<int64_t>(cells), what));
        for (size_t k = 0; k < cells; ++k) {
          const double v = a.values[k];
          if (!IsCount(v)) {
            const auto slots = static_cast<size_t>(map->slots);
            return BadCount(dump->path, what, static_cast<int64_t>(k / slots),
                            static_cast<int64_t>(k % slots), v);
          }
          counts[k] += mult * v;
        }
      } else if (const int32_t t = dump->graph.Get(record, "topk_ids_of_layer"); t >= 0) {
        EPLB_ASSIGN_OR_RETURN(const Array* read,
                              ReadTensor(*dump, t, where + ".topk_ids_of_layer", /*ids=*/true));
        const Array& a = *read;
        EPLB_RETURN_IF_ERROR(
            Spend(*dump, static_cast<int64_t>(a.values.size()), where + ".topk_ids_of_layer"));
        if (a.shape.size() != 3 || a.shape[0] != map->layers) {
          return Status::InvalidArgument(fmt::format(
              "{}: {}.topk_ids_of_layer is shaped [{}]; expected [{} layers, tokens, top-k]",
              dump->path, where, fmt::join(a.shape, ", "), map->layers));
        }
        const size_t per_layer = static_cast<size_t>(a.shape[1] * a.shape[2]);
        for (size_t k = 0; k < a.values.size(); ++k) {
          const double slot = a.values[k];
          if (slot == -1) continue;  // padding
          if (slot < -1 || slot >= static_cast<double>(map->slots)) {
            return Status::InvalidArgument(fmt::format(
                "{}: {}.topk_ids_of_layer holds slot {:.0f}; the map has slots 0 to {} (-1 pads)",
                dump->path, where, slot, map->slots - 1));
          }
          counts[k / per_layer * static_cast<size_t>(map->slots) + static_cast<size_t>(slot)] +=
              mult;
        }
      } else {
        return Status::InvalidArgument(fmt::format(
            "{}: {} has neither global_physical_count nor topk_ids_of_layer", dump->path, where));
      }
    }
  }
  if (passes.empty()) {
    return Status::InvalidArgument(fmt::format(
        "{}: records is an empty list{}; the recorder saved no forward passes (record while the "
        "server handles traffic, then dump)",
        name, dumps.size() > 1 ? fmt::format(" in all {} dumps", dumps.size()) : ""));
  }
  std::vector<std::vector<double>> physical;
  std::vector<int64_t> ids;
  for (auto& [id, counts] : passes) {
    physical.push_back(std::move(counts));
    ids.push_back(id);
  }
  return Fold(physical, *map, name, [&](size_t step) {
    return fmt::format("forward pass {} (its records summed)", ids[step]);
  });
}

// vLLM's expert_load_window [window, layers, slots] through its physical_to_logical_map.
Status AppendVllmWindow(const Dump& dump, LoadSeries& series) {
  EPLB_ASSIGN_OR_RETURN(int32_t map_ref,
                        Need(dump, dump.graph.root, "physical_to_logical_map", "the dump"));
  EPLB_ASSIGN_OR_RETURN(SlotMap map, ReadSlotMap(dump, map_ref, "physical_to_logical_map"));
  EPLB_ASSIGN_OR_RETURN(int32_t window_ref,
                        Need(dump, dump.graph.root, "expert_load_window", "the dump"));
  EPLB_ASSIGN_OR_RETURN(const Array* read, ReadTensor(dump, window_ref, "expert_load_window"));
  const Array& a = *read;
  if (a.shape.size() != 3 || a.shape[1] != map.layers || a.shape[2] != map.slots) {
    return Status::InvalidArgument(fmt::format(
        "{}: expert_load_window is shaped [{}] but physical_to_logical_map is [{}, {}]; expected "
        "[window, layers, slots] and [layers, slots]",
        dump.path, fmt::join(a.shape, ", "), map.layers, map.slots));
  }
  const size_t cells = static_cast<size_t>(map.layers * map.slots);
  std::vector<std::vector<double>> physical;
  for (int64_t s = 0; s < a.shape[0]; ++s) {
    physical.emplace_back(a.values.begin() + static_cast<std::ptrdiff_t>(s * cells),
                          a.values.begin() + static_cast<std::ptrdiff_t>((s + 1) * cells));
  }
  EPLB_ASSIGN_OR_RETURN(LoadSeries folded, Fold(physical, map, dump.path, [](size_t step) {
                          return fmt::format("expert_load_window[{}]", step);
                        }));
  if (!series.steps.empty() &&
      (folded.layers() != series.layers() || folded.experts() != series.experts())) {
    return Status::InvalidArgument(fmt::format(
        "{}: folds to {} layers × {} experts but the dumps before it hold {} × {}", dump.path,
        folded.layers(), folded.experts(), series.layers(), series.experts()));
  }
  for (LoadMatrix& m : folded.steps) series.steps.push_back(std::move(m));
  return Status::Ok();
}

}  // namespace

Result<LoadSeries> ReadTorchDump(const std::string& path) {
  return ReadTorchDump(path, nullptr);
}

Result<std::vector<std::vector<int32_t>>> ReadTorchPlacementMap(const std::string& path) {
  TorchDumpWork work;
  EPLB_ASSIGN_OR_RETURN(std::unique_ptr<Dump> dump, OpenDump(path, &work));
  const PickleGraph& g = dump->graph;
  if (g.at(g.root).kind != PickleKind::kDict) {
    return Status::InvalidArgument(
        fmt::format("{}: holds {}; expected a dict with 'physical_to_logical_map'", path,
                    PickleGraph::KindName(g.at(g.root).kind)));
  }
  if (g.Get(g.root, "physical_to_logical_map") < 0 && g.Get(g.root, "logical_count") >= 0) {
    return Status::InvalidArgument(fmt::format(
        "{}: SGLang's logical_count form is a load, which SGLang places with its own algorithm "
        "when it starts; a placement is its physical_to_logical_map",
        path));
  }
  EPLB_ASSIGN_OR_RETURN(const int32_t ref,
                        Need(*dump, g.root, "physical_to_logical_map", "its dict"));
  EPLB_ASSIGN_OR_RETURN(const SlotMap map, ReadSlotMap(*dump, ref, "physical_to_logical_map"));
  std::vector<std::vector<int32_t>> rows(static_cast<size_t>(map.layers));
  for (int64_t l = 0; l < map.layers; ++l) {
    for (int64_t s = 0; s < map.slots; ++s) {
      rows[static_cast<size_t>(l)].push_back(
          static_cast<int32_t>(map.ids[static_cast<size_t>(l * map.slots + s)]));
    }
  }
  return rows;
}

Result<LoadSeries> ReadTorchDump(const std::string& path, TorchDumpWork* work) {
  TorchDumpWork unused;
  if (work == nullptr) work = &unused;
  std::vector<std::string> files;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (const auto& entry : fs::directory_iterator(path, ec)) {
      if (entry.path().extension() == ".pt") files.push_back(entry.path().string());
    }
    if (ec) return Status::IoError(fmt::format("{}: cannot list: {}", path, ec.message()));
    std::sort(files.begin(), files.end());  // the recorder names its files by time
    if (files.empty()) {
      return Status::InvalidArgument(
          path + ": a folder with neither TensorRT-LLM's meta_info.json nor any .pt dump");
    }
  } else {
    files.push_back(path);
  }

  std::vector<std::unique_ptr<Dump>> dumps;
  std::set<std::string> kinds;
  for (const std::string& file : files) {
    EPLB_ASSIGN_OR_RETURN(std::unique_ptr<Dump> dump, OpenDump(file, work));
    const PickleGraph& g = dump->graph;
    const PickleNode& root = g.at(g.root);
    if (root.kind != PickleKind::kDict) {
      return Status::InvalidArgument(fmt::format("{}: holds {}; expected the dict an engine saves",
                                                 file, PickleGraph::KindName(root.kind)));
    }
    if (g.Get(g.root, "logical_count") >= 0) {
      kinds.insert("stat");
    } else if (g.Get(g.root, "records") >= 0 &&
               g.Get(g.root, "last_physical_to_logical_map") >= 0) {
      kinds.insert("per_pass");
    } else if (g.Get(g.root, "expert_load_window") >= 0 &&
               g.Get(g.root, "physical_to_logical_map") >= 0) {
      kinds.insert("vllm");
    } else if (root.items.empty()) {
      return Status::InvalidArgument(
          fmt::format("{}: an empty dict; expected SGLang's logical_count, or records with "
                      "last_physical_to_logical_map, or vLLM's expert_load_window with "
                      "physical_to_logical_map",
                      file));
    } else if (g.Get(g.root, "records") >= 0 || g.Get(g.root, "expert_load_window") >= 0) {
      const bool sglang = g.Get(g.root, "records") >= 0;
      return Status::InvalidArgument(fmt::format(
          "{}: has '{}' but no '{}'; {} needs both (the map folds physical slots to logical "
          "experts)",
          file, sglang ? "records" : "expert_load_window",
          sglang ? "last_physical_to_logical_map" : "physical_to_logical_map",
          sglang ? "an SGLang per_pass or per_token dump" : "vLLM's EPLB state"));
    } else {
      std::vector<std::string> keys;
      for (size_t i = 0; i + 1 < root.items.size() && keys.size() < 8; i += 2) {
        const PickleNode& k = g.at(root.items[i]);
        keys.push_back(k.kind == PickleKind::kString ? fmt::format("'{}'", Excerpt(k.text))
                                                     : PickleGraph::KindName(k.kind));
      }
      return Status::InvalidArgument(fmt::format(
          "{}: has keys [{}{}]; expected SGLang's logical_count, or records with "
          "last_physical_to_logical_map, or vLLM's expert_load_window with "
          "physical_to_logical_map",
          file, fmt::join(keys, ", "), root.items.size() / 2 > keys.size() ? ", ..." : ""));
    }
    dumps.push_back(std::move(dump));
  }
  if (kinds.size() != 1) {
    return Status::InvalidArgument(
        fmt::format("{}: mixes dumps of several kinds ({})", path, fmt::join(kinds, ", ")));
  }
  const std::string kind = *kinds.begin();
  if (kind == "per_pass") return ReadPerPass(dumps, path);
  LoadSeries series;
  for (const auto& dump : dumps) {
    if (kind == "stat") {
      EPLB_ASSIGN_OR_RETURN(
          const Array* a,
          ReadTensor(*dump, dump->graph.Get(dump->graph.root, "logical_count"), "logical_count"));
      EPLB_RETURN_IF_ERROR(AppendSteps(*a, dump->path + ": logical_count", series));
    } else {
      EPLB_RETURN_IF_ERROR(AppendVllmWindow(*dump, series));
    }
  }
  return series;
}

}  // namespace eplb
