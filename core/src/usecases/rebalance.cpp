#include "eplb/usecases/rebalance.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "eplb/policy/policy.h"

namespace eplb {

Result<Rebalanced> RebalanceRecordedLoad(std::string_view policy_name, const LoadSeries& load,
                                         const Topology& topology,
                                         const RebalanceOptions& options) {
  EPLB_ASSIGN_OR_RETURN(const std::unique_ptr<Policy> policy, MakePolicy(policy_name));
  if (load.steps.empty()) return Status::InvalidArgument("the load has no steps");
  if (options.max_chunks < 1) {
    return Status::InvalidArgument(
        fmt::format("max_chunks is {}; it must be at least 1", options.max_chunks));
  }
  if (options.window_steps < 0) {
    return Status::InvalidArgument(
        fmt::format("window_steps is {}; it must be at least 0", options.window_steps));
  }
  const int64_t steps =
      options.window_steps > 0 ? options.window_steps : static_cast<int64_t>(load.steps.size());
  LoadMatrix window = load.Total();
  const std::vector<LoadMatrix> chunks =
      steps > 1 ? load.Chunks(options.max_chunks) : std::vector<LoadMatrix>{};
  std::vector<int> lost = options.lost_ranks;
  std::sort(lost.begin(), lost.end());
  PolicyInput input{window, topology, options.current, options.num_groups, chunks};
  input.lost_ranks = lost;
  input.tuning.window_steps = static_cast<double>(steps);
  for (const auto& [name, value] : options.policy_options) {
    EPLB_RETURN_IF_ERROR(SetPolicyOption(name, value, input.tuning));
  }
  const auto start = std::chrono::steady_clock::now();
  Result<Placement> placement = policy->Rebalance(input);
  const double policy_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!placement.ok()) {
    return placement.status().WithContext(fmt::format("policy {}: ", policy_name));
  }
  return Rebalanced{std::move(placement).value(), std::move(window), policy_ms};
}

}  // namespace eplb
