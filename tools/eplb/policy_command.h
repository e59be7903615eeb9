// --policy-command and --policy-timeout, for run, compare and sweep: a policy that is a user's
// program (eplb/policy/external_policy.h, docs/policy_protocol.md). The command line is the one
// place a command comes from: a scenario names the policy, never the program.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "command.h"
#include "eplb/base/status.h"
#include "eplb/policy/external_policy.h"

namespace eplb::cli {

struct PolicyCommandArgs {
  std::vector<std::string> commands;  // "CMD" or "NAME=CMD"
  double timeout_s = kDefaultPolicyTimeoutS;
  std::string time = "priced";  // --policy-time
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
}

// Registers every command given; returns their policies' names in order.
inline Result<std::vector<std::string>> RegisterPolicyCommands(const PolicyCommandArgs& args,
                                                               bool repeatable) {
  if (!repeatable && args.commands.size() > 1) {
    return Status::InvalidArgument(
        "--policy-command is given more than once; a run has one policy (compare and sweep take "
        "several, as NAME=CMD)");
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
  return names;
}

// The policies a study runs: `listed` (--policies) with every program's policy not named there
// added at the end; each checked to have its program when it is "external".
inline Result<std::vector<std::string>> WithPolicyCommands(std::vector<std::string> listed,
                                                           const std::vector<std::string>& names) {
  for (const std::string& n : names) {
    if (std::find(listed.begin(), listed.end(), n) == listed.end()) listed.push_back(n);
  }
  for (const std::string& p : listed) {
    EPLB_RETURN_IF_ERROR(CheckExternalPolicyGiven(p).WithContext("--policies: "));
  }
  return listed;
}

}  // namespace eplb::cli
