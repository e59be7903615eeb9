// The splits of an expert's tokens among its replicas (engine/replica_dispatch.h): hand-computed
// cases, conservation and the statistics of the draws on random inputs.
#include "eplb/engine/replica_dispatch.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "eplb/model/placement.h"

namespace eplb {
namespace {

constexpr int32_t kA = 0, kB = 1, kC = 2;

std::vector<double> GpuSums(const std::vector<double>& slot_tokens, int per) {
  std::vector<double> sums(slot_tokens.size() / static_cast<size_t>(per), 0.0);
  for (size_t s = 0; s < slot_tokens.size(); ++s)
    sums[s / static_cast<size_t>(per)] += slot_tokens[s];
  return sums;
}

// Two GPUs of two slots: A alone on GPU 0, C alone on GPU 1, B on both.
const std::vector<int32_t> kRow = {kA, kB, kB, kC};

TEST(ReplicaDispatch, EvenGivesEveryReplicaAnEqualShare) {
  ReplicaDispatcher even(Dispatch::kEven, 1);
  std::vector<double> tokens;
  const std::vector<double> load = {10, 10, 2};
  EXPECT_EQ(even.Split(load, kRow, 2, {}, tokens), 0.0);
  EXPECT_EQ(tokens, (std::vector<double>{10, 5, 5, 2}));
}

// Water-filling by hand: GPU 0 starts at 10 (A), GPU 1 at 2 (C); B's 10 raise GPU 1 to 10
// (8 of them), then both to 11: B's parts are 1 and 9, its odds 0.1 and 0.9. Each assignment
// then draws its replica with those odds, so over many steps GPU 0 takes B's 1 on average.
TEST(ReplicaDispatch, LpLevelsTheGpusOfAnExpertsReplicas) {
  ReplicaDispatcher lp(Dispatch::kLp, 7);
  std::vector<double> tokens;
  const std::vector<double> load = {10, 10, 2};
  double sum_on_0 = 0;
  const int steps = 4000;
  for (int i = 0; i < steps; ++i) {
    lp.Split(load, kRow, 2, {}, tokens);
    EXPECT_EQ(tokens[0], 10);
    EXPECT_EQ(tokens[3], 2);
    EXPECT_EQ(tokens[1] + tokens[2], 10);
    sum_on_0 += tokens[1];
  }
  // Binomial(10, 0.1): mean 1, standard deviation 0.95; the mean of 4,000 draws is 1 ± 0.015.
  EXPECT_NEAR(sum_on_0 / steps, 1.0, 0.06);
  // With 10^6 assignments the draws hardly move the split: the GPUs end level.
  const std::vector<double> big = {1e6, 1e6, 2e5};
  lp.Split(big, kRow, 2, {}, tokens);
  const auto gpus = GpuSums(tokens, 2);
  EXPECT_NEAR(gpus[0], 1.1e6, 2e3);
  EXPECT_NEAR(gpus[1], 1.1e6, 2e3);
}

// Two replicated experts sharing a GPU: X on GPUs 0 and 1, Y on GPUs 1 and 2, 10^8 each. The
// LP's optimum puts 2·10^8 / 3 on every GPU (X gives GPU 1 a third, Y two thirds of theirs
// elsewhere); one pass of filling expert by expert stops at 6.25 / 6.875 / 6.875 · 10^7.
TEST(ReplicaDispatch, LpReachesTheOptimumWhenReplicatedExpertsShareAGpu) {
  ReplicaDispatcher lp(Dispatch::kLp, 9);
  std::vector<double> tokens;
  const std::vector<int32_t> row = {kA, kEmptySlot, kA, kB, kB, kEmptySlot};
  const std::vector<double> load = {1e8, 1e8};
  lp.Split(load, row, 2, {}, tokens);
  for (const double gpu : GpuSums(tokens, 2)) EXPECT_NEAR(gpu, 2e8 / 3, 1e5);
}

TEST(ReplicaDispatch, RandomDrawsEachAssignmentWithEqualOdds) {
  ReplicaDispatcher random(Dispatch::kRandom, 3);
  std::vector<double> tokens;
  // B on three slots of three GPUs: each takes Binomial(300, 1/3), mean 100, variance 66.7.
  const std::vector<int32_t> row = {kB, kA, kB, kC, kB, kEmptySlot};
  const std::vector<double> load = {5, 300, 7};
  const int steps = 3000;
  std::vector<double> sum(3, 0.0), sum_sq(3, 0.0);
  for (int i = 0; i < steps; ++i) {
    random.Split(load, row, 2, {}, tokens);
    EXPECT_EQ(tokens[0] + tokens[2] + tokens[4], 300);
    EXPECT_EQ(tokens[1], 5);
    EXPECT_EQ(tokens[3], 7);
    EXPECT_EQ(tokens[5], 0);
    for (int r = 0; r < 3; ++r) {
      sum[r] += tokens[2 * r];
      sum_sq[r] += tokens[2 * r] * tokens[2 * r];
    }
  }
  for (int r = 0; r < 3; ++r) {
    const double mean = sum[r] / steps, variance = sum_sq[r] / steps - mean * mean;
    EXPECT_NEAR(mean, 100.0, 0.6);  // 4 standard errors of the mean (0.15)
    EXPECT_NEAR(variance, 200.0 / 3, 8.0);
  }
  // The same seed draws the same split.
  ReplicaDispatcher a(Dispatch::kRandom, 11), b(Dispatch::kRandom, 11);
  std::vector<double> ta, tb;
  for (int i = 0; i < 5; ++i) {
    a.Split(load, row, 2, {}, ta);
    b.Split(load, row, 2, {}, tb);
    EXPECT_EQ(ta, tb);
  }
}

TEST(ReplicaDispatch, LostGpusTakeNothingAndAnExpertWithoutReplicasIsUnserved) {
  const std::vector<double> load = {10, 10, 2.5};
  const std::vector<char> lost = {0, 1};  // GPU 1 (B's second replica and C) is gone
  for (const Dispatch mode : {Dispatch::kEven, Dispatch::kRandom, Dispatch::kLp}) {
    ReplicaDispatcher d(mode, 5);
    std::vector<double> tokens;
    EXPECT_EQ(d.Split(load, kRow, 2, lost, tokens), 2.5) << DispatchName(mode);
    EXPECT_EQ(tokens, (std::vector<double>{10, 10, 0, 0})) << DispatchName(mode);
  }
}

// Random placements and loads (fractions included): every mode conserves each expert's load
// over its replicas, and lp's busiest GPU is never above even's by more than its draws' noise
// nor below the bound that unreplicated experts and the mean set.
TEST(ReplicaDispatch, EveryModeConservesTheLoadAndLpLevelsBestOnRandomInputs) {
  std::mt19937_64 rng(2026);
  for (int trial = 0; trial < 200; ++trial) {
    const int experts = 4 + static_cast<int>(rng() % 28), gpus = 2 + static_cast<int>(rng() % 7),
              per = 1 + static_cast<int>(rng() % 4);
    const int slots = gpus * per;
    if (slots < experts) continue;
    std::vector<int32_t> row(static_cast<size_t>(slots));
    for (int s = 0; s < slots; ++s) {
      row[s] = s < experts ? s : static_cast<int32_t>(rng() % static_cast<uint64_t>(experts));
    }
    std::shuffle(row.begin(), row.end(), rng);
    std::vector<double> load(static_cast<size_t>(experts));
    for (double& x : load) x = std::floor(std::exponential_distribution<double>(1e-5)(rng)) + 0.25;
    std::vector<int> replicas(static_cast<size_t>(experts), 0);
    for (const int32_t e : row) ++replicas[e];
    double max_even = 0, bound = 0;
    std::vector<double> fixed(static_cast<size_t>(gpus), 0.0);
    for (int s = 0; s < slots; ++s) {
      if (replicas[row[s]] == 1) fixed[s / per] += load[row[s]];
    }
    bound = std::max(*std::max_element(fixed.begin(), fixed.end()),
                     std::accumulate(load.begin(), load.end(), 0.0) / gpus);
    for (const Dispatch mode : {Dispatch::kEven, Dispatch::kRandom, Dispatch::kLp}) {
      ReplicaDispatcher d(mode, static_cast<uint64_t>(trial));
      std::vector<double> tokens;
      ASSERT_EQ(d.Split(load, row, per, {}, tokens), 0.0);
      std::vector<double> per_expert(static_cast<size_t>(experts), 0.0);
      for (int s = 0; s < slots; ++s) {
        ASSERT_GE(tokens[s], 0.0);
        per_expert[row[s]] += tokens[s];
      }
      for (int e = 0; e < experts; ++e) {
        EXPECT_NEAR(per_expert[e], load[e], 1e-9 * load[e]) << DispatchName(mode) << " " << e;
      }
      const auto gpu = GpuSums(tokens, per);
      const double max = *std::max_element(gpu.begin(), gpu.end());
      if (mode == Dispatch::kEven) max_even = max;
      if (mode == Dispatch::kLp) {
        // The draws' noise: a few standard deviations of the largest binomial, sqrt(n / 4).
        const double noise = 6 * std::sqrt(*std::max_element(load.begin(), load.end()) / 4) + 1;
        EXPECT_LE(max, max_even + noise) << "trial " << trial;
        EXPECT_GE(max, bound - noise) << "trial " << trial;
      }
    }
  }
}

}  // namespace
}  // namespace eplb
