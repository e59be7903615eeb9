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

PolicyInfo PlaceholderOf(const ExternalPolicyCommand& none) {
  PolicyInfo info = ExternalPolicyInfo(none);
  info.placeholder = true;
  return info;
}
PolicyInfo PlaceholderOf(const Recording& none) {
  PolicyInfo info = RecordedPolicyInfo(none);
  info.placeholder = true;
  return info;
}

constexpr PolicyOption kOptions[] = {
    {"migration_weight", &PolicyTuning::weight, nullptr, 0, "eplb.migration_weight",
     "multiplies the time to move a placement's bytes; 0 ignores moving"},
    {"serve_steps", &PolicyTuning::serve_steps, nullptr, 1, "eplb.step_interval",
     "steps the new placement serves, over which its balance is priced"},
    {"seconds_per_token", &PolicyTuning::seconds_per_token, nullptr, 0,
     "compute.per_token_us (x 1e-6)", "GPU time per token-expert"},
    {"window_steps", &PolicyTuning::window_steps, nullptr, 1, "eplb.window_size (steps filled)",
     "steps summed in the load, to turn it into per-step load"},
    {"max_moves_per_layer", nullptr, &PolicyTuning::max_moves_per_layer, 0,
     "eplb.max_moves_per_layer", "experts moved per layer at most"},
};

// Built-ins are listed here rather than self-registered from static initialisers, which a
// static library's linker may drop.
Registry& GetRegistry() {
  static Registry* registry = [] {
    auto* r = new Registry;
    r->policies.push_back(
        {"deepseek",
         "DeepSeek's EPLB (`eplb.py`), bit-for-bit: expert groups packed onto nodes, hot "
         "experts replicated inside nodes, replicas packed onto GPUs; the global policy "
         "when groups do not divide by nodes",
         [] { return std::make_unique<DeepSeekPolicy>(); },
         {},
         /*honours_lost_ranks=*/true});
    r->policies.push_back({"static", "never rearranges: the baseline",
                           [] { return std::make_unique<StaticPolicy>(); }});
    r->policies.push_back(
        {"deepseek-preserve",
         "`deepseek`, then vLLM's `preserve_intragpu_slots` (`model/slot_preservation.h`): "
         "each GPU holds the experts `deepseek` gives it, and an expert it already held "
         "keeps its old slot, incoming experts filling the freed slots; so it moves the "
         "same experts between GPUs as `deepseek` and turns its local copies into "
         "unchanged slots",
         [] { return std::make_unique<DeepSeekPreservePolicy>(); }});
    r->policies.push_back(
        {"replicate-lpt",
         "TensorRT-LLM's host algorithm: greedy replication by load per replica, replicas "
         "heaviest first on the least loaded GPU with a free slot",
         [] { return std::make_unique<ReplicateLptPolicy>(); },
         {},
         /*honours_lost_ranks=*/true});
    r->policies.push_back(
        {"timeseries",
         "SGLang's `deepseek_vec` idea: each extra replica where it most cuts the "
         "per-chunk peaks of the window, not its sum",
         [] { return std::make_unique<TimeSeriesPolicy>(); },
         {},
         /*honours_lost_ranks=*/true});
    r->policies.push_back(
        {"incremental",
         "SwiftBalancer-like: keeps the placement, re-points redundant slots to the "
         "hottest experts, swaps experts off the busiest GPU, at most "
         "`eplb.max_moves_per_layer` moves per layer",
         [] { return std::make_unique<IncrementalPolicy>(); },
         {"max_moves_per_layer"}});
    r->policies.push_back(
        {"migration-aware",
         "eplb's own: per layer, the cheapest of keeping, repairing the current placement, "
         "or `deepseek-preserve`, priced as straggler time over the next interval plus "
         "`eplb.migration_weight` × the time to move its bytes; exact by enumeration on "
         "tiny layers",
         [] { return std::make_unique<MigrationAwarePolicy>(); },
         {"migration_weight", "serve_steps", "seconds_per_token", "window_steps"}});
    r->policies.push_back(
        {"fault-tolerant",
         "survives the loss of any one node (or, on one node, any one GPU) without "
         "reloading weights, where slots allow: a second replica for every expert, hottest "
         "first, while redundant slots last, then the rest by load per replica; an "
         "expert's replicas packed on different failure domains, least loaded GPU first. "
         "Trades balance for survivability",
         [] { return std::make_unique<FaultTolerantPolicy>(); },
         {},
         /*honours_lost_ranks=*/true});
    r->policies.push_back(
        {"topology-aware",
         "SGLang's `topology_aware`: node-uniform experts, then bounded swaps that cut "
         "traffic to far ranks, then the busiest GPU's load, within the node-uniform peak",
         [] { return std::make_unique<TopologyAwarePolicy>(); },
         {},
         /*honours_lost_ranks=*/false,
         CheckTopologyAwareSize});
    // Always known, so that a run folder naming them reads back; what they run is given only
    // on the command line or in Python (RegisterExternalPolicy, RegisterRecordedPolicy).
    r->policies.push_back(PlaceholderOf(ExternalPolicyCommand{}));
    r->policies.push_back(PlaceholderOf(Recording{}));
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

std::string PolicyOption::DefaultText() const {
  // A run derives it from the load window it has filled; outside a run, the load is one step.
  if (name == "window_steps") return "the window's steps";
  const PolicyTuning defaults;
  return real != nullptr ? fmt::format("{}", defaults.*real) : fmt::format("{}", defaults.*integer);
}

std::span<const PolicyOption> PolicyOptions() {
  return kOptions;
}

const PolicyOption* FindPolicyOption(std::string_view name) {
  for (const PolicyOption& o : kOptions) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

Status SetPolicyOption(std::string_view name, std::string_view value, PolicyTuning& tuning) {
  const PolicyOption* o = FindPolicyOption(name);
  if (o == nullptr) {
    std::vector<std::string_view> names;
    for (const PolicyOption& each : kOptions) names.push_back(each.name);
    return Status::InvalidArgument(fmt::format("unknown policy option {}; the options are {}",
                                               QuoteInput(name), fmt::join(names, ", ")));
  }
  double number = 0;
  int32_t whole = 0;
  const bool parsed =
      o->real != nullptr ? ParseCsvDouble(value, number) : ParseCsvInt32(value, whole);
  if (o->integer != nullptr) number = whole;
  if (!parsed || number < o->min) {
    return Status::InvalidArgument(
        fmt::format("policy option {} is {}; it must be {} of at least {}", name, QuoteInput(value),
                    o->real != nullptr ? "a number" : "an integer", o->min));
  }
  if (o->real != nullptr) tuning.*(o->real) = number;
  if (o->integer != nullptr) tuning.*(o->integer) = whole;
  return Status::Ok();
}

Status CheckPolicyCallSize(std::string_view name, int layers, int slots, int ranks) {
  const std::optional<PolicyInfo> p = FindPolicy(name);
  if (!p || !p->check_size) return Status::Ok();
  return p->check_size(layers, slots, ranks).WithContext(fmt::format("eplb.policy {}: ", name));
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
  for (const std::string& option : info.options) {
    if (FindPolicyOption(option) == nullptr) {
      return Status::InvalidArgument(fmt::format(
          "the policy '{}' reads the option {}, which PolicyOptions() does not describe", info.name,
          QuoteInput(option)));
    }
  }
  Registry& r = GetRegistry();
  std::lock_guard lock(r.mu);
  for (PolicyInfo& p : r.policies) {
    if (p.name != info.name) continue;
    // A placeholder is given what it runs; a user's policy given again the same is refreshed.
    if (p.placeholder ||
        (p.source == info.source && p.source != PolicySource::kBuiltIn && p.given == info.given)) {
      p = std::move(info);
      return Status::Ok();
    }
    return Status::InvalidArgument(
        fmt::format("a policy named '{}' is already registered", info.name));
  }
  r.policies.push_back(std::move(info));
  return Status::Ok();
}

Status RegisterGivenPolicy(PolicyInfo info, std::string_view flag) {
  if (const std::optional<PolicyInfo> known = FindPolicy(info.name)) {
    if (known->source == PolicySource::kBuiltIn) {
      return Status::InvalidArgument(fmt::format(
          "{}: {} is a built-in policy's name; name yours otherwise", flag, QuoteInput(info.name)));
    }
    if (known->source != info.source) {
      return Status::InvalidArgument(fmt::format(
          "{}: {} is {}; name yours otherwise", flag, QuoteInput(info.name),
          known->source == PolicySource::kProgram ? "a program's policy (--policy-command)"
                                                  : "a recording's policy (--policy-replay)"));
    }
    if (!known->placeholder && known->given != info.given) {
      return Status::InvalidArgument(fmt::format(
          "{}: the policy {} is given twice, as {} and as {}; give each name once", flag,
          QuoteInput(info.name), QuoteInput(known->given), QuoteInput(info.given)));
    }
  }
  return RegisterPolicy(std::move(info));
}

std::optional<PolicyInfo> FindPolicy(std::string_view name) {
  Registry& r = GetRegistry();
  std::lock_guard lock(r.mu);
  for (const PolicyInfo& p : r.policies) {
    if (p.name == name) return p;
  }
  return std::nullopt;
}

Result<std::unique_ptr<Policy>> MakePolicy(std::string_view name) {
  if (const std::optional<PolicyInfo> p = FindPolicy(name)) return p->make();
  std::vector<std::string> names;
  for (const PolicyInfo& p : RegisteredPolicies()) names.push_back(p.name);
  return Status::NotFound(fmt::format("unknown policy {}; valid policies: {}", QuoteInput(name),
                                      fmt::join(names, ", ")));
}

bool PolicyHonoursLostRanks(std::string_view name) {
  const std::optional<PolicyInfo> p = FindPolicy(name);
  return p && p->honours_lost_ranks;
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
  std::vector<PolicyInfo> listed;
  for (const PolicyInfo& p : r.policies) {
    if (p.listed) listed.push_back(p);
  }
  return listed;
}

}  // namespace eplb
