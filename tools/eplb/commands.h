// The `eplb` subcommands. Each command file adds its subcommand to the app and sets `action` to
// the function that runs it once the command line is parsed; the action returns the exit code.
// Which executable carries which command is the runner table in main.cpp.
#pragma once

#include <string>

#include "cli_util.h"
#include "command.h"

namespace eplb::cli {

// Names and one-line descriptions of the commands other executables carry: their own
// subcommands and eplb's --help (main.cpp) both use these.
inline constexpr const char* kRunName = "run";
inline constexpr const char* kRunAbout =
    "Simulate a scenario on the SimGrid cluster model and write a run folder";
inline constexpr const char* kCompareName = "compare";
inline constexpr const char* kCompareAbout =
    "Run a scenario once per policy and write a comparison report";
inline constexpr const char* kSweepName = "sweep";
inline constexpr const char* kSweepAbout =
    "Run a scenario over the cross product of field values and policies";
inline constexpr const char* kDeviceRunName = "device-run";
inline constexpr const char* kDeviceRunAbout =
    "Run a scenario's rearrangements on real GPUs (CUDA/NCCL), write a run folder";
inline constexpr const char* kValidateName = "validate";
inline constexpr const char* kValidateAbout =
    "Compare the simulator's transfer times with a short run of the same scenario on GPUs";

// `validate --published`: the published figures against the simulator (cmd_published.cpp), in
// eplb itself, since it needs neither a GPU nor SimGrid; eplb-validate takes the same flags.
struct PublishedArgs {
  bool published = false;
  std::string figures;
  std::string out;
  bool json = false;
};
Status RunPublished(const PublishedArgs& args);
void AddPublishedOptions(Command& command, PublishedArgs& args);

// In eplb itself (the core alone).
void AddA2aCommand(CommandLine& line);
void AddPublishedCommand(CommandLine& line);
void AddRebalanceCommand(CommandLine& line);
void AddPlanCommand(CommandLine& line);
void AddPoliciesCommand(CommandLine& line);
// In eplb-sim (SimGrid).
void AddRunCommand(CommandLine& line);
void AddCompareCommand(CommandLine& line);
void AddSweepCommand(CommandLine& line);
// In eplb-device (CUDA, NCCL, MPI).
void AddDeviceRunCommand(CommandLine& line);
// In eplb-validate (CUDA, NCCL, MPI and SimGrid).
void AddValidateCommand(CommandLine& line);

}  // namespace eplb::cli
