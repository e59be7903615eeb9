#include "eplb/io/scenario_file.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string_view>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "eplb/engine/hardware.h"
#include "eplb/engine/time_bounds.h"
#include "eplb/formats/load_file.h"
#include "eplb/policy/external_policy.h"
#include "eplb/policy/policy.h"
#include "io/scenario_fields.h"
#include "io/scenario_schema.h"
#include "io/yaml_document.h"

namespace eplb {

using namespace scenario_fields;  // NOLINT: this file is the fields' main reader

namespace {

// The one YAML document of a scenario: none (an empty file) is an error when
// `require_document`; otherwise it is an empty map (the defaults).
Result<YAML::Node> LoadOneDocument(const std::string& text, const std::string& source,
                                   bool require_document) {
  // A scenario is recognised by its sections; until then no error quotes the text
  // (base/excerpt.h): /etc/shadow linked or saved as x.yaml reads as a map of one odd key.
  const auto sections = {
      std::string_view("name"),      std::string_view("model"),    std::string_view("cluster"),
      std::string_view("compute"),   std::string_view("workload"), std::string_view("eplb"),
      std::string_view("migration"), std::string_view("faults"),   std::string_view("run")};
  EPLB_ASSIGN_OR_RETURN(YAML::Node doc,
                        LoadOneYamlDocument(text, source, "a scenario file", sections));
  if (doc.IsMap() && doc.size() > 0 && !HasKindField(doc, sections)) {
    const YAML::Mark m = doc.begin()->first.Mark();
    return Status::InvalidArgument(fmt::format(
        "{}:{}:{}: not a scenario: none of its top-level fields is one of {}; eplb quotes nothing "
        "of a file it does not recognise (a wrong path?)",
        source, m.line + 1, m.column + 1, fmt::join(sections, ", ")));
  }
  if (!doc.IsNull()) return doc;
  if (!require_document) return YAML::Node(YAML::NodeType::Map);
  return Status::InvalidArgument(fmt::format(
      "{}: no scenario in it (the file is empty or only comments); give at least the fields "
      "that differ from the built-in default (scenarios/README.md), or give no file to run the "
      "default",
      source));
}

// `into` with every field of `from` set: maps merge key by key, anything else replaces.
void Merge(YAML::Node into, const YAML::Node& from) {
  for (const auto& kv : from) {
    const std::string key = kv.first.Scalar();
    YAML::Node existing = into[key];
    if (kv.second.IsMap() && existing.IsMap()) {
      Merge(existing, kv.second);
    } else {
      into[key] = kv.second;
    }
  }
}

Status ApplyOverride(YAML::Node& root, const std::string& setting, Reader& reader) {
  const size_t eq = setting.find('=');
  if (eq == std::string::npos || eq == 0) {
    return Status::InvalidArgument(
        fmt::format("--set {}: expected key.path=value", QuoteInput(setting)));
  }
  const std::string path = setting.substr(0, eq);
  YAML::Node value;
  try {
    value = YAML::Load(setting.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(fmt::format("--set {}: the value is not valid YAML: {}",
                                               QuoteInput(setting), YamlReason(e.msg)));
  }
  size_t visited = 0;
  EPLB_RETURN_IF_ERROR(CheckYamlKeys(value, "--set " + QuoteInput(setting), visited));
  std::vector<std::string> parts;
  std::stringstream ss(path);
  for (std::string part; std::getline(ss, part, '.');) parts.push_back(part);
  YAML::Node cur = root;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (cur[parts[i]] && !cur[parts[i]].IsMap()) {
      return Status::InvalidArgument(fmt::format("--set {}: {} is not a map of fields",
                                                 QuoteInput(setting), QuoteInput(parts[i])));
    }
    YAML::Node next = cur[parts[i]];
    cur.reset(next);
  }
  // A map sets the fields it names and keeps the others: --set 'model={layers: 2}'.
  YAML::Node target = cur[parts.back()];
  if (value.IsMap() && target.IsMap()) {
    Merge(target, value);
  } else {
    cur[parts.back()] = value;
  }
  reader.Overridden(path);
  return Status::Ok();
}

void Validate(Scenario& s, Reader& r) {
  const ModelSpec& m = s.model;
  if (int64_t{s.cluster.nodes} * s.cluster.gpus_per_node > kMaxGpus) {
    r.FailAt("cluster.nodes",
             fmt::format("cluster.nodes × cluster.gpus_per_node is {} × {} = {} GPUs; eplb "
                         "models at most {}",
                         s.cluster.nodes, s.cluster.gpus_per_node,
                         int64_t{s.cluster.nodes} * s.cluster.gpus_per_node, kMaxGpus));
    return;
  }
  // Every byte count of a run (a layer, a rearrangement, all of them) must fit an int64.
  const double all_bytes = double(m.layers) * s.num_slots() * double(m.expert_bytes);
  if (all_bytes > 4e18) {
    r.FailAt("model.expert_bytes",
             fmt::format("model.layers × slots × model.expert_bytes is {} × {} × {} = {:.3g} "
                         "bytes, beyond what eplb counts (4e18); lower model.expert_bytes",
                         m.layers, s.num_slots(), m.expert_bytes, all_bytes));
  }
  if (m.experts % m.groups != 0) {
    r.FailAt("model.groups", fmt::format("model.groups is {}; it must divide model.experts ({})",
                                         m.groups, m.experts));
  }
  if (m.top_k > m.experts) {
    r.FailAt("model.top_k", fmt::format("model.top_k is {}; it must be at most model.experts ({})",
                                        m.top_k, m.experts));
  }
  const int gpus = s.num_gpus();
  if (s.num_slots() % gpus != 0) {
    const int next = (s.num_slots() + gpus - 1) / gpus * gpus - m.experts;
    r.FailAt(
        "eplb.num_redundant_experts",
        fmt::format("eplb.num_redundant_experts is {}: {} experts + {} redundant = {} slots do not "
                    "divide over {} GPUs; valid values are {} plus multiples of {}",
                    s.eplb.num_redundant_experts, m.experts, s.eplb.num_redundant_experts,
                    s.num_slots(), gpus, next, gpus));
  }
  if (!MakePolicy(s.eplb.policy).ok()) {
    r.FailAt("eplb.policy", fmt::format("eplb.policy is {}; {}", QuoteInput(s.eplb.policy),
                                        MakePolicy(s.eplb.policy).status().message()));
  }
  if (s.eplb.layers_per_chunk > 0 && s.eplb.use_async) {
    r.FailAt("eplb.layers_per_chunk",
             fmt::format("eplb.layers_per_chunk is {} but eplb.use_async is true; chunks move "
                         "stop-the-world, one per step (SGLang, ATOM): set eplb.use_async: false, "
                         "or eplb.layers_per_step for the async protocol",
                         s.eplb.layers_per_chunk));
  }
  if (s.compute.mtp_draft_tokens > 0 && s.compute.stage != InferenceStage::kDecode) {
    r.FailAt("compute.mtp_draft_tokens",
             fmt::format("compute.mtp_draft_tokens is {} but compute.stage is prefill; "
                         "multi-token prediction drafts tokens in decode",
                         s.compute.mtp_draft_tokens));
  }
  if (const GpuSpec* gpu = FindGpuPreset(s.compute.gpu);
      gpu != nullptr && s.compute.normal_sms >= gpu->sms) {
    r.FailAt(
        "compute.normal_sms",
        fmt::format("compute.normal_sms is {} but the {} has {} SMs; the normal kernels must leave "
                    "compute at least one (valid: 0 to {})",
                    s.compute.normal_sms, gpu->name, gpu->sms, gpu->sms - 1));
  }
  if (s.workload.sequence_tokens > s.tokens_per_forward()) {
    r.FailAt(
        "workload.sequence_tokens",
        fmt::format("workload.sequence_tokens is {} but a step runs {} tokens; a sequence "
                    "brings at most a step's tokens (valid: 0 to {})",
                    s.workload.sequence_tokens, s.tokens_per_forward(), s.tokens_per_forward()));
  }
  if (s.migration.engine == Engine::kSglang && s.migration.transport != Transport::kNccl) {
    r.FailAt("migration.engine",
             fmt::format("migration.engine is 'sglang', which moves the weights with "
                         "torch.distributed P2P only, but migration.transport is '{}'; valid "
                         "with sglang: nccl",
                         TransportName(s.migration.transport)));
  }
  if (s.migration.batching && s.migration.engine != Engine::kVllm) {
    r.FailAt("migration.batching",
             fmt::format("migration.batching is true, which is vLLM's option, but "
                         "migration.engine is '{}'; valid: false, or migration.engine vllm",
                         EngineName(s.migration.engine)));
  }
  if (s.migration.sms > 0 && !CostOf(s.migration.transport).uses_sms) {
    r.FailAt("migration.sms",
             fmt::format("migration.sms is {} but migration.transport '{}' moves the weights on "
                         "copy engines or the CPU, not on SMs; valid: 0",
                         s.migration.sms, TransportName(s.migration.transport)));
  } else if (const GpuSpec* gpu = FindGpuPreset(s.compute.gpu);
             gpu != nullptr && s.migration.sms > 0 &&
             s.migration.sms + s.compute.normal_sms >= gpu->sms) {
    r.FailAt("migration.sms",
             fmt::format("migration.sms is {} and compute.normal_sms {}, but the {} has {} SMs; "
                         "compute must keep at least one (valid: 0 to {})",
                         s.migration.sms, s.compute.normal_sms, gpu->name, gpu->sms,
                         gpu->sms - s.compute.normal_sms - 1));
  }
  if (s.migration.transport == Transport::kHostPool &&
      s.cluster.backup == ClusterSpec::Backup::kStorage) {
    r.FailAt("migration.transport",
             "migration.transport is 'host_pool', which reads the weights from host memory, but "
             "cluster.backup is 'storage'; set cluster.backup to 'host' or choose another "
             "transport");
  }
  if (s.workload.kind == "trace" && s.workload.trace.empty()) {
    r.FailAt("workload.kind", "workload.kind is 'trace' but workload.trace names no file");
  }
  if (s.cluster.initial_gpus > gpus) {
    r.FailAt("cluster.initial_gpus",
             fmt::format("cluster.initial_gpus is {}; the cluster has 1..{} GPUs (0: all)",
                         s.cluster.initial_gpus, gpus));
  } else if (r.status().ok()) {
    ValidateRankChanges(s, r);
  }
  if (r.status().ok()) ValidateFaultOverlaps(s, r);
}

// DeepSeek-V3 and R1 (and their updates: DeepSeek-V3-0324, deepseek-ai/DeepSeek-R1-0528) share
// the shapes every model constant's default is.
bool IsDeepSeekV3Shape(const std::string& name) {
  std::string base = name.substr(name.rfind('/') + 1);
  std::transform(base.begin(), base.end(), base.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return base.rfind("deepseek-v3", 0) == 0 || base.rfind("deepseek-r1", 0) == 0;
}

// A scenario that names another model (model.name) but leaves a model constant out runs that
// model with DeepSeek-V3's value, which is valid YAML and a wrong answer: each such field is
// said on stderr, once a process (sweeps and comparisons read a scenario many times).
// The built-in scenario's text sets every model constant to DeepSeek-V3's: with another
// model.name given by --set, a constant counts as set only when a --set sets it too.
constexpr const char* kBuiltInSource = "(built-in default scenario)";

void WarnOfDeepSeekConstants(const YAML::Node& root, const Scenario& s,
                             const std::vector<std::string>& overrides) {
  if (IsDeepSeekV3Shape(s.model.name)) return;
  const bool built_in = s.source == kBuiltInSource;
  const auto overridden = [&](const std::string& key) {
    const std::string prefix = "model." + key + "=";
    return std::any_of(overrides.begin(), overrides.end(),
                       [&](const std::string& o) { return o.rfind(prefix, 0) == 0; });
  };
  const Scenario defaults;
  const YAML::Node model = root["model"];
  static std::mutex mutex;
  static std::set<std::string> said;
  for (const scenario_schema::Field& f : scenario_schema::ScenarioFields()) {
    // The model's constants: every number of model.*.
    if (f.Section() != "model" || !f.number) continue;
    const std::string key = f.Key();
    if (built_in ? overridden(key) : model.IsMap() && model[key]) continue;
    const std::string warning = fmt::format(
        "{}: warning: model.name is '{}' but model.{} is not set, so it is DeepSeek-V3's {:.10g}; "
        "set {}'s own (scenarios/README.md says how each is derived)",
        s.source, s.model.name, key, f.number(defaults), s.model.name);
    const std::lock_guard<std::mutex> lock(mutex);
    if (said.insert(warning).second) fmt::print(stderr, "{}\n", warning);
  }
}

Result<Scenario> ParseScenarioChecked(const std::string& text, const std::string& source,
                                      const std::vector<std::string>& overrides,
                                      bool require_document);

// yaml-cpp reports some misuse by exception; none may escape as a crash.
Result<Scenario> ParseScenarioText(const std::string& text, const std::string& source,
                                   const std::vector<std::string>& overrides,
                                   bool require_document) {
  try {
    return ParseScenarioChecked(text, source, overrides, require_document);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(fmt::format("{}:{}:{}: not a valid scenario: {}", source,
                                               e.mark.line + 1, e.mark.column + 1,
                                               YamlReason(e.msg)));
  }
}

Result<Scenario> ParseScenarioChecked(const std::string& text, const std::string& source,
                                      const std::vector<std::string>& overrides,
                                      bool require_document) {
  EPLB_ASSIGN_OR_RETURN(YAML::Node root, LoadOneDocument(text, source, require_document));
  if (!root.IsMap()) {
    return Status::InvalidArgument(
        fmt::format("{}:1:1: the file is {}; a scenario is a map of fields (model:, cluster:, ...)",
                    source, root.IsScalar() ? "plain text" : Show(root)));
  }
  Reader r(source);
  for (const std::string& o : overrides) EPLB_RETURN_IF_ERROR(ApplyOverride(root, o, r));

  Scenario s;
  s.source = source;
  scenario_schema::ReadScenarioFields(root, s, r);
  if (r.status().ok()) Validate(s, r);
  // Last: the step model needs a scenario whose every other check passed.
  if (r.status().ok()) {
    if (const auto unbounded = FindUnboundedTime(s)) r.FailAt(unbounded->field, unbounded->message);
  }
  if (!r.status().ok()) return r.status();
  WarnOfDeepSeekConstants(root, s, overrides);
  return s;
}

}  // namespace

Result<Scenario> ParseScenario(const std::string& text, const std::string& source,
                               const std::vector<std::string>& overrides) {
  return ParseScenarioText(text, source, overrides, /*require_document=*/false);
}

Result<Scenario> LoadScenarioFile(const std::string& path,
                                  const std::vector<std::string>& overrides) {
  // A scenario is a page of YAML; another kind of file, or a larger one, is a wrong path.
  EPLB_RETURN_IF_ERROR(ExpectFileKind(path, "a scenario", {".yaml", ".yml"}));
  auto text = ReadTextFile(path, 16 << 20);
  if (!text.ok()) return text.status();
  auto s = ParseScenarioText(*text, path, overrides, /*require_document=*/true);
  if (!s.ok()) return s;
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  s->base_dir = dir.empty() ? std::filesystem::path(".") : dir;
  return s;
}

Result<Scenario> LoadScenarioOrDefault(const std::string& path,
                                       const std::vector<std::string>& overrides) {
  if (path.empty()) return ParseScenario(DefaultScenarioText(), kBuiltInSource, overrides);
  return LoadScenarioFile(path, overrides);
}

std::string ScenarioToYaml(const Scenario& s) {
  YAML::Emitter out;
  scenario_schema::WriteScenarioFields(out, s);
  return std::string(out.c_str()) + "\n";
}

std::vector<ScenarioFieldDoc> ScenarioFieldDocs() {
  std::vector<ScenarioFieldDoc> docs;
  const Scenario defaults;
  for (const scenario_schema::Field& f : scenario_schema::ScenarioFields()) {
    ScenarioFieldDoc d{f.path, f.unit,  f.DefaultText(), f.ValidText(),
                       f.doc,  f.names, std::nullopt,    f.ReadmeRow()};
    if (f.number) d.default_number = f.number(defaults);
    docs.push_back(std::move(d));
  }
  return docs;
}

Result<Scenario> WithFault(const Scenario& scenario, const FaultSpec& fault) {
  Scenario with = scenario;
  with.faults.push_back(fault);
  // Through the text, so that the one validation applies.
  auto parsed = ParseScenario(ScenarioToYaml(with), scenario.source);
  if (!parsed.ok()) return parsed.status();
  parsed->base_dir = scenario.base_dir;
  return parsed;
}

}  // namespace eplb
