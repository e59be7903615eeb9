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
#include "io/yaml_document.h"

namespace eplb {

using namespace scenario_fields;  // NOLINT: this file is the fields' main reader

namespace {

void ReadLink(MapReader m, LinkConfig& link) {
  m.Double("bandwidth_gbps", link.bandwidth_gbps, 0, kMaxGbps, true);
  m.Double("latency_us", link.latency_us, 0, kMaxMicroseconds);
  m.Double("efficiency", link.efficiency, 0, 1, true);
  m.Finish();
}

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

// model.name: a Hugging Face model name, with or without its organisation.
bool IsModelName(const std::string& name) {
  return !name.empty() && name.size() <= 100 && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ||
           c == '+' || c == '/';
  });
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
void WarnOfDeepSeekConstants(const YAML::Node& root, const Scenario& s) {
  if (IsDeepSeekV3Shape(s.model.name)) return;
  const ModelSpec d;
  const std::pair<const char*, double> constants[] = {
      {"layers", d.layers},
      {"experts", d.experts},
      {"groups", d.groups},
      {"top_k", d.top_k},
      {"hidden", d.hidden},
      {"expert_bytes", static_cast<double>(d.expert_bytes)},
      {"expert_tensors", d.expert_tensors},
      {"activation_bytes", d.activation_bytes},
      {"combine_bytes", d.combine_bytes},
      {"topk_groups", d.topk_groups},
      {"intermediate", d.intermediate},
      {"dense_params", d.dense_params},
      {"kv_bytes_per_token", d.kv_bytes_per_token},
      {"attention_flops_per_kv", d.attention_flops_per_kv},
      {"elementwise_bytes_per_token", d.elementwise_bytes_per_token}};
  const YAML::Node model = root["model"];
  static std::mutex mutex;
  static std::set<std::string> said;
  for (const auto& [key, value] : constants) {
    if (model.IsMap() && model[key]) continue;
    const std::string warning = fmt::format(
        "{}: warning: model.name is '{}' but model.{} is not set, so it is DeepSeek-V3's {:.10g}; "
        "set {}'s own (scenarios/README.md says how each is derived)",
        s.source, s.model.name, key, value, s.model.name);
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
  MapReader top(root, "", r);
  top.String("name", s.name);
  if (!IsSafePathComponent(s.name)) {
    r.FailAt("name", fmt::format("name is '{}'; it names the default output folder runs/NAME, so "
                                 "it is 1 to 100 letters, digits, '.', '_', '-' or '+', not "
                                 "starting with '.' (use --out to write elsewhere)",
                                 Excerpt(s.name)));
  }
  {
    MapReader m = top.Sub("model");
    m.String("name", s.model.name);
    if (!IsModelName(s.model.name)) {
      r.FailAt("model.name",
               fmt::format("model.name is '{}'; it is the model's Hugging Face name, 1 to 100 "
                           "letters, digits, '.', '_', '-', '+' or '/' (e.g. Qwen3-235B-A22B)",
                           Excerpt(s.model.name)));
    }
    m.Int("layers", s.model.layers, 1, 100000);
    m.Int("experts", s.model.experts, 1, kMaxExperts);
    m.Int("groups", s.model.groups, 1, kMaxExperts);
    m.Int("top_k", s.model.top_k, 1, kMaxExperts);
    m.Int("hidden", s.model.hidden, 1, 1 << 20);
    m.Int64("expert_bytes", s.model.expert_bytes, 1, kMaxExpertBytes);
    m.Int("expert_tensors", s.model.expert_tensors, 1, 16);
    m.Int("activation_bytes", s.model.activation_bytes, 1, 8);
    m.Int("combine_bytes", s.model.combine_bytes, 0, 8);
    m.Int("topk_groups", s.model.topk_groups, 0, kMaxExperts);
    m.Int("intermediate", s.model.intermediate, 1, 1 << 24);
    m.Double("dense_params", s.model.dense_params, 0, 1e15);
    m.Double("kv_bytes_per_token", s.model.kv_bytes_per_token, 0, 1e12);
    m.Double("attention_flops_per_kv", s.model.attention_flops_per_kv, 0, 1e15);
    m.Double("elementwise_bytes_per_token", s.model.elementwise_bytes_per_token, 0, 1e12);
    m.Finish();
  }
  {
    MapReader c = top.Sub("cluster");
    c.Int("nodes", s.cluster.nodes, 1, kMaxGpus);
    c.Int("gpus_per_node", s.cluster.gpus_per_node, 1, 1024);
    ReadLink(c.Sub("nvlink"), s.cluster.nvlink);
    ReadLink(c.Sub("nic"), s.cluster.nic);
    c.Double("pcie_gbps", s.cluster.pcie_gbps, 0, kMaxGbps, true);
    c.Double("hbm_gbps", s.cluster.hbm_gbps, 0, kMaxGbps, true);
    c.Double("nvswitch_gbps", s.cluster.nvswitch_gbps, 0, kMaxGbps);
    c.Double("fabric_oversubscription", s.cluster.fabric_oversubscription, 1, 1000);
    std::string backup = s.cluster.backup == ClusterSpec::Backup::kHost ? "host" : "storage";
    c.String("backup", backup, {"host", "storage"});
    s.cluster.backup =
        backup == "host" ? ClusterSpec::Backup::kHost : ClusterSpec::Backup::kStorage;
    c.Double("host_read_gbps", s.cluster.host_read_gbps, 0, kMaxGbps, true);
    c.Double("host_read_latency_us", s.cluster.host_read_latency_us, 0, 1e9);
    c.Double("storage_read_gbps", s.cluster.storage_read_gbps, 0, kMaxGbps, true);
    c.Double("storage_read_latency_us", s.cluster.storage_read_latency_us, 0, 1e9);
    c.Int("initial_gpus", s.cluster.initial_gpus, 0, kMaxGpus);
    c.Double("gpu_memory_gb", s.cluster.gpu_memory_gb, 0, kMaxMemoryGb);
    c.Double("kv_cache_gb", s.cluster.kv_cache_gb, 0, kMaxMemoryGb);
    c.Double("memory_utilization", s.cluster.memory_utilization, 0, 1, true);
    c.Finish();
  }
  {
    MapReader c = top.Sub("compute");
    ComputeSpec& k = s.compute;
    std::string model = ComputeModelName(k.model), a2a = AllToAllModeName(k.all_to_all),
                stage = InferenceStageName(k.stage);
    c.String("model", model, {"simple", "roofline"});
    k.model = *ParseComputeModel(model);
    c.Double("attention_us", k.attention_us, 0, kMaxMicroseconds);
    c.Double("layer_fixed_us", k.layer_fixed_us, 0, kMaxMicroseconds);
    c.Double("per_token_us", k.per_token_us, 0, 1000);
    c.String("gpu", k.gpu, GpuPresetNames());
    c.Double("flops_efficiency", k.flops_efficiency, 0, 1, true);
    c.Double("hbm_efficiency", k.hbm_efficiency, 0, 1, true);
    c.Double("weight_hbm_efficiency", k.weight_hbm_efficiency, 0, 1, true);
    c.Double("expert_fixed_tokens", k.expert_fixed_tokens, 0, 1e6);
    c.Int("gemm_bytes", k.gemm_bytes, 1, 2);
    c.String("stage", stage, {"prefill", "decode"});
    k.stage = *ParseInferenceStage(stage);
    c.Double("kv_length", k.kv_length, 0, 1e9);
    c.String("all_to_all", a2a, {"bulk", "normal", "low-latency"});
    k.all_to_all = *ParseAllToAllMode(a2a);
    c.Int("micro_batches", k.micro_batches, 1, 2);
    c.Double("normal_nvlink_efficiency", k.normal_nvlink_efficiency, 0, 1, true);
    c.Int("normal_sms", k.normal_sms, 0, 1000);
    c.Double("normal_overlap_slowdown", k.normal_overlap_slowdown, 1, 100);
    c.Double("low_latency_overhead_us", k.low_latency_overhead_us, 0, kMaxMicroseconds);
    c.Int("mtp_draft_tokens", k.mtp_draft_tokens, 0, 4);
    c.Double("mtp_acceptance", k.mtp_acceptance, 0, 1);
    c.Finish();
  }
  {
    MapReader w = top.Sub("workload");
    w.String("kind", s.workload.kind, {"generator", "trace"});
    w.Int("tokens_per_step", s.workload.tokens_per_step, 1, 1 << 30);
    w.String("popularity", s.workload.popularity, {"lognormal", "zipf"});
    w.Double("sigma", s.workload.sigma, 0, 20);
    w.Double("zipf_s", s.workload.zipf_s, 0, 20);
    w.Double("drift", s.workload.drift, 0, 1);
    w.Bool("noise", s.workload.noise);
    w.Int("sequence_tokens", s.workload.sequence_tokens, 0, 1 << 30);
    w.Double("sequence_sigma", s.workload.sequence_sigma, 0, 20);
    w.Double("step_sigma", s.workload.step_sigma, 0, 1);
    w.String("trace", s.workload.trace);
    const YAML::Node phases = w.Take("phases");
    if (phases && !phases.IsNull()) {
      if (!phases.IsSequence()) {
        r.Fail(phases, "workload.phases",
               fmt::format("workload.phases is {}; expected a list of {{step, shuffle}}",
                           Show(phases)));
      } else {
        for (size_t i = 0; i < phases.size(); ++i) {
          PhaseChange p;
          MapReader pm(phases[i], fmt::format("workload.phases[{}]", i), r);
          pm.Int("step", p.step, 0, std::numeric_limits<int>::max());
          pm.Double("shuffle", p.shuffle, 0, 1);
          pm.Finish();
          s.workload.phases.push_back(p);
        }
      }
    }
    w.Finish();
  }
  {
    MapReader e = top.Sub("eplb");
    e.Int("window_size", s.eplb.window_size, 1, 1 << 20);
    e.Int("step_interval", s.eplb.step_interval, 1);
    std::string statistics = StatisticsName(s.eplb.statistics);
    e.String("statistics", statistics, {"window", "decayed"});
    s.eplb.statistics = *ParseStatistics(statistics);
    e.Double("decay", s.eplb.decay, 0, 1, true);
    e.Double("min_balancedness", s.eplb.min_balancedness, 0, 2);
    std::string gate = BalancednessGateName(s.eplb.balancedness_gate);
    e.String("balancedness_gate", gate, {"window_min", "window_mean", "step_mean"});
    s.eplb.balancedness_gate = *ParseBalancednessGate(gate);
    e.Int("num_redundant_experts", s.eplb.num_redundant_experts, 0, kMaxExperts);
    e.String("policy", s.eplb.policy);
    std::string dispatch = DispatchName(s.eplb.dispatch);
    e.String("dispatch", dispatch, {"even", "random", "lp"});
    s.eplb.dispatch = *ParseDispatch(dispatch);
    e.Bool("use_async", s.eplb.use_async);
    e.Int("layers_per_step", s.eplb.layers_per_step, 1, 100000);
    e.Int("staging_layers", s.eplb.staging_layers, 1, 100000);
    e.Int("layers_per_chunk", s.eplb.layers_per_chunk, 0, 100000);
    std::string rule = SenderRuleName(s.eplb.sender_rule),
                sched = ScheduleStrategyName(s.eplb.schedule);
    e.String("sender_rule", rule, {"vllm", "local"});
    e.String("schedule", sched, {"single-batch", "greedy-pairs", "best"});
    s.eplb.sender_rule = *ParseSenderRule(rule);
    s.eplb.schedule = *ParseScheduleStrategy(sched);
    e.Bool("preserve_slots", s.eplb.preserve_slots);
    e.Double("migration_weight", s.eplb.migration_weight, 0, 1e9);
    e.Int("max_moves_per_layer", s.eplb.max_moves_per_layer, 0, kMaxExperts);
    std::string lost = s.eplb.lost_tokens == EplbSpec::LostTokens::kDrop ? "drop" : "wait";
    e.String("lost_tokens", lost, {"drop", "wait"});
    s.eplb.lost_tokens = lost == "drop" ? EplbSpec::LostTokens::kDrop : EplbSpec::LostTokens::kWait;
    std::string recovery = s.eplb.recovery == EplbSpec::Recovery::kRepair ? "repair" : "rebalance";
    e.String("recovery", recovery, {"rebalance", "repair"});
    s.eplb.recovery =
        recovery == "repair" ? EplbSpec::Recovery::kRepair : EplbSpec::Recovery::kRebalance;
    e.Finish();
  }
  {
    MapReader m = top.Sub("migration");
    m.Double("max_staging_gb", s.migration.max_staging_gb, 0, kMaxMemoryGb);
    std::string transport = TransportName(s.migration.transport);
    m.String("transport", transport, {"nccl", "nixl", "gloo", "host_pool"});
    s.migration.transport = *ParseTransport(transport);
    m.Int("sms", s.migration.sms, 0, 1000);
    std::string engine = EngineName(s.migration.engine);
    m.String("engine", engine, EngineNames());
    s.migration.engine = *ParseEngine(engine);
    m.Bool("batching", s.migration.batching);
    m.Finish();
  }
  {
    const YAML::Node faults = top.Take("faults");
    if (faults && !faults.IsNull()) {
      if (!faults.IsSequence()) {
        r.Fail(faults, "faults",
               fmt::format("faults is {}; expected a list of {{kind, step, until, ...}}",
                           Show(faults)));
      } else {
        for (size_t i = 0; i < faults.size(); ++i) ReadFault(faults[i], i, s, r);
      }
    }
  }
  {
    MapReader run = top.Sub("run");
    run.Int("steps", s.run.steps, 1);
    run.Uint64("seed", s.run.seed);
    if (const YAML::Node from = run.Take("measure_from"); from) {
      long long step = 0;
      if (from.IsScalar() && from.Scalar() == "first_commit") {
        s.run.measure_from = RunSpec::kFromFirstCommit;
      } else if (!from.IsScalar() || !PlainDecimal(from.Scalar()) ||
                 !YAML::convert<long long>::decode(from, step) || step < 0 || step >= s.run.steps) {
        r.Fail(from, "run.measure_from",
               fmt::format("run.measure_from is {}; expected first_commit, or a step in 0..{} "
                           "(run.steps − 1) where the run's statistics begin",
                           Show(from), s.run.steps - 1));
      } else {
        s.run.measure_from = static_cast<int>(step);
      }
    }
    run.Finish();
  }
  top.Finish();
  if (r.status().ok()) Validate(s, r);
  // Last: the step model needs a scenario whose every other check passed.
  if (r.status().ok()) {
    if (const auto unbounded = FindUnboundedTime(s)) r.FailAt(unbounded->field, unbounded->message);
  }
  if (!r.status().ok()) return r.status();
  WarnOfDeepSeekConstants(root, s);
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
  if (path.empty())
    return ParseScenario(DefaultScenarioText(), "(built-in default scenario)", overrides);
  return LoadScenarioFile(path, overrides);
}

namespace {

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

}  // namespace

std::string ScenarioToYaml(const Scenario& s) {
  // A user's program is `external` in a file, whatever its name in tables: the file then reads
  // back anywhere, and runs the program only where it is given again (external_policy.h).
  const std::string policy_command = ExternalPolicyCommandFor(s.eplb.policy);
  YAML::Emitter out;
  auto link = [&](const char* name, const LinkConfig& l) {
    out << YAML::Key << name << YAML::Value << YAML::BeginMap << YAML::Key << "bandwidth_gbps"
        << YAML::Value << Shortest(l.bandwidth_gbps) << YAML::Key << "latency_us" << YAML::Value
        << Shortest(l.latency_us) << YAML::Key << "efficiency" << YAML::Value
        << Shortest(l.efficiency) << YAML::EndMap;
  };
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << s.name;
  out << YAML::Key << "model" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << s.model.name;
  out << YAML::Key << "layers" << YAML::Value << s.model.layers << YAML::Key << "experts"
      << YAML::Value << s.model.experts << YAML::Key << "groups" << YAML::Value << s.model.groups
      << YAML::Key << "top_k" << YAML::Value << s.model.top_k << YAML::Key << "hidden"
      << YAML::Value << s.model.hidden << YAML::Key << "expert_bytes" << YAML::Value
      << static_cast<long long>(s.model.expert_bytes) << YAML::Key << "expert_tensors"
      << YAML::Value << s.model.expert_tensors << YAML::Key << "activation_bytes" << YAML::Value
      << s.model.activation_bytes << YAML::Key << "combine_bytes" << YAML::Value
      << s.model.combine_bytes << YAML::Key << "topk_groups" << YAML::Value << s.model.topk_groups
      << YAML::Key << "intermediate" << YAML::Value << s.model.intermediate << YAML::Key
      << "dense_params" << YAML::Value << Shortest(s.model.dense_params) << YAML::Key
      << "kv_bytes_per_token" << YAML::Value << Shortest(s.model.kv_bytes_per_token) << YAML::Key
      << "attention_flops_per_kv" << YAML::Value << Shortest(s.model.attention_flops_per_kv)
      << YAML::Key << "elementwise_bytes_per_token" << YAML::Value
      << Shortest(s.model.elementwise_bytes_per_token) << YAML::EndMap;
  out << YAML::Key << "cluster" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "nodes" << YAML::Value << s.cluster.nodes << YAML::Key << "gpus_per_node"
      << YAML::Value << s.cluster.gpus_per_node;
  link("nvlink", s.cluster.nvlink);
  link("nic", s.cluster.nic);
  out << YAML::Key << "pcie_gbps" << YAML::Value << Shortest(s.cluster.pcie_gbps) << YAML::Key
      << "hbm_gbps" << YAML::Value << Shortest(s.cluster.hbm_gbps) << YAML::Key << "nvswitch_gbps"
      << YAML::Value << Shortest(s.cluster.nvswitch_gbps) << YAML::Key << "fabric_oversubscription"
      << YAML::Value << Shortest(s.cluster.fabric_oversubscription) << YAML::Key << "backup"
      << YAML::Value << (s.cluster.backup == ClusterSpec::Backup::kHost ? "host" : "storage")
      << YAML::Key << "host_read_gbps" << YAML::Value << Shortest(s.cluster.host_read_gbps)
      << YAML::Key << "host_read_latency_us" << YAML::Value
      << Shortest(s.cluster.host_read_latency_us) << YAML::Key << "storage_read_gbps" << YAML::Value
      << Shortest(s.cluster.storage_read_gbps) << YAML::Key << "storage_read_latency_us"
      << YAML::Value << Shortest(s.cluster.storage_read_latency_us) << YAML::Key << "initial_gpus"
      << YAML::Value << s.cluster.initial_gpus << YAML::Key << "gpu_memory_gb" << YAML::Value
      << Shortest(s.cluster.gpu_memory_gb) << YAML::Key << "kv_cache_gb" << YAML::Value
      << Shortest(s.cluster.kv_cache_gb) << YAML::Key << "memory_utilization" << YAML::Value
      << Shortest(s.cluster.memory_utilization) << YAML::EndMap;
  const ComputeSpec& k = s.compute;
  out << YAML::Key << "compute" << YAML::Value << YAML::BeginMap << YAML::Key << "model"
      << YAML::Value << ComputeModelName(k.model) << YAML::Key << "attention_us" << YAML::Value
      << Shortest(k.attention_us) << YAML::Key << "layer_fixed_us" << YAML::Value
      << Shortest(k.layer_fixed_us) << YAML::Key << "per_token_us" << YAML::Value
      << Shortest(k.per_token_us) << YAML::Key << "gpu" << YAML::Value << k.gpu << YAML::Key
      << "flops_efficiency" << YAML::Value << Shortest(k.flops_efficiency) << YAML::Key
      << "hbm_efficiency" << YAML::Value << Shortest(k.hbm_efficiency) << YAML::Key
      << "weight_hbm_efficiency" << YAML::Value << Shortest(k.weight_hbm_efficiency) << YAML::Key
      << "expert_fixed_tokens" << YAML::Value << Shortest(k.expert_fixed_tokens) << YAML::Key
      << "gemm_bytes" << YAML::Value << k.gemm_bytes << YAML::Key << "stage" << YAML::Value
      << InferenceStageName(k.stage) << YAML::Key << "kv_length" << YAML::Value
      << Shortest(k.kv_length) << YAML::Key << "all_to_all" << YAML::Value
      << AllToAllModeName(k.all_to_all) << YAML::Key << "micro_batches" << YAML::Value
      << k.micro_batches << YAML::Key << "normal_nvlink_efficiency" << YAML::Value
      << Shortest(k.normal_nvlink_efficiency) << YAML::Key << "normal_sms" << YAML::Value
      << k.normal_sms << YAML::Key << "normal_overlap_slowdown" << YAML::Value
      << Shortest(k.normal_overlap_slowdown) << YAML::Key << "low_latency_overhead_us"
      << YAML::Value << Shortest(k.low_latency_overhead_us) << YAML::Key << "mtp_draft_tokens"
      << YAML::Value << k.mtp_draft_tokens << YAML::Key << "mtp_acceptance" << YAML::Value
      << Shortest(k.mtp_acceptance) << YAML::EndMap;
  out << YAML::Key << "workload" << YAML::Value << YAML::BeginMap << YAML::Key << "kind"
      << YAML::Value << s.workload.kind << YAML::Key << "tokens_per_step" << YAML::Value
      << s.workload.tokens_per_step << YAML::Key << "popularity" << YAML::Value
      << s.workload.popularity << YAML::Key << "sigma" << YAML::Value << Shortest(s.workload.sigma)
      << YAML::Key << "zipf_s" << YAML::Value << Shortest(s.workload.zipf_s) << YAML::Key << "drift"
      << YAML::Value << Shortest(s.workload.drift) << YAML::Key << "noise" << YAML::Value
      << s.workload.noise << YAML::Key << "sequence_tokens" << YAML::Value
      << s.workload.sequence_tokens << YAML::Key << "sequence_sigma" << YAML::Value
      << Shortest(s.workload.sequence_sigma) << YAML::Key << "step_sigma" << YAML::Value
      << Shortest(s.workload.step_sigma);
  out << YAML::Key << "phases" << YAML::Value << YAML::BeginSeq;
  for (const PhaseChange& p : s.workload.phases) {
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "step" << YAML::Value << p.step << YAML::Key
        << "shuffle" << YAML::Value << Shortest(p.shuffle) << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::Key << "trace" << YAML::Value << s.workload.trace << YAML::EndMap;
  out << YAML::Key << "eplb" << YAML::Value << YAML::BeginMap << YAML::Key << "window_size"
      << YAML::Value << s.eplb.window_size << YAML::Key << "step_interval" << YAML::Value
      << s.eplb.step_interval << YAML::Key << "statistics" << YAML::Value
      << StatisticsName(s.eplb.statistics) << YAML::Key << "decay" << YAML::Value
      << Shortest(s.eplb.decay) << YAML::Key << "min_balancedness" << YAML::Value
      << Shortest(s.eplb.min_balancedness) << YAML::Key << "balancedness_gate" << YAML::Value
      << BalancednessGateName(s.eplb.balancedness_gate) << YAML::Key << "num_redundant_experts"
      << YAML::Value << s.eplb.num_redundant_experts << YAML::Key << "policy" << YAML::Value
      << (policy_command.empty() ? s.eplb.policy : std::string(kExternalPolicyName));
  // The command is for the record only: a file never names code to run.
  if (const std::string& command = policy_command; !command.empty()) {
    out << YAML::Comment("a user's program, run only when given again: --policy-command '" +
                         (s.eplb.policy == kExternalPolicyName ? "" : s.eplb.policy + "=") +
                         command + "'");
  }
  out << YAML::Key << "dispatch" << YAML::Value << DispatchName(s.eplb.dispatch) << YAML::Key
      << "use_async" << YAML::Value << s.eplb.use_async << YAML::Key << "layers_per_step"
      << YAML::Value << s.eplb.layers_per_step << YAML::Key << "staging_layers" << YAML::Value
      << s.eplb.staging_layers << YAML::Key << "layers_per_chunk" << YAML::Value
      << s.eplb.layers_per_chunk << YAML::Key << "sender_rule" << YAML::Value
      << SenderRuleName(s.eplb.sender_rule) << YAML::Key << "schedule" << YAML::Value
      << ScheduleStrategyName(s.eplb.schedule) << YAML::Key << "preserve_slots" << YAML::Value
      << s.eplb.preserve_slots << YAML::Key << "migration_weight" << YAML::Value
      << Shortest(s.eplb.migration_weight) << YAML::Key << "max_moves_per_layer" << YAML::Value
      << s.eplb.max_moves_per_layer << YAML::Key << "lost_tokens" << YAML::Value
      << (s.eplb.lost_tokens == EplbSpec::LostTokens::kDrop ? "drop" : "wait") << YAML::Key
      << "recovery" << YAML::Value
      << (s.eplb.recovery == EplbSpec::Recovery::kRepair ? "repair" : "rebalance") << YAML::EndMap;
  out << YAML::Key << "migration" << YAML::Value << YAML::BeginMap << YAML::Key << "max_staging_gb"
      << YAML::Value << Shortest(s.migration.max_staging_gb) << YAML::Key << "transport"
      << YAML::Value << TransportName(s.migration.transport) << YAML::Key << "sms" << YAML::Value
      << s.migration.sms << YAML::Key << "engine" << YAML::Value << EngineName(s.migration.engine)
      << YAML::Key << "batching" << YAML::Value << s.migration.batching << YAML::EndMap;
  out << YAML::Key << "faults" << YAML::Value << YAML::BeginSeq;
  for (const FaultSpec& f : s.faults) {
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "kind" << YAML::Value
        << FaultKindName(f.kind) << YAML::Key << "step" << YAML::Value << f.step;
    if (f.until != std::numeric_limits<int>::max())
      out << YAML::Key << "until" << YAML::Value << f.until;
    if (f.rank >= 0) out << YAML::Key << "rank" << YAML::Value << f.rank;
    if (f.node >= 0) out << YAML::Key << "node" << YAML::Value << f.node;
    if (f.kind == FaultKind::kLinkDegraded) {
      out << YAML::Key << "link" << YAML::Value
          << (f.link == LinkClass::kNvlink ? "nvlink" : "nic");
    }
    if (f.kind == FaultKind::kScale) out << YAML::Key << "gpus" << YAML::Value << f.gpus;
    if (f.kind == FaultKind::kStraggler || f.kind == FaultKind::kLinkDegraded)
      out << YAML::Key << "factor" << YAML::Value << Shortest(f.factor);
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "run" << YAML::Value << YAML::BeginMap << YAML::Key << "steps" << YAML::Value
      << s.run.steps << YAML::Key << "seed" << YAML::Value
      << static_cast<unsigned long long>(s.run.seed) << YAML::Key << "measure_from" << YAML::Value;
  if (s.run.measure_from == RunSpec::kFromFirstCommit) {
    out << "first_commit";
  } else {
    out << s.run.measure_from;
  }
  out << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
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
