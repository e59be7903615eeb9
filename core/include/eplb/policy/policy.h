// Policy: decides how many replicas each logical expert gets and which slot holds each one.
//
// A policy sees the window's load (`layers × experts`), the placement in force (if any) and the
// topology, and returns a new placement with topology.num_slots() slots per layer. Policies are
// looked up by name in a registry; the built-in ones are registered there.
//
// Thread-safety: a Policy object is not thread-safe; use one object per thread. The registry
// functions are safe to call from any thread.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "eplb/base/status.h"
#include "eplb/model/load.h"
#include "eplb/model/placement.h"
#include "eplb/model/topology.h"

namespace eplb {

// What migration-aware policies weigh against balance. Loads are window sums; these turn them
// into time.
struct MigrationCost {
  double window_steps = 1;    // steps summed in the load window
  double serve_steps = 3000;  // steps the new placement will serve (the rearrangement interval)
  double seconds_per_token = 0.15e-6;  // per token-expert on a GPU (the step model's per_token)
  double weight = 16;                  // multiplies the cost of moving bytes; 0 ignores it
  int max_moves_per_layer = 8;         // `incremental`: experts moved per layer at most
};

struct PolicyInput {
  const LoadMatrix& load;
  const Topology& topology;
  // The placement in force, or nullptr when there is none (the first rearrangement).
  const Placement* current = nullptr;
  // Expert groups of the model (DeepSeek's group-limited routing); 1 when the model has none.
  int num_groups = 1;
  // The window cut into consecutive chunks of steps (each layers × experts, summing to `load`),
  // for policies that look at load over time; empty when unknown.
  std::span<const LoadMatrix> window_chunks = {};
  MigrationCost migration = {};
  // GPUs lost (failed or drained), ascending: a policy that honours them leaves their slots
  // empty and places every expert on the live ones (SGLang's and vLLM's fault-aware EPLB);
  // empty when every GPU is live.
  std::span<const int> lost_ranks = {};
  // The step after which it runs (a run's rearrangement), for a user's program to see; -1 when
  // it is not part of a run.
  int step = -1;
};

// Checks what every policy needs: a valid load, at least as many slots as experts, and a
// current placement (when given) of the same shape as the load and topology; lost ranks in
// range, ascending, leaving a live slot per expert — and none at all for a policy that does not
// `honour_lost_ranks` (the error names the policies that do).
Status ValidatePolicyInput(const PolicyInput& input, bool honour_lost_ranks = false);
// Whether `rank` is among the input's lost ranks.
bool IsLost(const PolicyInput& input, int rank);

// What a policy that replays recorded placements (recorded_policy.h) decides in place of the
// scenario's trigger.
struct RecordedSchedule {
  bool replays = false;    // false: the scenario's trigger (eplb.step_interval) decides
  std::vector<int> steps;  // after which the run rearranges, ascending; nothing in between
  std::optional<Placement> initial;  // the placement the run starts from; none: vLLM's
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string_view name() const = 0;
  virtual Result<Placement> Rebalance(const PolicyInput& input) = 0;
  // Whether a run's clock pays the policy's wall time before the rearrangement starts, as an
  // engine's step boundary waits for its policy. The built-ins' is not priced, so that their
  // runs are reproducible (a millisecond or so beside steps of tens to hundreds); a user's
  // program's is (external_policy.h), as it may be slow enough to matter.
  virtual bool prices_wall_time() const { return false; }
  // Called once before a run's first rearrangement, outside its timing: a policy that needs
  // something started (a user's program) starts it here, so that its start is no call's time.
  virtual Status Prepare() { return Status::Ok(); }
  // A policy that replays a recording says when the run rearranges and what it starts from,
  // its placements checked against the run's shape (layers, experts, slots, steps, the GPUs
  // idle at the start); its placements are then taken as they are (no eplb.preserve_slots, no
  // balance gate).
  virtual Result<RecordedSchedule> Recorded(const Topology& /*topology*/, int /*layers*/,
                                            int /*experts*/, int /*steps*/,
                                            std::span<const int> /*idle_ranks*/) {
    return RecordedSchedule{};
  }
};

// A setting a policy reads from PolicyInput::migration, named as the Python API's keyword
// (`eplb.rebalance(..., migration_weight=4)`), with the scenario field that sets it in runs.
struct PolicyOption {
  std::string name;
  std::string default_value;   // as the scenario's default gives it
  std::string scenario_field;  // "eplb.migration_weight"; what a run derives it from
  std::string meaning;
};

struct PolicyInfo {
  std::string name;
  std::string summary;
  std::function<std::unique_ptr<Policy>()> make;
  std::vector<PolicyOption> options = {};  // what it reads beyond the load and the placement
  // Whether it places around PolicyInput::lost_ranks (its slots there stay empty).
  bool honours_lost_ranks = false;
  // Refuses a call on `layers` layers of `slots` slots over `ranks` GPUs whose work would be
  // without bound, so that a run is refused before its first step rather than at its first
  // rearrangement; empty for the policies whose work is near-linear in the slots.
  std::function<Status(int layers, int slots, int ranks)> check_size = {};
};

// OK unless the registered policy `name` refuses a call of this size (PolicyInfo::check_size);
// OK for unknown names (MakePolicy says those).
Status CheckPolicyCallSize(std::string_view name, int layers, int slots, int ranks);

// Whether the registered policy `name` honours lost ranks; false for unknown names.
bool PolicyHonoursLostRanks(std::string_view name);
// The registered policies that honour lost ranks, in registration order.
std::vector<std::string> PoliciesHonouringLostRanks();

// Sets the option called `name` (a PolicyOption of any registered policy) in `cost` from its
// text. Errors name the option, the value and what is valid.
Status SetPolicyOption(std::string_view name, std::string_view value, MigrationCost& cost);

// OK when `name` may name a policy: it becomes a folder of a comparison, so it is one safe path
// component (base/file_io.h's IsSafePathComponent: no "." or "..", no '/'). `given_as` says
// where it came from in the error ("--policy-command").
Status CheckPolicyName(std::string_view name, std::string_view given_as);

// Adds a policy to the registry. Fails when the name is taken or cannot name a policy.
Status RegisterPolicy(PolicyInfo info);
// The policy called `name`; the error lists the valid names.
Result<std::unique_ptr<Policy>> MakePolicy(std::string_view name);
// Every registered policy, built-ins first, in registration order.
std::vector<PolicyInfo> RegisteredPolicies();

}  // namespace eplb
