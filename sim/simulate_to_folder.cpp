#include <functional>

#include "simulation.h"

namespace eplb::sim {

Status SimulateToFolder(const Scenario& scenario, const std::string& dir,
                        const RunFolderOptions& options, std::atomic<int64_t>* steps_done) {
  std::function<void(const StepRecord&)> on_step;
  if (steps_done != nullptr) {
    on_step = [steps_done](const StepRecord& s) {
      steps_done->store(s.step + 1, std::memory_order_relaxed);
    };
  }
  auto run = RunSimulation(scenario, on_step);
  if (!run.ok()) return run.status();
  return WriteRunFolder(dir, *run, options);
}

}  // namespace eplb::sim
