#include "eplb/policies.h"
#include "eplb/policy_deepseek.h"
#include "eplb/slot_preservation.h"
#include "policy_util.h"

namespace eplb {

Result<Placement> DeepSeekPreservePolicy::Rebalance(const PolicyInput& input) {
  DeepSeekPolicy deepseek;
  auto target = deepseek.Rebalance(input);
  if (!target.ok()) return target;
  return PreserveSlots(policy_util::CurrentOrInitial(input), *target, input.topology);
}

}  // namespace eplb
