// The step cost model against hand arithmetic.
#include "eplb/engine/step_model.h"

#include <gtest/gtest.h>

#include "eplb/engine/scenario.h"
#include "eplb/io/scenario_file.h"

namespace eplb {
namespace {

// 1 node × 2 GPUs × 2 slots, 1 layer, 3 experts: slots [0, 1 | 0, 2]; expert 0 has two replicas.
Scenario TwoGpus() {
  auto s = ParseScenario(
      "", "t",
      {"model.layers=1", "model.experts=3", "model.groups=1", "model.top_k=1", "model.hidden=1000",
       "model.activation_bytes=2", "cluster.nodes=1", "cluster.gpus_per_node=2",
       "eplb.num_redundant_experts=1", "compute.attention_us=100", "compute.layer_fixed_us=10",
       "compute.per_token_us=0.5",
       "cluster.nvlink={bandwidth_gbps: 1, latency_us: 2, efficiency: 1}"});
  return *s;
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
  EXPECT_DOUBLE_EQ(cost.recv[0][1], 5 * 2000.0);
  EXPECT_DOUBLE_EQ(cost.send[0][0], 5 * 2000.0);
  EXPECT_DOUBLE_EQ(cost.recv[0][0], 3 * 2000.0);
  EXPECT_TRUE(cost.recv[1][0] == 0 && cost.send[1][1] == 0);  // one node: no NIC traffic
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
    const auto& bytes = f.outbound ? cost.send[0] : cost.recv[0];
    EXPECT_DOUBLE_EQ(f.bytes, bytes[static_cast<size_t>(f.rank)]);
    busiest = std::max(busiest, f.bytes);
  }
  // The busiest port, alone, drains in the analytic phase time.
  EXPECT_DOUBLE_EQ(model.PhaseLatency(LinkClass::kNvlink) + busiest / 1e9, cost.dispatch_s);
  // Combine is the mirror image: each port carries what the other direction did in dispatch.
  const auto combine = model.AllToAllFlows(cost, true);
  ASSERT_EQ(combine.size(), 4u);
  for (const auto& f : combine) {
    const auto& bytes = f.outbound ? cost.recv[0] : cost.send[0];
    EXPECT_DOUBLE_EQ(f.bytes, bytes[static_cast<size_t>(f.rank)]);
  }
}

}  // namespace
}  // namespace eplb
