// The cost of one inference step, from its load and the placement in force.
//
//   GPU tokens     t(l, g) = Σ over g's slots of the assignments of load(l, e) its replica
//                  takes (load(l, e) / replicas(l, e) with eplb.dispatch even; random and
//                  lp in engine/replica_dispatch.h); a step has T = Σ_e load(l, e) / top_k
//                  tokens, spread evenly over the G GPUs (data-parallel attention)
//   MoE layer      every MoE layer waits for its most loaded GPU (the straggler):
//                    simple    layer_fixed + per_token × max_g t(l, g)
//                    roofline  layer_fixed + max_g max(FLOPs_g / (peak × flops_eff),
//                                                      bytes_g / (HBM × hbm_eff))
//                              FLOPs_g = 6 · hidden · intermediate · (t(l, g) + n_g · m₀)
//                                        (gate, up, down)
//                              bytes_g = n_g × expert_bytes (at HBM × weight_hbm_eff)
//                                        + t(l, g) · hidden · (activation_bytes + combine
//                                        bytes) (at HBM × hbm_eff)
//                              n_g: the experts g runs tokens through. m₀
//                              (compute.expert_fixed_tokens): a grouped GEMM pays a fixed cost
//                              per group, so an expert's M tokens run at flops_eff · M / (M +
//                              m₀). DeepGEMM's README (H800, 2025-02 to 04) times its
//                              masked grouped GEMMs (decode's) on DeepSeek-V3's two expert
//                              shapes, 1,024 tokens in all, as 1 × 1,024, 2 × 512 and 4 × 256
//                              at 81.3, 90.6 and 101.4 µs: a least-squares line is the FLOPs at
//                              0.60 of peak plus 6.5 µs a group, m₀ = 88 tokens (0.45 of peak
//                              at 256 tokens an expert, 0.59 at 4,096). Decode, with a few
//                              hundred tokens an expert, pays it; prefill's thousands barely.
//   attention      simple: attention_us per step. roofline, per GPU with T/G tokens, the dense
//                  GEMMs and attention's core as separate kernels, each bound by its own
//                  FLOPs or bytes, their times added:
//                    max(2 · dense_params · T/G / (peak(gemm_bytes) · flops_eff),
//                        dense_params · gemm_bytes / (HBM · weight_hbm_eff))
//                    + max(attention_flops_per_kv · kv_length · T/G / (peak(BF16) · flops_eff),
//                          KV bytes read / (HBM · hbm_eff))
//                  weight_hbm_eff: what a GEMM with few tokens per weight achieves while it
//                  streams its weights. DeepGEMM's README (H800, 2025-02/04) times DeepSeek-V3's
//                  six dense shapes at M = 128 at 352-645 TFLOPS: their 231 MB of weights take
//                  109 µs, 2.12 TB/s = 0.63 of 3.35 (0.69 at M = 64); its masked grouped GEMMs at
//                  256 tokens per expert reach 2.05-2.06 TB/s, 0.61. In decode this puts the
//                  dense GEMMs at 0.24 ms a layer (LMSYS's breakdown of DeepSeek's profile: 0.29)
//                  instead of hiding them under attention's FLOPs.
//                  KV bytes read: T/G · kv_length · kv_bytes_per_token in decode (each token
//                  reads its sequence's cache), 1/128 of that in prefill (FlashAttention reads the
//                  cache once per 128-query tile)
//                  + T/G · elementwise_bytes_per_token / (HBM · hbm_eff): the kernels between the
//                  GEMMs (normalisation, RoPE, activation, quantisation, residual adds, the
//                  weighted combine) are separate, memory-bound launches, so their time adds.
//                  LMSYS's breakdown of DeepSeek's profile (2025-05-05) measures them at 5.15 ms in
//                  a prefill layer (16,384 tokens; 15% of its 34.6 ms) and 0.08 ms a decode
//                  layer (6%), which the roofline alone leaves out. They count with the dense
//                  stage, spread evenly; the part that follows a hot GPU's assignments is not
//                  split out.
//   dispatch       bytes per GPU port, by compute.all_to_all (combine is the mirror image, with
//                  the combine bytes per element):
//                    bulk         one message per assignment, hidden × activation_bytes
//                    low-latency  the same messages, FP8 with its per-128-element float scales
//                                 (DeepEP's low-latency kernels: each token straight to each
//                                 expert's GPU, NVLink inside a node, RDMA between nodes)
//                    normal       DeepEP's normal kernels: a token crosses RDMA once per remote
//                                 node it reaches (to the GPU of the same rail), then NVLink to
//                                 each GPU it reaches there; NVLink at normal_nvlink_efficiency
//                  A token reaches GPU g with probability 1 − (1 − q_g)^top_k, q_g = g's share
//                  of the layer's assignments (and likewise a node), the nodes reached capped by
//                  group-limited routing (model.topk_groups).
//   a2a phase      per link class: layers × latency + the busiest port's bytes / bandwidth; the
//                  two classes overlap, so a phase lasts as long as the slower class, plus
//                  layers × low_latency_overhead in low-latency mode. Every layer's dispatch and
//                  combine wait for that layer's busiest port, so the bytes are
//                  Σ_l max_g port bytes(l, g), not max_g Σ_l: where different GPUs are hottest in
//                  different layers, each layer pays for its own (StepCost::layer_busiest_bytes)
//   faults         while a straggler fault holds (scenario.h), its GPU's MoE work and
//                  attention take × factor, so it may become the layer's straggler and the
//                  step's attention waits for it; while a link fault holds, the GPU's ports of
//                  that class drain at bandwidth ÷ factor
//   step time      one micro-batch: attention + MoE + dispatch + combine. Two micro-batches
//                  (compute.micro_batches 2): each has half the tokens (and reads the weights
//                  again); one's communication runs while the other computes, so with c_l a
//                  micro-batch's compute in layer l (attention a_l + MoE e_l) and m its
//                  dispatch + combine per layer:
//                    prefill  one's attention and MoE overlap the other's dispatch and combine
//                             (DeepSeek-V3 report §3.4.1):
//                             step = Σ_l max(2·c_l, 2·m) + min(c_0, m)
//                    decode   one's attention overlaps the other's dispatch, MoE and combine
//                             (§3.4.2; DeepSeek's profile-data README: the all-to-all holds no
//                             SMs, and a micro-batch waits for it after its computation), so the
//                             MoE lies on the communication's path as well as on the SMs:
//                             step = Σ_l max(2·c_l, 2·(m + e_l)) + min(c_0, m + e_0)
//                  The communication that shows is what compute does not hide.
//   micro-batches  the two micro-batches are disjoint halves of the step's tokens (DeepSeek-V3
//                  report §3.4: one batch split in two of similar work; SGLang's two-batch
//                  overlap splits by requests), so each has its own counts and waits for its
//                  own busiest GPU, in its MoE and in its all-to-all: c_l, e_l and m above are
//                  each micro-batch's own, the step the sum of the two. With workload.noise,
//                  the step's count n of an expert splits as its tokens fall, the first half
//                  drawn around n/2 with variance (n + n² · v) / 4 (v: the sequences' variance
//                  factor, engine/workload.h; a sequence's tokens stay together); a half of
//                  fewer tokens is further from its mean, so the busiest GPU of a micro-batch
//                  is busier than half the step's. The step's own movement
//                  (workload.step_sigma) is in the step's counts already and both halves share
//                  it, so it does not spread the split. Without noise the halves are exact.
//   SMs shared     with two micro-batches and DeepEP's normal kernels, the kernels that run
//                  beside compute hold compute.normal_sms of the GPU's S SMs (24, set by
//                  Buffer.set_num_sms in DeepEP's README), and compute runs on the rest
//                  meanwhile: with f = normal_sms / S, compute c overlapped by communication m
//                  takes c + f · min(m, c / (1 − f)), which replaces c in the step formula above.
//                  The low-latency kernels in hook mode hold no SMs (DeepSeek's profile-data
//                  README, of decode). In DeepSeek's prefill profile the communication covers
//                  most of a layer, so this adds ~18% to compute (StepCost::sm_shared_s), as
//                  LMSYS's breakdown of the profile finds its kernels slower than peak ×
//                  efficiency.
//   beside compute with two micro-batches, DeepEP's normal kernels take
//                  compute.normal_overlap_slowdown times their unit tests' time, latency included
//                  (m above, and the SMs they hold as long): LMSYS's breakdown of DeepSeek's
//                  prefill profile times their cores at 9.45 and 17.23 ms a layer against 7.26
//                  and 14.24 alone (1.24×). In the profile the communication, 25 ms a layer,
//                  then still hides behind 30.6 ms of compute.
//   MTP            decode with multi-token prediction (compute.mtp_draft_tokens d): each
//                  sequence runs 1 + d tokens through every layer (the workload's loads and the
//                  dense work scale with them), but its KV cache is read once per step.
//
// On links shared with expert migrations the simulator plays each phase as one flow per GPU port
// (AllToAllFlows) and the step lasts longer; on idle links it gives exactly the analytic time.
//
// Thread-safety: a StepModel is not thread-safe (it keeps scratch buffers).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "eplb/engine/hardware.h"
#include "eplb/engine/replica_dispatch.h"
#include "eplb/engine/scenario.h"
#include "eplb/engine/step_cost.h"
#include "eplb/model/load.h"
#include "eplb/model/placement.h"
#include "eplb/model/topology.h"

namespace eplb {

class NormalTable;  // engine/sampling.h

// The traffic of one GPU port in an a2a phase: everything `rank` sends (outbound) or receives
// over one link class.
struct PhaseFlow {
  int rank;
  LinkClass link;
  bool outbound;
  double bytes;
};

// The faults in force at a step, per rank: how many times longer its compute takes and how many
// times slower each class of its links is (1: healthy). Factors of overlapping faults multiply.
struct Slowdowns {
  std::vector<double> compute;
  PerLink<std::vector<double>> link;
  explicit Slowdowns(int ranks = 0);
  bool healthy() const;
  bool operator==(const Slowdowns& other) const;
};
Slowdowns SlowdownsAt(const std::vector<FaultSpec>& faults, int step, const Topology& topology);

class StepModel {
 public:
  explicit StepModel(const Scenario& scenario);
  ~StepModel();
  // Prices a step of `load` under `placement`; with two micro-batches, splits it into the two
  // (above) and prices them as CostMicroBatches does.
  void Cost(const LoadMatrix& load, const Placement& placement, StepCost& out);
  // Prices a step whose two micro-batches carry `first` and `second` (compute.micro_batches
  // must be 2): each pays for its own busiest GPU; the step's totals (ports, balance) are of
  // their sum.
  void CostMicroBatches(const LoadMatrix& first, const LoadMatrix& second,
                        const Placement& placement, StepCost& out);
  // The micro-batches the last Cost split its load into (empty before a split).
  const LoadMatrix& micro_batch_load(int b) const { return halves_[b]; }
  // The faults in force from now on (all healthy at construction).
  void SetSlowdowns(const Slowdowns& slowdowns);
  // Which GPUs exist and serve from now on (all of them at construction), per rank: a `lost`
  // GPU is gone: nothing routes to it, its replicas no longer count, and an expert with no
  // other replica loses its tokens (StepCost::tokens_lost). The `serving` GPUs share the step's
  // tokens (attention, and the sources of dispatch); a live GPU that does not serve (draining,
  // or not yet added) still computes the experts it holds.
  void SetRanks(const std::vector<char>& lost, const std::vector<char>& serving);

  // One a2a phase as flows: per link class and GPU, one flow through its sending port with all
  // it sends and one through its receiving port with all it receives (none where that is zero).
  // Each port drains on its own, as a real all-to-all's does when a GPU exchanges with many
  // peers at once: a port slowed by a migration delays the phase by its own backlog only. On
  // idle links the busiest port decides, which is exactly the analytic phase time.
  // `combine` swaps the roles of sends and receives.
  std::vector<PhaseFlow> AllToAllFlows(const StepCost& cost, bool combine) const;
  // Micro-batches × layers × latency of `link`: the start-up cost of one phase on it.
  double PhaseLatency(LinkClass link) const;
  // Micro-batches × layers × the mode's fixed cost per phase (low-latency kernels' overhead).
  double PhaseOverhead() const;
  // The bandwidth of `link` in a2a phases (the normal kernels' NVLink copies run below it).
  double PhaseBandwidth(LinkClass link) const;
  // How many times longer the a2a phases take beside the other micro-batch's compute than alone
  // (compute.normal_overlap_slowdown with two micro-batches and the normal kernels, else 1);
  // AllToAllFlows' flows carry bytes that take as long.
  double BesideCompute() const;
  const Topology& topology() const { return topology_; }

  // The roofline's pieces, for one GPU: a MoE layer over `tokens` assignments to
  // `loaded_experts` experts, and the attention and dense layers of `tokens` tokens.
  double RooflineMoe(double tokens, int loaded_experts) const;
  double RooflineAttention(double tokens) const;

 private:
  // What Cost's passes over the layers add up for the step.
  struct StepSums {
    double mean = 0, max = 0;     // Σ over layers of the mean and the busiest GPU's assignments
    double imbalance = 0;         // Σ over loaded layers of (max − mean) / mean
    int loaded_layers = 0;        // layers with a positive mean
    double assignments = 0;       // token-expert assignments, all layers
    double lost_assignments = 0;  // those that found no live replica
    double rdma_counted = 0;      // normal mode: DeepEP's counted RDMA bytes (StepCost)
  };
  // Cost's phases, in order. BeginStep sizes and zeroes the step's buffers; PriceLoad prices one
  // load, the step's or a micro-batch's, into a pass's ports and MoE times (PricedLoad), and
  // FinishStep forms the step's balance from the tokens both passes left per layer and GPU
  // (layer_tokens_) and its time (StepTime). In a pass: BeginPass zeroes its buffers;
  // SplitLayer splits one layer's load over the replicas and GPUs (gpu_layer_, gpu_step_),
  // prices each GPU's MoE work and returns the layer's assignments. The ports of DeepEP's
  // normal kernels are priced per layer (NormalLayerPorts, then NormalStepPorts); those of the
  // bulk and low-latency modes over the pass (LayerBusiestPorts per layer, DirectStepPorts).
  // StepTime adds attention and the a2a phases up as one or two micro-batches overlap them.
  struct PricedLoad {
    const StepCost* ports;           // the pass's port bytes (its send, recv, busiest)
    const std::vector<double>* moe;  // per layer, one micro-batch's MoE straggler time
    double scale;                    // one micro-batch's part of those bytes
  };
  void BeginStep(int layers, StepCost& out);
  double PriceLoad(const LoadMatrix& load, const Placement& placement, double share,
                   StepCost& ports, std::vector<double>& moe, StepSums& sums);
  void BeginPass(StepCost& ports);
  double SplitLayer(const LoadMatrix& load, const Placement& placement, int layer, double share,
                    std::vector<double>& moe, StepSums& sums);
  void NormalLayerPorts(double assignments, StepCost& out, StepSums& sums);
  void NormalStepPorts(StepCost& out);
  void DirectStepPorts(StepCost& out, double assignments);
  void FinishStep(int layers, std::span<const PricedLoad> passes, StepSums& sums, StepCost& out);
  void StepTime(int layers, std::span<const PricedLoad> passes, const StepSums& sums,
                StepCost& out);
  // Draws the two micro-batches of `load` into halves_ (see the header).
  void SplitMicroBatches(const LoadMatrix& load);

  // Whether some GPU is lost or does not serve (SetRanks), and how many serve.
  bool RanksChanged() const { return !lost_.empty(); }
  int ServingRanks() const { return RanksChanged() ? serving_count_ : topology_.num_ranks(); }

  // One micro-batch's dispatch phase, whose port bytes are `scale` × those of `cost` (a pass's
  // ports: the step's, or one micro-batch's).
  double PhaseTime(const StepCost& cost, double scale) const;
  // Bulk and low-latency modes, where each assignment is one message from its source GPU: GPU
  // `g`'s dispatch bytes per port for `t` assignments to its experts, `in_node` to its node's
  // and `all` in total (one layer's, or the step's).
  struct PortBytes {
    double nvlink_out, nvlink_in, rdma_out, rdma_in;
  };
  PortBytes DirectPortBytes(int g, double t, double in_node, double all) const;
  // Bulk and low-latency modes: adds the current layer's busiest port per link class (from
  // gpu_layer_, the layer's tokens per GPU, and its `layer_assignments`) to `out`.
  void LayerBusiestPorts(double layer_assignments, StepCost& out);

  Topology topology_;
  ComputeSpec compute_;
  ModelSpec shape_;
  const GpuSpec* gpu_ = nullptr;
  Slowdowns slowdowns_;
  double slowest_gpu_ = 1;  // the largest compute slowdown in force
  int layers_;
  double dispatch_bytes_per_token_, combine_bytes_per_token_;
  std::vector<double> gpu_step_;          // per GPU, its assignments over the pass's layers
  std::vector<double> node_tokens_;       // per node, likewise
  ReplicaDispatcher dispatcher_;          // splits each expert's tokens among its replicas
  std::vector<double> slot_tokens_;       // the current layer's assignments per slot
  std::vector<double> layer_compute_[2];  // per pass and layer: a micro-batch's MoE time
  std::vector<double> layer_tokens_;      // layers × GPUs: the step's tokens (all passes)
  std::vector<int> layer_working_;        // per layer: the GPUs its mean is over
  // With noise and two micro-batches, the step's load is split (SplitMicroBatches): the draws,
  // the sequences' variance factor, the two loads and each one's ports.
  std::unique_ptr<NormalTable> split_normal_;
  double split_variance_ = 0;
  LoadMatrix halves_[2];
  StepCost batch_[2];
  std::vector<double> gpu_layer_, node_layer_;  // the current layer's tokens per GPU and node
  // Normal mode, per GPU: the counted NVLink bytes over the step, and the NVLink bytes received
  // over the pass.
  std::vector<double> nvlink_counted_, normal_nvlink_recv_;
  // SetRanks: empty while every GPU is live and serves.
  std::vector<char> lost_, serving_;
  int serving_count_ = 0;
  std::vector<int> serving_in_node_;
};

}  // namespace eplb
