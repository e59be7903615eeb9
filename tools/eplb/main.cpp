// eplb: expert-parallel load balancing toolkit. See README.md.
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli_util.h"
#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"eplb: expert-parallel load balancing for Mixture-of-Experts models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "eplb 0.1.0");

  eplb::cli::Action action;
  eplb::cli::AddRebalanceCommand(app, action);
  eplb::cli::AddPlanCommand(app, action);
  eplb::cli::AddRunCommand(app, action);
  eplb::cli::AddCompareCommand(app, action);
  eplb::cli::AddSweepCommand(app, action);
  eplb::cli::AddDeviceRunCommand(app, action);
  eplb::cli::AddValidateCommand(app, action);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? eplb::cli::kExitOk : eplb::cli::kExitBadInput;
  }
  return action();
}
