// The scheduler: round rules, the link model's arithmetic, and the best strategy's distance
// from the lower bound.
#include "eplb/migrate/schedule.h"

#include <random>
#include <set>

#include <gtest/gtest.h>

#include "eplb/policy/deepseek.h"
#include "test_util.h"

namespace eplb {
namespace {

using testing::MakeTopology;
using testing::RandomLoad;
using testing::RandomPlacement;

constexpr double kNvlinkBw = 450e9, kNvlinkLat = 3e-6;

Flow MakeFlow(int src, int dst, int64_t bytes) {
  return Flow{src, dst, bytes, {}};
}

TEST(RoundDuration, OneFlowOnAnIdleLinkTakesLatencyPlusBytesOverBandwidth) {
  const LinkSpec link{kNvlinkBw, kNvlinkLat};
  const std::vector<Flow> flows = {MakeFlow(0, 1, 450'000'000)};
  EXPECT_DOUBLE_EQ(RoundDuration(flows, link, 4), kNvlinkLat + 1e-3);
}

TEST(RoundDuration, TwoFlowsFromOneSenderShareItsPort) {
  const LinkSpec link{kNvlinkBw, kNvlinkLat};
  const std::vector<Flow> out = {MakeFlow(0, 1, 450'000'000), MakeFlow(0, 2, 450'000'000)};
  EXPECT_NEAR(RoundDuration(out, link, 4), kNvlinkLat + 2e-3, 1e-12);
  const std::vector<Flow> incast = {MakeFlow(1, 0, 450'000'000), MakeFlow(2, 0, 450'000'000)};
  EXPECT_NEAR(RoundDuration(incast, link, 4), kNvlinkLat + 2e-3, 1e-12);
}

TEST(RoundDuration, SplitDuplexDirectionsDoNotInterfere) {
  const LinkSpec link{kNvlinkBw, kNvlinkLat};
  const std::vector<Flow> both = {MakeFlow(0, 1, 450'000'000), MakeFlow(1, 0, 450'000'000)};
  EXPECT_DOUBLE_EQ(RoundDuration(both, link, 2), kNvlinkLat + 1e-3);
}

TEST(RoundDuration, MaxMinFairSharingGivesLeftoverCapacityToTheOtherFlow) {
  // Rank 2 sends three flows (1/3 of its port each); rank 0's flow into rank 1 shares rank 1's
  // receive port with one of them and gets the remaining 2/3, finishing at 1.5 t. The busiest
  // port (rank 2's, 3 units) ends the round at 3 t.
  const LinkSpec link{1e9, 0};
  const std::vector<Flow> flows = {MakeFlow(0, 1, 1'000'000'000), MakeFlow(2, 1, 1'000'000'000),
                                   MakeFlow(2, 3, 1'000'000'000), MakeFlow(2, 4, 1'000'000'000)};
  EXPECT_NEAR(RoundDuration(flows, link, 5), 3.0, 1e-9);
  EXPECT_NEAR(RoundDuration(std::vector<Flow>{flows[0], flows[1]}, link, 5), 2.0, 1e-9);
}

void CheckRoundsRespectPorts(const Schedule& s) {
  for (int c = 0; c < kNumLinkClasses; ++c) {
    for (const Round& round : s.lanes[c]) {
      std::set<int> senders, receivers;
      std::set<std::pair<int, int>> pairs;
      for (const Flow& f : round.flows) {
        ASSERT_TRUE(pairs.insert({f.src_rank, f.dst_rank}).second) << "a pair twice in one round";
        if (s.strategy == ScheduleStrategy::kSingleBatch) continue;
        ASSERT_TRUE(senders.insert(f.src_rank).second) << "rank sends to two peers in a round";
        ASSERT_TRUE(receivers.insert(f.dst_rank).second)
            << "rank receives from two peers in a round";
      }
    }
  }
}

TEST(Schedule, EveryStrategyCoversEveryTransferOnceAndRespectsPorts) {
  std::mt19937_64 rng(99);
  for (int trial = 0; trial < 300; ++trial) {
    const Topology topo = MakeTopology(1 + trial % 4, 2 + trial % 5, 1 + trial % 6, 1'000'000);
    const int experts = std::max(1, topo.num_slots() - static_cast<int>(rng() % 4));
    const Placement a = RandomPlacement(rng, 1, topo.num_slots(), experts);
    const Placement b = RandomPlacement(rng, 1, topo.num_slots(), experts);
    auto plan = PlanLayer(0, a.phy2log(0), b.phy2log(0), topo,
                          trial % 2 ? SenderRule::kLocal : SenderRule::kVllm);
    ASSERT_TRUE(plan.ok());
    for (auto strategy : {ScheduleStrategy::kSingleBatch, ScheduleStrategy::kGreedyPairs,
                          ScheduleStrategy::kBest}) {
      const Schedule s = ScheduleTransfers(plan->transfers, topo, strategy);
      CheckRoundsRespectPorts(s);
      std::vector<int> seen(plan->transfers.size(), 0);
      for (int c = 0; c < kNumLinkClasses; ++c) {
        for (size_t r = 0; r < s.lanes[c].size(); ++r) {
          for (const Flow& f : s.lanes[c][r].flows) {
            int64_t bytes = 0;
            for (int32_t t : f.transfers) {
              ++seen[t];
              bytes += plan->transfers[t].bytes;
              ASSERT_EQ(plan->transfers[t].src_rank, f.src_rank);
              ASSERT_EQ(plan->transfers[t].dst_rank, f.dst_rank);
              ASSERT_EQ(static_cast<int>(plan->transfers[t].link), c);
              ASSERT_EQ(s.round_of_transfer[t], static_cast<int>(r));
            }
            ASSERT_EQ(bytes, f.bytes);
          }
        }
      }
      for (int n : seen) ASSERT_EQ(n, 1);
      if (strategy == ScheduleStrategy::kSingleBatch) {
        ASSERT_LE(s.num_rounds(), 2);
      }
      ASSERT_GE(s.makespan_s, s.lower_bound_s * (1 - 1e-12));
      ASSERT_EQ(s.bytes, plan->bytes);
    }
  }
}

TEST(Schedule, BestUsesAsManyRoundsAsTheBusiestPortHasExperts) {
  // Rank 0 sends three experts; ranks 1..3 each receive one from 0 and one from 4.
  const Topology topo = MakeTopology(1, 5, 2, 1'000'000);
  std::vector<Transfer> transfers;
  for (int dst = 1; dst <= 3; ++dst) {
    for (int src : {0, 4})
      transfers.push_back({dst, src, src * 2, dst, dst * 2, 1'000'000, LinkClass::kNvlink});
  }
  const Schedule best = ScheduleTransfers(transfers, topo, ScheduleStrategy::kBest);
  EXPECT_EQ(best.num_rounds(), 3);
  const Schedule batch = ScheduleTransfers(transfers, topo, ScheduleStrategy::kSingleBatch);
  EXPECT_EQ(batch.num_rounds(), 1);
  EXPECT_NEAR(best.lower_bound_s, 3e-6 + 3e6 / 450e9, 1e-15);
}

// The target: within 1.10x of the lower bound on DeepSeek-V3-like migrations (EP32,
// 288 slots, 44 MB experts, placements from two drifted load windows).
TEST(Schedule, BestIsWithinTenPercentOfTheLowerBoundOnDeepSeekMigrations) {
  std::mt19937_64 rng(2026);
  const Topology topo = MakeTopology(4, 8, 9);
  LoadMatrix load = RandomLoad(rng, 58, 256);
  auto before = RebalanceDeepSeek(load, 288, 8, 4, 32);
  for (int e = 0; e < 256; ++e)
    load.col(e) *= std::exp(std::normal_distribution<double>(0, 0.5)(rng));
  auto after = RebalanceDeepSeek(load, 288, 8, 4, 32);
  ASSERT_TRUE(before.ok() && after.ok());
  for (SenderRule rule : {SenderRule::kVllm, SenderRule::kLocal}) {
    auto plans = PlanMigration(*before, *after, topo, rule);
    ASSERT_TRUE(plans.ok());
    ASSERT_GT(plans->size(), 50u);
    double worst = 0;
    for (const LayerPlan& plan : *plans) {
      const Schedule s = ScheduleTransfers(plan.transfers, topo, ScheduleStrategy::kBest);
      worst = std::max(worst, s.makespan_s / s.lower_bound_s);
    }
    EXPECT_LE(worst, 1.10) << SenderRuleName(rule);
  }
}

TEST(Schedule, ParsesStrategyNames) {
  EXPECT_EQ(*ParseScheduleStrategy("greedy-pairs"), ScheduleStrategy::kGreedyPairs);
  EXPECT_EQ(ParseScheduleStrategy("fast").status().message(),
            "schedule is 'fast'; valid schedules: single-batch, greedy-pairs, best");
}

}  // namespace
}  // namespace eplb
