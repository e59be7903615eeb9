// The best any placement can do: a lower bound on each layer's maximum GPU load.
//
// With G GPUs, the busiest carries at least the mean, total / G. And the GPU holding a replica of
// expert e carries at least load_e / replicas_e, so the busiest carries at least
// min over replica counts of max_e load_e / count_e, which greedy replication attains. The bound
// is the larger of the two; balancedness can be at most Σ mean / Σ bound.
//
// On small layers the exact optimum (policy/optimal.h) replaces the bound where its search
// proves it within a small budget. Measured against exact optima (tools/bench/bench_optimal.cpp),
// the bound is within 0.1% of the optimum on lognormal loads: the gap a report shows between a
// policy and the bound is the policy's, not the bound's.
#pragma once

#include <cstdint>
#include <vector>

#include "eplb/model/load.h"
#include "eplb/model/topology.h"

namespace eplb {

// Per layer, the lower bound on the maximum GPU load of any placement on `topology`: the mean
// and the hottest replica, as above.
std::vector<double> MaxGpuLoadLowerBound(const LoadMatrix& load, const Topology& topology);
// Per layer, the best maximum GPU load known to be unbeatable: the exact optimum on layers of at
// most kExactExperts experts and kExactSlots slots whose search finishes within
// kExactNodeBudget nodes (a few milliseconds), else MaxGpuLoadLowerBound.
inline constexpr int kExactExperts = 32, kExactSlots = 48;
inline constexpr int64_t kExactNodeBudget = 200'000;
std::vector<double> BestMaxGpuLoadBound(const LoadMatrix& load, const Topology& topology);
// The balancedness no placement can exceed on `load` (metrics.h's definition), from
// BestMaxGpuLoadBound.
double BalancednessUpperBound(const LoadMatrix& load, const Topology& topology);

}  // namespace eplb
