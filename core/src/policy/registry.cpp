#include <algorithm>
#include <mutex>

#include <fmt/format.h>

#include "eplb/base/csv.h"
#include "eplb/base/excerpt.h"
#include "eplb/base/file_io.h"
#include "eplb/policy/deepseek.h"
#include "eplb/policy/external_policy.h"
#include "eplb/policy/policies.h"
#include "eplb/policy/policy.h"
#include "eplb/policy/recorded_policy.h"
#include "eplb/policy/topology_aware.h"

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
                           [] { return std::make_unique<DeepSeekPolicy>(); },
                           {},
                           /*honours_lost_ranks=*/true});
    r->policies.push_back(
        {"static", "never rearranges", [] { return std::make_unique<StaticPolicy>(); }});
    r->policies.push_back({"deepseek-preserve",
                           "deepseek, then each GPU's experts kept in the slots they hold (vLLM's "
                           "preserve_intragpu_slots)",
                           [] { return std::make_unique<DeepSeekPreservePolicy>(); }});
    r->policies.push_back(
        {"replicate-lpt",
         "TensorRT-LLM's: greedy replication, replicas heaviest first on the least loaded GPU",
         [] { return std::make_unique<ReplicateLptPolicy>(); },
         {},
         /*honours_lost_ranks=*/true});
    r->policies.push_back(
        {"timeseries",
         "SGLang's deepseek_vec idea: replicas where they cut the per-chunk peaks",
         [] { return std::make_unique<TimeSeriesPolicy>(); },
         {},
         /*honours_lost_ranks=*/true});
    const MigrationCost defaults;
    r->policies.push_back(
        {"incremental",
         "SwiftBalancer-like: bounded re-points and swaps from the current placement",
         [] { return std::make_unique<IncrementalPolicy>(); },
         {{"max_moves_per_layer", fmt::format("{}", defaults.max_moves_per_layer),
           "eplb.max_moves_per_layer", "experts moved per layer at most"}}});
    r->policies.push_back(
        {"migration-aware",
         "eplb's own: per layer, the cheapest of keeping the placement, repairing it and "
         "deepseek-preserve: straggler time over the next interval plus the time to move its bytes",
         [] { return std::make_unique<MigrationAwarePolicy>(); },
         {{"migration_weight", fmt::format("{}", defaults.weight), "eplb.migration_weight",
           "multiplies the time to move a placement's bytes; 0 ignores moving"},
          {"serve_steps", fmt::format("{}", defaults.serve_steps), "eplb.step_interval",
           "steps the new placement serves, over which its balance is priced"},
          {"seconds_per_token", fmt::format("{}", defaults.seconds_per_token),
           "compute.per_token_us (x 1e-6)", "GPU time per token-expert"},
          {"window_steps", "the window's steps", "eplb.window_size (steps filled)",
           "steps summed in the load, to turn it into per-step load"}}});
    r->policies.push_back(
        {"fault-tolerant",
         "survives any one node (or GPU) lost without reloading where slots allow: second "
         "replicas hottest first, replicas of an expert on different failure domains",
         [] { return std::make_unique<FaultTolerantPolicy>(); },
         {},
         /*honours_lost_ranks=*/true});
    r->policies.push_back(
        {"topology-aware",
         "SGLang's topology_aware: node-uniform experts, then bounded swaps that cut traffic "
         "to far ranks, then the busiest GPU's load, within the node-uniform peak",
         [] { return std::make_unique<TopologyAwarePolicy>(); },
         {},
         /*honours_lost_ranks=*/false,
         CheckTopologyAwareSize});
    return r;
  }();
  return *registry;
}

}  // namespace

bool IsLost(const PolicyInput& input, int rank) {
  return std::binary_search(input.lost_ranks.begin(), input.lost_ranks.end(), rank);
}

Status ValidatePolicyInput(const PolicyInput& input, bool honour_lost_ranks) {
  EPLB_RETURN_IF_ERROR(ValidateLoad(input.load));
  if (!input.lost_ranks.empty()) {
    if (!honour_lost_ranks) {
      return Status::InvalidArgument(
          fmt::format("it cannot place around lost GPUs; the policies that can: {}",
                      fmt::join(PoliciesHonouringLostRanks(), ", ")));
    }
    const int ranks = input.topology.num_ranks();
    for (size_t i = 0; i < input.lost_ranks.size(); ++i) {
      const int r = input.lost_ranks[i];
      if (r < 0 || r >= ranks || (i > 0 && r <= input.lost_ranks[i - 1])) {
        return Status::InvalidArgument(fmt::format(
            "lost rank {} is not valid: lost ranks are distinct, ascending, within 0..{}", r,
            ranks - 1));
      }
    }
    const int64_t live_slots =
        int64_t{ranks - static_cast<int>(input.lost_ranks.size())} * input.topology.slots_per_gpu();
    if (live_slots < input.load.cols()) {
      return Status::InvalidArgument(
          fmt::format("{} of {} GPUs lost leave {} slots for {} experts; every expert needs one",
                      input.lost_ranks.size(), ranks, live_slots, input.load.cols()));
    }
  }
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

Status SetPolicyOption(std::string_view name, std::string_view value, MigrationCost& cost) {
  struct Field {
    std::string_view name;
    double* real;
    int* integer;
    double min;
  };
  const Field fields[] = {{"migration_weight", &cost.weight, nullptr, 0},
                          {"serve_steps", &cost.serve_steps, nullptr, 1},
                          {"seconds_per_token", &cost.seconds_per_token, nullptr, 0},
                          {"window_steps", &cost.window_steps, nullptr, 1},
                          {"max_moves_per_layer", nullptr, &cost.max_moves_per_layer, 0}};
  std::vector<std::string_view> names;
  for (const Field& f : fields) {
    names.push_back(f.name);
    if (f.name != name) continue;
    double number = 0;
    int32_t whole = 0;
    const bool parsed =
        f.real != nullptr ? ParseCsvDouble(value, number) : ParseCsvInt32(value, whole);
    if (f.integer != nullptr) number = whole;
    if (!parsed || number < f.min) {
      return Status::InvalidArgument(
          fmt::format("policy option {} is {}; it must be {} of at least {}", name,
                      QuoteInput(value), f.real != nullptr ? "a number" : "an integer", f.min));
    }
    if (f.real != nullptr) *f.real = number;
    if (f.integer != nullptr) *f.integer = whole;
    return Status::Ok();
  }
  return Status::InvalidArgument(fmt::format("unknown policy option {}; the options are {}",
                                             QuoteInput(name), fmt::join(names, ", ")));
}

Status CheckPolicyCallSize(std::string_view name, int layers, int slots, int ranks) {
  std::function<Status(int, int, int)> check;
  {
    Registry& r = GetRegistry();
    std::lock_guard lock(r.mu);
    for (const auto& p : r.policies) {
      if (p.name == name) check = p.check_size;
    }
  }
  if (!check) return Status::Ok();
  return check(layers, slots, ranks).WithContext(fmt::format("eplb.policy {}: ", name));
}

Status CheckPolicyName(std::string_view name, std::string_view given_as) {
  if (IsSafePathComponent(name)) return Status::Ok();
  return Status::InvalidArgument(fmt::format(
      "{}: the policy name {} cannot name the folder of its runs; a name is 1 to 100 of letters, "
      "digits, '.', '_', '-' and '+', not starting with '.'",
      given_as, QuoteInput(name)));
}

Status RegisterPolicy(PolicyInfo info) {
  EPLB_RETURN_IF_ERROR(CheckPolicyName(info.name, "a policy registered"));
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
  // Always known, so that a run folder naming it reads back, yet not listed among the
  // registered ones: it runs only a command given on the command line or in Python
  // (external_policy.h), and fails at its first call without one.
  if (name == kExternalPolicyName) {
    return std::unique_ptr<Policy>(
        std::make_unique<ExternalPolicy>(std::string(kExternalPolicyName)));
  }
  // Likewise a recording, given only on the command line or in Python (recorded_policy.h).
  if (name == kRecordedPolicyName) {
    return std::unique_ptr<Policy>(
        std::make_unique<RecordedPolicy>(std::string(kRecordedPolicyName)));
  }
  return Status::NotFound(fmt::format("unknown policy {}; valid policies: {}", QuoteInput(name),
                                      fmt::join(names, ", ")));
}

bool PolicyHonoursLostRanks(std::string_view name) {
  if (name == kExternalPolicyName) return true;  // its placements are checked for it
  if (name == kRecordedPolicyName) return true;  // likewise
  for (const PolicyInfo& p : RegisteredPolicies()) {
    if (p.name == name) return p.honours_lost_ranks;
  }
  return false;
}

std::vector<std::string> PoliciesHonouringLostRanks() {
  std::vector<std::string> names;
  for (const PolicyInfo& p : RegisteredPolicies()) {
    if (p.honours_lost_ranks) names.push_back(p.name);
  }
  return names;
}

std::vector<PolicyInfo> RegisteredPolicies() {
  Registry& r = GetRegistry();
  std::lock_guard lock(r.mu);
  return r.policies;
}

}  // namespace eplb
