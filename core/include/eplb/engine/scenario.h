// A scenario: a model, a cluster, a step cost model, a workload, the EPLB settings and the run,
// as validated values. io/scenario_file.h reads and writes them as YAML; every field has a
// default (scenarios/README.md lists them).
//
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "eplb/base/status.h"
#include "eplb/migrate/engine_profile.h"
#include "eplb/migrate/migration_pricing.h"
#include "eplb/migrate/schedule.h"
#include "eplb/migrate/transfer_plan.h"
#include "eplb/migrate/transport.h"
#include "eplb/model/topology.h"

namespace eplb {

struct ModelSpec {
  // The model whose constants these are (its Hugging Face name). Every constant's default is
  // DeepSeek-V3's, so reading a scenario that names another model warns of each constant it
  // leaves out (io/scenario_file.h).
  std::string name = "DeepSeek-V3";
  int layers = 58;  // MoE layers
  int experts = 256;
  int groups = 8;
  int top_k = 8;
  int hidden = 7168;
  int64_t expert_bytes = 3LL * 7168 * 2048;  // DeepSeek-V3 FP8
  // Weight tensors per expert, which multiply an engine's per-tensor operations
  // (migrate/engine_profile.h): BF16 2 (w13, w2), FP8 block-quantized 4 (with the two
  // weight_scale_inv), NVFP4 6 (weights, block scales, global scales). DeepSeek-V3's FP8: 4.
  int expert_tensors = 4;
  int activation_bytes = 1;  // per hidden element in dispatch/combine (FP8)
  // Bytes per hidden element in combine; 0: as activation_bytes (the simple step model's
  // symmetric phases). DeepSeek and DeepEP combine in BF16 (2).
  int combine_bytes = 0;
  // Group-limited routing: a token's experts come from at most this many groups (DeepSeek-V3:
  // 4 of 8); 0: no limit. Caps the nodes a token reaches in the normal all-to-all.
  int topk_groups = 4;
  // The roofline step model's shapes (DeepSeek-V3 defaults; step_model.h):
  int intermediate = 2048;                // an expert's intermediate size (3 GEMMs: gate, up, down)
  double dense_params = 15.6e9;           // parameters every token runs outside the routed experts
  double kv_bytes_per_token = 70272;      // KV cache per token position over all layers
  double attention_flops_per_kv = 5.0e6;  // attention FLOPs per query token per KV position
  // Bytes the kernels between the GEMMs (normalisation, RoPE, activation, quantisation, residual
  // adds, the weighted combine) read and write per token over all layers; 0: not priced.
  double elementwise_bytes_per_token = 0;
};

struct LinkConfig {
  double bandwidth_gbps = 0;  // 10^9 bytes/s per direction per GPU, nominal
  double latency_us = 0;
  double efficiency = 1.0;  // achieved fraction of nominal bandwidth
};

struct ClusterSpec {
  int nodes = 4;
  int gpus_per_node = 8;
  LinkConfig nvlink{450, 3, 0.8};
  LinkConfig nic{50, 10, 0.9};
  double pcie_gbps = 64;   // GPU to NIC; inter-node flows cross it
  double hbm_gbps = 3000;  // local copies inside a GPU
  // Aggregate NVSwitch capacity per node, GB/s per direction; 0 when the switch is non-blocking.
  // Modelled as each GPU's share under all-to-all load: NVLink per GPU <= nvswitch / gpus_per_node.
  double nvswitch_gbps = 0;
  // Inter-node fabric oversubscription (1: non-blocking). Modelled as each GPU's share under
  // all-to-all load: NIC per GPU / oversubscription.
  double fabric_oversubscription = 1;
  // Where recovery reloads an expert whose every replica was lost (engine/eplb_loop.h): a copy of
  // the weights in host memory (SGLang's backup), read over each GPU's PCIe; or storage, read at
  // a rate per node that the node's GPUs share, then over their PCIe.
  enum class Backup { kHost, kStorage };
  Backup backup = Backup::kHost;
  double host_read_gbps = 25;  // per GPU: pinned host memory to HBM over PCIe
  double host_read_latency_us = 10;
  double storage_read_gbps = 8;  // per node, shared by its GPUs
  double storage_read_latency_us = 500;
  // GPUs serving at the start: ranks 0..initial_gpus−1 (0: all of them); the others wait for a
  // `scale` fault to add them.
  int initial_gpus = 0;
  // Each GPU's memory (engine/gpu_memory.h): its capacity, 10^9 bytes (0: compute.gpu's
  // preset); its KV cache, 10^9 bytes (0: what the step's batch needs); and the fraction of the
  // capacity the engine's weights, KV cache and staging may use, the rest left to the CUDA
  // context, communication buffers and activations (vLLM's --gpu-memory-utilization, 0.9).
  double gpu_memory_gb = 0;
  double kv_cache_gb = 0;
  double memory_utilization = 0.9;
};

// The time of one inference step (see step_model.h).
enum class ComputeModel { kSimple, kRoofline };
enum class AllToAllMode { kBulk, kNormal, kLowLatency };
enum class InferenceStage { kPrefill, kDecode };
// How one expert's token-expert assignments split among its live replicas in a step
// (engine/replica_dispatch.h says what each does and where engines do it).
enum class Dispatch { kEven, kRandom, kLp };
const char* DispatchName(Dispatch d);
Result<Dispatch> ParseDispatch(const std::string& name);

const char* ComputeModelName(ComputeModel m);
const char* AllToAllModeName(AllToAllMode m);
const char* InferenceStageName(InferenceStage s);
Result<ComputeModel> ParseComputeModel(const std::string& name);
Result<AllToAllMode> ParseAllToAllMode(const std::string& name);
Result<InferenceStage> ParseInferenceStage(const std::string& name);

struct ComputeSpec {
  ComputeModel model = ComputeModel::kSimple;
  // simple: fixed times per step and layer, and per token.
  double attention_us = 20000;  // attention and dense layers, per step
  double layer_fixed_us = 30;   // per MoE layer, on every GPU (both models)
  double per_token_us = 0.15;   // per token routed to one GPU's experts, per layer
  // roofline: work priced from a GPU preset's peaks (engine/hardware.h) and the model's shapes.
  std::string gpu = "H200";
  double flops_efficiency = 0.6;  // achieved fraction of peak tensor-core FLOP/s
  double hbm_efficiency = 0.8;    // achieved fraction of peak HBM bandwidth
  // Achieved fraction of peak HBM bandwidth while a GEMM streams its weights (few tokens per
  // weight: decode's dense layers and every MoE layer's experts); tiles sized for large M leave
  // small-M GEMMs short of the streaming kernels' share.
  double weight_hbm_efficiency = 0.8;
  // roofline: each expert a GPU runs tokens through costs its grouped GEMMs as much as this
  // many more tokens would, per layer and micro-batch: a fixed cost per group, so the GEMMs
  // reach flops_efficiency × M / (M + this) at M tokens an expert (step_model.h). 0: none.
  double expert_fixed_tokens = 0;
  int gemm_bytes = 1;  // bytes per GEMM input element (1: FP8, 2: BF16)
  InferenceStage stage = InferenceStage::kPrefill;
  double kv_length = 2048;  // mean KV positions each token attends to
  // Both models: how dispatch and combine run, and whether two micro-batches overlap them with
  // compute (DeepSeek's and SGLang's two-batch overlap).
  AllToAllMode all_to_all = AllToAllMode::kBulk;
  int micro_batches = 1;
  double normal_nvlink_efficiency = 0.85;  // normal kernels' SM-driven NVLink copies
  // `normal`: the SMs DeepEP's normal kernels hold while they run beside compute (two
  // micro-batches); compute gets the rest (step_model.h). DeepEP's README sets 24
  // (Buffer.set_num_sms); 0 leaves them unpriced. The low-latency kernels in hook mode hold none.
  int normal_sms = 0;
  // `normal` with two micro-batches: how many times longer the normal kernels take beside the
  // other micro-batch's compute than alone, as DeepEP's unit tests time them (1: as alone).
  double normal_overlap_slowdown = 1;
  double low_latency_overhead_us = 30;  // low-latency kernels' fixed cost per phase
  // Multi-token prediction in decode (DeepSeek-V3 §2.2, §5.4.3): each sequence runs
  // 1 + mtp_draft_tokens tokens through the model per step and emits 1 + acceptance × drafts
  // of them (the second token is accepted 85–90% of the time).
  int mtp_draft_tokens = 0;
  double mtp_acceptance = 0.85;
};

struct PhaseChange {
  int step = 0;
  double shuffle = 0.5;  // fraction of experts whose popularity is swapped with another's
};

struct WorkloadSpec {
  std::string kind = "generator";  // generator | trace
  int tokens_per_step = 16384;
  std::string popularity = "lognormal";  // lognormal | zipf
  double sigma = 0.9;                    // lognormal: spread of log-popularity
  double zipf_s = 1.0;                   // zipf: exponent
  double drift = 0.002;                  // per-step random walk of log-popularity
  bool noise = true;                     // per-step sampling noise on the counts
  // Tokens come in sequences that route alike (workload.h): each sequence brings this many
  // tokens to a step (a prefill's prompt length; 0: every token routes on its own), and its
  // experts' log-popularity deviates from the layer's by a normal of this spread.
  int sequence_tokens = 0;
  double sequence_sigma = 0.67;  // DeepSeek-V2-Lite's prompts of ≥ 1,000 tokens (scenarios/README)
  // Each step's log-popularity of every expert deviates from the layer's by a normal of this
  // spread, shared by all the step's tokens: the batch's popularity moving from step to step
  // around the statistics a placement is made from (workload.h). 0: no such movement.
  double step_sigma = 0;
  std::vector<PhaseChange> phases;
  std::string trace;  // kind: trace; resolved against the scenario file's folder
};

struct EplbSpec {
  int window_size = 1000;
  int step_interval = 3000;
  // What the policy is given (engine/eplb_loop.h): `window`, the sum of the last window_size
  // steps' loads (vLLM, SGLang, ROCm ATOM); `decayed`, each step's load decayed by `decay` per
  // step since, reset by each rearrangement (TensorRT-LLM's online statistics:
  // loadFactor = loadFactor × decayFactor + count, decayFactor 0.95, cleared after an update).
  enum class Statistics { kWindow, kDecayed };
  Statistics statistics = Statistics::kWindow;
  double decay = 0.95;
  // The balance gate: at an interval, rebalance only while the placement in force has a
  // balancedness below this (ROCm ATOM's rebalance_min_balancedness, SGLang's
  // --eplb-min-rebalancing-utilization-threshold); otherwise the rearrangement is held. Which
  // balancedness is `balancedness_gate`'s. Balancedness is at most 1: the default, ATOM's 2,
  // never holds.
  double min_balancedness = 2;
  bool gated() const { return min_balancedness <= 1; }  // the gate can hold a rearrangement
  // window_min, window_mean: each layer's mean/max GPU load over the window (statistics),
  // the least or the mean over layers (ATOM's rebalance_balancedness_agg); step_mean: each
  // step's mean over layers of (mean + 1e-5) / (max + 1e-5) GPU tokens, averaged over the last
  // window_size steps (SGLang #8345).
  enum class BalancednessGate { kWindowMin, kWindowMean, kStepMean };
  BalancednessGate balancedness_gate = BalancednessGate::kWindowMin;
  int num_redundant_experts = 32;
  std::string policy = "deepseek";
  Dispatch dispatch = Dispatch::kEven;
  bool use_async = true;
  int layers_per_step = 1;
  int staging_layers = 1;
  // Stop the world in chunks (use_async false): this many layers move at each step boundary,
  // which waits for them, one chunk per step until every layer has moved (SGLang's
  // --eplb-rebalance-layers-per-chunk, ATOM's rebalance_layers_per_chunk); 0: every layer at
  // one boundary.
  int layers_per_chunk = 0;
  SenderRule sender_rule = SenderRule::kLocal;
  ScheduleStrategy schedule = ScheduleStrategy::kBest;
  bool preserve_slots = false;
  double migration_weight = 16;  // migration-aware: weight of the time to move bytes
  int max_moves_per_layer = 8;   // incremental: experts moved per layer at most
  // Tokens routed to an expert with no live replica (after a GPU is lost, until recovery reloads
  // it): dropped (serving goes on without that expert's work, counted as lost) or waiting
  // (serving pauses until recovery has every expert back, counted as stalled).
  enum class LostTokens { kDrop, kWait };
  LostTokens lost_tokens = LostTokens::kDrop;
  // What recovery from lost GPUs moves: `rebalance` runs the policy over the live GPUs (a full
  // rearrangement); `repair` changes only what the loss forces (model/recovery.h): the lost
  // experts reloaded in place of redundant replicas, nothing copied, and the next interval
  // rebalances.
  enum class Recovery { kRebalance, kRepair };
  Recovery recovery = Recovery::kRebalance;
};
const char* StatisticsName(EplbSpec::Statistics s);
Result<EplbSpec::Statistics> ParseStatistics(const std::string& name);
const char* BalancednessGateName(EplbSpec::BalancednessGate g);
Result<EplbSpec::BalancednessGate> ParseBalancednessGate(const std::string& name);

// A fault: something that goes wrong with the cluster while it serves (step_model.h and the
// simulator say what each does). Steps count from 0; a fault lasts over [step, until).
//   straggler      [step, until): a GPU computes × factor slower
//   link_degraded  [step, until): a GPU's or node's links of one class carry ÷ factor
//   gpu_lost       from step on: a GPU is gone (its transfers fail, its experts with it)
//   node_lost      from step on: every GPU of a node is gone
//   scale          at step: the serving GPUs become ranks 0..gpus−1 (elastic EP, planned)
enum class FaultKind { kStraggler, kLinkDegraded, kGpuLost, kNodeLost, kScale };
const char* FaultKindName(FaultKind kind);
struct FaultSpec {
  FaultKind kind = FaultKind::kStraggler;
  int step = 0;
  int until = 0;
  int rank = -1;                     // the GPU it hits, or -1 when it hits a node
  int node = -1;                     // link_degraded: every GPU of this node, or -1
  LinkClass link = LinkClass::kNic;  // link_degraded: which of the GPUs' links
  double factor = 1;  // straggler: compute takes × factor; link: bandwidth ÷ factor
  int gpus = 0;       // scale: the serving GPUs from step on
  bool active_at(int s) const { return s >= step && s < until; }
  // gpu_lost and node_lost: ranks leave for good.
  bool is_loss() const { return kind == FaultKind::kGpuLost || kind == FaultKind::kNodeLost; }
  // Changes which GPUs serve (a loss or a scale): the policy must place around the others.
  bool changes_ranks() const { return is_loss() || kind == FaultKind::kScale; }
  // The ranks it hits, first to last: its rank, or every GPU of its node.
  int first_rank(int gpus_per_node) const { return rank >= 0 ? rank : node * gpus_per_node; }
  int last_rank(int gpus_per_node) const {
    return rank >= 0 ? rank : (node + 1) * gpus_per_node - 1;
  }
};

// How expert weights move (engine/gpu_memory.h).
struct MigrationSpec {
  // Bytes a GPU may hold staged for a rearrangement at once, 10^9 bytes (0: all it has left
  // after the resident terms). The rearranger begins a layer on a GPU only while the layers it
  // has begun and not committed fit.
  double max_staging_gb = 0;
  // How the weights travel (migrate/transport.h): nccl, nixl, gloo or host_pool.
  Transport transport = Transport::kNccl;
  // SMs an SM-driven transport's kernels (nccl) hold on every GPU while a rearrangement is in
  // flight; compute gets the rest, as with compute.normal_sms. 0: not priced. vLLM caps NCCL at
  // 8 CTAs (NCCL_MAX_CTAS=8) when async EPLB runs beside DeepEP's low-latency kernels.
  int sms = 0;
  // Whose orchestration a rearrangement pays beyond its bytes (migrate/engine_profile.h):
  // eplb (none; the default) or vllm (its Python planning, per-tensor calls, barriers, polls).
  Engine engine = Engine::kEplb;
  // vLLM's opt-in migration batching (EplbConfig.enable_migration_batching): each layer's
  // transfers go in batches in which a rank talks to at most one peer, each batch one
  // communicator execute() (for NIXL: its own poll loop and barrier). Priced by engine vllm only.
  bool batching = false;
};

struct RunSpec {
  int steps = 30000;
  uint64_t seed = 1;
  // The first step a run's statistics are over (summary.json, comparisons); the steps before
  // it are the warm-up, kept in the series and marked in the plots (MeasuredFromStep).
  // kFromFirstRearrangement: the first step whose latency holds nothing of leaving the initial
  // placement (the second after the first finished rearrangement's last commit).
  // kFromFirstCommit: the step after the run's first commit (the first step served on a
  // placement a policy made). Either is the first step when nothing is ever committed.
  static constexpr int kFromFirstCommit = -1;
  static constexpr int kFromFirstRearrangement = -2;
  int measure_from = kFromFirstRearrangement;
};

struct Scenario {
  std::string name = "deepseek-v3-prefill-ep32";
  std::string source;  // the file it came from, or "(built-in)"
  std::string base_dir = ".";
  ModelSpec model;
  ClusterSpec cluster;
  ComputeSpec compute;
  WorkloadSpec workload;
  EplbSpec eplb;
  MigrationSpec migration;
  std::vector<FaultSpec> faults;
  RunSpec run;

  int num_gpus() const { return cluster.nodes * cluster.gpus_per_node; }
  int initial_gpus() const { return cluster.initial_gpus > 0 ? cluster.initial_gpus : num_gpus(); }
  int num_slots() const { return model.experts + eplb.num_redundant_experts; }
  int slots_per_gpu() const { return num_slots() / num_gpus(); }
  // The expert-parallel group an engine's once-per-rearrangement work scales with.
  EpShape ep_shape() const { return {num_gpus(), cluster.nodes, model.groups}; }
  // What moving its weights costs beyond the links is priced from (migrate/migration_pricing.h).
  MigrationSetUp migration_set_up() const;
  // Tokens a step runs through the model: workload.tokens_per_step (sequences, in decode) times
  // 1 + compute.mtp_draft_tokens.
  double tokens_per_forward() const {
    return double(workload.tokens_per_step) * (1 + compute.mtp_draft_tokens);
  }
  // Tokens a step emits per sequence: 1 + acceptance × drafts (1 without MTP).
  double output_tokens_per_sequence() const {
    return 1 + compute.mtp_acceptance * compute.mtp_draft_tokens;
  }
  // The topology the scenario describes, with effective (efficiency-scaled) bandwidths.
  Topology topology() const;
};

// What a run of the scenario will hold in memory, from the fields that drive it, so that a run
// too large for the machine is refused before it starts instead of dying part way. An upper
// estimate: every rearrangement is taken to move every slot.
struct MemoryEstimate {
  double bytes = 0;
  std::string largest;  // the largest term, as the fields that drive it
  double largest_bytes = 0;
};
MemoryEstimate EstimateRunMemory(const Scenario& s);

// OK when EstimateRunMemory(s) fits in `available_bytes` (0: 80% of this machine's physical
// memory); otherwise InvalidArgument naming the estimate, the limit and the fields to lower.
// Also refuses a policy whose call at this size would run without bound (CheckPolicyCallSize):
// with memory, what a run checks before its first step.
Status CheckRunFitsInMemory(const Scenario& s, int64_t available_bytes = 0);

}  // namespace eplb
