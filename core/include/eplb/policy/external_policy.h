// ExternalPolicy: a policy that is a user's program, spoken to over its stdin and stdout.
//
// Code runs only when the user names it: a command reaches this file from the command line
// (--policy-command) or from Python, never from a scenario, figures file or run folder. A
// scenario names the policy ("external", or the name given as NAME=CMD), and a scenario written
// out records the command in a comment, for the reader only.
//
// The program is started once per run (`/bin/sh -c CMD`, in a process group of its own, stopped
// with this process on SIGINT/SIGTERM) and asked once per rearrangement. The protocol
// (docs/policy_protocol.md; all little-endian):
//   greeting "EPLH", int32 version (1), once, when the program is ready: its start is not a
//            call's time
//   request  "EPLB", int32 version (1), layers, experts, slots, gpus, nodes, slots_per_gpu,
//            groups, step, reserved (0); uint8 lost[gpus] (1: lost, leave its slots empty);
//            float64 load[layers × experts]; int32 old_phy2log[layers × slots] (-1: empty)
//   reply    "EPLR", int32 status; status 0: int32 rows, cols, phy2log[rows × cols];
//            status 1: int32 length, that many bytes of a message to show the user
// Its reply is untrusted: the shape, every value, every expert placed and every lost GPU's
// slots left empty are checked, and errors name the program, the layer and what is wrong (the
// loop adds the step). A program that exits, crashes, hangs past the time limit or writes
// anything else fails the run. What it prints on stderr passes through.
//
// Thread-safety: an ExternalPolicy is used from one thread; the registry is locked.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>

#include "eplb/base/status.h"
#include "eplb/policy/policy.h"

namespace eplb {

inline constexpr std::string_view kExternalPolicyName = "external";
inline constexpr double kDefaultPolicyTimeoutS = 60;
inline constexpr int32_t kPolicyProtocolVersion = 1;

struct ExternalPolicyCommand {
  std::string name;                           // the policy's name in scenarios and tables
  std::string command;                        // run with /bin/sh -c
  double timeout_s = kDefaultPolicyTimeoutS;  // per call, and for the program's start
  // Whether a run's clock pays each call's wall time (Policy::prices_wall_time); false for
  // reproducible run folders (--policy-time free).
  bool priced = true;
};

// Parses --policy-command's text: "CMD" names the policy "external"; "NAME=CMD", where NAME is
// letters, digits, '-', '_' or '.', and the rest does not start with a space, names it NAME.
Result<ExternalPolicyCommand> ParsePolicyCommand(std::string_view text, double timeout_s);

// Makes `command.name` a policy that runs `command.command`: "external" is always registered
// (so that run folders naming it read back) and this gives its command; another name is
// registered. Fails when the name is a built-in's or already has another command.
Status RegisterExternalPolicy(const ExternalPolicyCommand& command);
// The registry's entry for `command` (what RegisterExternalPolicy registers); with no command,
// the policy fails at its first call, saying how to give one.
PolicyInfo ExternalPolicyInfo(const ExternalPolicyCommand& command);

// The command registered for the policy `name`; empty when it is not a user's program.
std::string ExternalPolicyCommandFor(std::string_view name);

// OK unless `name` is "external" and no command was given: the error says that the policy was
// a user's program, which a file never names, and how to give it again.
Status CheckExternalPolicyGiven(std::string_view name);

class ExternalPolicy final : public Policy {
 public:
  explicit ExternalPolicy(ExternalPolicyCommand command);
  ~ExternalPolicy() override;
  std::string_view name() const override { return name_; }
  // Starts the program on the first call.
  Result<Placement> Rebalance(const PolicyInput& input) override;
  bool prices_wall_time() const override { return command_.priced; }
  // Starts the program and waits for its greeting (Rebalance does, when not called).
  Status Prepare() override;

 private:
  struct Child;
  Status Start();
  // The greeting, within the time limit.
  Status ReadGreeting();
  // Reads exactly `n` bytes of `what` by `deadline_s`, or says why they did not come.
  Status ReadExactly(char* data, size_t n, std::string_view what, double deadline_s);
  // The reply's placement, checked.
  Result<Placement> ReadReply(const PolicyInput& input, double deadline_s);
  std::string Describe() const;

  std::string name_;
  ExternalPolicyCommand command_;
  std::unique_ptr<Child> child_;
};

}  // namespace eplb
