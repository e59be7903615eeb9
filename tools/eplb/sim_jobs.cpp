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
