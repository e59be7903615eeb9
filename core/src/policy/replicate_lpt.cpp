#include "eplb/policy/policies.h"
#include "policy/util.h"

namespace eplb {

Result<Placement> ReplicateLptPolicy::Rebalance(const PolicyInput& input) {
  EPLB_RETURN_IF_ERROR(ValidatePolicyInput(input, /*honour_lost_ranks=*/true));
  const int slots = input.topology.num_slots(), live = policy_util::LiveSlots(input);
  std::vector<std::vector<int32_t>> rows;
  std::vector<int32_t> replicas;
  std::vector<double> weight;
  for (int l = 0; l < input.load.rows(); ++l) {
    const auto load = policy_util::Row(input.load, l);
    policy_util::ExpandReplicas(load, policy_util::ReplicaCounts(load, live), replicas, weight);
    rows.push_back(policy_util::PackLpt(replicas, weight, input.topology, input.lost_ranks));
  }
  return policy_util::FromRows(static_cast<int>(input.load.cols()), slots, rows);
}

}  // namespace eplb
