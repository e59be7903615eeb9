// Topology, Placement and metrics.
#include <cmath>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "eplb/io/placement_files.h"
#include "eplb/model/metrics.h"
#include "eplb/model/placement.h"
#include "eplb/model/topology.h"

namespace eplb {
namespace {

TEST(Topology, SlotsRanksAndNodes) {
  auto t = Topology::FromReplicas(288, 4, 32);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->num_ranks(), 32);
  EXPECT_EQ(t->slots_per_gpu(), 9);
  EXPECT_EQ(t->gpus_per_node(), 8);
  EXPECT_EQ(t->rank_of_slot(17), 1);
  EXPECT_EQ(t->node_of_rank(9), 1);
  EXPECT_EQ(t->link_between(1, 7), LinkClass::kNvlink);
  EXPECT_EQ(t->link_between(7, 8), LinkClass::kNic);
}

TEST(Topology, RejectsBadShapesNamingTheValues) {
  EXPECT_EQ(Topology::FromReplicas(288, 4, 30).status().message(),
            "GPUs is 30; it must be a positive multiple of nodes (4)");
  EXPECT_EQ(Topology::FromReplicas(100, 4, 32).status().message(),
            "replicas is 100; it must be a positive multiple of GPUs (32)");
  TopologyConfig c;
  c.nvlink.bandwidth_bytes_per_s = 0;
  EXPECT_EQ(Topology::Create(c).status().message(),
            "NVLink bandwidth is 0 bytes/s; it must be a positive finite number");
  c = {};
  c.slots_per_gpu = 0;
  EXPECT_EQ(Topology::Create(c).status().message(), "slots per GPU is 0; it must be at least 1");
}

TEST(Placement, InitialIsVllmsRoundRobin) {
  auto p = Placement::Initial(2, 4, 6);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(std::vector<int32_t>(p->phy2log(1).begin(), p->phy2log(1).end()),
            (std::vector<int32_t>{0, 1, 2, 3, 0, 1}));
  EXPECT_EQ(p->logcnt(0, 0), 2);
  EXPECT_EQ(p->logcnt(0, 3), 1);
  EXPECT_EQ(std::vector<int32_t>(p->replicas(1, 1).begin(), p->replicas(1, 1).end()),
            (std::vector<int32_t>{1, 5}));
}

TEST(Placement, DerivesLog2PhyAscendingWithEmptySlots) {
  auto p = Placement::Create(3, {{2, -1, 0, 2, 1, 2}});
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(std::vector<int32_t>(p->replicas(0, 2).begin(), p->replicas(0, 2).end()),
            (std::vector<int32_t>{0, 3, 5}));
  EXPECT_EQ(p->max_logcnt(), 3);
  std::string text;
  AppendPlacementJsonMembers(text, *p, {8, 2});
  EXPECT_EQ(text,
            "\"phy2log\":[[2,-1,0,2,1,2]],\"log2phy\":[[[2,-1,-1],[4,-1,-1],[0,3,5]]],"
            "\"logcnt\":[[1,1,3]],\"num_gpus\":8,\"num_nodes\":2");
}

TEST(Placement, ValidationNamesTheProblem) {
  EXPECT_EQ(Placement::Create(3, {{0, 1, 1, 1}}).status().message(),
            "layer 0: logical expert 2 has no replica; every expert 0..2 needs at least one slot");
  EXPECT_EQ(Placement::Create(3, {{0, 1, 2, 7}}).status().message(),
            "phy2log[0][3] is 7; valid values are -1 (empty) or 0..2");
  EXPECT_EQ(Placement::Create(3, {{0, 1, 2}, {0, 1}}).status().message(),
            "phy2log layer 1 has 2 slots but layer 0 has 3; every layer needs the same count");
  auto t = Topology::FromReplicas(8, 1, 2);
  EXPECT_EQ(Placement::Create(3, {{0, 1, 2}})->CheckFits(*t).message(),
            "placement has 3 slots per layer but the cluster has 8 (2 GPUs × 4 slots)");
}

TEST(Placement, WithLayerFromSwapsOneLayer) {
  auto a = Placement::Create(2, {{0, 1}, {0, 1}});
  auto b = Placement::Create(2, {{1, 0}, {1, 0}});
  const Placement mixed = a->WithLayerFrom(*b, 1);
  EXPECT_EQ(mixed.expert_at(0, 0), 0);
  EXPECT_EQ(mixed.expert_at(1, 0), 1);
  EXPECT_EQ(mixed.replicas(1, 0)[0], 1);
}

// Hand-computed: 2 GPUs × 2 slots; expert 0 (load 8) has two replicas on different GPUs.
TEST(Metrics, GpuLoadsBalancednessAndImbalance) {
  auto t = Topology::FromReplicas(4, 1, 2);
  auto p = Placement::Create(3, {{0, 1, 0, 2}, {0, 1, 2, 2}});
  LoadMatrix load(2, 3);
  load << 8, 2, 6,  //
      4, 4, 0;
  const LoadMatrix g = GpuLoads(load, *p, *t);
  EXPECT_DOUBLE_EQ(g(0, 0), 4 + 2);
  EXPECT_DOUBLE_EQ(g(0, 1), 4 + 6);
  EXPECT_DOUBLE_EQ(g(1, 0), 8);
  EXPECT_DOUBLE_EQ(g(1, 1), 0);
  // Σ mean / Σ max = (8 + 4) / (10 + 8)
  EXPECT_DOUBLE_EQ(Balancedness(g), 12.0 / 18.0);
  // mean over layers of (max − mean) / mean = ((10−8)/8 + (8−4)/4) / 2
  EXPECT_DOUBLE_EQ(ImbalanceRatio(g), (0.25 + 1.0) / 2);
  // Slots: expert 0's 8 split 4 + 4; layer 1's expert 2 has two replicas of 0 tokens.
  const LoadMatrix s = SlotLoads(load, *p);
  ASSERT_EQ(s.cols(), 4);
  EXPECT_DOUBLE_EQ(s(0, 0), 4);
  EXPECT_DOUBLE_EQ(s(0, 1), 2);
  EXPECT_DOUBLE_EQ(s(0, 2), 4);
  EXPECT_DOUBLE_EQ(s(0, 3), 6);
  EXPECT_DOUBLE_EQ(s(1, 0), 4);
  EXPECT_DOUBLE_EQ(s(1, 3), 0);
  // Sample spreads (n − 1), averaged over layers: GPUs 6, 10 → √8 and 8, 0 → √32; slots 4, 2,
  // 4, 6 (mean 4) → √(8 / 3) and 4, 4, 0, 0 → √(16 / 3).
  EXPECT_DOUBLE_EQ(Spread(g), (std::sqrt(8.0) + std::sqrt(32.0)) / 2);
  EXPECT_DOUBLE_EQ(Spread(s), (std::sqrt(8.0 / 3) + std::sqrt(16.0 / 3)) / 2);
  EXPECT_DOUBLE_EQ(ImbalanceRatio(s), ((6.0 - 4) / 4 + (4.0 - 2) / 2) / 2);
}

TEST(Metrics, NoLoadIsPerfectlyBalanced) {
  const LoadMatrix zero = LoadMatrix::Zero(3, 4);
  EXPECT_DOUBLE_EQ(Balancedness(zero), 1.0);
  EXPECT_DOUBLE_EQ(ImbalanceRatio(zero), 0.0);
}

}  // namespace
}  // namespace eplb
