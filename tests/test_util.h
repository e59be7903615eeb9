// Helpers shared by the test suites.
#pragma once

#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <vector>

#include "eplb/model/load.h"
#include "eplb/model/placement.h"
#include "eplb/model/topology.h"
#include "eplb/policy/policy.h"

namespace eplb::testing {

// What an unknown policy's error lists, from the registry: a new policy changes no test.
inline std::string ValidPoliciesText() {
  std::string names;
  for (const PolicyInfo& p : RegisteredPolicies()) names += (names.empty() ? "" : ", ") + p.name;
  return "valid policies: " + names;
}

inline std::string DataPath(const std::string& name) {
  return std::string(EPLB_TEST_DATA_DIR) + "/" + name;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Random load with a heavy tail (log-normal), as real routing counts have.
inline LoadMatrix RandomLoad(std::mt19937_64& rng, int layers, int experts) {
  std::lognormal_distribution<double> dist(0.0, 1.0);
  LoadMatrix m(layers, experts);
  for (int l = 0; l < layers; ++l) {
    for (int e = 0; e < experts; ++e) m(l, e) = std::round(dist(rng) * 1000.0);
  }
  return m;
}

}  // namespace eplb::testing

namespace eplb::testing {

// A random phy2log row of `slots` entries in which each of `experts` appears at least once;
// with `empty_fraction` > 0 some extra slots are left empty (-1).
inline std::vector<int32_t> RandomRow(std::mt19937_64& rng, int slots, int experts,
                                      double empty_fraction = 0.0) {
  std::vector<int32_t> row(static_cast<size_t>(slots));
  for (int s = 0; s < slots; ++s) {
    if (s < experts) {
      row[s] = s;
    } else if (std::uniform_real_distribution<double>(0, 1)(rng) < empty_fraction) {
      row[s] = -1;
    } else {
      row[s] = static_cast<int32_t>(rng() % static_cast<uint64_t>(experts));
    }
  }
  std::shuffle(row.begin(), row.end(), rng);
  return row;
}

inline Placement RandomPlacement(std::mt19937_64& rng, int layers, int slots, int experts,
                                 double empty_fraction = 0.0) {
  std::vector<int32_t> flat;
  for (int l = 0; l < layers; ++l) {
    const auto row = RandomRow(rng, slots, experts, empty_fraction);
    flat.insert(flat.end(), row.begin(), row.end());
  }
  return *Placement::Create(experts, slots, std::move(flat));
}

// A placement that shares most of `base`: each layer keeps a slot with probability `keep`.
inline Placement Drift(std::mt19937_64& rng, const Placement& base, double keep) {
  std::vector<int32_t> flat;
  for (int l = 0; l < base.num_layers(); ++l) {
    std::vector<int32_t> row(base.phy2log(l).begin(), base.phy2log(l).end());
    const auto fresh = RandomRow(rng, base.num_slots(), base.num_experts());
    for (size_t s = 0; s < row.size(); ++s) {
      if (std::uniform_real_distribution<double>(0, 1)(rng) >= keep) row[s] = fresh[s];
    }
    // Repair: every expert needs a replica; overwrite duplicates with missing experts.
    std::vector<int> count(static_cast<size_t>(base.num_experts()), 0);
    for (int32_t e : row) {
      if (e >= 0) ++count[e];
    }
    for (int e = 0; e < base.num_experts(); ++e) {
      if (count[e] > 0) continue;
      for (auto& x : row) {
        if (x < 0 || count[x] > 1) {
          if (x >= 0) --count[x];
          x = e;
          ++count[e];
          break;
        }
      }
    }
    flat.insert(flat.end(), row.begin(), row.end());
  }
  return *Placement::Create(base.num_experts(), base.num_slots(), std::move(flat));
}

// Each layer of `now` equals that layer of `a` or of `b`.
inline bool EachLayerIsOneOf(const Placement& now, const Placement& a, const Placement& b) {
  for (int l = 0; l < now.num_layers(); ++l) {
    const bool is_a =
        std::equal(now.phy2log(l).begin(), now.phy2log(l).end(), a.phy2log(l).begin());
    const bool is_b =
        std::equal(now.phy2log(l).begin(), now.phy2log(l).end(), b.phy2log(l).begin());
    if (!is_a && !is_b) return false;
  }
  return true;
}

inline Topology MakeTopology(int nodes, int gpus_per_node, int slots_per_gpu,
                             int64_t expert_bytes = 44040192) {
  TopologyConfig c;
  c.nodes = nodes;
  c.gpus_per_node = gpus_per_node;
  c.slots_per_gpu = slots_per_gpu;
  c.expert_bytes = expert_bytes;
  return *Topology::Create(c);
}

// The least load the busiest GPU can carry: `load` (one layer) on `gpus` GPUs of
// `slots_per_gpu` slots, every expert given a slot and its load split evenly over its replicas.
// Found by trying every placement up to the order of slots within a GPU, which changes no GPU's
// load: each GPU's slots hold a non-decreasing run of experts. With 4 experts in 3 × 3 slots
// that is 20³ placements where every slot order gives 4⁹. For layers small enough to enumerate.
inline double BalanceOptimumByEnumeration(std::span<const double> load, int gpus,
                                          int slots_per_gpu) {
  const int experts = static_cast<int>(load.size()), slots = gpus * slots_per_gpu;
  std::vector<int32_t> row(static_cast<size_t>(slots));
  std::vector<int> count(static_cast<size_t>(experts));
  double best = std::numeric_limits<double>::infinity();
  const auto try_slot = [&](const auto& self, int s) -> void {
    if (s == slots) {
      std::fill(count.begin(), count.end(), 0);
      for (const int32_t e : row) ++count[static_cast<size_t>(e)];
      if (std::find(count.begin(), count.end(), 0) != count.end()) return;
      double busiest = 0;
      for (int g = 0; g < gpus; ++g) {
        double gpu = 0;
        for (int k = 0; k < slots_per_gpu; ++k) {
          const auto e = static_cast<size_t>(row[static_cast<size_t>(g * slots_per_gpu + k)]);
          gpu += load[e] / count[e];
        }
        busiest = std::max(busiest, gpu);
      }
      best = std::min(best, busiest);
      return;
    }
    const int first = s % slots_per_gpu == 0 ? 0 : row[static_cast<size_t>(s - 1)];
    for (int e = first; e < experts; ++e) {
      row[static_cast<size_t>(s)] = e;
      self(self, s + 1);
    }
  };
  try_slot(try_slot, 0);
  return best;
}

}  // namespace eplb::testing
