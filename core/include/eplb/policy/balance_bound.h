// The best any placement can do: a lower bound on each layer's maximum GPU load.
//
// With G GPUs, the busiest carries at least the mean, total / G. And the GPU holding a replica of
// expert e carries at least load_e / replicas_e, so the busiest carries at least
// min over replica counts of max_e load_e / count_e, which greedy replication attains. The bound
// is the larger of the two; balancedness can be at most Σ mean / Σ bound.
#pragma once

#include <vector>

#include "eplb/model/load.h"
#include "eplb/model/topology.h"

namespace eplb {

// Per layer, the lower bound on the maximum GPU load of any placement on `topology`.
std::vector<double> MaxGpuLoadLowerBound(const LoadMatrix& load, const Topology& topology);
// The balancedness no placement can exceed on `load` (metrics.h's definition).
double BalancednessUpperBound(const LoadMatrix& load, const Topology& topology);

}  // namespace eplb
