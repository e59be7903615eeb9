// eplb-validate: `eplb validate`, which needs both the GPU backend and the simulator.
#include <array>

#include "commands.h"

int main(int argc, char** argv) {
  constexpr std::array<eplb::cli::AddCommand, 1> commands = {eplb::cli::AddValidateCommand};
  return eplb::cli::RunCommands(argc, argv, commands);
}
