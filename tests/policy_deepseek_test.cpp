// Golden and property tests of the `deepseek` policy against DeepSeek's reference eplb.py.
#include "eplb/policy/deepseek.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <thread>
#include <tuple>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "eplb/model/metrics.h"
#include "policy/parallel_for.h"
#include "policy/torch_sort.h"
#include "test_util.h"

namespace eplb {
namespace {

using testing::DataPath;
using testing::RandomLoad;
using testing::ReadFile;

LoadMatrix ToLoad(const std::vector<std::vector<double>>& rows) {
  LoadMatrix m(static_cast<Eigen::Index>(rows.size()), static_cast<Eigen::Index>(rows[0].size()));
  for (size_t l = 0; l < rows.size(); ++l) {
    for (size_t e = 0; e < rows[l].size(); ++e) m(l, e) = rows[l][e];
  }
  return m;
}

std::vector<std::vector<int32_t>> Rows(const Placement& p) {
  std::vector<std::vector<int32_t>> out;
  for (int l = 0; l < p.num_layers(); ++l)
    out.emplace_back(p.phy2log(l).begin(), p.phy2log(l).end());
  return out;
}

std::vector<std::vector<int>> Logcnt(const Placement& p) {
  std::vector<std::vector<int>> out(p.num_layers());
  for (int l = 0; l < p.num_layers(); ++l) {
    for (int e = 0; e < p.num_experts(); ++e) out[l].push_back(p.logcnt(l, e));
  }
  return out;
}

TEST(DeepSeekPolicy, ReadmeExample) {
  const LoadMatrix load = ToLoad({{90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86},
                                  {20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27}});
  auto p = RebalanceDeepSeek(load, 16, 4, 2, 8);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(Rows(*p), (std::vector<std::vector<int32_t>>{
                          {5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1},
                          {7, 10, 6, 8, 6, 11, 8, 9, 2, 4, 5, 1, 5, 0, 3, 1}}));
  EXPECT_EQ(Logcnt(*p), (std::vector<std::vector<int>>{{1, 2, 1, 1, 2, 2, 1, 1, 1, 1, 2, 1},
                                                       {1, 2, 1, 1, 1, 2, 2, 1, 2, 1, 1, 1}}));
}

// log2phy as the reference builds it: row (layer, expert) holds the expert's slots by replica
// rank, padded with -1 to the call's largest replica count.
std::vector<std::vector<std::vector<int32_t>>> Log2Phy(const RankedPlacement& r) {
  const Placement& p = r.placement;
  std::vector<std::vector<std::vector<int32_t>>> out(
      p.num_layers(),
      std::vector<std::vector<int32_t>>(p.num_experts(), std::vector<int32_t>(p.max_logcnt(), -1)));
  for (int l = 0; l < p.num_layers(); ++l) {
    for (int s = 0; s < p.num_slots(); ++s) {
      out[l][p.phy2log(l)[s]][r.replica_rank[static_cast<size_t>(l) * p.num_slots() + s]] = s;
    }
  }
  return out;
}

// Every output of the reference, compared element for element, on the cases of `file`.
int CheckReferenceCases(const std::string& file) {
  const auto doc = nlohmann::json::parse(ReadFile(DataPath(file)));
  int checked = 0;
  for (const auto& c : doc["cases"]) {
    const auto load = ToLoad(c["load"].get<std::vector<std::vector<double>>>());
    auto r = RebalanceDeepSeekRanked(load, c["replicas"], c["groups"], c["nodes"], c["gpus"]);
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (!r.ok()) continue;
    SCOPED_TRACE(::testing::Message()
                 << file << " case " << checked << ": " << load.rows() << "x" << load.cols()
                 << " replicas " << c["replicas"] << " " << c["policy"]);
    EXPECT_EQ(Rows(r->placement), c["phy2log"].get<std::vector<std::vector<int32_t>>>());
    EXPECT_EQ(Logcnt(r->placement), c["logcnt"].get<std::vector<std::vector<int>>>());
    EXPECT_EQ(Log2Phy(*r), c["log2phy"].get<std::vector<std::vector<std::vector<int32_t>>>>());
    // The plain entry point returns the same placement.
    auto plain = RebalanceDeepSeek(load, c["replicas"], c["groups"], c["nodes"], c["gpus"]);
    EXPECT_TRUE(plain.ok() && Rows(*plain) == Rows(r->placement));
    ++checked;
  }
  return checked;
}

// 33 cases produced by running the reference itself on continuous loads.
TEST(DeepSeekPolicy, ReferenceCases) {
  EXPECT_EQ(CheckReferenceCases("deepseek-eplb-cases.json"), 33);
}

// 12 cases of integer loads full of ties (one all zero), where the reference's outputs follow
// the order torch's unstable sort leaves equal weights in, rows longer than 16 included.
TEST(DeepSeekPolicy, ReferenceCasesWithTies) {
  EXPECT_EQ(CheckReferenceCases("deepseek-eplb-tie-cases.json"), 12);
}

// vLLM's test_eplb_algo.py invariants.
TEST(DeepSeekPolicy, SingleHotExpertGetsMostReplicas) {
  LoadMatrix load = LoadMatrix::Constant(1, 8, 10.0);
  load(0, 3) = 1000.0;
  auto p = RebalanceDeepSeek(load, 16, 1, 1, 4);
  ASSERT_TRUE(p.ok());
  for (int e = 0; e < 8; ++e) {
    if (e != 3) {
      EXPECT_GT(p->logcnt(0, 3), p->logcnt(0, e));
    }
  }
  EXPECT_EQ(p->logcnt(0, 3), 9);  // all 8 redundant slots go to the hot expert
}

TEST(DeepSeekPolicy, EveryLayerUsesEverySlot) {
  std::mt19937_64 rng(7);
  const LoadMatrix load = RandomLoad(rng, 5, 24);
  auto p = RebalanceDeepSeek(load, 32, 4, 2, 8);
  ASSERT_TRUE(p.ok());
  for (int l = 0; l < 5; ++l) {
    int total = 0;
    for (int e = 0; e < 24; ++e) total += p->logcnt(l, e);
    EXPECT_EQ(total, 32);
  }
}

TEST(DeepSeekPolicy, GlobalFallbackWhenGroupsDoNotDivideByNodes) {
  std::mt19937_64 rng(3);
  const LoadMatrix load = RandomLoad(rng, 3, 30);
  // 3 groups over 2 nodes: not divisible, so the global policy (1 group, 1 node) applies.
  auto fallback = RebalanceDeepSeek(load, 40, 3, 2, 8);
  auto global = RebalanceDeepSeek(load, 40, 1, 1, 8);
  ASSERT_TRUE(fallback.ok() && global.ok());
  EXPECT_EQ(*fallback, *global);
}

TEST(DeepSeekPolicy, UniformLoadGivesOneReplicaEach) {
  const LoadMatrix load = LoadMatrix::Constant(2, 16, 5.0);
  auto p = RebalanceDeepSeek(load, 16, 4, 2, 8);
  ASSERT_TRUE(p.ok());
  for (int l = 0; l < 2; ++l) {
    for (int e = 0; e < 16; ++e) EXPECT_EQ(p->logcnt(l, e), 1);
  }
}

TEST(DeepSeekPolicy, RejectsImpossibleInputs) {
  const LoadMatrix load = LoadMatrix::Constant(2, 12, 1.0);
  auto msg = [](const Result<Placement>& r) {
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_EQ(msg(RebalanceDeepSeek(load, 18, 4, 2, 8)),
            "replicas is 18; it must be a positive multiple of GPUs (8)");
  EXPECT_EQ(msg(RebalanceDeepSeek(load, 16, 6, 3, 8)),
            "GPUs is 8; it must be a positive multiple of nodes (3)");
  EXPECT_EQ(msg(RebalanceDeepSeek(load, 8, 4, 2, 8)),
            "replicas is 8 but the load has 12 experts; every expert needs at least one replica");
  EXPECT_EQ(msg(RebalanceDeepSeek(load, 16, 8, 2, 8)),
            "the load has 12 experts, which do not divide into 8 groups; experts must be a "
            "multiple of groups");
  LoadMatrix bad = load;
  bad(1, 4) = -3;
  EXPECT_EQ(msg(RebalanceDeepSeek(bad, 16, 4, 2, 8)),
            "load of layer 1, expert 4 is -3; loads must be finite and non-negative");
  bad(1, 4) = std::numeric_limits<double>::quiet_NaN();
  EXPECT_NE(msg(RebalanceDeepSeek(bad, 16, 4, 2, 8)).find("finite"), std::string::npos);
  EXPECT_EQ(msg(RebalanceDeepSeek(LoadMatrix(0, 12), 16, 4, 2, 8)), "load has no layers");
}

// Thousands of random shapes: valid placements, P/G slots per GPU, every expert replicated,
// hierarchical results keep each expert's replicas on one node, and the same input gives the
// same output.
TEST(DeepSeekPolicy, PropertiesOverRandomShapes) {
  std::mt19937_64 rng(20261129);
  int hierarchical = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    int nodes = 1 + static_cast<int>(rng() % 4);
    int gpus = nodes * (1 + static_cast<int>(rng() % 4));
    int groups = 1 + static_cast<int>(rng() % 8);
    int experts = groups * (1 + static_cast<int>(rng() % 6));
    const int per_gpu = (experts + gpus - 1) / gpus + static_cast<int>(rng() % 3);
    int replicas = per_gpu * gpus;
    const int layers = 1 + static_cast<int>(rng() % 3);
    LoadMatrix load = RandomLoad(rng, layers, experts);
    if (trial % 10 == 0) load.setZero();
    if (trial % 10 == 1) load.col(0).setZero();
    auto p = RebalanceDeepSeek(load, replicas, groups, nodes, gpus);
    ASSERT_TRUE(p.ok()) << p.status().message();
    ASSERT_EQ(p->num_slots(), replicas);
    ASSERT_EQ(p->num_layers(), layers);
    const bool is_hier = groups % nodes == 0;
    hierarchical += is_hier;
    for (int l = 0; l < layers; ++l) {
      int total = 0;
      for (int e = 0; e < experts; ++e) {
        ASSERT_GE(p->logcnt(l, e), 1);
        total += p->logcnt(l, e);
        if (is_hier) {
          std::set<int> nodes_of_expert;
          for (int s : p->replicas(l, e)) nodes_of_expert.insert(s / (replicas / nodes));
          ASSERT_EQ(nodes_of_expert.size(), 1u) << "expert " << e << " spans nodes";
        }
      }
      ASSERT_EQ(total, replicas);
      for (int s = 0; s < replicas; ++s) ASSERT_NE(p->expert_at(l, s), kEmptySlot);
    }
    auto again = RebalanceDeepSeek(load, replicas, groups, nodes, gpus);
    ASSERT_EQ(*p, *again);
  }
  EXPECT_GT(hierarchical, 500);
}

// Replication never makes the straggler worse than no replication with the same packing input.
TEST(DeepSeekPolicy, RedundantExpertsImproveBalance) {
  std::mt19937_64 rng(11);
  const LoadMatrix load = RandomLoad(rng, 4, 64);
  auto topo_plain = Topology::FromReplicas(64, 2, 16);
  auto topo_redundant = Topology::FromReplicas(96, 2, 16);
  auto plain = RebalanceDeepSeek(load, 64, 8, 2, 16);
  auto redundant = RebalanceDeepSeek(load, 96, 8, 2, 16);
  ASSERT_TRUE(plain.ok() && redundant.ok());
  EXPECT_GT(Balancedness(GpuLoads(load, *redundant, *topo_redundant)),
            Balancedness(GpuLoads(load, *plain, *topo_plain)));
}

// The policy orders weights by their bits; a -0.0 load (valid: it is >= 0) must order as 0.
TEST(DeepSeekPolicy, NegativeZeroLoadIsZero) {
  LoadMatrix zero(1, 8), negative(1, 8);
  zero << 5, 0, 3, 0, 9, 1, 0, 2;
  negative << 5, -0.0, 3, -0.0, 9, 1, -0.0, 2;
  auto a = RebalanceDeepSeek(zero, 12, 4, 2, 4);
  auto b = RebalanceDeepSeek(negative, 12, 4, 2, 4);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
}

// vLLM's DefaultEplbPolicy exposes the two steps; worked by hand. Packing {9, 1, 5, 5} in two:
// 9 and the first 5 open the packs, the second 5 joins the lighter one, 1 fills the other.
// Replicating {6, 2, 3} into 5 slots: 6 beats 3 (its load per replica), then 6/2 ties 3 and
// the first index wins. A row of zeros fills the packs in order (every pack weighs the same).
TEST(DeepSeekSteps, PackingAndReplicationByHand) {
  const std::vector<float> pack_weight = {9, 1, 5, 5, 0, 0, 0, 0};
  auto packing = DeepSeekBalancedPacking(pack_weight, 2, 2);
  ASSERT_TRUE(packing.ok()) << packing.status().message();
  EXPECT_EQ(packing->pack_index, (std::vector<int32_t>{0, 0, 1, 1, 0, 0, 1, 1}));
  EXPECT_EQ(packing->rank_in_pack, (std::vector<int32_t>{0, 1, 0, 1, 0, 1, 0, 1}));

  const std::vector<float> replicate_weight = {6, 2, 3};
  auto replication = DeepSeekReplicateExperts(replicate_weight, 1, 5);
  ASSERT_TRUE(replication.ok()) << replication.status().message();
  EXPECT_EQ(replication->phy2log, (std::vector<int32_t>{0, 1, 2, 0, 0}));
  EXPECT_EQ(replication->rank, (std::vector<int32_t>{0, 0, 0, 1, 2}));
  EXPECT_EQ(replication->logcnt, (std::vector<int32_t>{3, 1, 1}));
}

TEST(DeepSeekSteps, RejectBadShapesAndWeightsNamingThem) {
  const std::vector<float> four = {1, 2, 3, 4};
  EXPECT_EQ(DeepSeekBalancedPacking(four, 1, 3).status().message(),
            "num_packs is 3; it must be a positive divisor of the 4 items per row");
  EXPECT_EQ(DeepSeekBalancedPacking(four, 3, 2).status().message(),
            "weight has 4 values, which do not make 3 rows");
  EXPECT_EQ(DeepSeekReplicateExperts(four, 1, 3).status().message(),
            "num_phy is 3 but a row has 4 experts; every expert needs at least one slot");
  const std::vector<float> negative = {1, 2, -3, 4};
  EXPECT_EQ(DeepSeekReplicateExperts(negative, 2, 4).status().message(),
            "weight[1, 0] is -3; weights must be finite and >= 0");
  const std::vector<float> infinite = {1, std::numeric_limits<float>::infinity()};
  EXPECT_FALSE(DeepSeekBalancedPacking(infinite, 1, 1).ok());
}

// Large calls spread layers over threads; each layer must come out as it does alone.
TEST(DeepSeekPolicy, ParallelLayersEqualLayerByLayer) {
  struct Shape {
    int layers, experts, replicas, groups, nodes, gpus;
  };
  // DeepSeek-V3 at EP32 (a layer at a time), on 2 nodes (layers in pairs) and the global
  // policy (layers four at a time, the last batch short).
  for (const Shape& s : {Shape{58, 256, 288, 8, 4, 32}, Shape{57, 256, 384, 8, 2, 128},
                         Shape{94, 128, 144, 1, 1, 16}}) {
    std::mt19937_64 rng(5);
    const LoadMatrix load = RandomLoad(rng, s.layers, s.experts);
    auto whole = RebalanceDeepSeek(load, s.replicas, s.groups, s.nodes, s.gpus);
    ASSERT_TRUE(whole.ok());
    for (int l = 0; l < s.layers; ++l) {
      auto one = RebalanceDeepSeek(load.row(l), s.replicas, s.groups, s.nodes, s.gpus);
      ASSERT_TRUE(one.ok());
      ASSERT_TRUE(
          std::equal(one->phy2log(0).begin(), one->phy2log(0).end(), whole->phy2log(l).begin()))
          << s.replicas << " slots, layer " << l;
    }
  }
}

// RebalanceDeepSeekMaps on `weight` against RebalanceDeepSeekRanked on the same loads: the
// placement, each expert's count, and its slots listed by rank and padded with -1 to the
// largest count. The maps' width goes to `width` when given.
void ExpectMapsHoldTheRankedPlacement(const std::vector<float>& weight, int layers, int experts,
                                      int replicas, int groups, int nodes, int gpus,
                                      int* width = nullptr) {
  SCOPED_TRACE(fmt::format("{} layers, {} experts, {} replicas, {} groups, {} nodes, {} GPUs",
                           layers, experts, replicas, groups, nodes, gpus));
  LoadMatrix load(layers, experts);
  for (int i = 0; i < load.size(); ++i) load.data()[i] = weight[static_cast<size_t>(i)];
  auto ranked = RebalanceDeepSeekRanked(load, replicas, groups, nodes, gpus);
  auto maps = RebalanceDeepSeekMaps(weight, layers, experts, replicas, groups, nodes, gpus);
  ASSERT_TRUE(ranked.ok()) << ranked.status().message();
  ASSERT_TRUE(maps.ok()) << maps.status().message();
  const Placement& p = ranked->placement;
  ASSERT_EQ(maps->width, p.max_logcnt());
  if (width != nullptr) *width = maps->width;
  std::vector<int64_t> log2phy(static_cast<size_t>(layers) * experts * maps->width, -1);
  for (int l = 0; l < layers; ++l) {
    for (int s = 0; s < replicas; ++s) {
      const size_t slot = static_cast<size_t>(l) * replicas + s;
      ASSERT_EQ(maps->phy2log[slot], p.phy2log(l)[s]);
      log2phy[(static_cast<size_t>(l) * experts + p.phy2log(l)[s]) * maps->width +
              ranked->replica_rank[slot]] = s;
    }
    for (int e = 0; e < experts; ++e) {
      ASSERT_EQ(maps->logcnt[static_cast<size_t>(l) * experts + e], p.logcnt(l, e));
    }
  }
  ASSERT_TRUE(std::equal(log2phy.begin(), log2phy.end(), maps->log2phy.get()));
}

// The engines' three arrays straight from float32 weights, on random shapes (hierarchical and
// global, small and spread over threads) with ties.
TEST(DeepSeekPolicy, MapsHoldWhatTheRankedPlacementHolds) {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 60; ++trial) {
    int nodes = 1 << (rng() % 3);
    int groups = trial % 5 == 0 ? 3 : nodes * static_cast<int>(1 + rng() % 2);
    int gpus = nodes * static_cast<int>(1 + rng() % 4);
    int experts = groups * static_cast<int>(2 + rng() % 7);
    int replicas = gpus * ((experts + gpus - 1) / gpus + static_cast<int>(rng() % 3));
    int layers = static_cast<int>(1 + rng() % 40);
    // And DeepSeek-V3's shape and the global policy's, big enough to spread over threads.
    if (trial == 0)
      std::tie(layers, experts, replicas, groups, nodes, gpus) = std::tuple{58, 256, 288, 8, 4, 32};
    if (trial == 1)
      std::tie(layers, experts, replicas, groups, nodes, gpus) = std::tuple{94, 128, 144, 1, 1, 16};
    std::vector<float> weight(static_cast<size_t>(layers) * experts);
    for (float& w : weight) w = static_cast<float>(rng() % 6) * 100.0f;  // ties throughout
    ExpectMapsHoldTheRankedPlacement(weight, layers, experts, replicas, groups, nodes, gpus);
  }
}

// A call writes log2phy at the width the last call of its shape had, and redoes it when the
// width turns out otherwise: one shape called again and again with loads whose widest expert
// grows (with the other layers as wide as the last call or narrower), shrinks and stays, on a
// shape small enough for one thread and on DeepSeek-V3's, spread over threads.
TEST(DeepSeekPolicy, MapsOfOneShapeCalledAgainFollowEachCallsWidth) {
  struct Shape {
    int layers, experts, replicas, groups, nodes, gpus;
  };
  struct Load {
    int hot_every;  // every hot_every-th layer's first expert is hot, the rest even
    float heat;     // how many times the others' load the hot expert carries
    int width;      // log2phy's width then: 2 when even, 3 at 2.5x, 9 (every extra slot) at 40x
  };
  for (const Shape& s : {Shape{6, 16, 32, 4, 2, 4}, Shape{58, 256, 320, 8, 8, 64}}) {
    std::mt19937 rng(static_cast<unsigned>(s.layers));
    for (const Load& load :
         {Load{1, 1.0f, 2}, Load{3, 40.0f, 9}, Load{2, 2.5f, 3}, Load{1, 1.0f, 2}, Load{4, 2.5f, 3},
          Load{4, 2.5f, 3}, Load{3, 40.0f, 9}, Load{1, 40.0f, 9}}) {
      std::vector<float> weight(static_cast<size_t>(s.layers) * s.experts);
      for (size_t i = 0; i < weight.size(); ++i) {
        weight[i] = 100.0f + static_cast<float>(rng() % 3);
        const size_t expert = i % static_cast<size_t>(s.experts),
                     layer = i / static_cast<size_t>(s.experts);
        if (expert == 0 && layer % static_cast<size_t>(load.hot_every) == 0) {
          weight[i] *= load.heat;
        }
      }
      SCOPED_TRACE(fmt::format("hot every {} layers at {}x", load.hot_every, load.heat));
      // The first call guesses the last load's width; the second, this one's.
      ExpectMapsHoldTheRankedPlacement(weight, s.layers, s.experts, s.replicas, s.groups, s.nodes,
                                       s.gpus);
      int width = 0;
      ExpectMapsHoldTheRankedPlacement(weight, s.layers, s.experts, s.replicas, s.groups, s.nodes,
                                       s.gpus, &width);
      EXPECT_EQ(width, load.width);
    }
  }
}

TEST(DeepSeekPolicy, MapsNameTheFirstBadWeight) {
  std::vector<float> weight(2 * 4, 1.0f);
  weight[6] = std::numeric_limits<float>::quiet_NaN();
  weight[7] = -1.0f;
  auto maps = RebalanceDeepSeekMaps(weight, 2, 4, 4, 1, 1, 1);
  ASSERT_FALSE(maps.ok());
  EXPECT_EQ(maps.status().message(),
            "load of layer 1, expert 2 is nan; loads must be finite and non-negative");
  auto short_weight = RebalanceDeepSeekMaps(weight, 3, 4, 4, 1, 1, 1);
  ASSERT_FALSE(short_weight.ok());
  EXPECT_EQ(short_weight.status().message(),
            "load has 8 values, which do not make 3 layers of 4 experts");
  weight[6] = std::numeric_limits<float>::infinity();
  weight[7] = 1.0f;
  EXPECT_EQ(RebalanceDeepSeekMaps(weight, 2, 4, 4, 1, 1, 1).status().message(),
            "load of layer 1, expert 2 is inf; loads must be finite and non-negative");
  weight[6] = 1e20f;
  EXPECT_EQ(RebalanceDeepSeekMaps(weight, 2, 4, 4, 1, 1, 1).status().message(),
            "load of layer 1, expert 2 is 1.0000000200408773e+20; loads are at most 1e+15 tokens");
  weight[6] = 1.0f;
  auto few_slots = RebalanceDeepSeekMaps(weight, 2, 4, 3, 1, 1, 1);
  ASSERT_FALSE(few_slots.ok());
  EXPECT_EQ(few_slots.status().message(),
            "replicas is 3 but the load has 4 experts; every expert needs at least one replica");
}

// -0.0 is no load, as +0.0 is: its bits would otherwise sort it above every weight.
TEST(DeepSeekPolicy, MapsTakeNegativeZeroForZero) {
  const std::vector<float> negative = {-0.0f, 5.0f, 0.0f, 7.0f, -0.0f, 1.0f};
  const std::vector<float> positive = {0.0f, 5.0f, 0.0f, 7.0f, 0.0f, 1.0f};
  auto a = RebalanceDeepSeekMaps(negative, 1, 6, 8, 1, 1, 2);
  auto b = RebalanceDeepSeekMaps(positive, 1, 6, 8, 1, 1, 2);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->width, b->width);
  EXPECT_TRUE(std::equal(a->phy2log.get(), a->phy2log.get() + 8, b->phy2log.get()));
  EXPECT_TRUE(std::equal(a->log2phy.get(), a->log2phy.get() + 6 * a->width, b->log2phy.get()));
}

// Each thread keeps its balancer for the next call of the same shape: calls of other shapes in
// between, on the pool's threads and on this one, must not leak into it.
TEST(DeepSeekPolicy, ShapesInTurnGiveWhatFirstCallsGive) {
  std::mt19937_64 rng(11);
  struct Shape {
    int layers, experts, replicas, groups, nodes, gpus;
  };
  const std::vector<Shape> shapes = {{58, 256, 288, 8, 4, 32},
                                     {58, 256, 320, 8, 8, 64},
                                     {3, 16, 24, 4, 2, 8},
                                     {94, 128, 144, 1, 1, 16},
                                     {58, 256, 384, 8, 2, 128},
                                     // Neighbours that differ in the GPUs only, then in the
                                     // slots only (the calls go forwards, then backwards).
                                     {58, 256, 288, 8, 4, 16},
                                     {58, 256, 288, 8, 4, 32},
                                     {58, 256, 320, 8, 4, 32}};
  std::vector<LoadMatrix> loads;
  std::vector<std::vector<int32_t>> first;
  for (const Shape& s : shapes) {
    loads.push_back(RandomLoad(rng, s.layers, s.experts));
    auto p = RebalanceDeepSeek(loads.back(), s.replicas, s.groups, s.nodes, s.gpus);
    ASSERT_TRUE(p.ok());
    first.push_back(p->phy2log_flat());
  }
  for (int round = 0; round < 3; ++round) {
    for (size_t i = shapes.size(); i-- > 0;) {
      const Shape& s = shapes[i];
      auto p = RebalanceDeepSeek(loads[i], s.replicas, s.groups, s.nodes, s.gpus);
      ASSERT_TRUE(p.ok());
      ASSERT_EQ(p->phy2log_flat(), first[i]) << "shape " << i << ", round " << round;
    }
  }
}

TEST(PolicyRegistry, FindsDeepSeekAndListsNamesOnError) {
  auto p = MakePolicy("deepseek");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->name(), "deepseek");
  auto missing = MakePolicy("nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "unknown policy 'nope'; " + testing::ValidPoliciesText());
}

TEST(PolicyRegistry, PolicyChecksCurrentPlacementShape) {
  auto topo = Topology::FromReplicas(16, 2, 8);
  const LoadMatrix load = LoadMatrix::Constant(2, 12, 1.0);
  auto current = Placement::Initial(3, 12, 16);
  DeepSeekPolicy policy;
  auto r = policy.Rebalance({load, *topo, &*current, 4});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "current placement has 3 layers of 12 experts but the load has 2 layers of 12 experts");
}

}  // namespace
}  // namespace eplb

namespace eplb {
namespace {

// Values that drive an introsort into its worst case (McIlroy, "A killer adversary for
// quicksort", 1999): std::sort itself, run on values that are fixed only when a comparison
// needs them, leaves values that make it partition badly and fall back on heapsort.
std::vector<uint32_t> IntroSortAdversary(int n) {
  const auto gas = static_cast<uint32_t>(n);
  std::vector<uint32_t> value(static_cast<size_t>(n), gas);
  uint32_t solid = 0;
  int candidate = 0;
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int x, int y) {
    if (value[x] == gas && value[y] == gas) value[x == candidate ? x : y] = solid++;
    if (value[x] == gas) {
      candidate = x;
    } else if (value[y] == gas) {
      candidate = y;
    }
    return value[x] < value[y];
  });
  return value;
}

// The reference's order of equal weights: SortLikeStdSort leaves every array exactly as
// std::sort does, on sizes around its thresholds, with values from all equal to all distinct,
// random and in the patterns that steer a partition.
TEST(TorchSort, LeavesEveryArrayAsStdSortDoes) {
  std::mt19937_64 rng(11);
  std::vector<int32_t> scratch;
  auto check = [&](const std::vector<uint32_t>& values) {
    std::vector<uint64_t> keys(values.size());
    for (size_t i = 0; i < values.size(); ++i) keys[i] = uint64_t{values[i]} << 32 | i;
    std::vector<uint64_t> expected = keys;
    std::sort(expected.begin(), expected.end(), ValueLess);
    SortLikeStdSort(keys, scratch);
    ASSERT_EQ(keys, expected) << values.size() << " values";
  };
  for (const int n : {0, 1, 2, 3, 15, 16, 17, 18, 31, 32, 33, 40, 72, 100, 192, 257, 600, 2000}) {
    for (const uint32_t distinct : {1u, 2u, 3u, 8u, 64u, 0xffffffffu}) {
      std::uniform_int_distribution<uint32_t> draw(0, distinct - 1);
      std::vector<uint32_t> v(static_cast<size_t>(n));
      for (int rep = 0; rep < 20; ++rep) {
        for (auto& x : v) x = draw(rng);
        check(v);
      }
      const uint64_t span = uint64_t{distinct} + 1;
      for (int i = 0; i < n; ++i) v[i] = static_cast<uint32_t>(uint64_t(i) * span / (n + 1));
      check(v);  // ascending
      std::reverse(v.begin(), v.end());
      check(v);  // descending
      for (int i = 0; i < n; ++i) v[i] = static_cast<uint32_t>(std::min(i, n - 1 - i) % span);
      check(v);  // organ pipe
      for (int i = 0; i < n; ++i) v[i] = static_cast<uint32_t>(i % span);
      check(v);  // saw tooth
    }
    check(IntroSortAdversary(n));
  }
}

// Up to 16 keys, std::sort is an insertion sort and SortLikeStdSort a sorting network: every
// array of 0s and 1s (which a network sorts only if it sorts everything) comes out alike.
TEST(TorchSort, SmallArraysOfZerosAndOnesComeOutAsStdSortLeavesThem) {
  std::vector<int32_t> scratch;
  for (int n = 2; n <= 16; ++n) {
    for (uint32_t bits = 0; bits < (1u << n); ++bits) {
      std::vector<uint64_t> keys(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i)
        keys[i] = uint64_t{(bits >> i) & 1u} << 32 | static_cast<uint64_t>(i);
      std::vector<uint64_t> expected = keys;
      std::sort(expected.begin(), expected.end(), ValueLess);
      SortLikeStdSort(keys, scratch);
      ASSERT_EQ(keys, expected) << n << " keys, bits " << bits;
    }
  }
}

// The pool behind ParallelFor: every index runs exactly once, whoever calls and however many
// call at once; a call from inside a chunk (the pool busy) runs on its own thread; a forked
// child, whose workers stayed in the parent, still finishes.
TEST(ParallelFor, EachIndexOnceFromConcurrentAndNestedCalls) {
  auto run = [](int n) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    ParallelFor(n, 0, [&](int begin, int end) {
      for (int i = begin; i < end; ++i) hits[i]++;
      ParallelFor(3, 0, [&](int b, int e) { EXPECT_LE(b, e); });  // nested
    });
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  };
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&, t] {
      for (int rep = 0; rep < 50; ++rep) run(1 + (rep * 7 + t) % 100);
    });
  }
  for (auto& c : callers) c.join();

  const pid_t child = fork();
  if (child == 0) {
    std::atomic<int> sum{0};
    ParallelFor(100, 0, [&](int begin, int end) { sum += end - begin; });
    _exit(sum == 100 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace eplb
