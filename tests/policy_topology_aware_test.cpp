// SGLang's topology-aware placement (topology_aware.h). The first cases are SGLang's own unit
// tests (test/registered/unit/eplb/test_topology_aware.py at commit 2112426b), their data and
// assertions as they are; the Python ones (its public dispatch) are in
// python/tests/test_sglang_topology_aware.py. Then properties over random loads, and the
// `topology-aware` policy as runs use it.
#include "eplb/policy/topology_aware.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "eplb/model/metrics.h"
#include "test_util.h"

namespace eplb {
namespace {

using testing::MakeTopology;
using testing::RandomLoad;

// A [layers, sources, experts] count tensor, row-major.
struct Counts {
  int layers, ranks, experts;
  std::vector<double> v;
  Counts(int l, int r, int e) : layers(l), ranks(r), experts(e), v(size_t(l) * r * e, 0.0) {}
  double& at(int l, int s, int e) { return v[(size_t(l) * ranks + s) * experts + e]; }
};

RankCostMatrix Costs(int ranks, std::vector<double> values) {
  return {ranks, std::move(values)};
}

Result<TopologyAwareMaps> Rebalance(const Counts& c, const RankCostMatrix& costs,
                                    std::optional<int> physical = std::nullopt) {
  return RebalanceTopologyAware(c.v, c.layers, c.ranks, c.experts, costs, physical);
}

std::vector<int64_t> Layer(const std::vector<int64_t>& flat, int layer, int width) {
  return {flat.begin() + int64_t{layer} * width, flat.begin() + int64_t{layer + 1} * width};
}

// One layer's [sources, experts] counts as total load and [experts, ranks] communication.
struct LayerCost {
  std::vector<double> total, comm;
};
LayerCost Reduce(const std::vector<std::vector<double>>& counts, const RankCostMatrix& costs) {
  const int ranks = static_cast<int>(counts.size()), experts = static_cast<int>(counts[0].size());
  LayerCost out{std::vector<double>(experts, 0.0), std::vector<double>(size_t(experts) * ranks)};
  for (int s = 0; s < ranks; ++s) {
    for (int e = 0; e < experts; ++e) {
      out.total[e] += counts[s][e];
      for (int r = 0; r < ranks; ++r)
        out.comm[size_t(e) * ranks + r] += counts[s][e] * costs.at(s, r);
    }
  }
  return out;
}

double Max(const std::vector<double>& v) {
  return *std::max_element(v.begin(), v.end());
}
double SumSq(const std::vector<double>& v) {
  return std::inner_product(v.begin(), v.end(), v.begin(), 0.0);
}
double CommOf(const std::vector<int>& a, const std::vector<double>& comm, int ranks) {
  double sum = 0;
  for (size_t e = 0; e < a.size(); ++e) sum += comm[e * ranks + a[e]];
  return sum;
}

// A search whose work (cubic in the experts a layer) would run for minutes is refused before it
// starts, saying how large it is and what to change; one of the size of DeepSeek-V3's is not.
TEST(TopologyAwareSize, AWorkWithoutBoundIsRefusedBeforeItStarts) {
  const auto uniform = [](int ranks) {
    std::vector<double> costs(static_cast<size_t>(ranks) * ranks, 1.0);
    for (int r = 0; r < ranks; ++r) costs[static_cast<size_t>(r) * (ranks + 1)] = 0;
    return Costs(ranks, costs);
  };
  const Counts huge(1, 4, 4096);
  auto refused = Rebalance(huge, uniform(4));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("1 layers × 4096 items over 4 ranks"),
            std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("grows with the cube"), std::string::npos);
  EXPECT_TRUE(Rebalance(Counts(2, 32, 256), uniform(32)).ok());
}

// ---- SGLang's TestTopologyAwarePlacement ----

TEST(SglangTopologyAware, PrefersTheCheapestDestination) {
  Counts counts(1, 2, 4);
  counts.at(0, 0, 0) = counts.at(0, 0, 1) = 10;
  counts.at(0, 1, 2) = counts.at(0, 1, 3) = 10;
  auto maps = Rebalance(counts, Costs(2, {0, 5, 5, 0}));
  ASSERT_TRUE(maps.ok()) << maps.status().message();
  EXPECT_EQ(Layer(maps->phy2log, 0, 4), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(Layer(maps->log2phy, 0, 4), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(Layer(maps->logcnt, 0, 4), (std::vector<int64_t>{1, 1, 1, 1}));
}

TEST(SglangTopologyAware, MapsArePermutationsWithEqualCapacity) {
  const std::vector<std::vector<std::vector<double>>> data = {
      {{4, 0, 2, 1, 0, 0}, {0, 3, 0, 0, 5, 1}, {2, 1, 0, 0, 1, 4}},
      {{0, 1, 6, 0, 2, 0}, {3, 0, 0, 4, 0, 1}, {1, 0, 0, 2, 5, 0}}};
  Counts counts(2, 3, 6);
  for (int l = 0; l < 2; ++l)
    for (int s = 0; s < 3; ++s)
      for (int e = 0; e < 6; ++e) counts.at(l, s, e) = data[l][s][e];
  auto maps = Rebalance(counts, Costs(3, {0, 1, 3, 1, 0, 2, 3, 2, 0}));
  ASSERT_TRUE(maps.ok()) << maps.status().message();
  const std::vector<int64_t> all = {0, 1, 2, 3, 4, 5};
  for (int layer = 0; layer < 2; ++layer) {
    auto p2l = Layer(maps->phy2log, layer, 6), l2p = Layer(maps->log2phy, layer, 6);
    auto sorted_p2l = p2l, sorted_l2p = l2p;
    std::sort(sorted_p2l.begin(), sorted_p2l.end());
    std::sort(sorted_l2p.begin(), sorted_l2p.end());
    EXPECT_EQ(sorted_p2l, all);
    EXPECT_EQ(sorted_l2p, all);
    // Two physical experts per rank.
    for (int rank = 0; rank < 3; ++rank) {
      const int start = rank * 2, end = start + 2;
      EXPECT_EQ(
          std::count_if(l2p.begin(), l2p.end(), [&](int64_t s) { return s >= start && s < end; }),
          2);
    }
  }
}

TEST(SglangTopologyAware, IsDeterministic) {
  Counts counts(1, 2, 4);
  const double rows[2][4] = {{3, 3, 1, 1}, {1, 1, 3, 3}};
  for (int s = 0; s < 2; ++s)
    for (int e = 0; e < 4; ++e) counts.at(0, s, e) = rows[s][e];
  const RankCostMatrix costs = Costs(2, {0, 2, 2, 0});
  auto first = Rebalance(counts, costs), second = Rebalance(counts, costs);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->phy2log, second->phy2log);
  EXPECT_EQ(first->log2phy, second->log2phy);
  EXPECT_EQ(first->logcnt, second->logcnt);
}

TEST(SglangTopologyAware, TopologySwapsWithoutWorseningLoadBalance) {
  // The node-uniform seed assigns [0, 1] to rank 0 and [2, 3] to rank 1. The traffic is
  // reversed, so two swaps should make the placement local at equal rank loads.
  Counts counts(1, 2, 4);
  counts.at(0, 0, 2) = counts.at(0, 0, 3) = 10;
  counts.at(0, 1, 0) = counts.at(0, 1, 1) = 10;
  auto maps = Rebalance(counts, Costs(2, {0, 5, 5, 0}));
  ASSERT_TRUE(maps.ok());
  EXPECT_EQ(Layer(maps->phy2log, 0, 4), (std::vector<int64_t>{2, 3, 0, 1}));
}

TEST(SglangTopologyAware, TopologyDoesNotRegressNodeUniformCommunication) {
  Counts counts(1, 2, 4);
  const double row[4] = {10, 9, 8, 7};
  for (int e = 0; e < 4; ++e) counts.at(0, 0, e) = row[e];
  const RankCostMatrix costs = Costs(2, {0, 10, 10, 0});
  auto maps = Rebalance(counts, costs);
  ASSERT_TRUE(maps.ok());
  std::vector<int> destination(4);
  for (int rank = 0; rank < 2; ++rank)
    for (int k = 0; k < 2; ++k) destination[maps->phy2log[rank * 2 + k]] = rank;
  const std::vector<int> node_uniform = {0, 0, 1, 1};
  auto communication = [&](const std::vector<int>& dest) {
    double sum = 0;
    for (int s = 0; s < 2; ++s)
      for (int e = 0; e < 4; ++e) sum += counts.at(0, s, e) * costs.at(s, dest[e]);
    return sum;
  };
  EXPECT_LE(communication(destination), communication(node_uniform));
  std::vector<double> total(4);
  for (int e = 0; e < 4; ++e) total[e] = counts.at(0, 0, e) + counts.at(0, 1, e);
  const std::vector<double> candidate_load = RankLoads(destination, total, 2);
  const std::vector<double> node_uniform_load = {total[0] + total[1], total[2] + total[3]};
  EXPECT_LE(Max(candidate_load), Max(node_uniform_load));
}

TEST(SglangTopologyAware, LoadPhaseSpendsOnlyExplicitCommunicationBudget) {
  const RankCostMatrix costs = Costs(2, {0, 1, 1, 0});
  const LayerCost c = Reduce({{80, 20, 1, 0}, {1, 0, 10, 10}}, costs);
  const std::vector<int> seed = NodeUniformSeed(4, 2);
  const std::vector<double> seed_load = RankLoads(seed, c.total, 2);
  TopologySearch search;
  search.max_allowed_load = Max(seed_load);
  search.max_swaps = 10;
  search.max_comm_regression_ratio = 20.0;
  auto assignment = ImproveTopology(seed, c.total, c.comm, 2, search);
  ASSERT_TRUE(assignment.ok());
  EXPECT_LT(Max(RankLoads(*assignment, c.total, 2)), Max(seed_load));
  EXPECT_LE(CommOf(*assignment, c.comm, 2), CommOf(seed, c.comm, 2) * 21.0 + 1e-12);
}

TEST(SglangTopologyAware, SystemPhaseReservesSearchBudgetForCriticalRank) {
  const LayerCost c = Reduce({{28, 8, 23, 7}, {0, 8, 21, 10}}, Costs(2, {0, 1, 1, 0}));
  const std::vector<int> seed = NodeUniformSeed(4, 2);
  TopologySearch search;
  search.max_allowed_load = Max(RankLoads(seed, c.total, 2));
  search.max_swaps = 4;
  auto communication_only = ImproveTopology(seed, c.total, c.comm, 2, search);
  search.max_comm_regression_ratio = 1.0;
  auto system_aware = ImproveTopology(seed, c.total, c.comm, 2, search);
  ASSERT_TRUE(communication_only.ok() && system_aware.ok());
  EXPECT_LT(Max(RankLoads(*system_aware, c.total, 2)),
            Max(RankLoads(*communication_only, c.total, 2)));
}

TEST(SglangTopologyAware, SystemPhaseBreaksEqualPeakLoadTies) {
  // With three ranks, a first swap can leave the busiest rank unchanged while reducing the
  // other ranks' variance.
  const std::vector<double> total = {12, 8, 6, 4, 12, 8};
  const std::vector<double> communication(6 * 3, 0.0);
  const std::vector<int> seed = NodeUniformSeed(6, 3);
  const std::vector<double> seed_load = RankLoads(seed, total, 3);
  TopologySearch search;
  search.max_allowed_load = Max(seed_load);
  search.max_swaps = 1;
  search.max_comm_regression_ratio = 1.0;
  auto assignment = ImproveTopology(seed, total, communication, 3, search);
  ASSERT_TRUE(assignment.ok());
  const std::vector<double> candidate_load = RankLoads(*assignment, total, 3);
  EXPECT_LT(SumSq(candidate_load), SumSq(seed_load));
  EXPECT_EQ(Max(candidate_load), Max(seed_load));
}

void ExpectError(const Status& s, const std::string& words) {
  ASSERT_FALSE(s.ok()) << "expected an error with '" << words << "'";
  EXPECT_NE(s.message().find(words), std::string::npos) << s.message();
}

TEST(SglangTopologyAware, RejectsNegativeCommunicationBudget) {
  const LayerCost c = Reduce({{1, 1, 1, 1}, {1, 1, 1, 1}}, Costs(2, {0, 1, 1, 0}));
  TopologySearch search;
  search.max_comm_regression_ratio = -1.0;
  ExpectError(ImproveTopology(NodeUniformSeed(4, 2), c.total, c.comm, 2, search).status(),
              "non-negative");
}

TEST(SglangTopologyAware, RejectsReplicationUntilSupported) {
  Counts counts(1, 2, 4);
  std::fill(counts.v.begin(), counts.v.end(), 1.0);
  ExpectError(Rebalance(counts, Costs(2, {0, 0, 0, 0}), 6).status(), "no redundant experts");
}

TEST(SglangTopologyAware, RejectsInconsistentPhysicalExpertDimension) {
  Counts counts(1, 2, 4);
  std::fill(counts.v.begin(), counts.v.end(), 1.0);
  ExpectError(Rebalance(counts, Costs(2, {0, 0, 0, 0}), 2).status(), "must match");
}

TEST(SglangTopologyAware, RejectsNonzeroSelfCost) {
  Counts counts(1, 2, 4);
  std::fill(counts.v.begin(), counts.v.end(), 1.0);
  ExpectError(Rebalance(counts, Costs(2, {1, 1, 1, 1})).status(), "diagonal");
}

TEST(SglangTopologyAware, RejectsRankCostMatrixShapeMismatch) {
  Counts counts(1, 2, 4);
  std::fill(counts.v.begin(), counts.v.end(), 1.0);
  ExpectError(Rebalance(counts, Costs(3, std::vector<double>(9, 0.0))).status(), "does not match");
}

// ---- eplb's own ----

TEST(TopologyAware, RejectsWhatSglangRejectsNamingTheValues) {
  Counts counts(1, 2, 4);
  struct Case {
    std::vector<double> tokens;
    RankCostMatrix costs;
    std::optional<int> physical, local;
    std::string message;
  };
  std::vector<double> negative = counts.v;
  negative[5] = -1;
  const RankCostMatrix ok = Costs(2, {0, 1, 1, 0});
  const std::vector<Case> cases = {
      {negative, ok, {}, {}, "must be finite and non-negative: [0, 1, 1] is -1"},
      {counts.v, Costs(2, {0, 1, 1}), {}, {}, "must be square: 3 values for 2 ranks"},
      {counts.v, Costs(2, {0, -1, 1, 0}), {}, {}, "finite and non-negative: [0][1] is -1"},
      {counts.v, ok, 6, {}, "no redundant experts: num_physical_experts is 6 for 4"},
      {counts.v, ok, {}, 3, "num_local_physical_experts must equal"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    ExpectError(RebalanceTopologyAware(c.tokens, 1, 2, 4, c.costs, c.physical, c.local).status(),
                c.message);
  }
  Counts three(1, 2, 3);
  ExpectError(Rebalance(three, ok).status(), "divisible by ranks: 3 over 2 ranks");
}

// Over random source counts and costs: permutations, equal capacity, never more communication
// than the node-uniform layout and never a busier rank.
TEST(TopologyAware, RandomCountsNeverRegressTheNodeUniformLayout) {
  std::mt19937_64 rng(58);
  for (int trial = 0; trial < 60; ++trial) {
    const int ranks = 2 + trial % 4, per = 1 + trial % 3, experts = ranks * per, layers = 2;
    Counts counts(layers, ranks, experts);
    std::lognormal_distribution<double> skew(0, 1.2);
    for (double& x : counts.v) x = std::round(skew(rng) * 50);
    RankCostMatrix costs{ranks, std::vector<double>(size_t(ranks) * ranks, 0.0)};
    for (int s = 0; s < ranks; ++s)
      for (int d = 0; d < ranks; ++d)
        if (s != d) costs.cost[size_t(s) * ranks + d] = 1 + static_cast<double>(rng() % 9);
    auto maps = Rebalance(counts, costs);
    ASSERT_TRUE(maps.ok()) << maps.status().message();
    for (int l = 0; l < layers; ++l) {
      std::vector<std::vector<double>> rows(ranks, std::vector<double>(experts));
      for (int s = 0; s < ranks; ++s)
        for (int e = 0; e < experts; ++e) rows[s][e] = counts.at(l, s, e);
      const LayerCost c = Reduce(rows, costs);
      std::vector<int> dest(experts, -1);
      for (int slot = 0; slot < experts; ++slot) {
        const int64_t e = maps->phy2log[size_t(l) * experts + slot];
        ASSERT_TRUE(e >= 0 && e < experts);
        ASSERT_EQ(dest[e], -1) << "expert " << e << " placed twice";
        dest[e] = slot / per;
        EXPECT_EQ(maps->log2phy[size_t(l) * experts + e], slot);
      }
      const std::vector<int> seed = NodeUniformSeed(experts, ranks);
      EXPECT_LE(CommOf(dest, c.comm, ranks), CommOf(seed, c.comm, ranks) + 1e-9);
      EXPECT_LE(Max(RankLoads(dest, c.total, ranks)), Max(RankLoads(seed, c.total, ranks)) + 1e-9);
    }
  }
}

// The policy in runs: every expert placed, every slot filled, never a busier GPU than the
// node-uniform layout (vLLM's initial placement when slots equal experts).
TEST(TopologyAware, PolicyPlacesEveryExpertWithinTheNodeUniformPeak) {
  std::mt19937_64 rng(7);
  TopologyAwarePolicy policy;
  for (int trial = 0; trial < 60; ++trial) {
    const Topology topo = MakeTopology(1 + trial % 2, 2 + trial % 3, 2 + trial % 3, 1000);
    const int extra = trial % 3 == 0 ? 0 : 1 + trial % 4;
    const int experts = std::max(2, topo.num_slots() - extra);
    SCOPED_TRACE(::testing::Message() << topo.num_ranks() << " GPUs x " << topo.slots_per_gpu()
                                      << " slots, " << experts << " experts");
    const LoadMatrix load = RandomLoad(rng, 3, experts);
    auto p = policy.Rebalance({load, topo, nullptr, 1});
    ASSERT_TRUE(p.ok()) << p.status().message();
    ASSERT_EQ(p->num_slots(), topo.num_slots());
    for (int l = 0; l < 3; ++l) {
      for (int e = 0; e < experts; ++e) ASSERT_GE(p->logcnt(l, e), 1);
      for (int32_t e : p->phy2log(l)) ASSERT_NE(e, kEmptySlot);
    }
    if (experts == topo.num_slots()) {
      const Placement uniform = *Placement::Initial(3, experts, topo.num_slots());
      const auto mine = GpuLoads(load, *p, topo), seed = GpuLoads(load, uniform, topo);
      for (int l = 0; l < 3; ++l)
        EXPECT_LE(mine.row(l).maxCoeff(), seed.row(l).maxCoeff() * (1 + 1e-12)) << l;
    }
  }
}

// With slots equal to experts the policy is SGLang's algorithm on even sources and the links'
// costs; and lost GPUs are refused, as it cannot place around them.
TEST(TopologyAware, PolicyIsSglangsOnEvenSources) {
  std::mt19937_64 rng(3);
  const Topology topo = MakeTopology(2, 2, 3, 1000);
  const int ranks = 4, experts = 12;
  const LoadMatrix load = RandomLoad(rng, 2, experts);
  auto p = TopologyAwarePolicy().Rebalance({load, topo, nullptr, 1});
  ASSERT_TRUE(p.ok());
  Counts counts(2, ranks, experts);
  for (int l = 0; l < 2; ++l)
    for (int s = 0; s < ranks; ++s)
      for (int e = 0; e < experts; ++e) counts.at(l, s, e) = load(l, e) / ranks;
  // Any costs alike for every rank give the same placement; these sum exactly.
  const double nv = 1, nic = 9;
  auto maps = Rebalance(counts, Costs(4, {0, nv, nic, nic, nv, 0, nic, nic,  //
                                          nic, nic, 0, nv, nic, nic, nv, 0}));
  ASSERT_TRUE(maps.ok());
  for (int l = 0; l < 2; ++l) {
    const auto row = p->phy2log(l);
    EXPECT_EQ(std::vector<int64_t>(row.begin(), row.end()), Layer(maps->phy2log, l, experts));
  }
  const std::vector<int> lost = {1};
  PolicyInput input{load, topo, nullptr, 1};
  input.lost_ranks = lost;
  ExpectError(TopologyAwarePolicy().Rebalance(input).status(), "cannot place around lost GPUs");
}

}  // namespace
}  // namespace eplb
