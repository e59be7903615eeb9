#include "eplb/model/slot_preservation.h"
#include "eplb/policy/deepseek.h"
#include "eplb/policy/policies.h"
#include "policy/util.h"

namespace eplb {

Result<Placement> DeepSeekPreservePolicy::Rebalance(const PolicyInput& input) {
  DeepSeekPolicy deepseek;
  auto target = deepseek.Rebalance(input);
  if (!target.ok()) return target;
  return PreserveSlots(policy_util::CurrentOrInitial(input), *target, input.topology);
}

}  // namespace eplb
