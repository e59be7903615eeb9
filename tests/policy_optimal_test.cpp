// The exact balance optimum (policy/optimal.h) against brute force, the bounds below it and
// every policy above it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "eplb/policy/balance_bound.h"
#include "eplb/policy/optimal.h"
#include "eplb/policy/policy.h"
#include "test_util.h"

namespace eplb {
namespace {

Topology MakeTopology(int gpus, int per_gpu) {
  return *Topology::FromReplicas(gpus * per_gpu, 1, gpus);
}

std::vector<double> GpuLoads(std::span<const double> load, std::span<const int32_t> row,
                             int per_gpu) {
  std::vector<int> count(load.size(), 0);
  for (int32_t e : row) ++count[static_cast<size_t>(e)];
  std::vector<double> gpu(row.size() / static_cast<size_t>(per_gpu), 0.0);
  for (size_t s = 0; s < row.size(); ++s)
    gpu[s / static_cast<size_t>(per_gpu)] += load[static_cast<size_t>(row[s])] / count[row[s]];
  return gpu;
}

double MaxOf(const std::vector<double>& v) {
  return *std::max_element(v.begin(), v.end());
}

std::vector<double> RandomRow(std::mt19937_64& rng, int experts, int mode) {
  std::lognormal_distribution<double> lognormal(0, 1.2);
  std::vector<double> load(static_cast<size_t>(experts));
  for (int e = 0; e < experts; ++e) {
    load[static_cast<size_t>(e)] =
        mode == 0   ? std::round(lognormal(rng) * 50)
        : mode == 1 ? static_cast<double>(rng() % 4)                            // ties and zeros
                    : (e == 0 ? 1000.0 : static_cast<double>(1 + rng() % 20));  // one hot expert
  }
  return load;
}

TEST(OptimalLayer, EqualsBruteForceOnTinyLayers) {
  std::mt19937_64 rng(20261201);
  int proven = 0;
  for (int trial = 0; trial < 150; ++trial) {
    const int gpus = 2 + trial % 2, per_gpu = 2 + (trial / 2) % 2;  // 4, 6 or 9 slots
    const int slots = gpus * per_gpu;
    const int experts = std::max(2, std::min(slots == 9 ? 4 : 5, slots - 1 - trial % 3));
    const auto load = RandomRow(rng, experts, trial % 3);
    const Topology topo = MakeTopology(gpus, per_gpu);
    const LayerOptimum o = OptimalLayer(load, topo);
    ASSERT_TRUE(o.proven);
    ++proven;
    const double exact = testing::BalanceOptimumByEnumeration(load, gpus, per_gpu);
    EXPECT_NEAR(o.max_gpu_load, exact, 1e-9 * std::max(1.0, exact)) << "trial " << trial;
    // The placement returned is whole and has the cost reported.
    ASSERT_EQ(o.phy2log.size(), static_cast<size_t>(gpus * per_gpu));
    EXPECT_DOUBLE_EQ(MaxOf(GpuLoads(load, o.phy2log, per_gpu)), o.max_gpu_load);
  }
  EXPECT_EQ(proven, 150);
}

// The bounds never exceed the optimum, and no policy beats it.
TEST(OptimalLayer, BoundsBelowEveryPolicyAbove) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 60; ++trial) {
    const int gpus = 2 + trial % 3, per_gpu = 2 + trial % 4;
    const int experts = std::max(2, gpus * per_gpu - 1 - static_cast<int>(rng() % 4));
    const auto row = RandomRow(rng, experts, trial % 3);
    const Topology topo = MakeTopology(gpus, per_gpu);
    const LayerOptimum o = OptimalLayer(row, topo);
    LoadMatrix load(1, experts);
    for (int e = 0; e < experts; ++e) load(0, e) = row[static_cast<size_t>(e)];
    const double slack = 1 + 1e-12;
    EXPECT_LE(MaxGpuLoadLowerBound(load, topo)[0], o.max_gpu_load * slack) << "trial " << trial;
    if (o.proven) {
      EXPECT_NEAR(BestMaxGpuLoadBound(load, topo)[0], o.max_gpu_load, 1e-9 * o.max_gpu_load);
    }
    for (const PolicyInfo& info : RegisteredPolicies()) {
      auto placement = info.make()->Rebalance({load, topo});
      ASSERT_TRUE(placement.ok()) << info.name << ": " << placement.status().message();
      const double policy_max = MaxOf(GpuLoads(row, placement->phy2log(0), per_gpu));
      EXPECT_GE(policy_max * slack, o.max_gpu_load) << info.name << ", trial " << trial;
    }
  }
}

// For fixed replica weights, LowerBoundForCounts never exceeds the best packing.
TEST(OptimalLayer, CountBoundBelowTheBestPacking) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    const int gpus = 2 + trial % 2, per_gpu = 1 + trial % 3, n = gpus * per_gpu;  // 3^9 at most
    std::vector<double> w(static_cast<size_t>(n));
    for (double& x : w) x = static_cast<double>(rng() % 100);
    std::sort(w.begin(), w.end(), std::greater<>());
    // The best packing of exactly per_gpu per GPU, by enumeration.
    std::vector<int> gpu_of(static_cast<size_t>(n));
    double best = std::numeric_limits<double>::infinity();
    std::function<void(int)> place = [&](int i) {
      if (i == n) {
        std::vector<double> load(static_cast<size_t>(gpus), 0);
        std::vector<int> count(static_cast<size_t>(gpus), 0);
        for (int k = 0; k < n; ++k) {
          load[static_cast<size_t>(gpu_of[k])] += w[static_cast<size_t>(k)];
          ++count[static_cast<size_t>(gpu_of[k])];
        }
        if (std::all_of(count.begin(), count.end(), [&](int c) { return c == per_gpu; }))
          best = std::min(best, MaxOf(load));
        return;
      }
      for (int g = 0; g < gpus; ++g) {
        gpu_of[static_cast<size_t>(i)] = g;
        place(i + 1);
      }
    };
    place(0);
    EXPECT_LE(LowerBoundForCounts(w, gpus, per_gpu), best * (1 + 1e-12)) << "trial " << trial;
  }
}

TEST(OptimalLayer, TheMeanEndsTheSearchAndABudgetStopsIt) {
  // Perfectly divisible: DeepSeek's placement reaches the mean, proven without a search.
  const std::vector<double> even = {10, 10, 10, 10};
  const LayerOptimum o = OptimalLayer(even, MakeTopology(2, 2));
  EXPECT_TRUE(o.proven);
  EXPECT_EQ(o.nodes, 0);
  EXPECT_DOUBLE_EQ(o.max_gpu_load, 20);
  // A budget of one node: the incumbent comes back, not proven, still a whole placement.
  std::mt19937_64 rng(5);
  const auto load = RandomRow(rng, 20, 0);
  const LayerOptimum cut = OptimalLayer(load, MakeTopology(4, 6), {.node_budget = 1});
  EXPECT_FALSE(cut.proven);
  EXPECT_EQ(cut.phy2log.size(), 24u);
  EXPECT_DOUBLE_EQ(MaxOf(GpuLoads(load, cut.phy2log, 6)), cut.max_gpu_load);
}

// Layers where the mean and the hottest replica say too little, each ruled out by one of the
// bound's tests (balance_bound.h), and the bound reaching the optimum there.
TEST(BalanceBound, RulesOutWhatTheMeanAndTheHottestReplicaCannot) {
  struct Case {
    const char* why;
    std::vector<double> load;
    int gpus, per_gpu;
    double optimum, mean_or_hottest;
  };
  const std::vector<Case> cases = {
      {"(4) no spare slot: the heaviest with the two lightest",
       {586, 408, 241, 168, 147, 96, 60, 49, 32},
       3,
       3,
       667,
       1787.0 / 3},
      {"(3) two GPUs of two: 100s cannot share, each takes a partner",
       {100, 100, 100, 1},
       2,
       2,
       200,
       150.5},
      {"(3) k = 2: the hottest replica's partner", {300, 40, 30, 20, 10, 5}, 4, 2, 120, 101.25},
      {"(2)/(3) three hot replicas on three GPUs of two",
       {100, 90, 80, 10, 10},
       3,
       2,
       100,
       290.0 / 3},
  };
  for (const Case& c : cases) {
    const LayerOptimum o = OptimalLayer(c.load, MakeTopology(c.gpus, c.per_gpu));
    ASSERT_TRUE(o.proven) << c.why;
    ASSERT_DOUBLE_EQ(o.max_gpu_load, c.optimum) << c.why;
    const double bound = LayerMaxGpuLoadLowerBound(c.load, c.gpus, c.per_gpu);
    EXPECT_LE(bound, c.optimum) << c.why;
    EXPECT_GE(bound, c.optimum * (1 - 2 * kBoundTolerance)) << c.why;
    EXPECT_GT(bound, c.mean_or_hottest * 1.02) << c.why;
  }
}

// The property: on random small layers the bound never exceeds the exact optimum, and equals it
// (to the bisection's tolerance) on most. Printed: how often, the mean and the worst ratio.
TEST(BalanceBound, NeverAboveTheOptimumAndMostlyEqual) {
  std::mt19937_64 rng(20261206);
  int layers = 0, equal = 0;
  double sum = 0, worst = 1;
  for (int trial = 0; trial < 400; ++trial) {
    const int gpus = 2 + static_cast<int>(rng() % 3), per_gpu = 1 + static_cast<int>(rng() % 5);
    const int slots = gpus * per_gpu;
    const int experts = std::max(1, slots - static_cast<int>(rng() % (slots / 2 + 1)));
    std::lognormal_distribution<double> lognormal(0, trial % 3 == 0 ? 0.3 : trial % 3);
    std::vector<double> load(static_cast<size_t>(experts));
    for (double& x : load) x = std::round(lognormal(rng) * 100);
    const LayerOptimum o =
        OptimalLayer(load, MakeTopology(gpus, per_gpu), {.node_budget = 5'000'000});
    if (!o.proven || o.max_gpu_load <= 0) continue;
    const double bound = LayerMaxGpuLoadLowerBound(load, gpus, per_gpu);
    ASSERT_LE(bound, o.max_gpu_load * (1 + 1e-12)) << "trial " << trial;
    const double ratio = bound / o.max_gpu_load;
    ++layers;
    equal += ratio >= 1 - 2 * kBoundTolerance;
    sum += ratio;
    worst = std::min(worst, ratio);
  }
  std::printf(
      "bound vs exact optimum on %d small layers: equal on %d (%.0f%%), mean %.4f, "
      "worst %.4f\n",
      layers, equal, 100.0 * equal / layers, sum / layers, worst);
  EXPECT_GE(layers, 350);
  EXPECT_GE(equal, layers / 2);
  EXPECT_GE(sum / layers, 0.985);
}

}  // namespace
}  // namespace eplb
