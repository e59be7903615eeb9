// The `eplb` subcommands. Each command file adds its subcommand to the app and sets `action` to
// the function that runs it once the command line is parsed; the action returns the exit code.
// Which executable carries which command is the runner table in main.cpp.
#pragma once

#include <CLI/CLI.hpp>

#include "cli_util.h"

namespace eplb::cli {

// In eplb itself (the core alone).
void AddRebalanceCommand(CLI::App& app, Action& action);
void AddPlanCommand(CLI::App& app, Action& action);
// In eplb-sim (SimGrid).
void AddRunCommand(CLI::App& app, Action& action);
void AddCompareCommand(CLI::App& app, Action& action);
void AddSweepCommand(CLI::App& app, Action& action);
// In eplb-device (CUDA, NCCL, MPI).
void AddDeviceRunCommand(CLI::App& app, Action& action);
// In eplb-validate (CUDA, NCCL, MPI and SimGrid).
void AddValidateCommand(CLI::App& app, Action& action);

}  // namespace eplb::cli
