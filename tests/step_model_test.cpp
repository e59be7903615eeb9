// The step cost model against hand arithmetic.
#include "eplb/engine/step_model.h"

#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "eplb/engine/scenario.h"
#include "eplb/engine/workload.h"
#include "eplb/io/scenario_file.h"

namespace eplb {
namespace {

// 1 node × 2 GPUs × 2 slots, 1 layer, 3 experts: slots [0, 1 | 0, 2]; expert 0 has two replicas.
Scenario TwoGpus(std::vector<std::string> more = {}) {
  std::vector<std::string> settings = {
      "model.layers=1",
      "model.experts=3",
      "model.groups=1",
      "model.top_k=1",
      "model.hidden=1000",
      "model.activation_bytes=2",
      "cluster.nodes=1",
      "cluster.gpus_per_node=2",
      "eplb.num_redundant_experts=1",
      "compute.attention_us=100",
      "compute.layer_fixed_us=10",
      "compute.per_token_us=0.5",
      "cluster.nvlink={bandwidth_gbps: 1, latency_us: 2, efficiency: 1}"};
  settings.insert(settings.end(), more.begin(), more.end());
  auto s = ParseScenario("", "t", settings);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return *s;
}

StepCost CostOf(const Scenario& s) {
  LoadMatrix load(1, 3);
  load << 8, 2, 6;
  StepModel model(s);
  StepCost cost;
  model.Cost(load, *Placement::Create(3, {{0, 1, 0, 2}}), cost);
  return cost;
}

class StepModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    load << 8, 2, 6;
    model.Cost(load, placement, cost);
  }
  const Scenario scenario = TwoGpus();
  StepModel model{scenario};
  const Placement placement = *Placement::Create(3, {{0, 1, 0, 2}});
  LoadMatrix load = LoadMatrix(1, 3);
  StepCost cost;
};

TEST_F(StepModelTest, StragglerComputeAndDispatchByHand) {
  // GPU 0: 8/2 + 2 = 6 tokens; GPU 1: 8/2 + 6 = 10 tokens: GPU 1 is the straggler.
  EXPECT_DOUBLE_EQ(cost.compute_s, 100e-6 + 10e-6 + 0.5e-6 * 10);
  // Tokens start evenly on 2 GPUs, so half of each GPU's tokens come over NVLink:
  // GPU 1 receives 10/2 = 5 assignments and GPU 0 sends 10/2 = 5, of 1000 × 2 bytes each.
  EXPECT_DOUBLE_EQ(cost.recv[LinkClass::kNvlink][1], 5 * 2000.0);
  EXPECT_DOUBLE_EQ(cost.send[LinkClass::kNvlink][0], 5 * 2000.0);
  EXPECT_DOUBLE_EQ(cost.recv[LinkClass::kNvlink][0], 3 * 2000.0);
  EXPECT_TRUE(cost.recv[LinkClass::kNic][0] == 0 &&
              cost.send[LinkClass::kNic][1] == 0);  // one node: no NIC traffic
  // A phase: 1 layer × 2 µs + 10,000 bytes at 1 GB/s.
  EXPECT_DOUBLE_EQ(cost.dispatch_s, 2e-6 + 10e-6);
  EXPECT_DOUBLE_EQ(cost.combine_s, cost.dispatch_s);
  EXPECT_DOUBLE_EQ(cost.total_s(), cost.compute_s + 2 * cost.dispatch_s);
  // Balancedness of this step: mean 8 / max 10.
  EXPECT_DOUBLE_EQ(cost.balancedness, 0.8);
  EXPECT_DOUBLE_EQ(cost.imbalance_ratio, 0.25);
}

TEST_F(StepModelTest, AllToAllFlowsCarryEachPortsBytesInOneFlow) {
  // Dispatch: GPU 0 sends 5 and receives 3 assignments over NVLink, GPU 1 the reverse of its
  // 3 and 5; no NIC traffic on one node.
  const auto dispatch = model.AllToAllFlows(cost, false);
  ASSERT_EQ(dispatch.size(), 4u);
  double busiest = 0;
  for (const auto& f : dispatch) {
    EXPECT_EQ(f.link, LinkClass::kNvlink);
    const auto& bytes = f.outbound ? cost.send[LinkClass::kNvlink] : cost.recv[LinkClass::kNvlink];
    EXPECT_DOUBLE_EQ(f.bytes, bytes[static_cast<size_t>(f.rank)]);
    busiest = std::max(busiest, f.bytes);
  }
  // The busiest port, alone, drains in the analytic phase time.
  EXPECT_DOUBLE_EQ(model.PhaseLatency(LinkClass::kNvlink) + busiest / 1e9, cost.dispatch_s);
  // Combine is the mirror image: each port carries what the other direction did in dispatch.
  const auto combine = model.AllToAllFlows(cost, true);
  ASSERT_EQ(combine.size(), 4u);
  for (const auto& f : combine) {
    const auto& bytes = f.outbound ? cost.recv[LinkClass::kNvlink] : cost.send[LinkClass::kNvlink];
    EXPECT_DOUBLE_EQ(f.bytes, bytes[static_cast<size_t>(f.rank)]);
  }
}

const std::vector<std::string> kRoofline = {
    "compute.model=roofline",        "compute.gpu=H800",
    "compute.flops_efficiency=0.5",  "compute.hbm_efficiency=0.5",
    "model.intermediate=1000",       "model.expert_bytes=1000000",
    "model.dense_params=1e9",        "model.attention_flops_per_kv=1e6",
    "model.kv_bytes_per_token=1000", "compute.kv_length=100"};

TEST(RooflineStepModel, PricesMoeAndAttentionByHand) {
  std::vector<std::string> weights = kRoofline;
  weights.push_back("compute.weight_hbm_efficiency=0.25");
  const StepCost cost = CostOf(TwoGpus(weights));
  // H800: 1,979 TFLOPS FP8, 3,350 GB/s; both at half, weight streaming at a quarter. GPU 1 is
  // the straggler: 10 assignments to two loaded experts. Its GEMMs are 6 × 1000 × 1000 × 10
  // FLOPs (60 ns at 989.5 TFLOPS), its bytes 2 experts × 1e6 of weights + 10 × 1000 × (2 in
  // + 2 out) of activations: memory-bound.
  const double hbm = 3350e9 * 0.5, weight_hbm = 3350e9 * 0.25;
  const double moe = 2 * 1e6 / weight_hbm + 10 * 1000.0 * 4 / hbm;
  EXPECT_LT(6.0 * 1000 * 1000 * 10 / (1979e12 * 0.5), moe);
  // 16 tokens over 2 GPUs: 8 each. The dense GEMMs' 2 × 1e9 × 8 FLOPs take 16.2 µs at FP8, their
  // 1e9 weight bytes 1,194 µs: memory-bound. Attention's 1e6 × 100 × 8 FLOPs take 1.6 µs at BF16,
  // its 8 × 100 × 1000 / 128 bytes of KV cache (prefill reads it once per 128-query tile) 4 ns:
  // compute-bound. Separate kernels: the times add.
  const double attention = 1e9 / weight_hbm + 1e6 * 100 * 8 / (989e12 * 0.5);
  EXPECT_NEAR(cost.compute_s, attention + 10e-6 + moe, 1e-12 * cost.compute_s);
  // With 1 MB of cache per position attention is memory-bound in both stages, and in decode each
  // token reads its own cache: 8 × 100 × 1e6 bytes, against 1/128 of that in prefill.
  weights.push_back("model.kv_bytes_per_token=1e6");
  std::vector<std::string> decode = weights;
  decode.push_back("compute.stage=decode");
  EXPECT_NEAR(CostOf(TwoGpus(decode)).compute_s - CostOf(TwoGpus(weights)).compute_s,
              8 * 100 * 1e6 * (1 - 1.0 / 128) / hbm, 1e-12);
}

TEST(RooflineStepModel, EachExpertsGemmsCostAFixedNumberOfTokensMore) {
  // Compute-bound experts: 6 × 1000 × 1e6 FLOPs a token at half of H800's 1,979 TFLOPS
  // (6.06 µs), one byte of weights each.
  std::vector<std::string> gemms = kRoofline;
  gemms.insert(gemms.end(), {"model.intermediate=1000000", "model.expert_bytes=1"});
  std::vector<std::string> fixed = gemms;
  fixed.push_back("compute.expert_fixed_tokens=5");
  const double per_token = 6.0 * 1000 * 1e6 / (1979e12 * 0.5);
  // Slots [0, 1 | 0, 2] with loads 8, 2, 6: GPU 0 runs 4 + 2 tokens through two experts, GPU 1
  // 4 + 6 through two. GPU 1 is the straggler either way, and its two experts cost it as much
  // as 2 × 5 more tokens would.
  EXPECT_NEAR(CostOf(TwoGpus(fixed)).compute_s - CostOf(TwoGpus(gemms)).compute_s,
              2 * 5 * per_token, 1e-12);
  // An expert no token reaches costs nothing: with expert 0 idle, GPU 0 runs 6 tokens through
  // expert 1 (6 + 5, where counting its idle replica of expert 0 would give 6 + 10) and GPU 1
  // 4 through expert 2 (4 + 5): GPU 0 is the straggler, 5 tokens' worth slower.
  LoadMatrix load(1, 3);
  load << 0, 6, 4;
  const Placement placement = *Placement::Create(3, {{0, 1, 0, 2}});
  StepCost with, without;
  StepModel(TwoGpus(fixed)).Cost(load, placement, with);
  StepModel(TwoGpus(gemms)).Cost(load, placement, without);
  EXPECT_NEAR(with.compute_s - without.compute_s, 5 * per_token, 1e-12);
  // Where the weights bound a GPU, the fixed cost hides under them as the FLOPs do: 1 MB
  // experts take 2 × 1e6 bytes at a quarter of 3,350 GB/s (2.39 µs) against the 0.12 µs of
  // 10 + 10 tokens' FLOPs at an intermediate of 1,000.
  std::vector<std::string> weights = kRoofline;
  weights.push_back("compute.weight_hbm_efficiency=0.25");
  std::vector<std::string> weights_fixed = weights;
  weights_fixed.push_back("compute.expert_fixed_tokens=5");
  EXPECT_DOUBLE_EQ(CostOf(TwoGpus(weights_fixed)).compute_s, CostOf(TwoGpus(weights)).compute_s);
}

TEST(RooflineStepModel, KernelsBetweenTheGemmsAddTheirBytesAtHbmSpeed) {
  // The same step with 1 MB of elementwise traffic per token: each GPU's 8 tokens add
  // 8 × 1e6 bytes at half of H800's 3,350 GB/s, on top of the memory-bound attention (they
  // are separate launches, not hidden under the GEMMs' roofline).
  std::vector<std::string> elementwise = kRoofline;
  elementwise.push_back("model.elementwise_bytes_per_token=1e6");
  const StepCost without = CostOf(TwoGpus(kRoofline));
  const StepCost with = CostOf(TwoGpus(elementwise));
  const double added = 8 * 1e6 / (3350e9 * 0.5);
  EXPECT_NEAR(with.compute_s - without.compute_s, added, 1e-12);
  EXPECT_NEAR(with.attention_s - without.attention_s, added, 1e-12);
  EXPECT_DOUBLE_EQ(with.balancedness, without.balancedness);
}

TEST(Faults, AStragglerSlowsItsGpusWorkAndADegradedLinkItsPorts) {
  Scenario s = TwoGpus();
  s.faults = {{FaultKind::kStraggler, 0, 10, 0, -1, LinkClass::kNic, 2}};
  LoadMatrix load(1, 3);
  load << 8, 2, 6;
  const Placement placement = *Placement::Create(3, {{0, 1, 0, 2}});
  StepModel model(s);
  StepCost cost;
  // GPU 0 (6 tokens) at half speed becomes the straggler: 2 × (10 + 0.5 × 6) = 26 µs against
  // GPU 1's 15 µs, and the step's attention waits for it: 2 × 100 µs.
  model.SetSlowdowns(SlowdownsAt(s.faults, 5, model.topology()));
  model.Cost(load, placement, cost);
  EXPECT_NEAR(cost.compute_s, 200e-6 + 26e-6, 1e-15);
  // After `until` the GPU is healthy again: 100 + 10 + 5 µs.
  model.SetSlowdowns(SlowdownsAt(s.faults, 10, model.topology()));
  model.Cost(load, placement, cost);
  EXPECT_NEAR(cost.compute_s, 115e-6, 1e-15);
  // GPU 1's NVLink at a quarter of its bandwidth: its 10,000 received bytes drain as 40,000
  // would, so a phase takes 2 + 40 µs.
  s.faults = {{FaultKind::kLinkDegraded, 0, 10, 1, -1, LinkClass::kNvlink, 4}};
  model.SetSlowdowns(SlowdownsAt(s.faults, 0, model.topology()));
  model.Cost(load, placement, cost);
  EXPECT_NEAR(cost.dispatch_s, 42e-6, 1e-15);
  EXPECT_NEAR(cost.compute_s, 115e-6, 1e-15);
  // A node's fault hits each of its GPUs; overlapping factors multiply.
  s.faults.push_back({FaultKind::kLinkDegraded, 0, 10, -1, 0, LinkClass::kNvlink, 3});
  const Slowdowns both = SlowdownsAt(s.faults, 0, model.topology());
  EXPECT_EQ(both.link[LinkClass::kNvlink], (std::vector<double>{3, 12}));
  EXPECT_TRUE(SlowdownsAt(s.faults, 10, model.topology()).healthy());
}

TEST(RooflineStepModel, ComputeBoundWhenTokensOutweighTheWeights) {
  StepModel model(TwoGpus({"compute.model=roofline", "compute.gpu=B200"}));
  // 100,000 assignments on one expert: 1.2 PFLOP against 0.44 GB, at B200 peaks.
  const double tokens = 1e5;
  const double flops = 6.0 * 1000 * 2048 * tokens / (4500e12 * 0.6);
  EXPECT_DOUBLE_EQ(model.RooflineMoe(tokens, 1), flops);
  // Doubling the tokens doubles a compute-bound layer; a memory-bound one barely moves.
  EXPECT_DOUBLE_EQ(model.RooflineMoe(2 * tokens, 1), 2 * flops);
  EXPECT_LT(model.RooflineMoe(2, 1), 1.01 * model.RooflineMoe(1, 1));
}

TEST(TwoMicroBatches, OverlapCommunicationWithComputeByHand) {
  // Per micro-batch: attention 100/2 = 50 µs, the layer 10 + 0.5 × 10 / 2 = 12.5 µs, so
  // c = 62.5 µs; dispatch 2 µs + 5,000 bytes at 1 GB/s = 7 µs and combine 7 µs: m = 14 µs.
  // step = 2 · max(c, m) + min(c, m) = 139 µs, of which compute is 2c = 125 µs.
  const StepCost hidden = CostOf(TwoGpus({"compute.micro_batches=2", "workload.noise=false"}));
  EXPECT_DOUBLE_EQ(hidden.compute_s, 125e-6);
  EXPECT_NEAR(hidden.total_s(), 139e-6, 1e-15);
  EXPECT_NEAR(hidden.dispatch_s, 7e-6, 1e-15);
  EXPECT_NEAR(hidden.combine_s, 7e-6, 1e-15);
  EXPECT_NEAR(hidden.dispatch_hidden_s, 2 * 7e-6 - 7e-6, 1e-15);
  // Communication-bound: NVLink at 0.01 GB/s makes each phase 2 + 500 µs, m = 1,004 µs, and
  // step = 2 × 1,004 + 62.5 µs: compute hides nothing but the first layer's fill.
  const StepCost bound = CostOf(TwoGpus({"compute.micro_batches=2", "workload.noise=false",
                                         "cluster.nvlink={bandwidth_gbps: 0.01, latency_us: 2}"}));
  EXPECT_NEAR(bound.total_s(), 2 * 1004e-6 + 62.5e-6, 1e-12);
  EXPECT_NEAR(bound.dispatch_s + bound.combine_s, bound.total_s() - 125e-6, 1e-12);
  // One micro-batch pays for everything in turn: 100 + 10 + 5 + 2 × 12 µs.
  EXPECT_NEAR(CostOf(TwoGpus()).total_s(), 139e-6, 1e-15);
}

TEST(TwoMicroBatches, DecodeRunsTheMoeBetweenItsOwnDispatchAndCombine) {
  // As above, c = 50 + 12.5 µs and m = 14 µs; in decode a micro-batch's MoE (e = 12.5 µs) sits
  // between its dispatch and combine, so its chain is m + e = 26.5 µs: still hidden,
  // step = 2 · 62.5 + min(62.5, 26.5) = 151.5 µs.
  const StepCost hidden =
      CostOf(TwoGpus({"compute.micro_batches=2", "workload.noise=false", "compute.stage=decode"}));
  EXPECT_DOUBLE_EQ(hidden.compute_s, 125e-6);
  EXPECT_NEAR(hidden.total_s(), 151.5e-6, 1e-15);
  // Communication-bound, the MoE shows on the path: 2 × (1,004 + 12.5) + 62.5 µs, against
  // prefill's 2 × 1,004 + 62.5 µs.
  const std::vector<std::string> slow = {"compute.micro_batches=2", "workload.noise=false",
                                         "cluster.nvlink={bandwidth_gbps: 0.01, latency_us: 2}"};
  std::vector<std::string> decode = slow;
  decode.push_back("compute.stage=decode");
  EXPECT_NEAR(CostOf(TwoGpus(decode)).total_s(), 2 * 1016.5e-6 + 62.5e-6, 1e-12);
  EXPECT_NEAR(CostOf(TwoGpus(decode)).total_s() - CostOf(TwoGpus(slow)).total_s(), 25e-6, 1e-12);
}

TEST(TwoMicroBatches, NormalKernelsBesideComputeTakeTheirOverlapSlowdown) {
  // With two micro-batches DeepEP's normal kernels take compute.normal_overlap_slowdown times
  // their time alone: on a link slow enough to expose them, each phase 1.5 × (2 + 500) µs, so
  // the step is 2 × 1.5 × 1,004 + 62.5 µs where it was 2 × 1,004 + 62.5 µs.
  const std::vector<std::string> slow = {
      "compute.micro_batches=2", "workload.noise=false", "compute.all_to_all=normal",
      "compute.normal_nvlink_efficiency=1", "cluster.nvlink={bandwidth_gbps: 0.01, latency_us: 2}"};
  std::vector<std::string> slowed = slow;
  slowed.push_back("compute.normal_overlap_slowdown=1.5");
  const StepCost alone = CostOf(TwoGpus(slow)), beside = CostOf(TwoGpus(slowed));
  const auto phases = [](const StepCost& c) {
    return c.dispatch_s + c.dispatch_hidden_s + c.combine_s + c.combine_hidden_s;
  };
  EXPECT_NEAR(phases(beside), 1.5 * phases(alone), 1e-12);
  EXPECT_NEAR(alone.total_s(), 2 * 1004e-6 + 62.5e-6, 1e-12);
  EXPECT_NEAR(beside.total_s(), 2 * 1.5 * 1004e-6 + 62.5e-6, 1e-12);
  // One micro-batch runs its kernels alone, and the low-latency kernels are not slowed.
  std::vector<std::string> one = {"compute.all_to_all=normal",
                                  "compute.normal_overlap_slowdown=1.5"};
  EXPECT_DOUBLE_EQ(CostOf(TwoGpus(one)).total_s(),
                   CostOf(TwoGpus({"compute.all_to_all=normal"})).total_s());
  std::vector<std::string> hook = {"compute.micro_batches=2", "workload.noise=false",
                                   "compute.all_to_all=low-latency",
                                   "compute.normal_overlap_slowdown=1.5"};
  EXPECT_DOUBLE_EQ(CostOf(TwoGpus(hook)).total_s(),
                   CostOf(TwoGpus({"compute.micro_batches=2", "workload.noise=false",
                                   "compute.all_to_all=low-latency"}))
                       .total_s());
}

TEST(TwoMicroBatches, EachPaysForItsOwnBusiestGpu) {
  // The step's 8, 2, 6 assignments as two uneven micro-batches, (8, 2, 0) and (0, 0, 6), on
  // slots [0, 1 | 0, 2] with expert 0 split evenly. First: GPUs 4 + 2 = 6 and 4, MoE 10 + 0.5 ×
  // 6 = 13 µs; its busiest port (1 node, 1,000 bytes an assignment per source) sends 6 of 10:
  // dispatch 2 + 6 = 8 µs, combine 8 µs, m = 16 µs. Second: GPUs 0 and 6, MoE 13 µs, GPU 0
  // sends 6,000 bytes: m = 16 µs. Each c = 50 + 13 = 63 µs, so step = 63 + 63 + min(63, 16) =
  // 142 µs, where the exact halves (4, 1, 3) give 139 µs (OverlapCommunication... above).
  const Scenario s = TwoGpus({"compute.micro_batches=2"});
  StepModel model(s);
  LoadMatrix first(1, 3), second(1, 3);
  first << 8, 2, 0;
  second << 0, 0, 6;
  const Placement placement = *Placement::Create(3, {{0, 1, 0, 2}});
  StepCost cost;
  model.CostMicroBatches(first, second, placement, cost);
  EXPECT_NEAR(cost.compute_s, 126e-6, 1e-15);
  EXPECT_NEAR(cost.total_s(), 142e-6, 1e-15);
  EXPECT_NEAR(cost.dispatch_s + cost.dispatch_hidden_s, 16e-6, 1e-15);
  EXPECT_NEAR(cost.dispatch_s, 8e-6, 1e-15);
  // The step's ports and balance are those of the sum, as with exact halves: GPU 1 takes 10 of
  // 16 assignments (mean 8), and GPU 0 sends 10,000 bytes.
  EXPECT_DOUBLE_EQ(cost.imbalance_ratio, 0.25);
  EXPECT_DOUBLE_EQ(cost.send[LinkClass::kNvlink][0], 10000);
  EXPECT_DOUBLE_EQ(cost.recv[LinkClass::kNvlink][1], 10000);
}

TEST(TwoMicroBatches, EachComputesBesideTheOthersCommunication) {
  // All 8, 2, 6 assignments in the first micro-batch, none in the second, on a link slow
  // enough to expose them. First: compute 50 + 10 + 0.5 × 10 = 65 µs, its busiest port 10,000
  // bytes at 0.01 GB/s, so dispatch and combine 1,002 µs each; second: compute 50 + 10 = 60 µs
  // and no communication. The first computes beside the second's (empty) phases, the second
  // beside the first's: 65 + max(60, 2,004) = 2,069 µs, with nothing to fill.
  StepModel model(
      TwoGpus({"compute.micro_batches=2", "cluster.nvlink={bandwidth_gbps: 0.01, latency_us: 2}"}));
  LoadMatrix first(1, 3), second(1, 3);
  first << 8, 2, 6;
  second << 0, 0, 0;
  StepCost cost;
  model.CostMicroBatches(first, second, *Placement::Create(3, {{0, 1, 0, 2}}), cost);
  EXPECT_NEAR(cost.compute_s, 125e-6, 1e-15);
  EXPECT_NEAR(cost.overlap_fill_s, 0, 1e-15);
  EXPECT_NEAR(cost.total_s(), 65e-6 + 2004e-6, 1e-12);
}

TEST(TwoMicroBatches, NoisySplitsFollowTheirTokensAndSequences) {
  // With noise, Cost splits each count n as its tokens fall: halves that sum to n, in whole
  // assignments, the first with variance n / 4 when tokens route on their own and
  // (n + n² · v) / 4 when they come in sequences, v = (e^{σ²} − 1) / sequences.
  for (const bool sequences : {false, true}) {
    // The step's own movement (workload.step_sigma) is shared by both halves: it does not
    // spread the split.
    std::vector<std::string> settings = {
        "compute.micro_batches=2", "workload.tokens_per_step=16384", "workload.step_sigma=0.5"};
    if (sequences) settings.push_back("workload.sequence_tokens=4096");
    StepModel model(TwoGpus(settings));
    const Placement placement = *Placement::Create(3, {{0, 1, 0, 2}});
    LoadMatrix load(1, 3);
    load << 1000, 0, 7;
    StepCost cost;
    double sum = 0, squares = 0;
    const int draws = 4000;
    for (int i = 0; i < draws; ++i) {
      model.Cost(load, placement, cost);
      const LoadMatrix& a = model.micro_batch_load(0);
      const LoadMatrix& b = model.micro_batch_load(1);
      for (int e = 0; e < 3; ++e) {
        ASSERT_EQ(a(0, e) + b(0, e), load(0, e));
        ASSERT_GE(a(0, e), 0);
        ASSERT_GE(b(0, e), 0);
        ASSERT_EQ(a(0, e), std::round(a(0, e)));
      }
      sum += a(0, 0);
      squares += a(0, 0) * a(0, 0);
    }
    const double mean = sum / draws, variance = squares / draws - mean * mean;
    const double v = sequences ? std::expm1(0.67 * 0.67) / 4 : 0.0;
    const double expected = (1000 + 1000.0 * 1000 * v) / 4;
    EXPECT_NEAR(mean, 500, 4 * std::sqrt(expected / draws)) << sequences;
    EXPECT_NEAR(variance, expected, 0.1 * expected) << sequences;
  }
  // Without noise the halves are exact, and the step is priced as one pass (as above).
  StepModel exact(TwoGpus({"compute.micro_batches=2", "workload.noise=false"}));
  LoadMatrix load(1, 3);
  load << 8, 2, 6;
  StepCost cost;
  exact.Cost(load, *Placement::Create(3, {{0, 1, 0, 2}}), cost);
  EXPECT_EQ(exact.micro_batch_load(0).size(), 0);
  EXPECT_NEAR(cost.total_s(), 139e-6, 1e-15);
}

TEST(TwoMicroBatches, NormalKernelsTakeTheirSmsFromTheComputeTheyOverlap) {
  // 33 of the H200's 132 SMs: while the other micro-batch's normal kernels run (m per layer),
  // compute c runs on three quarters of the GPU, so it takes c + m / 4 when the communication
  // ends first, and c / (3/4) when it outlasts compute.
  const auto with = [](std::vector<std::string> more, bool sms) {
    more.insert(more.end(),
                {"compute.micro_batches=2", "workload.noise=false", "compute.all_to_all=normal"});
    if (sms) more.push_back("compute.normal_sms=33");
    return CostOf(TwoGpus(more));
  };
  for (const std::string nvlink : {"1", "0.01"}) {
    const std::vector<std::string> link = {"cluster.nvlink={bandwidth_gbps: " + nvlink +
                                           ", latency_us: 2, efficiency: 1}"};
    const StepCost base = with(link, false), shared = with(link, true);
    const double c = base.compute_s / 2, m = (base.dispatch_s + base.dispatch_hidden_s +
                                              base.combine_s + base.combine_hidden_s) /
                                             2;
    const double slowed = c + 0.25 * std::min(m, c / 0.75);
    EXPECT_NEAR(shared.compute_s, 2 * slowed, 1e-15) << nvlink;
    EXPECT_NEAR(shared.sm_shared_s, 2 * (slowed - c), 1e-15) << nvlink;
    EXPECT_NEAR(shared.total_s(), 2 * std::max(slowed, m) + std::min(c, m), 1e-12) << nvlink;
    EXPECT_DOUBLE_EQ(shared.attention_s, base.attention_s);
    EXPECT_EQ(base.sm_shared_s, 0);
  }
  // Compute-bound with 1 GB/s: c = 62.5 µs against m = 14.x µs, so the SMs add m / 4 per
  // micro-batch; bound by 0.01 GB/s the step is the communication's, as without them.
  const StepCost fast = with({}, true), fast_base = with({}, false);
  EXPECT_GT(fast.total_s(), fast_base.total_s());
  // Low-latency kernels in hook mode hold no SMs, whatever normal_sms says.
  const StepCost hook =
      CostOf(TwoGpus({"compute.micro_batches=2", "workload.noise=false",
                      "compute.all_to_all=low-latency", "compute.normal_sms=33"}));
  EXPECT_EQ(hook.sm_shared_s, 0);
  EXPECT_DOUBLE_EQ(hook.total_s(),
                   CostOf(TwoGpus({"compute.micro_batches=2", "workload.noise=false",
                                   "compute.all_to_all=low-latency"}))
                       .total_s());
  // The kernels must leave compute at least one SM.
  auto all = ParseScenario("", "t", {"compute.gpu=H800", "compute.normal_sms=132"});
  ASSERT_FALSE(all.ok());
  EXPECT_NE(all.status().message().find("compute.normal_sms is 132 but the H800 has 132 SMs"),
            std::string::npos)
      << all.status().message();
}

TEST(AllToAllModes, EachLayerWaitsForItsOwnBusiestPort) {
  // Two layers, slots [0, 1 | 0, 2] in both: GPU 0 gets 6 tokens in layer 0 and 10 in layer 1,
  // GPU 1 the reverse, so over the step both ports carry 16 tokens' bytes, but in each layer the
  // busiest carries 10: a phase takes 2 layers × 2 µs + 2 × 10 × 1,000 bytes at 1 GB/s = 24 µs,
  // not the 20 µs the step's totals would give.
  auto s = ParseScenario("", "t",
                         {"model.layers=2", "model.experts=3", "model.groups=1", "model.top_k=1",
                          "model.hidden=1000", "model.activation_bytes=2", "cluster.nodes=1",
                          "cluster.gpus_per_node=2", "eplb.num_redundant_experts=1",
                          "cluster.nvlink={bandwidth_gbps: 1, latency_us: 2, efficiency: 1}"});
  ASSERT_TRUE(s.ok()) << s.status().message();
  LoadMatrix load(2, 3);
  load << 8, 2, 6, 8, 6, 2;
  StepModel model(*s);
  StepCost cost;
  model.Cost(load, *Placement::Create(3, {{0, 1, 0, 2}, {0, 1, 0, 2}}), cost);
  EXPECT_DOUBLE_EQ(cost.send[LinkClass::kNvlink][0], 16000);
  EXPECT_DOUBLE_EQ(cost.recv[LinkClass::kNvlink][1], 16000);
  EXPECT_DOUBLE_EQ(cost.layer_busiest_bytes[LinkClass::kNvlink], 20000);
  EXPECT_NEAR(cost.dispatch_s, 24e-6, 1e-15);
  // The same loads in both layers: every layer's busiest port is the step's, 4 + 20 µs again.
  load << 8, 2, 6, 8, 2, 6;
  model.Cost(load, *Placement::Create(3, {{0, 1, 0, 2}, {0, 1, 0, 2}}), cost);
  EXPECT_DOUBLE_EQ(cost.layer_busiest_bytes[LinkClass::kNvlink], 20000);
  EXPECT_NEAR(cost.dispatch_s, 24e-6, 1e-15);
}

TEST(MultiTokenPrediction, DraftsShareTheirSequencesCacheReadAndMultiplyTheWork) {
  // The same 16 tokens in decode, now 8 sequences of 1 + 1 draft: the KV cache (1 MB a position,
  // so attention is memory-bound) is read once per sequence, half the bytes of 16 sequences:
  // 8 × 100 × 1e6 / 2 bytes less.
  std::vector<std::string> decode = kRoofline;
  decode.push_back("compute.stage=decode");
  decode.push_back("model.kv_bytes_per_token=1e6");
  std::vector<std::string> mtp = decode;
  mtp.push_back("compute.mtp_draft_tokens=1");
  const double hbm = 3350e9 * 0.5;
  EXPECT_NEAR(CostOf(TwoGpus(decode)).compute_s - CostOf(TwoGpus(mtp)).compute_s,
              8 * 100 * 1e6 / 2 / hbm, 1e-12);
  // A step runs sequences × (1 + drafts) tokens and emits 1 + acceptance × drafts per sequence.
  mtp.push_back("workload.tokens_per_step=128");
  mtp.push_back("compute.mtp_draft_tokens=2");
  mtp.push_back("compute.mtp_acceptance=0.6");
  const Scenario s = TwoGpus(mtp);
  EXPECT_DOUBLE_EQ(s.tokens_per_forward(), 384);
  EXPECT_DOUBLE_EQ(s.output_tokens_per_sequence(), 2.2);
  // The generator's assignments follow: tokens per forward × top-k per layer.
  mtp.push_back("workload.noise=false");
  auto workload = MakeWorkload(TwoGpus(mtp));
  ASSERT_TRUE(workload.ok()) << workload.status().message();
  LoadMatrix step(1, 3);
  (*workload)->Next(step);
  EXPECT_NEAR(step.sum(), 384, 1e-9);
  // Drafting in prefill is refused, naming the field.
  auto prefill = ParseScenario("", "t", {"compute.mtp_draft_tokens=1"});
  ASSERT_FALSE(prefill.ok());
  EXPECT_NE(prefill.status().message().find("compute.mtp_draft_tokens is 1 but compute.stage is "
                                            "prefill"),
            std::string::npos)
      << prefill.status().message();
}

TEST(AllToAllModes, CombineCarriesItsOwnBytesPerElement) {
  // BF16 combine after FP8 dispatch: combine's ports carry twice dispatch's bytes.
  const Scenario s = TwoGpus({"model.activation_bytes=1", "model.combine_bytes=2"});
  const StepCost cost = CostOf(s);
  EXPECT_DOUBLE_EQ(cost.combine_bytes_ratio, 2);
  StepModel model(s);
  const auto dispatch = model.AllToAllFlows(cost, false), combine = model.AllToAllFlows(cost, true);
  double d = 0, c = 0;
  for (const auto& f : dispatch) d += f.bytes;
  for (const auto& f : combine) c += f.bytes;
  EXPECT_DOUBLE_EQ(c, 2 * d);
  EXPECT_GT(cost.combine_s, cost.dispatch_s);
}

TEST(AllToAllModes, NormalKernelsSendATokenOncePerGpuItReaches) {
  // One node of 8 GPUs, 256 experts, top-8, uniform: a token reaches a GPU with probability
  // 1 − (7/8)^8, and 7/8 of what a GPU receives comes over NVLink from its peers.
  auto s = ParseScenario(
      "", "t",
      {"cluster.nodes=1", "model.groups=1", "model.topk_groups=0", "eplb.num_redundant_experts=0",
       "model.layers=1", "compute.all_to_all=normal"});
  ASSERT_TRUE(s.ok()) << s.status().message();
  LoadMatrix load(1, 256);
  const double tokens = 8 * 4096;
  load.setConstant(tokens * 8 / 256);
  StepModel model(*s);
  StepCost cost;
  model.Cost(load, *Placement::Initial(1, 256, 256), cost);
  const double reach = 1 - std::pow(7.0 / 8, 8), token_bytes = 7168 * (1 + 4.0 / 128);
  for (int g = 0; g < 8; ++g) {
    EXPECT_NEAR(cost.recv[LinkClass::kNvlink][g], tokens * reach * 7 / 8 * token_bytes,
                1e-6 * cost.recv[LinkClass::kNvlink][g]);
    EXPECT_NEAR(cost.send[LinkClass::kNvlink][g], cost.recv[LinkClass::kNvlink][g],
                1e-6 * cost.recv[LinkClass::kNvlink][g]);
    EXPECT_EQ(cost.recv[LinkClass::kNic][g], 0);
  }
  EXPECT_NEAR(cost.counted_nvlink_bytes, tokens * reach * token_bytes, 1e-6 * tokens);
  // The phase runs at the normal kernels' share of NVLink.
  EXPECT_NEAR(cost.dispatch_s, 3e-6 + cost.recv[LinkClass::kNvlink][0] / (450e9 * 0.8 * 0.85),
              1e-9 * cost.dispatch_s);
}

}  // namespace
}  // namespace eplb
