// A GPU lost during a rearrangement, on the host backend (real bytes): before anything is
// staged, in the middle of the rounds, or between commits, nothing hangs, every layer stays
// wholly old or wholly new, and the recovery that follows gives every expert a live replica,
// uses no slot of the lost GPU, copies from live replicas and reloads only the experts the lost
// GPU alone held. And the planner's part of it, on random shapes.
#include <atomic>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "eplb/migrate/forwarding_backend.h"
#include "eplb/migrate/host_backend.h"
#include "eplb/migrate/rearranger.h"
#include "eplb/migrate/transfer_plan.h"
#include "eplb/model/recovery.h"
#include "eplb/policy/policy.h"
#include "test_util.h"

namespace eplb {
namespace {

using testing::Drift;
using testing::EachLayerIsOneOf;
using testing::MakeTopology;
using testing::RandomPlacement;

constexpr size_t kExpertBytes = 256;

// Per layer, the experts every replica of which is on `lost`.
int OnlyOnLost(const Placement& p, const Topology& topo, int lost) {
  int count = 0;
  for (int l = 0; l < p.num_layers(); ++l) {
    for (int e = 0; e < p.num_experts(); ++e) {
      bool live = false;
      for (int32_t s : p.replicas(l, e)) live = live || topo.rank_of_slot(s) != lost;
      count += live ? 0 : 1;
    }
  }
  return count;
}

TEST(TransferPlan, LostRanksSendNothingAndTheirExpertsAreReloaded) {
  std::mt19937_64 rng(21);
  for (int trial = 0; trial < 200; ++trial) {
    const Topology topo = MakeTopology(1 + trial % 3, 2 + trial % 2, 2 + trial % 3);
    const int ranks = topo.num_ranks(), experts = std::max(2, topo.num_slots() / 2);
    const Placement old_p = RandomPlacement(rng, 1, topo.num_slots(), experts);
    const int lost = static_cast<int>(rng() % static_cast<uint64_t>(ranks));
    // A new row with the lost rank's slots empty and every expert once elsewhere.
    std::vector<int32_t> row(static_cast<size_t>(topo.num_slots()), kEmptySlot);
    std::vector<int> live_slots;
    for (int s = 0; s < topo.num_slots(); ++s) {
      if (topo.rank_of_slot(s) != lost) live_slots.push_back(s);
    }
    if (static_cast<int>(live_slots.size()) < experts) continue;
    std::shuffle(live_slots.begin(), live_slots.end(), rng);
    for (size_t i = 0; i < live_slots.size(); ++i) {
      row[static_cast<size_t>(live_slots[i])] = static_cast<int32_t>(i % experts);
    }
    const std::vector<int> lost_ranks = {lost};
    auto plan = PlanLayer(0, old_p.phy2log(0), row, topo, SenderRule::kLocal, lost_ranks);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    for (const Transfer& t : plan->transfers) {
      EXPECT_NE(t.src_rank, lost);
      EXPECT_NE(t.dst_rank, lost);
    }
    // A reload per (rank, expert) that needs an expert no live rank held.
    std::vector<char> held(static_cast<size_t>(experts), 0);
    for (int s = 0; s < topo.num_slots(); ++s) {
      if (topo.rank_of_slot(s) != lost) held[static_cast<size_t>(old_p.expert_at(0, s))] = 1;
    }
    size_t want = 0;
    for (int r = 0; r < ranks; ++r) {
      std::vector<char> seen(static_cast<size_t>(experts), 0);
      for (int s = topo.first_slot_of_rank(r); s < topo.first_slot_of_rank(r + 1); ++s) {
        const int32_t e = row[static_cast<size_t>(s)];
        if (e == kEmptySlot || e == old_p.expert_at(0, s) || held[static_cast<size_t>(e)] ||
            seen[static_cast<size_t>(e)])
          continue;
        seen[static_cast<size_t>(e)] = 1;
        ++want;
      }
    }
    EXPECT_EQ(plan->reloads.size(), want);
    EXPECT_EQ(plan->reload_bytes, static_cast<int64_t>(want) * topo.expert_bytes());
    for (const Reload& r : plan->reloads) EXPECT_FALSE(held[static_cast<size_t>(r.expert)]);
    auto applied = ApplyPlan(old_p.phy2log(0), *plan, topo);
    ASSERT_TRUE(applied.ok()) << applied.status().message();
    EXPECT_EQ(*applied, row);
  }
  // A target that writes to the lost rank is refused.
  const Topology topo = MakeTopology(1, 2, 2);
  const std::vector<int32_t> old_row = {0, 1, 2, 3}, bad = {0, 1, 3, 2};
  const std::vector<int> lost = {1};
  auto refused = PlanLayer(0, old_row, bad, topo, SenderRule::kLocal, lost);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("slot 2 of lost rank 1"), std::string::npos)
      << refused.status().message();
}

// The repair changes only what the loss forces: the lost GPUs' slots emptied, one live slot per
// lost expert (a free one, else a redundant replica), nothing else; so its plan reloads the lost
// experts and copies nothing.
TEST(Recovery, RepairChangesOnlyWhatTheLossForces) {
  std::mt19937_64 rng(17);
  int repaired_experts = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const Topology topo = MakeTopology(1 + trial % 3, 2 + trial % 3, 2 + trial % 2);
    const int ranks = topo.num_ranks(), per = topo.slots_per_gpu();
    std::vector<int> lost;
    for (int r = 0; r < ranks; ++r) {
      if (rng() % 3 == 0 && static_cast<int>(lost.size()) + 1 < ranks) lost.push_back(r);
    }
    const int live_slots = (ranks - static_cast<int>(lost.size())) * per;
    const int experts = std::max(1, live_slots - static_cast<int>(rng() % 4));
    const Placement current = RandomPlacement(rng, 2, topo.num_slots(), experts, 0.1);
    const LoadMatrix load = LoadMatrix::Random(2, experts).cwiseAbs() * 100;
    auto repaired = RepairAroundLostRanks(current, load, topo, lost);
    ASSERT_TRUE(repaired.ok()) << repaired.status().message();
    const auto is_lost = [&](int slot) {
      return std::binary_search(lost.begin(), lost.end(), topo.rank_of_slot(slot));
    };
    for (int l = 0; l < 2; ++l) {
      int missing = 0, changed = 0;
      for (int e = 0; e < experts; ++e) {
        bool live = false;
        for (int32_t s : current.replicas(l, e)) live = live || !is_lost(s);
        missing += live ? 0 : 1;
        EXPECT_GE(repaired->logcnt(l, e), 1);
      }
      for (int s = 0; s < topo.num_slots(); ++s) {
        if (is_lost(s)) {
          EXPECT_EQ(repaired->expert_at(l, s), kEmptySlot);
        } else if (repaired->expert_at(l, s) != current.expert_at(l, s)) {
          ++changed;
        }
      }
      EXPECT_EQ(changed, missing) << "trial " << trial << " layer " << l;
      repaired_experts += missing;
    }
    auto plans = PlanMigration(current, *repaired, topo, SenderRule::kLocal, lost);
    ASSERT_TRUE(plans.ok()) << plans.status().message();
    for (const LayerPlan& p : *plans) {
      EXPECT_TRUE(p.transfers.empty());
      EXPECT_TRUE(p.local_copies.empty());
    }
  }
  EXPECT_GT(repaired_experts, 0);
}

// Forwards to the host backend, and tells the foreground when the rounds are under way.
class WatchedBackend final : public ForwardingBackend {
 public:
  explicit WatchedBackend(HostBackend& inner) : ForwardingBackend(inner) {}
  Status ExecuteRound(const StagingTarget& t, const Round& r,
                      std::span<const Transfer> tr) override {
    ++rounds;
    // Give the foreground time to lose a rank while rounds are in flight.
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    return ForwardingBackend::ExecuteRound(t, r, tr);
  }
  Status ReloadFromBackup(const StagingTarget& t, std::span<const Reload> r) override {
    reloads += static_cast<int>(r.size());
    return ForwardingBackend::ReloadFromBackup(t, r);
  }
  std::atomic<int> rounds{0};
  std::atomic<int> reloads{0};
};

enum class Phase { kBeforeStaging, kMidRound, kBetweenCommits };

TEST(Recovery, AGpuLostInAnyPhaseLeavesLayersWholeAndRecoveryGivesEveryExpertALiveReplica) {
  std::mt19937_64 rng(8);
  int reloaded = 0;
  for (Phase phase : {Phase::kBeforeStaging, Phase::kMidRound, Phase::kBetweenCommits}) {
    SCOPED_TRACE(static_cast<int>(phase));
    for (int trial = 0; trial < 20; ++trial) {
      const Topology topo = MakeTopology(2, 3, 3);  // 6 GPUs, 18 slots
      const int layers = 6, experts = 12;
      const Placement old_p = RandomPlacement(rng, layers, topo.num_slots(), experts);
      const Placement new_p = Drift(rng, old_p, 0.3);
      HostBackend host(topo, layers, 2, kExpertBytes);
      host.Fill(old_p);
      WatchedBackend backend(host);
      RearrangerOptions options;
      options.staging_layers = 2;
      Rearranger rearranger(backend, topo, options);
      ASSERT_TRUE(rearranger.Start(old_p, new_p).ok());
      if (phase == Phase::kMidRound) {
        while (backend.rounds == 0 && rearranger.in_progress()) std::this_thread::yield();
      } else if (phase == Phase::kBetweenCommits) {
        while (rearranger.committed_layers() == 0 && rearranger.in_progress()) {
          ASSERT_TRUE(rearranger.OnStepBoundary().ok());
          std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
      }
      const int lost = static_cast<int>(rng() % 6);
      backend.LoseRank(lost);
      // A boundary may report the failed round once; then the rearrangement is over.
      if (rearranger.in_progress()) (void)rearranger.OnStepBoundary();
      rearranger.Cancel();
      ASSERT_FALSE(rearranger.in_progress());
      const Placement current = rearranger.placement();
      ASSERT_TRUE(EachLayerIsOneOf(current, old_p, new_p));
      const Status whole = host.Verify(current);
      ASSERT_TRUE(whole.ok()) << whole.message();

      // Recovery: the policy over the live GPUs, then the move, reloading what only `lost` held.
      const LoadMatrix load = LoadMatrix::Constant(layers, experts, 10.0) +
                              LoadMatrix::Random(layers, experts).cwiseAbs() * 100;
      const std::vector<int> lost_ranks = {lost};
      PolicyInput input{load, topo, &current, 1};
      input.lost_ranks = lost_ranks;
      auto target = (*MakePolicy("deepseek"))->Rebalance(input);
      ASSERT_TRUE(target.ok()) << target.status().message();
      ASSERT_TRUE(rearranger.Start(current, *target, lost_ranks).ok());
      const int expect_reloads = [&] {
        int n = 0;
        for (const LayerPlan& p : rearranger.plans()) n += static_cast<int>(p.reloads.size());
        return n;
      }();
      EXPECT_GE(expect_reloads, OnlyOnLost(current, topo, lost));
      while (rearranger.in_progress()) {
        auto committed = rearranger.OnStepBoundary();
        ASSERT_TRUE(committed.ok()) << committed.status().message();
        std::this_thread::yield();
      }
      EXPECT_EQ(rearranger.placement(), *target);
      EXPECT_EQ(backend.reloads, expect_reloads);
      reloaded += expect_reloads;
      for (int l = 0; l < layers; ++l) {
        for (int s = topo.first_slot_of_rank(lost); s < topo.first_slot_of_rank(lost + 1); ++s)
          EXPECT_EQ(target->expert_at(l, s), kEmptySlot);
      }
      // Every live slot holds its expert's weights, bit for bit: copies and reloads alike.
      const Status recovered = host.Verify(rearranger.placement());
      ASSERT_TRUE(recovered.ok()) << recovered.message();
    }
  }
  EXPECT_GT(reloaded, 0);  // the trials did lose experts' only replicas
}

}  // namespace
}  // namespace eplb
