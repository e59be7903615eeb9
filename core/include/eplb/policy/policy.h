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

// The settings a policy may read beyond the load and the placement (each described once in
// PolicyOptions()): what migration-aware policies weigh against balance, where loads are window
// sums that these turn into time, and how far an incremental policy may go.
struct PolicyTuning {
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
  PolicyTuning tuning = {};
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
// scenario's trigger (SchedulingPolicy).
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
};

// A policy that decides when a run rearranges and what it starts from, in place of the
// scenario's trigger (a recording's replay: recorded_policy.h). The loop asks a policy that is
// one (dynamic_cast) before its first step; its placements are then taken as they are (no
// eplb.preserve_slots, no balance gate).
class SchedulingPolicy {
 public:
  virtual ~SchedulingPolicy() = default;
  // The schedule for a run of `steps` steps of `layers` × `experts` on `topology` whose GPUs
  // `idle_ranks` hold nothing at the start; fails when the policy cannot serve that run.
  virtual Result<RecordedSchedule> Schedule(const Topology& topology, int layers, int experts,
                                            int steps, std::span<const int> idle_ranks) = 0;
};

// A setting a policy reads from PolicyInput::tuning, described once: named as the Python API's
// keyword (`eplb.rebalance(..., migration_weight=4)`), set in runs from its scenario field. Read
// by SetPolicyOption, listed by `eplb policies`.
struct PolicyOption {
  std::string_view name;
  double PolicyTuning::*real = nullptr;  // its member when a number,
  int PolicyTuning::*integer = nullptr;  // or when an integer
  double min = 0;                        // the least valid value
  std::string_view scenario_field;       // "eplb.migration_weight"; what a run derives it from
  std::string_view meaning;
  // PolicyTuning's default, as text ("16"); what a run derives instead where the field does.
  std::string DefaultText() const;
};
// Every option, in the order `eplb policies` lists them.
std::span<const PolicyOption> PolicyOptions();
// The option called `name`; nullptr when there is none.
const PolicyOption* FindPolicyOption(std::string_view name);

// Where a registered policy's decisions come from.
enum class PolicySource {
  kBuiltIn,
  kProgram,    // a user's program (external_policy.h): `given` is its command
  kRecording,  // recorded placements (recorded_policy.h): `given` is the file or folder
};

struct PolicyInfo {
  std::string name;
  std::string summary;
  std::function<std::unique_ptr<Policy>()> make;
  std::vector<std::string> options = {};  // the names of the PolicyOptions() it reads
  // Whether it places around PolicyInput::lost_ranks (its slots there stay empty).
  bool honours_lost_ranks = false;
  // Refuses a call on `layers` layers of `slots` slots over `ranks` GPUs whose work would be
  // without bound, so that a run is refused before its first step rather than at its first
  // rearrangement; empty for the policies whose work is near-linear in the slots.
  std::function<Status(int layers, int slots, int ranks)> check_size = {};
  PolicySource source = PolicySource::kBuiltIn;
  std::string given = {};  // the command or the recording's file; empty for a built-in
  // Known so that a run folder naming it reads back, yet given nothing to run ("external",
  // "recorded" until the command line or Python gives them): its policy fails at its first
  // call, saying how to give it.
  bool placeholder = false;
  // In RegisteredPolicies(), `eplb policies` and the names errors list; not "external" and
  // "recorded", which a file never names as a choice, given or not.
  bool listed = true;
};

// OK unless the registered policy `name` refuses a call of this size (PolicyInfo::check_size);
// OK for unknown names (MakePolicy says those).
Status CheckPolicyCallSize(std::string_view name, int layers, int slots, int ranks);

// Whether the registered policy `name` honours lost ranks; false for unknown names.
bool PolicyHonoursLostRanks(std::string_view name);
// The registered policies that honour lost ranks, in registration order.
std::vector<std::string> PoliciesHonouringLostRanks();

// Sets the option called `name` (one of PolicyOptions()) in `tuning` from its text. Errors name
// the option, the value and what is valid.
Status SetPolicyOption(std::string_view name, std::string_view value, PolicyTuning& tuning);

// OK when `name` may name a policy: it becomes a folder of a comparison, so it is one safe path
// component (base/file_io.h's IsSafePathComponent: no "." or "..", no '/'). `given_as` says
// where it came from in the error ("--policy-command").
Status CheckPolicyName(std::string_view name, std::string_view given_as);

// Adds a policy to the registry, or gives a placeholder of its name what it runs. Fails when the
// name is taken or cannot name a policy.
Status RegisterPolicy(PolicyInfo info);
// Registers a user's policy (`info.source` a program or a recording) given by `flag`
// ("--policy-command", "--policy-replay"): refused when its name is a built-in's or another kind
// of user's policy, or is given again with another command or file; the same given again
// refreshes it (a program's time limit).
Status RegisterGivenPolicy(PolicyInfo info, std::string_view flag);
// The registered policy called `name`, placeholders included.
std::optional<PolicyInfo> FindPolicy(std::string_view name);
// The policy called `name`; the error lists the valid names.
Result<std::unique_ptr<Policy>> MakePolicy(std::string_view name);
// Every listed policy (PolicyInfo::listed), built-ins first, in registration order.
std::vector<PolicyInfo> RegisteredPolicies();

}  // namespace eplb
