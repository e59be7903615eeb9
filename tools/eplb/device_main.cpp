// eplb-device: `eplb device-run` on real GPUs, the only command that loads CUDA, NCCL and MPI
// without the simulator.
#include <array>

#include "commands.h"

int main(int argc, char** argv) {
  constexpr std::array<eplb::cli::AddCommand, 1> commands = {eplb::cli::AddDeviceRunCommand};
  return eplb::cli::RunCommands(argc, argv, commands);
}
