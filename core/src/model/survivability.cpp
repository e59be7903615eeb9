#include "eplb/model/survivability.h"

#include <algorithm>
#include <vector>

namespace eplb {

FailureExposure ExposureToFailure(const LoadMatrix& load, const Placement& placement,
                                  const Topology& topology, FailureDomain domain) {
  const int per_domain = domain == FailureDomain::kGpu ? 1 : topology.gpus_per_node();
  const int domains = topology.num_ranks() / per_domain;
  const int per_slot_domain = topology.slots_per_gpu() * per_domain;
  // Per domain: tokens and experts it alone holds.
  std::vector<double> tokens(static_cast<size_t>(domains), 0.0),
      experts(static_cast<size_t>(domains), 0.0);
  std::vector<int> only(static_cast<size_t>(placement.num_experts()));
  double total = 0;
  for (int l = 0; l < placement.num_layers(); ++l) {
    const auto row = placement.phy2log(l);
    // The one domain that holds each expert, or -2 once two do (-1: none seen yet).
    std::fill(only.begin(), only.end(), -1);
    for (size_t s = 0; s < row.size(); ++s) {
      const int32_t e = row[s];
      if (e == kEmptySlot) continue;
      const int d = static_cast<int>(s) / per_slot_domain;
      int& o = only[static_cast<size_t>(e)];
      o = o == -1 || o == d ? d : -2;
    }
    for (int e = 0; e < placement.num_experts(); ++e) {
      total += load(l, e);
      const int d = only[static_cast<size_t>(e)];
      if (d < 0) continue;
      tokens[static_cast<size_t>(d)] += load(l, e);
      experts[static_cast<size_t>(d)] += 1;
    }
  }
  FailureExposure out;
  for (int d = 0; d < domains; ++d) {
    const double share = total > 0 ? tokens[static_cast<size_t>(d)] / total : 0.0;
    out.tokens_lost_mean += share / domains;
    out.tokens_lost_worst = std::max(out.tokens_lost_worst, share);
    out.experts_lost_mean += experts[static_cast<size_t>(d)] / domains;
  }
  out.reload_bytes_mean = out.experts_lost_mean * static_cast<double>(topology.expert_bytes());
  return out;
}

}  // namespace eplb
