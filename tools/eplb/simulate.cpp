#include "simulate.h"

#include "eplb/io/run_folder.h"
#include "simulation.h"

namespace eplb::cli {

Status SimulateToFolder(const Scenario& scenario, const std::string& dir,
                        const RunFolderOptions& options) {
  auto run = sim::RunSimulation(scenario);
  if (!run.ok()) return run.status();
  return WriteRunFolder(dir, *run, options);
}

void AddNoTraceFlag(CLI::App* command, RunFolderOptions& options) {
  command->add_flag_function(
      "--no-trace", [&options](int64_t) { options.trace = false; },
      "Leave out trace.json (two events per expert transfer: the largest file of a run folder, "
      "read only by trace viewers)");
}

}  // namespace eplb::cli
