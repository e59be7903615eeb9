#include "eplb/policy/policies.h"
#include "policy/util.h"

namespace eplb {

Result<Placement> StaticPolicy::Rebalance(const PolicyInput& input) {
  EPLB_RETURN_IF_ERROR(ValidatePolicyInput(input));
  return policy_util::CurrentOrInitial(input);
}

}  // namespace eplb
