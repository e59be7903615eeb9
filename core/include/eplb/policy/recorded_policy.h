// RecordedPolicy: placements a user recorded (what an engine logged, a run folder's decisions)
// replayed at the steps they took effect, so that their cost can be set beside any policy's on
// the same workload (docs/own_policy.md).
//
// A recording is a sequence of placements, each with a step: the step after which the
// rearrangement to it starts (as rearrangements.csv's `step` and PolicyInput::step count), or
// -1 for the placement the run starts from (as an engine loads its initial layout, at no cost).
// The run rearranges at those steps and at no other (SchedulingPolicy); each rearrangement goes
// through the rearranger as any other, so its migration is priced as a built-in's is. A
// placement due while a rearrangement is still in flight is skipped and counted, as an
// interval's is. A fault's recovery or scale asks for the placement recorded at its step.
//
// Every placement is checked as a policy's reply is (external_policy.h): shape, expert ids,
// every expert placed, lost and idle GPUs' slots empty; errors name the file, the entry and what
// is wrong. The files themselves are read by io/recorded_placements.h; a file reaches a run only
// from the command line (--policy-replay) or Python, as a program does: a scenario names the
// policy "recorded", and a scenario written out records the file in a comment.
//
// Thread-safety: a RecordedPolicy is used from one thread; the registry is locked.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "eplb/base/status.h"
#include "eplb/policy/policy.h"

namespace eplb {

inline constexpr std::string_view kRecordedPolicyName = "recorded";

struct RecordedEntry {
  int step = -1;                              // -1: the placement the run starts from
  std::vector<std::vector<int32_t>> phy2log;  // [layer][slot]: logical expert, -1 empty
  std::string where;                          // "FILE line 3": what errors name
  // False for a run folder's recovery or scale: the scenario's fault asks for it, no trigger.
  bool triggered = true;
};

struct Recording {
  std::string name = std::string(kRecordedPolicyName);  // the policy's name in tables
  std::string path;                                     // the file or folder, for the record
  std::vector<RecordedEntry> entries;                   // ascending steps; at most one -1, first
  // The cluster the placements were made for, where the source says (a run folder's scenario,
  // eplb's placement file's num_gpus and num_nodes); 0 where it does not (the engines' files).
  int gpus = 0;
  int nodes = 0;
};

// Parses --policy-replay's text: "FILE" names the policy "recorded", "NAME=FILE" (NAME of
// letters, digits, '-', '_' or '.') names it NAME. Returns {name, file}.
Result<std::pair<std::string, std::string>> ParsePolicyReplay(std::string_view text);

// Makes `recording.name` a policy that replays it ("recorded" is always known, so that run
// folders naming it read back; another name is registered). Fails when the name is a
// built-in's or a program's, or names another file already.
Status RegisterRecordedPolicy(const Recording& recording);
// The registry's entry for `recording` (what RegisterRecordedPolicy registers); with no
// entries, the policy fails at its first call, saying how to give a recording.
PolicyInfo RecordedPolicyInfo(const Recording& recording);

// The file registered for the policy `name`; empty when it replays none.
std::string RecordedPolicyPathFor(std::string_view name);

// What a scenario written out says of the policy `name` beside "recorded": its file, and how to
// give it again (one line; control bytes as \xNN). Empty when it replays none.
std::string RecordedPolicyNote(std::string_view name);

// OK unless `name` is "recorded" and no recording was given: the error says how to give one.
Status CheckRecordedPolicyGiven(std::string_view name);

// The recording's placements, checked against a run of `steps` steps of `layers` × `experts`
// on `topology` whose GPUs `idle_ranks` hold nothing at the start; the first entry may be the
// initial one (step -1). Errors name the entry's file and place.
Result<std::vector<Placement>> CheckRecording(const Recording& recording, const Topology& topology,
                                              int layers, int experts, int steps,
                                              std::span<const int> idle_ranks = {});
// The same for the recording registered as `name`; OK for a policy that replays none.
Status CheckRecordedPolicy(std::string_view name, const Topology& topology, int layers, int experts,
                           int steps, std::span<const int> idle_ranks = {});

class RecordedPolicy final : public Policy, public SchedulingPolicy {
 public:
  explicit RecordedPolicy(Recording recording);
  std::string_view name() const override { return name_; }
  // The placement recorded for input.step (skipping earlier ones a busy rearranger skipped).
  Result<Placement> Rebalance(const PolicyInput& input) override;
  Result<RecordedSchedule> Schedule(const Topology& topology, int layers, int experts, int steps,
                                    std::span<const int> idle_ranks) override;

 private:
  std::string name_;
  Recording recording_;
  std::vector<Placement> placements_;  // one per entry, once checked
  size_t next_ = 0;                    // the first entry not yet used
};

}  // namespace eplb
