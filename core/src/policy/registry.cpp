#include <mutex>

#include <fmt/format.h>

#include "eplb/policy/deepseek.h"
#include "eplb/policy/policies.h"
#include "eplb/policy/policy.h"

namespace eplb {
namespace {

struct Registry {
  std::mutex mu;
  std::vector<PolicyInfo> policies;
};

// Built-ins are listed here rather than self-registered from static initialisers, which a
// static library's linker may drop.
Registry& GetRegistry() {
  static Registry* registry = [] {
    auto* r = new Registry;
    r->policies.push_back({"deepseek",
                           "DeepSeek's hierarchical policy (groups to nodes, replicas inside "
                           "nodes, replicas to GPUs) with its global fallback",
                           [] { return std::make_unique<DeepSeekPolicy>(); }});
    r->policies.push_back(
        {"static", "never rearranges", [] { return std::make_unique<StaticPolicy>(); }});
    r->policies.push_back({"deepseek-preserve", "deepseek, then slot preservation",
                           [] { return std::make_unique<DeepSeekPreservePolicy>(); }});
    r->policies.push_back(
        {"replicate-lpt",
         "TensorRT-LLM's: greedy replication, replicas heaviest first on the least loaded GPU",
         [] { return std::make_unique<ReplicateLptPolicy>(); }});
    r->policies.push_back(
        {"timeseries", "SGLang's deepseek_vec idea: replicas where they cut the per-chunk peaks",
         [] { return std::make_unique<TimeSeriesPolicy>(); }});
    r->policies.push_back(
        {"incremental",
         "SwiftBalancer-like: bounded re-points and swaps from the current placement",
         [] { return std::make_unique<IncrementalPolicy>(); }});
    r->policies.push_back(
        {"migration-aware",
         "ours: per layer, the cheapest of keep, repair and deepseek over the next interval",
         [] { return std::make_unique<MigrationAwarePolicy>(); }});
    return r;
  }();
  return *registry;
}

}  // namespace

Status ValidatePolicyInput(const PolicyInput& input) {
  EPLB_RETURN_IF_ERROR(ValidateLoad(input.load));
  if (input.topology.num_slots() < input.load.cols()) {
    return Status::InvalidArgument(fmt::format(
        "the cluster has {} slots per layer but the load has {} experts; every expert needs a slot",
        input.topology.num_slots(), input.load.cols()));
  }
  if (input.num_groups < 1) {
    return Status::InvalidArgument(
        fmt::format("groups is {}; it must be at least 1", input.num_groups));
  }
  if (input.current != nullptr) {
    EPLB_RETURN_IF_ERROR(
        input.current->CheckFits(input.topology).WithContext("current placement: "));
    if (input.current->num_layers() != input.load.rows() ||
        input.current->num_experts() != input.load.cols()) {
      return Status::InvalidArgument(fmt::format(
          "current placement has {} layers of {} experts but the load has {} layers of {} experts",
          input.current->num_layers(), input.current->num_experts(), input.load.rows(),
          input.load.cols()));
    }
  }
  return Status::Ok();
}

Status RegisterPolicy(PolicyInfo info) {
  Registry& r = GetRegistry();
  std::lock_guard lock(r.mu);
  for (const auto& p : r.policies) {
    if (p.name == info.name) {
      return Status::InvalidArgument(
          fmt::format("a policy named '{}' is already registered", info.name));
    }
  }
  r.policies.push_back(std::move(info));
  return Status::Ok();
}

Result<std::unique_ptr<Policy>> MakePolicy(std::string_view name) {
  Registry& r = GetRegistry();
  std::lock_guard lock(r.mu);
  std::vector<std::string> names;
  for (const auto& p : r.policies) {
    if (p.name == name) return p.make();
    names.push_back(p.name);
  }
  return Status::NotFound(
      fmt::format("unknown policy '{}'; valid policies: {}", name, fmt::join(names, ", ")));
}

std::vector<PolicyInfo> RegisteredPolicies() {
  Registry& r = GetRegistry();
  std::lock_guard lock(r.mu);
  return r.policies;
}

}  // namespace eplb
