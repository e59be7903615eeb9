// The transfer planner: vLLM's sender rule exactly, our local rule, and plans that reproduce
// the new placement on random inputs.
#include "eplb/migrate/transfer_plan.h"

#include <algorithm>
#include <random>
#include <set>
#include <tuple>

#include <gtest/gtest.h>

#include "test_util.h"

namespace eplb {
namespace {

using testing::MakeTopology;
using testing::RandomPlacement;

std::set<std::tuple<int, int, int>> Moves(const LayerPlan& plan) {
  std::set<std::tuple<int, int, int>> out;  // (src rank, dst rank, expert)
  for (const Transfer& t : plan.transfers) out.insert({t.src_rank, t.dst_rank, t.expert});
  return out;
}

// DESIGN.md §4: old [0,0,1,1,1] -> new [0,0,0,0,0], one slot per rank.
TEST(TransferPlan, VllmSenderRuleExample) {
  const Topology topo = MakeTopology(1, 5, 1);
  const std::vector<int32_t> old_row = {0, 0, 1, 1, 1}, new_row = {0, 0, 0, 0, 0};
  auto plan = PlanLayer(0, old_row, new_row, topo, SenderRule::kVllm);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(Moves(*plan), (std::set<std::tuple<int, int, int>>{{0, 2, 0}, {0, 4, 0}, {1, 3, 0}}));
  EXPECT_TRUE(plan->local_copies.empty());
}

TEST(TransferPlan, LocalRulePrefersASenderOnTheReceiversNode) {
  // 2 nodes × 2 GPUs × 1 slot. Expert 0 lives on rank 0 (node 0) and rank 3 (node 1); rank 2
  // (node 1) must get it. vLLM's rule takes the first sender, rank 0, across the NIC.
  const Topology topo = MakeTopology(2, 2, 1);
  const std::vector<int32_t> old_row = {0, 1, 2, 0}, new_row = {0, 1, 0, 2};
  auto vllm = PlanLayer(0, old_row, new_row, topo, SenderRule::kVllm);
  auto local = PlanLayer(0, old_row, new_row, topo, SenderRule::kLocal);
  ASSERT_TRUE(vllm.ok() && local.ok());
  EXPECT_TRUE(Moves(*vllm).count({0, 2, 0}));
  EXPECT_TRUE(Moves(*local).count({3, 2, 0}));
  // Expert 2 moves from rank 2 to rank 3 inside node 1 either way.
  EXPECT_EQ(local->bytes[LinkClass::kNic], 0);
  EXPECT_EQ(vllm->bytes[LinkClass::kNic], topo.expert_bytes());
}

TEST(TransferPlan, LocalRuleSpreadsReceiversOverSenders) {
  // Expert 0 on ranks 0 and 1; ranks 2..5 need it: each sender serves two.
  const Topology topo = MakeTopology(1, 6, 1);
  const std::vector<int32_t> old_row = {0, 0, 1, 2, 1, 2}, new_row = {1, 2, 0, 0, 0, 0};
  auto plan = PlanLayer(0, old_row, new_row, topo, SenderRule::kLocal);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  int from0 = 0, from1 = 0;
  for (const Transfer& t : plan->transfers) {
    if (t.expert == 0) (t.src_rank == 0 ? from0 : from1)++;
  }
  EXPECT_EQ(from0, 2);
  EXPECT_EQ(from1, 2);
}

TEST(TransferPlan, DuplicateDestinationsReceiveOnceThenCopy) {
  // Rank 1 (slots 2,3) needs expert 0 twice; it receives once and copies locally.
  const Topology topo = MakeTopology(1, 2, 2);
  const std::vector<int32_t> old_row = {0, 1, 2, 1}, new_row = {1, 2, 0, 0};
  auto plan = PlanLayer(0, old_row, new_row, topo, SenderRule::kLocal);
  ASSERT_TRUE(plan.ok());
  const auto to_rank1 =
      std::count_if(plan->transfers.begin(), plan->transfers.end(),
                    [](const Transfer& t) { return t.dst_rank == 1 && t.expert == 0; });
  EXPECT_EQ(to_rank1, 1);
  bool copied_after = false;
  for (const LocalCopy& c : plan->local_copies) {
    if (c.rank == 1 && c.expert == 0) copied_after = c.after_receive;
  }
  EXPECT_TRUE(copied_after);
  auto row = ApplyPlan(old_row, *plan, topo);
  ASSERT_TRUE(row.ok()) << row.status().message();
  EXPECT_EQ(*row, new_row);
}

TEST(TransferPlan, ExpertMovingWithinARankIsALocalCopy) {
  const Topology topo = MakeTopology(1, 2, 2);
  const std::vector<int32_t> old_row = {0, 1, 2, 3}, new_row = {1, 0, 2, 3};
  auto plan = PlanLayer(0, old_row, new_row, topo, SenderRule::kLocal);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->transfers.empty());
  ASSERT_EQ(plan->local_copies.size(), 2u);
  EXPECT_FALSE(plan->local_copies[0].after_receive);
  EXPECT_EQ(plan->written_slots[0], (std::vector<int32_t>{0, 1}));
  EXPECT_TRUE(plan->written_slots[1].empty());
}

TEST(TransferPlan, RejectsMismatchedShapesAndUnknownExperts) {
  const Topology topo = MakeTopology(1, 2, 2);
  EXPECT_EQ(PlanLayer(3, std::vector<int32_t>{0, 1, 2}, std::vector<int32_t>{0, 1, 2, 3}, topo,
                      SenderRule::kLocal)
                .status()
                .message(),
            "layer 3: old placement has 3 slots and new has 4; the cluster has 4");
  EXPECT_EQ(PlanLayer(0, std::vector<int32_t>{0, 1, 2, 2}, std::vector<int32_t>{0, 1, 2, 3}, topo,
                      SenderRule::kLocal)
                .status()
                .message(),
            "layer 0: expert 3 is in the new placement (slot 3) but nowhere in the old one");
  EXPECT_FALSE(ParseSenderRule("nearest").ok());
}

// The local rule's exact choice, replayed transfer by transfer by scanning every holder: on the
// receiver's node if any holds the expert, else the holder that has sent least over that link
// class so far in the layer; ties go to the receiver's rail, then to the lowest rank.
TEST(TransferPlan, LocalRulePicksTheLeastLoadedSenderAsAScanWould) {
  std::mt19937_64 rng(77);
  int checked = 0, remote = 0;
  for (int trial = 0; trial < 300; ++trial) {
    // Every tenth: DeepSeek-V3-like, or with 72 holders per expert (the planner's heap path).
    const bool large = trial % 10 == 0;
    const int nodes = large ? 16 : 1 + trial % 6, gpn = large ? 8 : 1 + trial % 8;
    const int per_rank = large ? 9 : 1 + trial % 4;
    const int experts = large ? (trial % 20 == 0 ? 256 : 16) : 2 + static_cast<int>(rng() % 24);
    const Topology topo = MakeTopology(nodes, gpn, per_rank);
    if (topo.num_slots() < experts) continue;
    const Placement old_p = RandomPlacement(rng, 1, topo.num_slots(), experts, 0.0);
    const Placement new_p = RandomPlacement(rng, 1, topo.num_slots(), experts, 0.0);
    auto plan = PlanLayer(0, old_p.phy2log(0), new_p.phy2log(0), topo, SenderRule::kLocal);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    std::vector<int64_t> sent[kNumLinkClasses] = {std::vector<int64_t>(topo.num_ranks(), 0),
                                                  std::vector<int64_t>(topo.num_ranks(), 0)};
    for (const Transfer& t : plan->transfers) {
      std::vector<int> holders;
      for (int r = 0; r < topo.num_ranks(); ++r) {
        for (int s = 0; s < per_rank; ++s) {
          if (old_p.expert_at(0, topo.first_slot_of_rank(r) + s) == t.expert) {
            holders.push_back(r);
            break;
          }
        }
      }
      const bool node_has_copy = std::any_of(holders.begin(), holders.end(),
                                             [&](int h) { return topo.same_node(h, t.dst_rank); });
      int best = -1;
      for (int src : holders) {
        if (node_has_copy && !topo.same_node(src, t.dst_rank)) continue;
        if (best < 0) {
          best = src;
          continue;
        }
        const auto link = static_cast<int>(topo.link_between(src, t.dst_rank));
        const int64_t a = sent[link][src], b = sent[link][best];
        const bool rail = src % gpn == t.dst_rank % gpn, best_rail = best % gpn == t.dst_rank % gpn;
        if (a < b || (a == b && rail && !best_rail)) best = src;
      }
      ASSERT_EQ(t.src_rank, best) << "trial " << trial << ", expert " << t.expert << " to rank "
                                  << t.dst_rank;
      sent[static_cast<int>(t.link)][t.src_rank] += t.bytes;
      ++checked;
      remote += t.link == LinkClass::kNic;
    }
  }
  EXPECT_GT(checked, 10000);
  EXPECT_GT(remote, 1000);
}

// vLLM's execute-test shapes (ranks, layers, slots per rank, experts) and larger ones.
TEST(TransferPlan, PlansReproduceTheNewPlacementOnRandomInputs) {
  struct Shape {
    int nodes, gpus_per_node, layers, per_rank, experts;
  };
  const std::vector<Shape> shapes = {{1, 2, 1, 2, 3},  {1, 2, 2, 3, 4},   {1, 2, 4, 8, 16},
                                     {1, 4, 1, 2, 6},  {1, 4, 2, 2, 5},   {1, 4, 8, 8, 16},
                                     {2, 4, 3, 4, 20}, {4, 8, 2, 9, 256}, {3, 2, 4, 5, 7}};
  std::mt19937_64 rng(1234);
  int checked = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const Shape& sh = shapes[trial % shapes.size()];
    const Topology topo = MakeTopology(sh.nodes, sh.gpus_per_node, sh.per_rank);
    const int slots = topo.num_slots();
    const double empty = trial % 5 == 0 ? 0.2 : 0.0;
    const Placement old_p = RandomPlacement(rng, sh.layers, slots, sh.experts, empty);
    const Placement new_p = RandomPlacement(rng, sh.layers, slots, sh.experts, empty);
    for (SenderRule rule : {SenderRule::kVllm, SenderRule::kLocal}) {
      auto plans = PlanMigration(old_p, new_p, topo, rule);
      ASSERT_TRUE(plans.ok()) << plans.status().message();
      std::vector<char> planned(static_cast<size_t>(sh.layers), 0);
      for (const LayerPlan& plan : *plans) {
        planned[plan.layer] = 1;
        const auto old_row = old_p.phy2log(plan.layer);
        auto row = ApplyPlan(old_row, plan, topo);
        ASSERT_TRUE(row.ok()) << row.status().message();
        ASSERT_TRUE(std::equal(row->begin(), row->end(), new_p.phy2log(plan.layer).begin()));
        std::set<std::pair<int, int>> received;
        for (const Transfer& t : plan.transfers) {
          ASSERT_TRUE(received.insert({t.dst_rank, t.expert}).second) << "received twice";
          ASSERT_EQ(t.link, topo.link_between(t.src_rank, t.dst_rank));
          // Only experts the receiver lacked travel.
          for (int s = 0; s < sh.per_rank; ++s) {
            ASSERT_NE(old_row[topo.first_slot_of_rank(t.dst_rank) + s], t.expert);
          }
        }
        if (rule == SenderRule::kLocal) {
          for (const Transfer& t : plan.transfers) {
            if (t.link != LinkClass::kNic) continue;
            // A NIC transfer only when the receiver's node had no copy.
            for (int s = 0; s < slots; ++s) {
              if (old_row[s] == t.expert) {
                ASSERT_FALSE(topo.same_node(topo.rank_of_slot(s), t.dst_rank));
              }
            }
          }
        }
        for (int r = 0; r < topo.num_ranks(); ++r) {
          for (int32_t s : plan.written_slots[r])
            ASSERT_NE(old_row[s], new_p.expert_at(plan.layer, s));
        }
        ++checked;
      }
      for (int l = 0; l < sh.layers; ++l) {
        if (!planned[l]) {
          ASSERT_TRUE(std::equal(old_p.phy2log(l).begin(), old_p.phy2log(l).end(),
                                 new_p.phy2log(l).begin()));
        }
      }
    }
  }
  EXPECT_GT(checked, 3000);
}

}  // namespace
}  // namespace eplb
