// eplb-sim: the commands that simulate (run, compare, sweep). `eplb` hands them here so that
// only they load SimGrid; it can also be run directly, with the same arguments.
#include <array>

#include "commands.h"
#include "eplb/base/interrupt.h"

int main(int argc, char** argv) {
  // Before any thread starts: Ctrl-C and SIGTERM stop the run, its children and its partial
  // folder, and exit 130/143.
  eplb::InstallInterruptHandler();
  constexpr std::array<eplb::cli::AddCommand, 3> commands = {
      eplb::cli::AddRunCommand, eplb::cli::AddCompareCommand, eplb::cli::AddSweepCommand};
  return eplb::cli::RunCommands(argc, argv, commands);
}
