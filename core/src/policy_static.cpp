#include "eplb/policies.h"
#include "policy_util.h"

namespace eplb {

Result<Placement> StaticPolicy::Rebalance(const PolicyInput& input) {
  EPLB_RETURN_IF_ERROR(ValidatePolicyInput(input));
  return policy_util::CurrentOrInitial(input);
}

}  // namespace eplb
