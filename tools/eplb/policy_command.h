// --policy-command and --policy-timeout, for run, compare and sweep: a policy that is a user's
// program (eplb/policy/external_policy.h, docs/policy_protocol.md). The command line is the one
// place a command comes from: a scenario names the policy, never the program. --policy-replay
// likewise: recorded placements replayed (eplb/policy/recorded_policy.h, docs/own_policy.md).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "command.h"
#include "eplb/base/status.h"
#include "eplb/engine/scenario.h"
#include "eplb/io/recorded_placements.h"
#include "eplb/policy/external_policy.h"
#include "eplb/policy/recorded_policy.h"

namespace eplb::cli {

struct PolicyCommandArgs {
  std::vector<std::string> commands;  // "CMD" or "NAME=CMD"
  double timeout_s = kDefaultPolicyTimeoutS;
  std::string time = "priced";       // --policy-time
  std::vector<std::string> replays;  // --policy-replay: "FILE" or "NAME=FILE"
};

inline void AddPolicyCommandOptions(Command& command, PolicyCommandArgs& args, bool repeatable) {
  command.Option("--policy-command", &args.commands,
                 std::string("A program as the policy, run with /bin/sh -c and spoken to over its "
                             "stdin and stdout (docs/policy_protocol.md): 'CMD' is the policy "
                             "'external', 'NAME=CMD' the policy NAME") +
                     (repeatable ? " (repeatable)" : ""));
  command
      .Option("--policy-timeout", &args.timeout_s,
              "Seconds the program may take to answer each rearrangement before the run fails")
      .ShowDefault()
      .Check(Positive());
  command
      .Option("--policy-time", &args.time,
              "priced: the simulated clock waits for each call's wall time before the "
              "rearrangement starts, as an engine does; free: it does not, as for the built-in "
              "policies, and the run folder is the same whatever the machine")
      .ShowDefault()
      .Check(OneOf({"priced", "free"}));
  command.Option("--policy-replay", &args.replays,
                 std::string("Recorded placements as the policy, each applied at its step "
                             "(docs/own_policy.md): a run folder, JSON lines of {\"step\": N, "
                             "\"phy2log\": [[...]]}, or one placement (eplb's, SGLang's "
                             "--init-expert-location, vLLM's map) from step 0; 'FILE' is the "
                             "policy 'recorded', 'NAME=FILE' the policy NAME") +
                     (repeatable ? " (repeatable)" : ""));
}

// Registers every command given; returns their policies' names in order.
inline Result<std::vector<std::string>> RegisterPolicyCommands(const PolicyCommandArgs& args,
                                                               bool repeatable) {
  if (!repeatable && args.commands.size() > 1) {
    return Status::InvalidArgument(
        "--policy-command is given more than once; a run has one policy (compare and sweep take "
        "several, as NAME=CMD)");
  }
  if (!repeatable && args.commands.size() + args.replays.size() > 1) {
    return Status::InvalidArgument(
        "--policy-replay is given more than once, or with --policy-command; a run has one "
        "policy (compare and sweep take several, as NAME=FILE and NAME=CMD)");
  }
  std::vector<std::string> names;
  for (const std::string& text : args.commands) {
    EPLB_ASSIGN_OR_RETURN(ExternalPolicyCommand c, ParsePolicyCommand(text, args.timeout_s));
    c.priced = args.time == "priced";
    if (std::find(names.begin(), names.end(), c.name) != names.end()) {
      return Status::InvalidArgument(
          fmt::format("--policy-command names the policy '{}' twice; name each program otherwise "
                      "(NAME=CMD)",
                      c.name));
    }
    EPLB_RETURN_IF_ERROR(RegisterExternalPolicy(c));
    names.push_back(c.name);
  }
  for (const std::string& text : args.replays) {
    EPLB_ASSIGN_OR_RETURN(const auto parsed, ParsePolicyReplay(text));
    const auto& [name, file] = parsed;
    if (std::find(names.begin(), names.end(), name) != names.end()) {
      return Status::InvalidArgument(fmt::format(
          "--policy-replay names the policy '{}' twice, or as a program's too; name each "
          "recording otherwise (NAME=FILE)",
          name));
    }
    EPLB_ASSIGN_OR_RETURN(Recording recording, ReadRecording(file, name));
    EPLB_RETURN_IF_ERROR(RegisterRecordedPolicy(recording));
    names.push_back(name);
  }
  return names;
}

// OK when `policy` has what it runs: a program's its command, a recording's its file.
inline Status CheckPolicyGiven(const std::string& policy) {
  EPLB_RETURN_IF_ERROR(CheckExternalPolicyGiven(policy));
  return CheckRecordedPolicyGiven(policy);
}

// Every recording among `policies` checked against `scenario` (shape, steps, the GPUs idle at
// the start) before anything runs or is written.
inline Status CheckPolicyReplays(const std::vector<std::string>& policies,
                                 const Scenario& scenario) {
  std::vector<int> idle;
  for (int g = scenario.initial_gpus(); g < scenario.num_gpus(); ++g) idle.push_back(g);
  for (const std::string& p : policies) {
    EPLB_RETURN_IF_ERROR(CheckRecordedPolicy(p, scenario.topology(), scenario.model.layers,
                                             scenario.model.experts, scenario.run.steps, idle)
                             .WithContext("--policy-replay: "));
  }
  return Status::Ok();
}

// The policies a study runs: `listed` (--policies) with every program's policy not named there
// added at the end; each checked to have its program when it is "external".
inline Result<std::vector<std::string>> WithPolicyCommands(std::vector<std::string> listed,
                                                           const std::vector<std::string>& names) {
  for (const std::string& n : names) {
    if (std::find(listed.begin(), listed.end(), n) == listed.end()) listed.push_back(n);
  }
  for (const std::string& p : listed) {
    EPLB_RETURN_IF_ERROR(CheckPolicyGiven(p).WithContext("--policies: "));
  }
  return listed;
}

}  // namespace eplb::cli
