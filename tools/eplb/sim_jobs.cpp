#include "sim_jobs.h"

#include <sstream>

#include "eplb/run_output.h"
#ifdef EPLB_HAVE_SIM
#include "simulation.h"
#endif

namespace eplb::cli {

Result<Scenario> LoadScenarioArg(const std::string& path,
                                 const std::vector<std::string>& overrides) {
  if (path.empty())
    return ParseScenario(DefaultScenarioText(), "(built-in default scenario)", overrides);
  return LoadScenarioFile(path, overrides);
}

Status SimulatorMissing() {
  return Status::Internal(
      "this eplb was built without the SimGrid simulator (SimGrid >= 3.32 was not found at build "
      "time; install libsimgrid-dev and rebuild)");
}

void AddScenarioOptions(CLI::App* command, std::string& scenario_path,
                        std::vector<std::string>& overrides) {
  command->add_option("scenario", scenario_path,
                      "Scenario file (YAML); default: the built-in DeepSeek-V3 prefill EP32");
  command->add_option("--set", overrides, "Override a scenario field: key.path=value (repeatable)");
}

std::vector<std::string> SplitList(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

#ifdef EPLB_HAVE_SIM
Status SimulateToFolder(const Scenario& scenario, const std::string& dir) {
  auto run = sim::RunSimulation(scenario);
  if (!run.ok()) return run.status();
  return WriteRunFolder(dir, *run);
}
#endif

}  // namespace eplb::cli
