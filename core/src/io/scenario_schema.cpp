#include "io/scenario_schema.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

#include "eplb/base/file_io.h"
#include "eplb/engine/hardware.h"
#include "eplb/engine/scenario_names.h"
#include "eplb/migrate/names.h"
#include "eplb/model/names.h"
#include "eplb/policy/external_policy.h"
#include "eplb/policy/recorded_policy.h"

namespace eplb::scenario_schema {

using namespace scenario_fields;  // NOLINT: the schema is the fields' reader

namespace {

constexpr int64_t kNoMax = std::numeric_limits<int>::max();  // an int field without a maximum

// A real as its shortest text that reads back to the same double ("0.8", not yaml-cpp's
// "0.80000000000000004"), so a resolved scenario reads as it was written.
std::string Shortest(double value) {
  // fmt writes 1.56e10 as "15600000000"; large counts read better with their exponent.
  if (std::fabs(value) >= 1e9) {
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
    return std::string(buf, r.ptr);
  }
  return fmt::format("{}", value);
}

// A bound as the README writes it: 1e6 for a large power of ten, else the shortest decimal.
std::string Bound(double v) {
  if (v >= 1e5) {
    const double exponent = std::round(std::log10(v));
    if (std::pow(10.0, exponent) == v) return fmt::format("1e{}", exponent);
  }
  return fmt::format("{}", v);
}

// The README's text of a field: its unit, its meaning, and its valid and default columns where
// they say more than the range and the default.
struct Doc {
  const char* unit;
  const char* text;
  const char* valid = "";
  const char* shown_default = "";
};

Field Base(std::string path, FieldType type, const Doc& doc) {
  Field f;
  f.path = std::move(path);
  f.type = type;
  f.unit = doc.unit;
  f.doc = doc.text;
  f.valid_text = doc.valid;
  f.default_text = doc.shown_default;
  return f;
}

// The type of the member `ref` names (FIELD below: `ref(s)` is a reference to it, const in a
// const Scenario).
template <typename Ref>
using Member = std::remove_reference_t<decltype(std::declval<Ref>()(std::declval<Scenario&>()))>;

// One builder per type; `ref` is the field's place in a Scenario (the FIELD macro below).
template <typename Ref>
Field Int(std::string path, Ref ref, int64_t min, int64_t max, const Doc& doc) {
  static_assert(std::is_same_v<std::remove_const_t<Member<Ref>>, int>);
  Field f = Base(std::move(path), FieldType::kInt, doc);
  f.int_min = min;
  f.int_max = max;
  f.read = [ref, min, max](MapReader& m, const char* key, Scenario& s, Reader&) {
    m.Int(key, ref(s), static_cast<int>(min), static_cast<int>(max));
  };
  f.write = [ref](YAML::Emitter& out, const Scenario& s) { out << ref(s); };
  f.number = [ref](const Scenario& s) { return double(ref(s)); };
  f.show = [ref](const Scenario& s) { return fmt::format("{}", ref(s)); };
  return f;
}
template <typename Ref>
Field Int64(std::string path, Ref ref, int64_t min, int64_t max, const Doc& doc) {
  static_assert(std::is_same_v<std::remove_const_t<Member<Ref>>, int64_t>);
  Field f = Base(std::move(path), FieldType::kInt, doc);
  f.int_min = min;
  f.int_max = max;
  f.read = [ref, min, max](MapReader& m, const char* key, Scenario& s, Reader&) {
    m.Int64(key, ref(s), min, max);
  };
  f.write = [ref](YAML::Emitter& out, const Scenario& s) { out << static_cast<long long>(ref(s)); };
  f.number = [ref](const Scenario& s) { return double(ref(s)); };
  f.show = [ref](const Scenario& s) { return fmt::format("{}", ref(s)); };
  return f;
}
// 0..2^63−1 (a seed).
template <typename Ref>
Field Uint64(std::string path, Ref ref, const Doc& doc) {
  static_assert(std::is_same_v<std::remove_const_t<Member<Ref>>, uint64_t>);
  Field f = Base(std::move(path), FieldType::kInt, doc);
  f.int_min = 0;
  f.int_max = std::numeric_limits<int64_t>::max();
  f.read = [ref](MapReader& m, const char* key, Scenario& s, Reader&) { m.Uint64(key, ref(s)); };
  f.write = [ref](YAML::Emitter& out, const Scenario& s) {
    out << static_cast<unsigned long long>(ref(s));
  };
  f.show = [ref](const Scenario& s) { return fmt::format("{}", ref(s)); };
  return f;
}
template <typename Ref>
Field Real(std::string path, Ref ref, double min, double max, bool positive, const Doc& doc) {
  static_assert(std::is_same_v<std::remove_const_t<Member<Ref>>, double>);
  Field f = Base(std::move(path), FieldType::kReal, doc);
  f.min = min;
  f.max = max;
  f.positive = positive;
  f.read = [ref, min, max, positive](MapReader& m, const char* key, Scenario& s, Reader&) {
    m.Double(key, ref(s), min, max, positive);
  };
  f.write = [ref](YAML::Emitter& out, const Scenario& s) { out << Shortest(ref(s)); };
  f.number = [ref](const Scenario& s) { return ref(s); };
  f.show = [ref](const Scenario& s) { return fmt::format("{}", ref(s)); };
  return f;
}
// [min, max]
template <typename Ref>
Field Real(std::string path, Ref ref, double min, double max, const Doc& doc) {
  return Real(std::move(path), ref, min, max, false, doc);
}
// (min, max]
template <typename Ref>
Field Positive(std::string path, Ref ref, double min, double max, const Doc& doc) {
  return Real(std::move(path), ref, min, max, true, doc);
}
template <typename Ref>
Field Bool(std::string path, Ref ref, const Doc& doc) {
  static_assert(std::is_same_v<std::remove_const_t<Member<Ref>>, bool>);
  Field f = Base(std::move(path), FieldType::kBool, doc);
  f.read = [ref](MapReader& m, const char* key, Scenario& s, Reader&) { m.Bool(key, ref(s)); };
  f.write = [ref](YAML::Emitter& out, const Scenario& s) { out << ref(s); };
  f.show = [ref](const Scenario& s) { return ref(s) ? "true" : "false"; };
  return f;
}
// A string, one of `names` unless they are empty.
template <typename Ref>
Field Text(std::string path, Ref ref, const std::vector<std::string>& names, const Doc& doc) {
  static_assert(std::is_same_v<std::remove_const_t<Member<Ref>>, std::string>);
  Field f = Base(std::move(path), FieldType::kText, doc);
  f.names = names;
  f.read = [ref, names](MapReader& m, const char* key, Scenario& s, Reader&) {
    m.String(key, ref(s), names);
  };
  f.write = [ref](YAML::Emitter& out, const Scenario& s) { out << ref(s); };
  f.show = [ref](const Scenario& s) {
    const std::string& v = ref(s);
    return fmt::format("`{}`", v.empty() ? "\"\"" : v);
  };
  return f;
}
// One of an enum's names (its table's).
template <typename Ref, typename E, size_t N>
Field Enum(std::string path, Ref ref, const NameTable<E, N>& table, const Doc& doc) {
  static_assert(std::is_same_v<std::remove_const_t<Member<Ref>>, E>);
  Field f = Base(std::move(path), FieldType::kEnum, doc);
  f.names = table.List();
  f.read = [ref, &table](MapReader& m, const char* key, Scenario& s, Reader&) {
    std::string name = table.Name(ref(s));
    m.String(key, name, table.List());
    if (const auto value = table.Find(name)) ref(s) = *value;
  };
  f.write = [ref, &table](YAML::Emitter& out, const Scenario& s) { out << table.Name(ref(s)); };
  f.show = [ref, &table](const Scenario& s) { return fmt::format("`{}`", table.Name(ref(s))); };
  return f;
}
// A field read and written by its own functions.
Field Custom(std::string path, decltype(Field::read) read, decltype(Field::write) write,
             const Doc& doc) {
  Field f = Base(std::move(path), FieldType::kCustom, doc);
  f.read = std::move(read);
  f.write = std::move(write);
  return f;
}
// `f`, read after the field `path` of its section (Field::read_after).
Field ReadAfter(Field f, std::string path) {
  f.read_after = std::move(path);
  return f;
}
// A field of a list's entries, documented here and read with its entry.
Field Note(std::string path, std::vector<std::string> names, const Doc& doc) {
  Field f = Base(std::move(path), FieldType::kNote, doc);
  f.names = std::move(names);
  return f;
}
// A number of a list's entries in [min, max], documented here and read with its entry.
Field NoteRange(std::string path, double min, double max, const Doc& doc) {
  Field f = Base(std::move(path), FieldType::kNote, doc);
  f.min = min;
  f.max = max;
  return f;
}
// Runs `check` after the field is read: a rule of that field alone.
Field Checked(Field f, void (*check)(const Scenario&, Reader&)) {
  auto read = std::move(f.read);
  f.read = [read, check](MapReader& m, const char* key, Scenario& s, Reader& r) {
    read(m, key, s, r);
    check(s, r);
  };
  return f;
}

// model.name: a Hugging Face model name, with or without its organisation.
bool IsModelName(const std::string& name) {
  return !name.empty() && name.size() <= 100 && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ||
           c == '+' || c == '/';
  });
}

void CheckName(const Scenario& s, Reader& r) {
  if (IsSafePathComponent(s.name)) return;
  r.FailAt("name", fmt::format("name is '{}'; it names the default output folder runs/NAME, so "
                               "it is 1 to 100 letters, digits, '.', '_', '-' or '+', not "
                               "starting with '.' (use --out to write elsewhere)",
                               Excerpt(s.name)));
}

void CheckModelName(const Scenario& s, Reader& r) {
  if (IsModelName(s.model.name)) return;
  r.FailAt("model.name",
           fmt::format("model.name is '{}'; it is the model's Hugging Face name, 1 to 100 "
                       "letters, digits, '.', '_', '-', '+' or '/' (e.g. Qwen3-235B-A22B)",
                       Excerpt(s.model.name)));
}

// The list at `key` (the field `field`, a list of `elements`), or an empty list when it is
// absent or null, or when it is not a list (that named as the error).
std::vector<YAML::Node> TakeList(MapReader& m, const char* key, const char* field,
                                 const char* elements, Reader& r) {
  const YAML::Node list = m.Take(key);
  if (!list || list.IsNull()) return {};
  if (!list.IsSequence()) {
    r.Fail(list, field,
           fmt::format("{} is {}; expected a list of {}", field, Show(list), elements));
    return {};
  }
  return {list.begin(), list.end()};
}

void ReadPhases(MapReader& w, const char* key, Scenario& s, Reader& r) {
  const std::vector<YAML::Node> phases = TakeList(w, key, "workload.phases", "{step, shuffle}", r);
  for (size_t i = 0; i < phases.size(); ++i) {
    PhaseChange p;
    MapReader pm(phases[i], fmt::format("workload.phases[{}]", i), r);
    pm.Int("step", p.step, 0, std::numeric_limits<int>::max());
    pm.Double("shuffle", p.shuffle, 0, 1);
    pm.Finish();
    s.workload.phases.push_back(p);
  }
}

void WritePhases(YAML::Emitter& out, const Scenario& s) {
  out << YAML::BeginSeq;
  for (const PhaseChange& p : s.workload.phases) {
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "step" << YAML::Value << p.step << YAML::Key
        << "shuffle" << YAML::Value << Shortest(p.shuffle) << YAML::EndMap;
  }
  out << YAML::EndSeq;
}

void ReadPolicy(MapReader& e, const char* key, Scenario& s, Reader&) {
  e.String(key, s.eplb.policy);
}

// A user's program is `external` in a file, whatever its name in tables: the file then reads
// back anywhere, and runs the program only where it is given again (external_policy.h).
void WritePolicy(YAML::Emitter& out, const Scenario& s) {
  const std::string command = ExternalPolicyCommandFor(s.eplb.policy);
  // Likewise a recording is `recorded`, its file in a comment (recorded_policy.h).
  if (const std::string note = RecordedPolicyNote(s.eplb.policy); !note.empty()) {
    out << std::string(kRecordedPolicyName) << YAML::Comment(note);
    return;
  }
  out << (command.empty() ? s.eplb.policy : std::string(kExternalPolicyName));
  // The command is for the record only: a file never names code to run.
  if (!command.empty()) {
    out << YAML::Comment("a user's program, run only when given again: --policy-command '" +
                         (s.eplb.policy == kExternalPolicyName ? "" : s.eplb.policy + "=") +
                         command + "'");
  }
}

void ReadFaults(MapReader& top, const char* key, Scenario& s, Reader& r) {
  const std::vector<YAML::Node> faults =
      TakeList(top, key, "faults", "{kind, step, until, ...}", r);
  for (size_t i = 0; i < faults.size(); ++i) ReadFault(faults[i], i, s, r);
}

void WriteFaults(YAML::Emitter& out, const Scenario& s) {
  out << YAML::BeginSeq;
  for (const FaultSpec& f : s.faults) {
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "kind" << YAML::Value
        << FaultKindName(f.kind) << YAML::Key << "step" << YAML::Value << f.step;
    if (f.until != std::numeric_limits<int>::max())
      out << YAML::Key << "until" << YAML::Value << f.until;
    if (f.rank >= 0) out << YAML::Key << "rank" << YAML::Value << f.rank;
    if (f.node >= 0) out << YAML::Key << "node" << YAML::Value << f.node;
    if (f.kind == FaultKind::kLinkDegraded)
      out << YAML::Key << "link" << YAML::Value << kLinkClassNames.Name(f.link);
    if (f.kind == FaultKind::kScale) out << YAML::Key << "gpus" << YAML::Value << f.gpus;
    if (f.kind == FaultKind::kStraggler || f.kind == FaultKind::kLinkDegraded)
      out << YAML::Key << "factor" << YAML::Value << Shortest(f.factor);
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
}

// run.measure_from: first_rearrangement, first_commit, or a step of the run (after run.steps).
void ReadMeasureFrom(MapReader& run, const char* key, Scenario& s, Reader& r) {
  const YAML::Node from = run.Take(key);
  if (!from) return;
  long long step = 0;
  if (from.IsScalar() && from.Scalar() == "first_rearrangement") {
    s.run.measure_from = RunSpec::kFromFirstRearrangement;
  } else if (from.IsScalar() && from.Scalar() == "first_commit") {
    s.run.measure_from = RunSpec::kFromFirstCommit;
  } else if (!from.IsScalar() || !PlainDecimal(from.Scalar()) ||
             !YAML::convert<long long>::decode(from, step) || step < 0 || step >= s.run.steps) {
    r.Fail(from, "run.measure_from",
           fmt::format("run.measure_from is {}; expected first_rearrangement, first_commit, or a "
                       "step in 0..{} (run.steps − 1) where the run's statistics begin",
                       Show(from), s.run.steps - 1));
  } else {
    s.run.measure_from = static_cast<int>(step);
  }
}

void WriteMeasureFrom(YAML::Emitter& out, const Scenario& s) {
  if (s.run.measure_from == RunSpec::kFromFirstRearrangement) {
    out << "first_rearrangement";
  } else if (s.run.measure_from == RunSpec::kFromFirstCommit) {
    out << "first_commit";
  } else {
    out << s.run.measure_from;
  }
}

// A field's path and its place in a Scenario, which the path spells: FIELD(cluster.nic.latency_us)
// is "cluster.nic.latency_us" and s.cluster.nic.latency_us.
// clang-format off
#define FIELD(member) #member, [](auto& s) -> auto& { return s.member; }
// clang-format on

std::vector<std::string> Split(const std::string& path) {
  std::vector<std::string> parts;
  size_t from = 0;
  for (size_t dot; (dot = path.find('.', from)) != std::string::npos; from = dot + 1) {
    parts.push_back(path.substr(from, dot - from));
  }
  parts.push_back(path.substr(from));
  return parts;
}

// A bound of an integer field as the README writes it: 2^24 for a large power of two.
std::string IntBound(int64_t v) {
  if (v == std::numeric_limits<int64_t>::max()) return "2^63−1";
  if (v >= (int64_t{1} << 24) && (v & (v - 1)) == 0) {
    int k = 0;
    while ((int64_t{1} << k) < v) ++k;
    return fmt::format("2^{}", k);
  }
  return fmt::format("{}", v);
}

}  // namespace

const std::vector<Field>& ScenarioFields() {
  static const std::vector<Field> fields = [] {
    return std::vector<Field>{
        Checked(Text(FIELD(name), {},
                     Doc{"",
                         "names the run folder (`runs/<name>`); one path component, so a name "
                         "never writes outside `runs/` (`--out` writes elsewhere)",
                         "1–100 letters, digits, `.`, `_`, `-`, `+`; not starting with `.`"}),
                CheckName),
        Checked(
            Text(FIELD(model.name), {},
                 Doc{"",
                     "the model whose constants these are, its Hugging Face name "
                     "(`Qwen3-235B-A22B` or `Qwen/Qwen3-235B-A22B`). Only read to warn: a scenario "
                     "naming a model other than DeepSeek-V3 or R1 (or their updates, "
                     "`DeepSeek-V3-0324`, `DeepSeek-R1-0528`) that leaves a `model.*` constant out "
                     "gets a warning on stderr for each, since every default is DeepSeek-V3's",
                     "1–100 letters, digits, `.`, `_`, `-`, `+`, `/`"}),
            CheckModelName),
        Int(FIELD(model.layers), 1, 100000, Doc{"", "MoE layers"}),
        Int(FIELD(model.experts), 1, kMaxExperts, Doc{"", "routed (logical) experts per layer"}),
        Int(FIELD(model.groups), 1, kMaxExperts,
            Doc{"", "expert groups (DeepSeek's group-limited routing); must divide `experts`",
                "1..1048576, divides `experts`"}),
        Int(FIELD(model.top_k), 1, kMaxExperts, Doc{"", "experts per token", "1..`experts`"}),
        Int(FIELD(model.hidden), 1, 1 << 20,
            Doc{"", "hidden size: a token's activation is `hidden × activation_bytes`"}),
        Int64(FIELD(model.expert_bytes), 1, kMaxExpertBytes,
              Doc{"bytes", "bytes of one expert's weights in one layer (what a transfer moves)",
                  "1..2^40 (1 TiB); `layers × slots × expert_bytes` ≤ 4e18"}),
        Int(FIELD(model.expert_tensors), 1, 16,
            Doc{"",
                "weight tensors per expert, as the checkpoint stores them: BF16 2 (`w13_weight`, "
                "`w2_weight`), FP8 block-quantized 4 (with the two `*_weight_scale_inv`), NVFP4 6 "
                "(weights, block scales, global scales). Multiplies an engine's per-tensor "
                "operations (`migration.engine`); the bytes stay `expert_bytes`. Every shipped "
                "scenario sets it from its checkpoint"}),
        Int(FIELD(model.activation_bytes), 1, 8,
            Doc{"bytes",
                "bytes per activation element in dispatch (and combine, unless `combine_bytes`); 1 "
                "(FP8) carries one float scale per 128 elements in the `normal` and `low-latency` "
                "all-to-all modes"}),
        Int(FIELD(model.combine_bytes), 0, 8,
            Doc{"bytes",
                "bytes per element in combine; 0: as `activation_bytes`. DeepSeek and DeepEP "
                "combine in BF16 (2)"}),
        Int(FIELD(model.topk_groups), 0, kMaxExperts,
            Doc{"",
                "group-limited routing: a token's experts come from at most this many groups "
                "(DeepSeek-V3: 4 of 8); 0 or ≥ `groups`: no limit. Caps the nodes a token reaches "
                "in the `normal` all-to-all at `topk_groups × ⌈nodes / groups⌉`"}),
        Int(FIELD(model.intermediate), 1, 1 << 24,
            Doc{"",
                "roofline: an expert's intermediate size; its three GEMMs cost `6 × hidden × "
                "intermediate` FLOPs per token"}),
        Real(FIELD(model.dense_params), 0, 1e15,
             Doc{"",
                 "roofline: parameters every token runs outside the routed experts (attention "
                 "projections, shared expert, dense layers, LM head); DeepSeek-V3: 37B active − 8 "
                 "× 58 × 44.0M routed − the 0.93B embedding lookup",
                 "", "1.56e10"}),
        Real(FIELD(model.kv_bytes_per_token), 0, 1e12,
             Doc{"bytes",
                 "roofline: KV cache per token position over all layers (DeepSeek-V3's MLA: (512 + "
                 "64) × 2 bytes × 61 layers)"}),
        Real(FIELD(model.attention_flops_per_kv), 0, 1e15,
             Doc{"",
                 "roofline: attention FLOPs per query token per KV position over all layers (MLA "
                 "in prefill: 61 × 128 heads × 2 × (192 + 128); absorbed in decode: 61 × 128 × 2 × "
                 "(576 + 512) = 1.7e7)",
                 "", "5.0e6"}),
        Real(FIELD(model.elementwise_bytes_per_token), 0, 1e12,
             Doc{"bytes",
                 "roofline: bytes the kernels between the GEMMs (normalisation, RoPE, activation, "
                 "quantisation, residual adds, the weighted combine) read and write per token over "
                 "all layers, priced at HBM × `hbm_efficiency` and added to the dense stage; 0: "
                 "not priced. DeepSeek-V3 ≈ 4.9e7 (~800 KB a layer × 61, counted in "
                 "`scenarios/published/h800-deepseek-v3.yaml`)"}),
        Int(FIELD(cluster.nodes), 1, kMaxGpus,
            Doc{"", "nodes", "1..65536; `nodes × gpus_per_node` ≤ 65536"}),
        Int(FIELD(cluster.gpus_per_node), 1, 1024,
            Doc{"", "GPUs per node (the EP group has `nodes × gpus_per_node` ranks)"}),
        Positive(
            FIELD(cluster.nvlink.bandwidth_gbps), 0, kMaxGbps,
            Doc{"GB/s",
                "NVLink per GPU per direction, GB/s (10^9 B/s), through a non-blocking NVSwitch"}),
        Real(FIELD(cluster.nvlink.latency_us), 0, kMaxMicroseconds,
             Doc{"µs", "start-up latency of a transfer round or a dispatch/combine layer"}),
        Positive(FIELD(cluster.nvlink.efficiency), 0, 1,
                 Doc{"fraction", "achieved fraction of nominal bandwidth"}),
        Positive(FIELD(cluster.nic.bandwidth_gbps), 0, kMaxGbps,
                 Doc{"GB/s", "NIC per GPU per direction (rail-optimised, non-blocking fabric)"}),
        Real(FIELD(cluster.nic.latency_us), 0, kMaxMicroseconds, Doc{"µs", ""}),
        Positive(FIELD(cluster.nic.efficiency), 0, 1, Doc{"fraction", ""}),
        Positive(FIELD(cluster.pcie_gbps), 0, kMaxGbps,
                 Doc{"GB/s", "GPU-to-NIC link; inter-node flows get the slower of it and the NIC"}),
        Positive(FIELD(cluster.hbm_gbps), 0, kMaxGbps, Doc{"GB/s", "local copies inside a GPU"}),
        Real(FIELD(cluster.nvswitch_gbps), 0, kMaxGbps,
             Doc{"GB/s",
                 "aggregate NVSwitch capacity per node, GB/s per direction; 0: non-blocking. "
                 "Modelled as each GPU's share under all-to-all load: NVLink per GPU is at most "
                 "`nvswitch_gbps / gpus_per_node`"}),
        Real(FIELD(cluster.fabric_oversubscription), 1, 1000,
             Doc{"",
                 "inter-node fabric oversubscription (1: non-blocking); modelled as each GPU's "
                 "share under all-to-all load: NIC per GPU ÷ oversubscription"}),
        Enum(FIELD(cluster.backup), kBackupNames,
             Doc{"",
                 "where recovery reloads an expert whose every replica was lost: a copy in host "
                 "memory (SGLang's backup), read over each GPU's own link; or storage, read "
                 "through the node's storage link (which its GPUs share) and then that link"}),
        Positive(FIELD(cluster.host_read_gbps), 0, kMaxGbps,
                 Doc{"GB/s", "per GPU, host memory to HBM (pinned, over PCIe)"}),
        Real(FIELD(cluster.host_read_latency_us), 0, 1e9,
             Doc{"µs", "start-up of a GPU's reloads from host memory"}),
        Positive(FIELD(cluster.storage_read_gbps), 0, kMaxGbps,
                 Doc{"GB/s", "`backup: storage`: per node, shared by its GPUs"}),
        Real(FIELD(cluster.storage_read_latency_us), 0, 1e9,
             Doc{"µs", "`backup: storage`: added to the host read's latency"}),
        Int(FIELD(cluster.initial_gpus), 0, kMaxGpus,
            Doc{"",
                "GPUs serving at the start, ranks 0..initial_gpus−1 (0: all); the others wait for "
                "a `scale` fault. Needs a policy that places around idle GPUs (as for losses)",
                "0..GPUs"}),
        Real(FIELD(cluster.gpu_memory_gb), 0, kMaxMemoryGb,
             Doc{"GB",
                 "each GPU's memory, 10^9 bytes (0: the `compute.gpu` preset's datasheet figure: "
                 "H800 and H100 80, H200 141, B200 180 — DGX B200's 1,440 GB over 8 GPUs; GB200 "
                 "186). A scenario whose resident memory (below) exceeds it is refused"}),
        Real(FIELD(cluster.kv_cache_gb), 0, kMaxMemoryGb,
             Doc{"GB",
                 "each GPU's KV cache, 10^9 bytes (0: what the step's batch needs: in decode each "
                 "of the GPU's sequences, `workload.tokens_per_step` / the GPUs serving at the "
                 "start, holds `compute.kv_length` positions; in prefill each of its tokens one; × "
                 "`model.kv_bytes_per_token`). Engines size a KV pool to fill what the weights "
                 "leave; give that pool here to ask whether a migration still fits"}),
        Positive(FIELD(cluster.memory_utilization), 0, 1,
                 Doc{"",
                     "the fraction of each GPU's memory the engine's weights, KV cache and "
                     "migration staging may use; the rest is left to the CUDA context, NCCL and "
                     "DeepEP buffers and activations — vLLM's `--gpu-memory-utilization` (default "
                     "0.9; SGLang sizes its `--mem-fraction-static` from a similar reserve)"}),
        Enum(FIELD(compute.model), kComputeModelNames,
             Doc{"", "how compute is priced (below, \"The step model\")"}),
        Real(FIELD(compute.attention_us), 0, kMaxMicroseconds,
             Doc{"µs", "simple: attention and dense layers, per step"}),
        Real(FIELD(compute.layer_fixed_us), 0, kMaxMicroseconds,
             Doc{"µs", "per MoE layer (both models): gate, permute, kernel launches"}),
        Real(FIELD(compute.per_token_us), 0, 1000,
             Doc{"µs", "simple: per token-expert assignment on a GPU, per layer"}),
        Text(FIELD(compute.gpu), GpuPresetNames(),
             Doc{"",
                 "roofline: the GPU preset whose datasheet peaks price the work "
                 "(`core/include/eplb/engine/hardware.h` lists each number with its source)"}),
        Positive(
            FIELD(compute.flops_efficiency), 0, 1,
            Doc{"fraction", "roofline: achieved fraction of the peak dense tensor-core FLOP/s"}),
        Positive(FIELD(compute.hbm_efficiency), 0, 1,
                 Doc{"fraction", "roofline: achieved fraction of the peak HBM bandwidth"}),
        Positive(FIELD(compute.weight_hbm_efficiency), 0, 1,
                 Doc{"fraction",
                     "roofline: the fraction GEMMs achieve while they stream their weights with "
                     "few tokens per weight (decode's dense layers, every MoE layer's experts). "
                     "DeepGEMM's H800 table gives 0.63 for DeepSeek-V3's dense shapes at 128 "
                     "tokens (`engine/step_model.h`)"}),
        Real(FIELD(compute.expert_fixed_tokens), 0, 1e6,
             Doc{"",
                 "roofline: each expert a GPU runs tokens through costs its GEMMs as much as this "
                 "many more tokens would, per layer and micro-batch (a fixed cost per group of a "
                 "grouped GEMM), so an expert's M tokens run at `flops_efficiency` × M / (M + "
                 "this). 88 in the published H800, H100 and GB200 sets: DeepGEMM's H800 table of "
                 "its masked grouped GEMMs at 1 × 1,024, 2 × 512 and 4 × 256 tokens (81.3, 90.6 "
                 "and 101.4 µs; `engine/step_model.h`)"}),
        Int(FIELD(compute.gemm_bytes), 1, 2,
            Doc{"bytes",
                "roofline: GEMM input width, 1 (FP8 peak) or 2 (BF16 peak); attention's core "
                "always runs at the BF16 peak"}),
        Enum(FIELD(compute.stage), kInferenceStageNames,
             Doc{"",
                 "roofline: decode reads each token's KV cache once per token; prefill once per "
                 "128-query tile"}),
        Real(FIELD(compute.kv_length), 0, 1e9,
             Doc{"", "roofline: mean KV positions each token attends to"}),
        Enum(FIELD(compute.all_to_all), kAllToAllModeNames,
             Doc{"",
                 "how dispatch and combine move tokens: `bulk` one message per token-expert "
                 "assignment; `low-latency` the same messages as DeepEP's low-latency kernels send "
                 "them (FP8 with scales, NVLink inside a node, RDMA between nodes, a fixed cost "
                 "per phase); `normal` DeepEP's normal kernels: once per remote node over RDMA, "
                 "then NVLink to each GPU reached there"}),
        Int(FIELD(compute.micro_batches), 1, 2,
            Doc{"",
                "2: DeepSeek's and SGLang's two-micro-batch overlap, one micro-batch's "
                "communication running while the other computes. Prefill overlaps one's attention "
                "and MoE with the other's dispatch and combine; decode one's attention with the "
                "other's dispatch, MoE and combine (DeepSeek-V3 report §3.4), so in decode a "
                "layer's MoE lies on the communication's path too (`engine/step_model.h`). The two "
                "are disjoint halves of the step's tokens: with `workload.noise` each expert's "
                "count splits as its tokens fall (a sequence's together), and each micro-batch "
                "waits for its own busiest GPU"}),
        Positive(FIELD(compute.normal_nvlink_efficiency), 0, 1,
                 Doc{"fraction",
                     "`normal`: the share of NVLink the normal kernels' SM-driven copies reach "
                     "(DeepEP uses 20–24 SMs for them)"}),
        Int(FIELD(compute.normal_sms), 0, 1000,
            Doc{"",
                "`normal` with two micro-batches: the SMs the normal kernels hold while they run "
                "beside the other micro-batch's compute, which runs on the rest meanwhile "
                "(`engine/step_model.h`). DeepEP's README sets 24 (`Buffer.set_num_sms(24)`) of an "
                "H800's 132; 0 leaves them unpriced. The low-latency kernels in hook mode hold "
                "none",
                "0 to the GPU's SMs − 1"}),
        Real(FIELD(compute.normal_overlap_slowdown), 1, 100,
             Doc{"",
                 "`normal` with two micro-batches: how many times longer the normal kernels' "
                 "dispatch and combine take beside the other micro-batch's compute than DeepEP's "
                 "unit tests time them alone. LMSYS's breakdown of DeepSeek's prefill profile "
                 "(2025-05-05, Detail Breakdown) measures their cores at 9.45 and 17.23 ms a layer "
                 "against 7.26 and 14.24 in the unit tests: 1.24 (SGLang finds the unit tests' "
                 "speed again without two-batch overlap, and names fewer SMs, noisy neighbours and "
                 "kernel interference as the causes)"}),
        Real(FIELD(compute.low_latency_overhead_us), 0, kMaxMicroseconds,
             Doc{"µs",
                 "`low-latency`: fixed cost per phase and layer (launch, IBGDA signalling, waiting "
                 "for every peer's flag)"}),
        Int(FIELD(compute.mtp_draft_tokens), 0, 4,
            Doc{"",
                "multi-token prediction: each sequence runs 1 + this many tokens through the model "
                "per step (the workload's loads and the dense work grow with them; its KV cache is "
                "read once). DeepSeek-V3 drafts 1",
                "0–4; decode only"}),
        Real(FIELD(compute.mtp_acceptance), 0, 1,
             Doc{"",
                 "share of draft tokens accepted: a step emits 1 + this × drafts tokens per "
                 "sequence (DeepSeek-V3 report §5.4.3: 85–90% for the second token)"}),
        Text(FIELD(workload.kind), {"generator", "trace"}, Doc{"", "`generator` or `trace`"}),
        Int(FIELD(workload.tokens_per_step), 1, 1 << 30,
            Doc{"", "tokens per step (generator); each makes `top_k` assignments"}),
        Text(FIELD(workload.popularity), {"lognormal", "zipf"},
             Doc{"",
                 "`lognormal` (spread `sigma`) or `zipf` (exponent `zipf_s`), a random hot set per "
                 "layer"}),
        Real(FIELD(workload.sigma), 0, 20, Doc{"", "log-normal spread of log-popularity"}),
        Real(FIELD(workload.zipf_s), 0, 20, Doc{"", "Zipf exponent", "", "1.0"}),
        Real(FIELD(workload.drift), 0, 1,
             Doc{"", "per-step random walk of every expert's log-popularity"}),
        Bool(FIELD(workload.noise), Doc{"", "per-step sampling noise on the counts"}),
        Int(FIELD(workload.sequence_tokens), 0, 1 << 30,
            Doc{"",
                "tokens each sequence brings to a step (a prefill's prompt length); a sequence's "
                "tokens route alike (below, \"Sequences\"). 0: every token routes on its own",
                "0 to the step's tokens"}),
        Real(FIELD(workload.sequence_sigma), 0, 20,
             Doc{"",
                 "with `sequence_tokens`: the spread of a sequence's log-popularity around its "
                 "layer's, measured on DeepSeek-V2-Lite (below)"}),
        Real(FIELD(workload.step_sigma), 0, 1,
             Doc{"",
                 "the spread of each step's log-popularity of every expert around its layer's, "
                 "drawn afresh each step and shared by all the step's tokens (below, \"Step "
                 "movement\"); 0.1 in the DeepSeek-V3/R1 scenarios. Applies to the generator and "
                 "to a single recorded matrix (a distribution sampled per step), not to recorded "
                 "steps, and only with `noise` (without it the counts are their expectations). "
                 "Counts are drawn from a normal with its variance, hence the bound"}),
        ReadAfter(Custom("workload.phases", ReadPhases, WritePhases,
                         Doc{"",
                             "`[{step, shuffle}]`: at `step`, a `shuffle` fraction of experts swap "
                             "popularity",
                             "step ≥ 0, shuffle [0, 1]", "`[]`"}),
                  "workload.trace"),
        Text(FIELD(workload.trace), {},
             Doc{"",
                 "`kind: trace`: any load eplb reads (docs/rebalance.md, \"Loads in\": CSV wide or "
                 "long `step,layer,expert,tokens`, JSON, SGLang's and vLLM's `.pt` dumps, "
                 "TensorRT-LLM's statistics folder). Several steps replay step by step, in a loop; "
                 "a single matrix is a distribution sampled per step. Relative to the scenario's "
                 "folder; its layers and experts must match the model's",
                 "a file or folder; loads ≤ 1e15 tokens per cell"}),
        Int(FIELD(eplb.window_size), 1, 1 << 20, Doc{"", "steps of load the policy sees (vLLM)"}),
        Int(FIELD(eplb.step_interval), 1, kNoMax,
            Doc{"", "steps between rearrangements (vLLM); the first comes after a quarter of it"}),
        Enum(FIELD(eplb.statistics), kStatisticsNames,
             Doc{"",
                 "the load the policy is given: `window`, the sum of the last `window_size` steps "
                 "(vLLM, SGLang, ROCm ATOM); `decayed`, each step's load decayed by `eplb.decay` "
                 "per step since, and cleared by each rearrangement — TensorRT-LLM's online "
                 "statistics (`moeLoadBalanceKernels.cu`: `loadFactor = loadFactor × decayFactor + "
                 "count`; `moeLoadBalancer.cpp` clears them after an update). Time-aware policies "
                 "get it as one chunk"}),
        Positive(FIELD(eplb.decay), 0, 1,
                 Doc{"",
                     "`decayed`: the factor per step (TensorRT-LLM's `decayFactor`, \"decayed by "
                     "0.95 for each step\"; an earlier version had 0.9); a step's load counts for "
                     "1/(1 − decay) steps (20)"}),
        Real(FIELD(eplb.min_balancedness), 0, 2,
             Doc{"",
                 "the balance gate: an interval's rearrangement runs only while the placement in "
                 "force has a balancedness (`eplb.balancedness_gate`) below this, else it is held "
                 "and counted (`summary.json` `rearrangements.held`). ROCm ATOM's "
                 "`rebalance_min_balancedness` (default 2.0, which never holds: balancedness is at "
                 "most 1; its DeepSeek-V4 recipe suggests 0.85–0.9) and SGLang's "
                 "`--eplb-min-rebalancing-utilization-threshold` (#8345; default 1.0, off)"}),
        Enum(FIELD(eplb.balancedness_gate), kBalancednessGateNames,
             Doc{"",
                 "which balancedness the gate compares: `window_min`/`window_mean`, each layer's "
                 "mean/max GPU load over the statistics, the least or the mean over layers (ATOM's "
                 "`rebalance_balancedness_agg`, default `min`); `step_mean`, each step's mean over "
                 "layers of (mean + 1e-5)/(max + 1e-5) GPU tokens, averaged over the last "
                 "`window_size` steps (SGLang #8345, which averages its last 1,000 forward "
                 "passes)"}),
        Int(FIELD(eplb.num_redundant_experts), 0, kMaxExperts,
            Doc{"",
                "slots beyond one per expert (vLLM); `experts + redundant` must divide by the "
                "GPUs"}),
        Custom("eplb.policy", ReadPolicy, WritePolicy,
               Doc{"", "a registered policy", "`eplb rebalance --help`", "`deepseek`"}),
        Enum(FIELD(eplb.dispatch), kDispatchNames,
             Doc{"",
                 "how each step's tokens for an expert split among its live replicas "
                 "(core/include/eplb/engine/replica_dispatch.h): `even`, an equal share each (the "
                 "ideal split EPLB's own model assumes); `random`, each token-expert assignment "
                 "picks a replica with equal odds, as vLLM's router (position modulo the replica "
                 "count, a hash) and SGLang's `dynamic` and `static` dispatch do; `lp`, the split "
                 "that levels the replicas' GPUs in each step (SGLang's `--ep-dispatch-algorithm "
                 "lp`, DeepSeek's LPLB), found by water-filling, each assignment then drawing its "
                 "replica with the split's odds as SGLang does. Compare them with `eplb sweep "
                 "SCENARIO --vary eplb.dispatch=even,random,lp`"}),
        Bool(FIELD(eplb.use_async),
             Doc{"",
                 "async rearrangement (layer by layer at step boundaries); false: stop the world"}),
        Int(FIELD(eplb.layers_per_step), 1, 100000,
            Doc{"", "layers committed per step boundary at most"}),
        Int(FIELD(eplb.staging_layers), 1, 100000,
            Doc{"", "layers a rank can stage ahead of the commits"}),
        Int(FIELD(eplb.layers_per_chunk), 0, 100000,
            Doc{"",
                "stop-the-world in chunks (needs `use_async: false`): from the step after the "
                "policy ran, this many layers move at each step boundary, which waits for them, "
                "until every layer has moved — SGLang's `--eplb-rebalance-layers-per-chunk` (one "
                "chunk per forward pass; default all layers at once) and ATOM's "
                "`rebalance_layers_per_chunk` (64). 0: every layer at one boundary. Recovery from "
                "a lost GPU moves every layer at once"}),
        Enum(FIELD(eplb.sender_rule), kSenderRuleNames,
             Doc{"", "`vllm` or `local` (see docs/plan.md)"}),
        Enum(FIELD(eplb.schedule), kScheduleStrategyNames,
             Doc{"", "`single-batch`, `greedy-pairs` or `best`", "see meaning"}),
        Bool(FIELD(eplb.preserve_slots),
             Doc{"", "apply vLLM's `preserve_intragpu_slots` to every new placement"}),
        Real(FIELD(eplb.migration_weight), 0, 1e9,
             Doc{"",
                 "`migration-aware`: weight of the time to move a layer's bytes against its "
                 "straggler time over the next interval (0: balance only). A transfer's own time "
                 "understates what a move costs (the slowed steps, the staging, the risk of moving "
                 "an expert that is hot only for a while); 16 was chosen as the smallest of 1, 4, "
                 "8, 16 that, on the default scenario, moved at least 5× fewer bytes per "
                 "steady-state rearrangement than `deepseek` while staying within 1% of its "
                 "balancedness; with each step's movement (`workload.step_sigma`) it moves 4.6× "
                 "fewer (137 against 634 GB), 0.1% less balanced"}),
        Int(FIELD(eplb.max_moves_per_layer), 0, kMaxExperts,
            Doc{"", "`incremental`: experts moved per layer per rearrangement at most"}),
        Enum(FIELD(eplb.lost_tokens), kLostTokensNames,
             Doc{"",
                 "after a GPU is lost, tokens routed to an expert with no live replica until its "
                 "layer's recovery commits: `drop` serves on without that expert's work and counts "
                 "them (metrics.csv `tokens_lost`); `wait` pauses serving until the whole recovery "
                 "has committed (it runs stop-the-world; the step's `stalled_s`) and counts the "
                 "batch as stalled"}),
        Enum(FIELD(eplb.recovery), kRecoveryNames,
             Doc{"",
                 "what recovery from lost GPUs moves: `rebalance` runs the policy over the live "
                 "GPUs (a full rearrangement, copying whatever it re-places); `repair` changes "
                 "only what the loss forces — each expert left without a live replica is reloaded "
                 "into a free live slot, else in place of the replica whose expert keeps the "
                 "lowest load per replica without it — and copies nothing; the next interval "
                 "rebalances (model/recovery.h)"}),
        Real(FIELD(migration.max_staging_gb), 0, kMaxMemoryGb,
             Doc{"GB",
                 "bytes each GPU may hold staged for a rearrangement at once, 10^9 bytes (0: all "
                 "the GPU has left, its headroom). A GPU begins a layer only while the layers it "
                 "has begun and not committed fit, each its written slots × `model.expert_bytes`; "
                 "stop-the-world then commits layers as they are staged, inside the same blocked "
                 "boundary. A budget beyond the headroom, or below a layer whose every slot on a "
                 "GPU changes (slots per GPU × `expert_bytes`), is refused. Engines: vLLM stages "
                 "one layer at a time into a buffer of one layer's experts, allocated with the "
                 "model; SGLang allocates such a buffer per update; the run folder's "
                 "`gpu_memory.csv` records each GPU's peak (docs/scenarios.md, GPU memory)"}),
        Enum(FIELD(migration.transport), kTransportNames,
             Doc{"",
                 "how the weights travel (migrate/transport.h gives each source): `nccl`, "
                 "point-to-point in one group per layer at the links' rates, on SMs (vLLM's "
                 "`torch_nccl`/`pynccl`, SGLang); `nixl`, one-sided reads on copy engines, plus "
                 "0.45 ms per layer (a gloo barrier, 0.2 ms; half of vLLM's 0.5 ms completion "
                 "polling) and 7 µs per message (UCX's `cuda_ipc` overhead) — vLLM's default when "
                 "NIXL is installed; `gloo`, staged through host memory over TCP (vLLM's "
                 "`torch_gloo`, its fallback): each flow at most 2.4 GB/s and each message 0.2 ms "
                 "of CPU work (torchft #199's gloo measurements); `host_pool`, every expert a GPU "
                 "would receive from another read instead from a copy in host memory at "
                 "`cluster.host_read_gbps`, no GPU-to-GPU traffic (TensorRT-LLM's host memory "
                 "pool; needs `cluster.backup: host`). The SMs `nccl` takes from compute are not "
                 "priced. Simulator only: `device-run` refuses all but `nccl`"}),
        Int(FIELD(migration.sms), 0, 1000,
            Doc{"",
                "SMs an SM-driven transport (`nccl`) holds on every GPU while a rearrangement is "
                "in flight; the steps meanwhile compute on the rest, and the difference counts as "
                "steps slowed. 0: not priced. vLLM caps NCCL at 8 CTAs (`NCCL_MAX_CTAS=8`) when "
                "async EPLB runs beside DeepEP's low-latency kernels (vLLM's "
                "`override_envs_for_eplb`); refused with the copy-engine transports",
                "0 to the GPU's SMs − `compute.normal_sms` − 1"}),
        Enum(
            FIELD(migration.engine), kEngineNames,
            Doc{"",
                "whose orchestration a rearrangement pays on top of its bytes "
                "(migrate/engine_profile.h counts each operation from the engine's code and prices "
                "it from one table of sourced per-operation costs): `eplb`, none (eplb's own "
                "backend, one group per layer from C++); `vllm`, vLLM's synchronous EPLB: once per "
                "rearrangement the load window's all_reduce and copy to the CPU, its Python policy "
                "(6 µs per layer and slot, from #28369's 10 ms on DeepSeek-V2-Lite), "
                "`compute_logical_maps`' loop over the slots (28 µs a slot) and the maps copied "
                "back; per layer and rank its numpy planning (a lookup per expert it holds and per "
                "expert it receives), `copy_` per tensor per local move, then per "
                "`migration.transport`: `nccl` an isend/irecv per tensor per expert moved, one "
                "batch, a wait per request, which NCCL runs at 21.3 GB/s a rank (vLLM #28562); "
                "`nixl` per received expert 6 NIXL calls and 3 "
                "releases, completion seen at the next 0.5 ms poll, a `monitored_barrier` (one "
                "gloo "
                "operation, 0.2 ms, and rank 0's 2 (ranks − 1) messages, 11.8 µs each) that waits "
                "for the slowest rank; `gloo` a "
                "host copy, a gloo send/recv (0.2 ms) and a wait per tensor; then the write-back "
                "`copy_` per row per tensor. Its counts replace the transport's own per-layer and "
                "per-message CPU estimates. The simulator charges the once-per-rearrangement work "
                "on the rearranging thread (a sync rearrangement's stall) and the rest on each "
                "rank's worker (in async mode, all but each layer's apply). In async mode "
                "(`eplb.use_async`) every step while a rearrangement "
                "is in flight also pays `_all_ranks_buffer_ready`, a gloo all_reduce of a flag "
                "(one "
                "operation and 2 (ranks − 1) − 1 ring steps) and `.item()`, and the main thread "
                "applies each layer in the step after it is staged (`move_to_workspace`: an event "
                "wait, the write-back `copy_` per row per tensor, the layer's maps), a stall of "
                "its slowest rank's share; `sglang`, SGLang's "
                "`ExpertLocationUpdater` "
                "(with `nccl` only): per layer two loops over the rank's slots and, per expert it "
                "receives or holds, two list comprehensions over every slot (0.02 µs an element), "
                "a P2P op per tensor per expert in one batch with a wait each (21.3 GB/s a rank), "
                "`copy_` per tensor "
                "per move; once per update, on the rearranging thread, the load's all_reduce, "
                "DeepSeek's policy in torch (its greedy packing, 7.8 µs an item and 0.88 µs per "
                "pack) and the dispatch map's Python loops over layers × experts × ranks. Not yet "
                "modelled: TensorRT-LLM's profile"}),
        Bool(FIELD(migration.batching),
             Doc{"",
                 "vLLM's opt-in migration batching (`enable_migration_batching`, "
                 "`migration_scheduler.py`): each layer's transfers go in batches in which a rank "
                 "talks to at most one peer, and each batch is one communicator `execute()` (with "
                 "`nixl`: its own poll loop and `monitored_barrier`). Priced with "
                 "`migration.engine: vllm` only"}),
        Custom("faults", ReadFaults, WriteFaults,
               Doc{"",
                   "what goes wrong while the cluster serves, each `{kind, step, ...}`; `step` ≥ "
                   "0. Slowdowns also take `until` > `step` (default: to the end of the run) and "
                   "hold over steps [`step`, `until`); losses are for good and a scale holds until "
                   "the next. Each kind takes only its own fields",
                   "a list of faults", "`[]`"}),
        Note("faults[].kind", kFaultKindNames.List(),
             Doc{"",
                 "`straggler`: a GPU computes slower; `link_degraded`: a GPU's or a node's links "
                 "of one class carry less; `gpu_lost` / `node_lost`: a GPU or every GPU of a node "
                 "is gone from `step` on (its transfers fail, the rearrangement in flight is "
                 "cancelled, recovery re-places every expert on the live GPUs and reloads from "
                 "`cluster.backup` those whose every replica was lost; docs/faults.md); `scale`: "
                 "the serving GPUs become ranks 0..`gpus`−1 at `step` (elastic EP: new ranks "
                 "receive experts, removed ones send theirs away). Losses and scales need a policy "
                 "that places around lost GPUs (`deepseek`, `replicate-lpt`, `timeseries`, "
                 "`fault-tolerant`), and every set of GPUs the run goes through must keep a slot "
                 "per expert. A fault that would do nothing is refused: a loss of GPUs already "
                 "lost or idle, a scale to the GPUs already serving; so are two slowdowns of one "
                 "kind on one target over overlapping steps (give one with the combined factor)",
                 "", "—"}),
        Note("faults[].rank", {},
             Doc{"",
                 "`straggler` and `gpu_lost` (required): the GPU it hits; `link_degraded`: the GPU "
                 "whose link slows (or `node`)",
                 "0..GPUs−1", "—"}),
        Note("faults[].node", {},
             Doc{"",
                 "`node_lost` (required): the node lost; `link_degraded`: every GPU of this node "
                 "(give `rank` or `node`)",
                 "0..nodes−1", "—"}),
        Note("faults[].gpus", {},
             Doc{"", "`scale` (required): the GPUs serving from `step` on", "1..GPUs", "—"}),
        Note("faults[].link", kLinkClassNames.List(),
             Doc{"", "`link_degraded`: which of the GPUs' links", "", "`nic`"}),
        NoteRange(
            "faults[].factor", 1, kMaxSlowdown,
            Doc{"",
                "`straggler`: its MoE work and attention take × factor (it may become each "
                "layer's straggler, and every step's attention waits for it); `link_degraded`: "
                "bandwidth ÷ factor for dispatch, combine and expert transfers alike, in flight "
                "too (the simulator; real links on the host and GPU backends keep their speed)",
                "", "1"}),
        Int(FIELD(run.steps), 1, kNoMax,
            Doc{"", "inference steps to simulate", "≥ 1, and the run must fit in memory (below)"}),
        Uint64(FIELD(run.seed), Doc{"", "seeds the workload"}),
        Custom(
            "run.measure_from", ReadMeasureFrom, WriteMeasureFrom,
            Doc{"",
                "where the run's statistics begin (`summary.json`'s `measured`): "
                "`first_rearrangement`, the first step whose latency holds nothing of leaving the "
                "initial placement (the second after the first finished rearrangement's last "
                "commit); `first_commit`, the step after the first commit (the window then holds "
                "the first rearrangement); either is step 0 when nothing is ever committed (as "
                "with `static`); a step, that step. The warm-up stays in `metrics.csv` and is "
                "shaded in the plots; a comparison measures every run from the latest of their "
                "own first steps",
                "`first_rearrangement`, `first_commit`, or a step in 0..`run.steps`−1",
                "`first_rearrangement`"}),
    };
  }();
  return fields;
}

#undef FIELD

std::string Field::Section() const {
  const size_t dot = path.rfind('.');
  return dot == std::string::npos ? "" : path.substr(0, dot);
}

std::string Field::Key() const {
  return path.substr(path.rfind('.') + 1);
}

std::string Field::ValidText() const {
  if (!valid_text.empty()) return valid_text;
  if (type == FieldType::kInt) {
    if (int_max - int_min == 1) return fmt::format("{}, {}", int_min, int_max);
    if (int_max == kNoMax) return fmt::format("≥ {}", int_min);
    return fmt::format("{}..{}", int_min, IntBound(int_max));
  }
  if (type == FieldType::kReal || (type == FieldType::kNote && max > min)) {
    return fmt::format("{}{}, {}]", positive ? "(" : "[", Bound(min), Bound(max));
  }
  if (type == FieldType::kBool) return "true, false";
  std::string out;  // the names: `a`, `b`, `c`
  for (const std::string& name : names) out += (out.empty() ? "`" : ", `") + name + "`";
  return out;
}

std::string Field::DefaultText() const {
  if (!default_text.empty() || !show) return default_text;
  return show(Scenario{});
}

std::string Field::ReadmeRow() const {
  return fmt::format("| `{}` | {} | {} |{} |", path, DefaultText(), ValidText(),
                     doc.empty() ? "" : " " + doc);
}

namespace {

// The fields in the order they are read: the table's, each read_after moved behind its field.
const std::vector<const Field*>& ReadOrder() {
  static const std::vector<const Field*> order = [] {
    std::vector<const Field*> fields;
    for (const Field& f : ScenarioFields()) {
      if (f.read && f.read_after.empty()) fields.push_back(&f);
    }
    for (const Field& f : ScenarioFields()) {
      if (!f.read || f.read_after.empty()) continue;
      const auto after = std::find_if(fields.begin(), fields.end(),
                                      [&](const Field* g) { return g->path == f.read_after; });
      fields.insert(after == fields.end() ? after : after + 1, &f);
    }
    return fields;
  }();
  return order;
}

}  // namespace

void ReadScenarioFields(const YAML::Node& root, Scenario& s, Reader& r) {
  // The maps open at the field being read: the top level, then its section's (and a link's).
  std::vector<MapReader> open;
  std::vector<std::string> open_names;
  open.reserve(4);
  open.emplace_back(root, "", r);
  for (const Field* field : ReadOrder()) {
    const Field& f = *field;
    std::vector<std::string> parts = Split(f.path);
    const std::string key = parts.back();
    parts.pop_back();
    size_t common = 0;
    while (common < open_names.size() && common < parts.size() &&
           open_names[common] == parts[common]) {
      ++common;
    }
    // A map is finished (its unknown fields reported) when the next field is outside it.
    for (; open_names.size() > common; open_names.pop_back()) {
      open.back().Finish();
      open.pop_back();
    }
    for (; open_names.size() < parts.size(); open_names.push_back(parts[open_names.size()])) {
      MapReader sub = open.back().Sub(parts[open_names.size()].c_str());
      open.push_back(std::move(sub));
    }
    f.read(open.back(), key.c_str(), s, r);
  }
  for (; !open.empty(); open.pop_back()) open.back().Finish();
}

void WriteScenarioFields(YAML::Emitter& out, const Scenario& s) {
  std::vector<std::string> open_names;
  out << YAML::BeginMap;
  for (const Field& f : ScenarioFields()) {
    if (!f.write) continue;
    std::vector<std::string> parts = Split(f.path);
    const std::string key = parts.back();
    parts.pop_back();
    size_t common = 0;
    while (common < open_names.size() && common < parts.size() &&
           open_names[common] == parts[common]) {
      ++common;
    }
    for (; open_names.size() > common; open_names.pop_back()) out << YAML::EndMap;
    for (; open_names.size() < parts.size(); open_names.push_back(parts[open_names.size()])) {
      out << YAML::Key << parts[open_names.size()] << YAML::Value << YAML::BeginMap;
    }
    out << YAML::Key << key << YAML::Value;
    f.write(out, s);
  }
  for (; !open_names.empty(); open_names.pop_back()) out << YAML::EndMap;
  out << YAML::EndMap;
}

}  // namespace eplb::scenario_schema
