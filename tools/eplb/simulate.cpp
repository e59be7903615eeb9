#include "simulate.h"

#include "eplb/io/run_folder.h"
#include "simulation.h"

namespace eplb::cli {

Status SimulateToFolder(const Scenario& scenario, const std::string& dir,
                        const RunFolderOptions& options, std::atomic<int64_t>* steps_done) {
  std::function<void(const StepRecord&)> on_step;
  if (steps_done != nullptr) {
    on_step = [steps_done](const StepRecord& s) {
      steps_done->store(s.step + 1, std::memory_order_relaxed);
    };
  }
  auto run = sim::RunSimulation(scenario, on_step);
  if (!run.ok()) return run.status();
  return WriteRunFolder(dir, *run, options);
}

void AddNoTraceFlag(Command& command, RunFolderOptions& options) {
  command.Flag(
      "--no-trace", [&options](int64_t) { options.trace = false; },
      "Leave out trace.json (two events per expert transfer: the largest file of a run folder, "
      "read only by trace viewers)");
}

}  // namespace eplb::cli
