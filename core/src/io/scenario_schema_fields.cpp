// The scenario schema's table: every field of a scenario file, section by section, in the
// order a file is read and written. Each field's row is its path, its type and range, and its
// README row's one-sentence meaning; the docs page the sentence points to says the rest.
#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "eplb/base/file_io.h"
#include "eplb/engine/hardware.h"
#include "eplb/engine/scenario_names.h"
#include "eplb/migrate/names.h"
#include "eplb/model/names.h"
#include "eplb/policy/external_policy.h"
#include "eplb/policy/recorded_policy.h"
#include "io/scenario_schema.h"
#include "io/scenario_schema_builders.h"

namespace eplb::scenario_schema {

using namespace scenario_fields;  // NOLINT: the schema is the fields' reader

namespace {

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

// The run's name, and the model: its shapes, and the constants only the roofline prices.
std::vector<Field> NameAndModelFields() {
  return {
      Checked(Text(FIELD(name), {},
                   Doc{"", "names the run folder, `runs/<name>` (docs/run_folder.md)",
                       "1–100 letters, digits, `.`, `_`, `-`, `+`; not starting with `.`"}),
              CheckName),
      Checked(Text(FIELD(model.name), {},
                   Doc{"",
                       "the model whose constants these are, its Hugging Face name "
                       "(`Qwen3-235B-A22B` or `Qwen/Qwen3-235B-A22B`), read only to warn of "
                       "constants left out (above)",
                       "1–100 letters, digits, `.`, `_`, `-`, `+`, `/`"}),
              CheckModelName),
      Int(FIELD(model.layers), 1, 100000, Doc{"", "MoE layers"}),
      Int(FIELD(model.experts), 1, kMaxExperts, Doc{"", "routed (logical) experts per layer"}),
      Int(FIELD(model.groups), 1, kMaxExperts,
          Doc{"", "expert groups (DeepSeek's group-limited routing)",
              "1..1048576, divides `experts`"}),
      Int(FIELD(model.top_k), 1, kMaxExperts, Doc{"", "experts per token", "1..`experts`"}),
      Int(FIELD(model.hidden), 1, 1 << 20,
          Doc{"", "hidden size: a token's activation is `hidden × activation_bytes`"}),
      Int64(FIELD(model.expert_bytes), 1, kMaxExpertBytes,
            Doc{"bytes", "bytes of one expert's weights in one layer (what a transfer moves)",
                "1..2^40 (1 TiB); `layers × slots × expert_bytes` ≤ 4e18"}),
      Int(FIELD(model.expert_tensors), 1, 16,
          Doc{"", "weight tensors per expert, as the checkpoint stores them (above)"}),
      Int(FIELD(model.activation_bytes), 1, 8,
          Doc{"bytes",
              "bytes per activation element in dispatch, and in combine unless `combine_bytes` "
              "is set (above)"}),
      Int(FIELD(model.combine_bytes), 0, 8,
          Doc{"bytes", "bytes per element in combine (0: as `activation_bytes`; above)"}),
      Int(FIELD(model.topk_groups), 0, kMaxExperts,
          Doc{"",
              "group-limited routing: the most groups a token's experts come from (0 or ≥ "
              "`groups`: no limit; above)"}),
      Int(FIELD(model.intermediate), 1, 1 << 24,
          Doc{"", "roofline: an expert's intermediate size (above)"}),
      Real(FIELD(model.dense_params), 0, 1e15,
           Doc{"", "roofline: parameters every token runs outside the routed experts (above)", "",
               "1.56e10"}),
      Real(FIELD(model.kv_bytes_per_token), 0, 1e12,
           Doc{"bytes", "roofline: KV cache per token position over all layers (above)"}),
      Real(FIELD(model.attention_flops_per_kv), 0, 1e15,
           Doc{"",
               "roofline: attention FLOPs per query token per KV position over all layers "
               "(above)",
               "", "5.0e6"}),
      Real(FIELD(model.elementwise_bytes_per_token), 0, 1e12,
           Doc{"bytes",
               "roofline: bytes the kernels between the GEMMs read and write per token over all "
               "layers (0: not priced; above)"}),
  };
}

// The cluster: its links, where lost experts are reloaded from, and its GPUs' memory.
std::vector<Field> ClusterFields() {
  return {
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
      Real(FIELD(cluster.nic.latency_us), 0, kMaxMicroseconds,
           Doc{"µs", "as `nvlink.latency_us`, over the NIC"}),
      Positive(FIELD(cluster.nic.efficiency), 0, 1,
               Doc{"fraction", "achieved fraction of the NIC's nominal bandwidth"}),
      Positive(FIELD(cluster.pcie_gbps), 0, kMaxGbps,
               Doc{"GB/s", "GPU-to-NIC link; inter-node flows get the slower of it and the NIC"}),
      Positive(FIELD(cluster.hbm_gbps), 0, kMaxGbps, Doc{"GB/s", "local copies inside a GPU"}),
      Real(FIELD(cluster.nvswitch_gbps), 0, kMaxGbps,
           Doc{"GB/s",
               "aggregate NVSwitch capacity per node, GB/s per direction (0: non-blocking; below, "
               "\"The step model\")"}),
      Real(FIELD(cluster.fabric_oversubscription), 1, 1000,
           Doc{"",
               "inter-node fabric oversubscription (1: non-blocking; below, \"The step model\")"}),
      Enum(FIELD(cluster.backup), kBackupNames,
           Doc{"",
               "where recovery reloads an expert whose every replica was lost: a copy in host "
               "memory or storage (docs/faults.md)"}),
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
              "GPUs serving at the start, ranks 0..initial_gpus−1 (0: all), the others waiting "
              "for a `scale` fault (docs/faults.md)",
              "0..GPUs"}),
      Real(FIELD(cluster.gpu_memory_gb), 0, kMaxMemoryGb,
           Doc{"GB",
               "each GPU's memory, 10^9 bytes (0: the `compute.gpu` preset's datasheet figure; "
               "docs/scenarios.md)"}),
      Real(FIELD(cluster.kv_cache_gb), 0, kMaxMemoryGb,
           Doc{"GB",
               "each GPU's KV cache, 10^9 bytes (0: what the step's batch needs; "
               "docs/scenarios.md)"}),
      Positive(FIELD(cluster.memory_utilization), 0, 1,
               Doc{"",
                   "the fraction of each GPU's memory the engine's weights, KV cache and "
                   "migration staging may use (docs/scenarios.md)"}),
  };
}

// How a step is priced: its compute, and dispatch and combine beside it.
std::vector<Field> ComputeFields() {
  return {
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
      Positive(FIELD(compute.flops_efficiency), 0, 1,
               Doc{"fraction", "roofline: achieved fraction of the peak dense tensor-core FLOP/s"}),
      Positive(FIELD(compute.hbm_efficiency), 0, 1,
               Doc{"fraction", "roofline: achieved fraction of the peak HBM bandwidth"}),
      Positive(FIELD(compute.weight_hbm_efficiency), 0, 1,
               Doc{"fraction",
                   "roofline: the fraction GEMMs achieve while they stream their weights with "
                   "few tokens per weight (decode's dense layers, every MoE layer's experts; "
                   "below, \"The step model\")"}),
      Real(FIELD(compute.expert_fixed_tokens), 0, 1e6,
           Doc{"",
               "roofline: each expert a GPU runs tokens through costs its GEMMs as much as this "
               "many more tokens would, per layer and micro-batch (below, \"The step model\")"}),
      Int(FIELD(compute.gemm_bytes), 1, 2,
          Doc{"bytes",
              "roofline: GEMM input width, 1 for the FP8 peak or 2 for the BF16 peak (below, "
              "\"The step model\")"}),
      Enum(FIELD(compute.stage), kInferenceStageNames,
           Doc{"",
               "roofline: the inference stage, which sets how often attention reads the KV cache "
               "(below, \"The step model\")"}),
      Real(FIELD(compute.kv_length), 0, 1e9,
           Doc{"", "roofline: mean KV positions each token attends to"}),
      Enum(FIELD(compute.all_to_all), kAllToAllModeNames,
           Doc{"",
               "how dispatch and combine move tokens: `bulk`, `low-latency` or `normal` (below, "
               "\"The step model\")"}),
      Int(FIELD(compute.micro_batches), 1, 2,
          Doc{"",
              "micro-batches per step; 2 is DeepSeek's and SGLang's two-micro-batch overlap, one "
              "micro-batch's communication running while the other computes (below, \"The step "
              "model\")"}),
      Positive(FIELD(compute.normal_nvlink_efficiency), 0, 1,
               Doc{"fraction",
                   "`normal`: the share of NVLink the normal kernels' SM-driven copies reach "
                   "(below, \"The step model\")"}),
      Int(FIELD(compute.normal_sms), 0, 1000,
          Doc{"",
              "`normal` with two micro-batches: the SMs the normal kernels hold while they run "
              "beside the other micro-batch's compute (0: not priced; below, \"The step model\")",
              "0 to the GPU's SMs − 1"}),
      Real(FIELD(compute.normal_overlap_slowdown), 1, 100,
           Doc{"",
               "`normal` with two micro-batches: how many times longer the normal kernels' "
               "dispatch and combine take beside the other micro-batch's compute than DeepEP's "
               "unit tests time them alone (below, \"The step model\")"}),
      Real(FIELD(compute.low_latency_overhead_us), 0, kMaxMicroseconds,
           Doc{"µs",
               "`low-latency`: fixed cost per phase and layer (launch, IBGDA signalling, waiting "
               "for every peer's flag)"}),
      Int(FIELD(compute.mtp_draft_tokens), 0, 4,
          Doc{"",
              "multi-token prediction: each sequence runs 1 + this many tokens through the model "
              "per step (below, \"The step model\")",
              "0–4; decode only"}),
      Real(FIELD(compute.mtp_acceptance), 0, 1,
           Doc{"",
               "share of draft tokens accepted: a step emits 1 + this × drafts tokens per "
               "sequence (below, \"The step model\")"}),
  };
}

// Where each step's loads come from: the generator's popularity and movement, or a trace.
std::vector<Field> WorkloadFields() {
  return {
      Text(FIELD(workload.kind), {"generator", "trace"},
           Doc{"", "where the loads come from: the `generator` or a `trace`"}),
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
              "tokens each sequence brings to a step (a prefill's prompt length), which route "
              "alike (0: every token routes on its own; below, \"Sequences\")",
              "0 to the step's tokens"}),
      Real(FIELD(workload.sequence_sigma), 0, 20,
           Doc{"",
               "with `sequence_tokens`: the spread of a sequence's log-popularity around its "
               "layer's, measured on DeepSeek-V2-Lite (below)"}),
      Real(FIELD(workload.step_sigma), 0, 1,
           Doc{"",
               "the spread of each step's log-popularity of every expert around its layer's, "
               "drawn afresh each step and shared by all the step's tokens (below, \"Step "
               "movement\")"}),
      ReadAfter(Custom("workload.phases", ReadPhases, WritePhases,
                       Doc{"",
                           "`[{step, shuffle}]`: at `step`, a `shuffle` fraction of experts swap "
                           "popularity",
                           "step ≥ 0, shuffle [0, 1]", "`[]`"}),
                "workload.trace"),
      Text(FIELD(workload.trace), {},
           Doc{"",
               "`kind: trace`: the load to replay, relative to the scenario's folder "
               "(docs/rebalance.md, \"Loads in\")",
               "a file or folder; loads ≤ 1e15 tokens per cell"}),
  };
}

// When the policy runs and on what load, how its placement reaches the GPUs, and recovery.
std::vector<Field> EplbFields() {
  return {
      Int(FIELD(eplb.window_size), 1, 1 << 20, Doc{"", "steps of load the policy sees (vLLM)"}),
      Int(FIELD(eplb.step_interval), 1, kNoMax,
          Doc{"", "steps between rearrangements (vLLM); the first comes after a quarter of it"}),
      Enum(FIELD(eplb.statistics), kStatisticsNames,
           Doc{"",
               "the load the policy is given: `window`, the sum of the last `window_size` steps, "
               "or `decayed`, each step's load decayed by `eplb.decay` per step since, the sum "
               "cleared by each rearrangement (docs/scenarios.md)"}),
      Positive(FIELD(eplb.decay), 0, 1,
               Doc{"",
                   "`decayed`: the factor per step, so that a step's load counts for 1/(1 − "
                   "decay) steps (docs/scenarios.md)"}),
      Real(FIELD(eplb.min_balancedness), 0, 2,
           Doc{"",
               "the balance gate: an interval's rearrangement runs only while the placement in "
               "force has a balancedness (`eplb.balancedness_gate`) below this, else it is held "
               "(docs/scenarios.md)"}),
      Enum(FIELD(eplb.balancedness_gate), kBalancednessGateNames,
           Doc{"",
               "which balancedness the gate compares: `window_min` or `window_mean`, the least or "
               "the mean over layers of each layer's balancedness over the statistics, or "
               "`step_mean`, each step's balancedness averaged over the last `window_size` steps "
               "(docs/scenarios.md)"}),
      Int(FIELD(eplb.num_redundant_experts), 0, kMaxExperts,
          Doc{"",
              "slots beyond one per expert (vLLM); `experts + redundant` must divide by the "
              "GPUs"}),
      Custom("eplb.policy", ReadPolicy, WritePolicy,
             Doc{"", "a registered policy", "`eplb rebalance --help`", "`deepseek`"}),
      Enum(FIELD(eplb.dispatch), kDispatchNames,
           Doc{"",
               "how each step's tokens for an expert split among its live replicas: `even`, "
               "`random` or `lp` (docs/scenarios.md)"}),
      Bool(FIELD(eplb.use_async),
           Doc{"",
               "async rearrangement (layer by layer at step boundaries); false: stop the world"}),
      Int(FIELD(eplb.layers_per_step), 1, 100000,
          Doc{"", "layers committed per step boundary at most"}),
      Int(FIELD(eplb.staging_layers), 1, 100000,
          Doc{"", "layers a rank can stage ahead of the commits"}),
      Int(FIELD(eplb.layers_per_chunk), 0, 100000,
          Doc{"",
              "stop-the-world in chunks (needs `use_async: false`): the layers that move at each "
              "step boundary from the step after the policy ran (0: every layer at one boundary; "
              "docs/scenarios.md)"}),
      Enum(FIELD(eplb.sender_rule), kSenderRuleNames,
           Doc{"", "which old holder sends an expert: `vllm` or `local` (docs/plan.md)"}),
      Enum(FIELD(eplb.schedule), kScheduleStrategyNames,
           Doc{"",
               "how a layer's transfers are cut into rounds: `single-batch`, `greedy-pairs` or "
               "`best` (docs/plan.md)",
               "see meaning"}),
      Bool(FIELD(eplb.preserve_slots),
           Doc{"", "apply vLLM's `preserve_intragpu_slots` to every new placement"}),
      Real(FIELD(eplb.migration_weight), 0, 1e9,
           Doc{"",
               "`migration-aware`: weight of the time to move a layer's bytes against its "
               "straggler time over the next interval (0: balance only; docs/policies.md)"}),
      Int(FIELD(eplb.max_moves_per_layer), 0, kMaxExperts,
          Doc{"", "`incremental`: experts moved per layer per rearrangement at most"}),
      Enum(FIELD(eplb.lost_tokens), kLostTokensNames,
           Doc{"",
               "after a GPU is lost, what becomes of tokens routed to an expert with no live "
               "replica until its layer's recovery commits: `drop` or `wait` (docs/faults.md)"}),
      Enum(FIELD(eplb.recovery), kRecoveryNames,
           Doc{"",
               "what recovery from lost GPUs moves: `rebalance`, whatever the policy re-places, "
               "or `repair`, only what the loss forces (docs/faults.md)"}),
  };
}

// How the weights move, with what memory, and whose orchestration a rearrangement pays.
std::vector<Field> MigrationFields() {
  return {
      Real(FIELD(migration.max_staging_gb), 0, kMaxMemoryGb,
           Doc{"GB",
               "bytes each GPU may hold staged for a rearrangement at once, 10^9 bytes (0: all "
               "the GPU has left, its headroom; docs/scenarios.md)"}),
      Enum(FIELD(migration.transport), kTransportNames,
           Doc{"",
               "how the weights travel between GPUs, and what that costs beyond the links "
               "(docs/transports.md's table)"}),
      Int(FIELD(migration.sms), 0, 1000,
          Doc{"",
              "SMs an SM-driven transport (`nccl`) holds on every GPU while a rearrangement is "
              "in flight (0: not priced; docs/transports.md)",
              "0 to the GPU's SMs − `compute.normal_sms` − 1"}),
      Enum(FIELD(migration.engine), kEngineNames,
           Doc{"",
               "whose orchestration a rearrangement pays on top of its bytes: `eplb`, `vllm` or "
               "`sglang` (docs/rearrangement_cost.md)"}),
      Bool(FIELD(migration.batching),
           Doc{"",
               "vLLM's opt-in migration batching (`enable_migration_batching`), priced with "
               "`migration.engine: vllm` only (docs/rearrangement_cost.md)"}),
  };
}

// What goes wrong while the cluster serves: the list, and each entry's fields.
std::vector<Field> FaultFields() {
  return {
      Custom("faults", ReadFaults, WriteFaults,
             Doc{"",
                 "what goes wrong while the cluster serves, each `{kind, step, ...}` with `step` "
                 "≥ 0 (docs/faults.md)",
                 "a list of faults", "`[]`"}),
      Note("faults[].kind", kFaultKindNames.List(),
           Doc{"",
               "`straggler`: a GPU computes slower; `link_degraded`: a GPU's or a node's links of "
               "one class carry less; `gpu_lost` / `node_lost`: a GPU or every GPU of a node is "
               "gone from `step` on; `scale`: the serving GPUs become ranks 0..`gpus`−1 at `step` "
               "(docs/faults.md)",
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
      NoteRange("faults[].factor", 1, kMaxSlowdown,
                Doc{"",
                    "`straggler`: its MoE work and attention take × factor; `link_degraded`: "
                    "bandwidth ÷ factor (docs/faults.md)",
                    "", "1"}),
  };
}

// How long the run is, its seed, and where its statistics begin.
std::vector<Field> RunFields() {
  return {
      Int(FIELD(run.steps), 1, kNoMax,
          Doc{"", "inference steps to simulate", "≥ 1, and the run must fit in memory (below)"}),
      Uint64(FIELD(run.seed), Doc{"", "seeds the workload"}),
      Custom("run.measure_from", ReadMeasureFrom, WriteMeasureFrom,
             Doc{"",
                 "the step where the run's statistics (`summary.json`'s `measured`) begin: "
                 "`first_rearrangement`, `first_commit` or a step (docs/run_folder.md)",
                 "`first_rearrangement`, `first_commit`, or a step in 0..`run.steps`−1",
                 "`first_rearrangement`"}),
  };
}

}  // namespace

const std::vector<Field>& ScenarioFields() {
  static const std::vector<Field> fields = [] {
    std::vector<Field> all;
    // The sections in the order a scenario file is read and written.
    for (const auto section : {NameAndModelFields, ClusterFields, ComputeFields, WorkloadFields,
                               EplbFields, MigrationFields, FaultFields, RunFields}) {
      std::vector<Field> part = section();
      all.insert(all.end(), std::make_move_iterator(part.begin()),
                 std::make_move_iterator(part.end()));
    }
    return all;
  }();
  return fields;
}

#undef FIELD

}  // namespace eplb::scenario_schema
