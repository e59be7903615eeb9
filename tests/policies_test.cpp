// The policy family: every policy gives valid placements, none beats the lower bound, and each
// shows the behaviour that defines it.
#include "eplb/policy/policies.h"

#include <algorithm>
#include <random>

#include <gtest/gtest.h>

#include "eplb/model/metrics.h"
#include "eplb/model/survivability.h"
#include "eplb/policy/balance_bound.h"
#include "eplb/policy/deepseek.h"
#include "test_util.h"

namespace eplb {
namespace {

using testing::MakeTopology;
using testing::RandomLoad;
using testing::RandomPlacement;

double MaxGpuLoad(const LoadMatrix& load, const Placement& p, const Topology& t, int layer) {
  return GpuLoads(load, p, t).row(layer).maxCoeff();
}

TEST(Policies, AllAreRegisteredAndGiveValidPlacementsThatNeverBeatTheBound) {
  std::mt19937_64 rng(31);
  for (const PolicyInfo& info : RegisteredPolicies()) {
    SCOPED_TRACE(info.name);
    for (int trial = 0; trial < 60; ++trial) {
      const Topology topo = MakeTopology(1 + trial % 2, 2 + trial % 3, 2 + trial % 3, 1'000'000);
      const int experts = std::max(2, topo.num_slots() - 1 - trial % 4);
      const int groups = experts % 2 == 0 ? 2 : 1;
      const LoadMatrix load = RandomLoad(rng, 3, experts);
      const Placement current = RandomPlacement(rng, 3, topo.num_slots(), experts);
      auto policy = MakePolicy(info.name);
      ASSERT_TRUE(policy.ok());
      auto p = (*policy)->Rebalance({load, topo, trial % 3 ? &current : nullptr, groups});
      ASSERT_TRUE(p.ok()) << p.status().message();
      ASSERT_EQ(p->num_slots(), topo.num_slots());
      ASSERT_EQ(p->num_experts(), experts);
      const auto bound = MaxGpuLoadLowerBound(load, topo);
      for (int l = 0; l < 3; ++l) {
        for (int e = 0; e < experts; ++e) ASSERT_GE(p->logcnt(l, e), 1);
        ASSERT_GE(MaxGpuLoad(load, *p, topo, l), bound[l] * (1 - 1e-12)) << "layer " << l;
      }
    }
  }
  // Which policies there are is docs/policies.md's table (PolicyDocs.TheDocsTableIsTheRegistrys).
  EXPECT_GE(RegisteredPolicies().size(), 9u);
}

TEST(Policies, FaultTolerantSurvivesAnySingleFailureWhereSlotsAllow) {
  std::mt19937_64 rng(77);
  FaultTolerantPolicy policy;
  for (int trial = 0; trial < 80; ++trial) {
    // Two replicas' room for every expert: slots ≥ 2 × experts, on 1..4 nodes.
    const int nodes = 1 + trial % 4, gpn = 1 + trial % 3 + (nodes == 1), per = 2 + trial % 4;
    const Topology topo = MakeTopology(nodes, gpn, per, 1'000'000);
    const int experts = std::max(1, topo.num_slots() / 2 - trial % 3);
    SCOPED_TRACE(::testing::Message() << nodes << " nodes x " << gpn << " GPUs x " << per
                                      << " slots, " << experts << " experts");
    const LoadMatrix load = RandomLoad(rng, 3, experts);
    auto p = policy.Rebalance({load, topo, nullptr, 1});
    ASSERT_TRUE(p.ok()) << p.status().message();
    const FailureDomain domain = nodes > 1 ? FailureDomain::kNode : FailureDomain::kGpu;
    const FailureExposure x = ExposureToFailure(load, *p, topo, domain);
    EXPECT_EQ(x.experts_lost_mean, 0);
    EXPECT_EQ(x.tokens_lost_worst, 0);
    // Any lost GPU is survived too: a node's loss covers each of its GPUs'.
    EXPECT_EQ(ExposureToFailure(load, *p, topo, FailureDomain::kGpu).experts_lost_mean, 0);
    // Against deepseek on the same load: never more exposed.
    auto d = DeepSeekPolicy().Rebalance({load, topo, nullptr, 1});
    ASSERT_TRUE(d.ok());
    EXPECT_LE(x.tokens_lost_mean, ExposureToFailure(load, *d, topo, domain).tokens_lost_mean);
  }
}

TEST(Policies, PlacingAroundLostGpusLeavesTheirSlotsEmpty) {
  std::mt19937_64 rng(5);
  for (const char* name : {"replicate-lpt", "fault-tolerant", "deepseek", "timeseries"}) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(PolicyHonoursLostRanks(name));
    auto policy = MakePolicy(name);
    ASSERT_TRUE(policy.ok());
    for (int trial = 0; trial < 60; ++trial) {
      const int nodes = 1 + trial % 3, gpn = 2 + trial % 3, per = 2 + trial % 3;
      const Topology topo = MakeTopology(nodes, gpn, per, 1000);
      std::vector<int> lost;
      for (int r = 0; r < topo.num_ranks(); ++r) {
        if (rng() % 4 == 0 && static_cast<int>(lost.size()) + 1 < topo.num_ranks())
          lost.push_back(r);
      }
      const int live_slots = (topo.num_ranks() - static_cast<int>(lost.size())) * per;
      const int experts = std::max(1, live_slots - static_cast<int>(rng() % 3));
      const LoadMatrix load = RandomLoad(rng, 2, experts);
      PolicyInput input{load, topo, nullptr, 1};
      input.lost_ranks = lost;
      auto p = (*policy)->Rebalance(input);
      ASSERT_TRUE(p.ok()) << p.status().message();
      for (int l = 0; l < 2; ++l) {
        const auto row = p->phy2log(l);
        for (int s = 0; s < topo.num_slots(); ++s) {
          const bool on_lost = std::count(lost.begin(), lost.end(), topo.rank_of_slot(s)) > 0;
          EXPECT_EQ(row[s] == kEmptySlot, on_lost) << "slot " << s;
        }
        for (int e = 0; e < experts; ++e) EXPECT_GE(p->logcnt(l, e), 1);
      }
    }
  }
  // The others refuse, and so does a rank outside the cluster.
  const Topology topo = MakeTopology(1, 4, 2);
  const LoadMatrix load = LoadMatrix::Constant(1, 4, 1.0);
  const std::vector<int> one = {1}, outside = {4};
  PolicyInput input{load, topo, nullptr, 1};
  input.lost_ranks = one;
  auto refused = StaticPolicy().Rebalance(input);
  ASSERT_FALSE(refused.ok());
  EXPECT_FALSE(PolicyHonoursLostRanks("static"));
  EXPECT_NE(refused.status().message().find("deepseek, replicate-lpt, timeseries, fault-tolerant"),
            std::string::npos)
      << refused.status().message();
  input.lost_ranks = outside;
  EXPECT_FALSE(ReplicateLptPolicy().Rebalance(input).ok());
}

// Around a lost node, deepseek is DeepSeek's policy on the nodes left, spread back over the
// real ranks; around GPUs lost inside a node, its policy on one node of the live GPUs.
TEST(Policies, DeepSeekAroundLostGpusIsItsPolicyOnTheLiveOnes) {
  std::mt19937_64 rng(11);
  const LoadMatrix load = RandomLoad(rng, 3, 16);
  const Topology topo = MakeTopology(4, 2, 3, 1000);  // 8 GPUs, 24 slots
  const std::vector<int> node2 = {4, 5};
  PolicyInput input{load, topo, nullptr, 4};
  input.lost_ranks = node2;
  auto around = DeepSeekPolicy().Rebalance(input);
  ASSERT_TRUE(around.ok()) << around.status().message();
  auto direct = RebalanceDeepSeek(load, 18, 4, 3, 6);
  ASSERT_TRUE(direct.ok());
  for (int l = 0; l < 3; ++l) {
    const auto row = around->phy2log(l), want = direct->phy2log(l);
    for (int s = 0; s < 24; ++s) {
      const int rank = s / 3;
      if (rank == 4 || rank == 5) {
        EXPECT_EQ(row[s], kEmptySlot);
      } else {
        const int compact = (rank < 4 ? rank : rank - 2) * 3 + s % 3;
        EXPECT_EQ(row[s], want[compact]) << "layer " << l << " slot " << s;
      }
    }
  }
  const std::vector<int> one = {3};
  input.lost_ranks = one;
  auto inside = DeepSeekPolicy().Rebalance(input);
  ASSERT_TRUE(inside.ok());
  auto flat = RebalanceDeepSeek(load, 21, 4, 1, 7);
  for (int s = 0; s < 24; ++s) {
    const int rank = s / 3;
    EXPECT_EQ(inside->phy2log(0)[s],
              rank == 3 ? kEmptySlot : flat->phy2log(0)[(rank < 3 ? rank : rank - 1) * 3 + s % 3]);
  }
}

TEST(Survivability, ExposureByHand) {
  // 2 nodes × 1 GPU × 2 slots, 3 experts: [0, 1 | 0, 2]. Losing GPU 0 loses expert 1 (load 2);
  // losing GPU 1 loses expert 2 (load 6); expert 0 (load 8) survives either.
  const Topology topo = MakeTopology(2, 1, 2, 1000);
  const Placement p = *Placement::Create(3, {{0, 1, 0, 2}});
  LoadMatrix load(1, 3);
  load << 8, 2, 6;
  const FailureExposure x = ExposureToFailure(load, p, topo, FailureDomain::kGpu);
  EXPECT_DOUBLE_EQ(x.tokens_lost_mean, (2.0 / 16 + 6.0 / 16) / 2);
  EXPECT_DOUBLE_EQ(x.tokens_lost_worst, 6.0 / 16);
  EXPECT_DOUBLE_EQ(x.experts_lost_mean, 1);
  EXPECT_DOUBLE_EQ(x.reload_bytes_mean, 1000);
}

TEST(Policies, StaticNeverMoves) {
  std::mt19937_64 rng(1);
  const Topology topo = MakeTopology(2, 2, 3);
  const Placement current = RandomPlacement(rng, 4, 12, 10);
  const LoadMatrix load = RandomLoad(rng, 4, 10);
  StaticPolicy policy;
  EXPECT_EQ(*policy.Rebalance({load, topo, &current}), current);
  EXPECT_EQ(*policy.Rebalance({load, topo}), *Placement::Initial(4, 10, 12));
}

TEST(Policies, IncrementalNeverMovesMoreThanItsBound) {
  std::mt19937_64 rng(2);
  for (int bound : {0, 1, 2, 5, 8}) {
    for (int trial = 0; trial < 40; ++trial) {
      const Topology topo = MakeTopology(2, 4, 4);
      const Placement current = RandomPlacement(rng, 3, 32, 24);
      const LoadMatrix load = RandomLoad(rng, 3, 24);
      IncrementalPolicy policy;
      PolicyInput input{load, topo, &current};
      input.tuning.max_moves_per_layer = bound;
      auto p = policy.Rebalance(input);
      ASSERT_TRUE(p.ok());
      for (int l = 0; l < 3; ++l) {
        int moved = 0;
        for (int s = 0; s < 32; ++s) moved += p->expert_at(l, s) != current.expert_at(l, s);
        ASSERT_LE(moved, bound);
        // It only ever improves the straggler.
        ASSERT_LE(MaxGpuLoad(load, *p, topo, l), MaxGpuLoad(load, current, topo, l) + 1e-9);
      }
    }
  }
}

TEST(Policies, MigrationAwareWithZeroWeightIsTheBalanceOptimumOnSmallCases) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 40; ++trial) {
    const Topology topo = MakeTopology(1, 2 + trial % 2, 2 + trial % 2 - (trial % 4 == 3), 1000);
    const int experts = 2 + static_cast<int>(rng() % 3);
    if (experts > topo.num_slots()) continue;
    const LoadMatrix load = RandomLoad(rng, 1, experts);
    const Placement current = RandomPlacement(rng, 1, topo.num_slots(), experts);
    MigrationAwarePolicy policy;
    PolicyInput input{load, topo, &current};
    input.tuning.weight = 0;
    auto p = policy.Rebalance(input);
    ASSERT_TRUE(p.ok());
    const std::vector<double> row(load.data(), load.data() + experts);
    EXPECT_NEAR(MaxGpuLoad(load, *p, topo, 0),
                testing::BalanceOptimumByEnumeration(row, topo.num_ranks(), topo.slots_per_gpu()),
                1e-9)
        << "trial " << trial;
  }
}

TEST(Policies, MigrationAwareKeepsThePlacementWhenMovingIsExpensive) {
  std::mt19937_64 rng(4);
  const Topology topo = MakeTopology(2, 4, 3);
  const Placement current = RandomPlacement(rng, 5, 24, 20);
  const LoadMatrix load = RandomLoad(rng, 5, 20);
  MigrationAwarePolicy policy;
  PolicyInput input{load, topo, &current};
  input.tuning.weight = 1e12;
  EXPECT_EQ(*policy.Rebalance(input), current);
  // Balance only: never worse than deepseek's placement, which is one of its candidates.
  input.tuning.weight = 0;
  auto balanced = policy.Rebalance(input);
  auto deepseek = RebalanceDeepSeek(load, 24, 1, 2, 8);
  for (int l = 0; l < 5; ++l) {
    EXPECT_LE(MaxGpuLoad(load, *balanced, topo, l), MaxGpuLoad(load, *deepseek, topo, l) + 1e-9);
  }
}

TEST(Policies, MigrationAwareMovesFewerExpertsThanDeepSeekOnDrift) {
  std::mt19937_64 rng(5);
  const Topology topo = MakeTopology(4, 8, 9);
  // A window of 1000 steps of 16k tokens × top-8 over 256 experts: ~500k assignments each.
  LoadMatrix load = RandomLoad(rng, 8, 256) * 300.0;
  auto first = RebalanceDeepSeek(load, 288, 8, 4, 32);
  for (int e = 0; e < 256; ++e)
    load.col(e) *= std::exp(std::normal_distribution<double>(0, 0.3)(rng));
  MigrationAwarePolicy aware;
  PolicyInput input{load, topo, &*first, 8};
  input.tuning.weight = 16;
  input.tuning.window_steps = 1000;  // the load is a window of 1000 steps, as in a run
  auto moved_aware = aware.Rebalance(input);
  auto moved_deepseek = RebalanceDeepSeek(load, 288, 8, 4, 32);
  int changed_aware = 0, changed_deepseek = 0;
  for (int l = 0; l < 8; ++l) {
    for (int s = 0; s < 288; ++s) {
      changed_aware += moved_aware->expert_at(l, s) != first->expert_at(l, s);
      changed_deepseek += moved_deepseek->expert_at(l, s) != first->expert_at(l, s);
    }
  }
  EXPECT_LT(changed_aware * 3, changed_deepseek);
  EXPECT_GT(Balancedness(GpuLoads(load, *moved_aware, topo)),
            0.98 * Balancedness(GpuLoads(load, *moved_deepseek, topo)));
}

TEST(Policies, ReplicateLptGivesTheHotExpertTheMostReplicas) {
  LoadMatrix load = LoadMatrix::Constant(1, 6, 10.0);
  load(0, 4) = 200;
  const Topology topo = MakeTopology(1, 3, 4);
  ReplicateLptPolicy policy;
  auto p = policy.Rebalance({load, topo});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->logcnt(0, 4), 7);  // all 6 redundant slots: 200/7 is still above 10
  // Heaviest first on the least loaded GPU: the 7 replicas of 28.6 spread 3/2/2.
  const auto gpu = GpuLoads(load, *p, topo);
  EXPECT_LT(gpu.row(0).maxCoeff() - gpu.row(0).minCoeff(), 200.0 / 7 + 1e-9);
}

TEST(Policies, TimeSeriesReplicatesWhatPeaksNotWhatSums) {
  // Chunk 1: expert 0 peaks; chunk 2: expert 1 peaks; expert 2 is steady and largest in sum.
  LoadMatrix c1(1, 3), c2(1, 3);
  c1 << 10, 0, 6;
  c2 << 0, 10, 6;
  const LoadMatrix sum = c1 + c2;
  const std::vector<LoadMatrix> chunks = {c1, c2};
  const Topology topo = MakeTopology(1, 5, 1);
  TimeSeriesPolicy ts;
  PolicyInput input{sum, topo};
  input.window_chunks = chunks;
  auto p = ts.Rebalance(input);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->logcnt(0, 0), 2);
  EXPECT_EQ(p->logcnt(0, 1), 2);
  EXPECT_EQ(p->logcnt(0, 2), 1);
  ReplicateLptPolicy by_sum;  // by the window's sum, the steady expert gets the extra replica
  EXPECT_EQ(by_sum.Rebalance({sum, topo})->logcnt(0, 2), 2);
}

TEST(BalanceBound, IsTheMeanOrTheHottestReplica) {
  LoadMatrix load(2, 4);
  load << 10, 10, 10, 10,  //
      100, 1, 1, 1;
  const Topology two = MakeTopology(1, 2, 3);
  EXPECT_DOUBLE_EQ(MaxGpuLoadLowerBound(load, two)[0], 20);    // the mean of 40 over 2 GPUs
  EXPECT_DOUBLE_EQ(MaxGpuLoadLowerBound(load, two)[1], 51.5);  // the mean, above 100/3
  // One slot per GPU: expert 0 cannot be split, so its GPU carries all 100.
  const Topology four = MakeTopology(1, 4, 1);
  EXPECT_DOUBLE_EQ(MaxGpuLoadLowerBound(load, four)[1], 100);
  EXPECT_NEAR(BalancednessUpperBound(load, four), (10 + 25.75) / (10 + 100), 1e-12);
}

}  // namespace
}  // namespace eplb
