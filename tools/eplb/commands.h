// The `eplb` subcommands. Each command file adds its subcommand to the app and sets `action`
// to the function that runs it once the command line is parsed; the action returns the exit
// code. A new command is one file plus one line in main.cpp's table.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace eplb::cli {

using Action = std::function<int()>;

void AddRebalanceCommand(CLI::App& app, Action& action);
void AddPlanCommand(CLI::App& app, Action& action);
void AddRunCommand(CLI::App& app, Action& action);
void AddCompareCommand(CLI::App& app, Action& action);
void AddSweepCommand(CLI::App& app, Action& action);
void AddDeviceRunCommand(CLI::App& app, Action& action);
void AddValidateCommand(CLI::App& app, Action& action);

}  // namespace eplb::cli
