#include "eplb/policy/balance_bound.h"

#include <algorithm>

#include "eplb/policy/optimal.h"
#include "policy/util.h"

namespace eplb {

std::vector<double> MaxGpuLoadLowerBound(const LoadMatrix& load, const Topology& topology) {
  std::vector<double> bound;
  for (int l = 0; l < load.rows(); ++l) {
    const auto row = policy_util::Row(load, l);
    const auto counts = policy_util::ReplicaCounts(row, topology.num_slots());
    double per_replica = 0;
    for (size_t e = 0; e < counts.size(); ++e)
      per_replica = std::max(per_replica, row[e] / counts[e]);
    bound.push_back(std::max(load.row(l).sum() / topology.num_ranks(), per_replica));
  }
  return bound;
}

std::vector<double> BestMaxGpuLoadBound(const LoadMatrix& load, const Topology& topology) {
  std::vector<double> bound = MaxGpuLoadLowerBound(load, topology);
  if (load.cols() > kExactExperts || topology.num_slots() > kExactSlots) return bound;
  for (int l = 0; l < load.rows(); ++l) {
    const LayerOptimum exact =
        OptimalLayer(policy_util::Row(load, l), topology, {.node_budget = kExactNodeBudget});
    if (exact.proven) bound[static_cast<size_t>(l)] = exact.max_gpu_load;
  }
  return bound;
}

double BalancednessUpperBound(const LoadMatrix& load, const Topology& topology) {
  const auto bound = BestMaxGpuLoadBound(load, topology);
  double mean = 0, max = 0;
  for (int l = 0; l < load.rows(); ++l) {
    mean += load.row(l).sum() / topology.num_ranks();
    max += bound[l];
  }
  return max > 0 ? mean / max : 1.0;
}

}  // namespace eplb
