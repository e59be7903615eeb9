#include "simulate.h"

#include "eplb/io/run_folder.h"
#include "simulation.h"

namespace eplb::cli {

Status SimulateToFolder(const Scenario& scenario, const std::string& dir) {
  auto run = sim::RunSimulation(scenario);
  if (!run.ok()) return run.status();
  return WriteRunFolder(dir, *run);
}

}  // namespace eplb::cli
