#include "sim_jobs.h"

#include <sstream>

#include <fmt/format.h>

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

void PrintRunSummary(const RunResult& run, const std::string& dir) {
  const auto s = RunSummary(run);
  fmt::print("{}: {} steps, {:.1f} s {} in {:.1f} s wall\n", run.scenario.name, run.steps.size(),
             s["simulated_s"].get<double>(),
             run.backend == "simgrid" ? "simulated" : "run on " + run.backend, run.wall_s);
  fmt::print("  step time      mean {:.3f} ms, p99 {:.3f} ms (idle links: {:.3f} ms)\n",
             s["step_time_s"]["mean"].get<double>() * 1e3,
             s["step_time_s"]["p99"].get<double>() * 1e3,
             s["idle_step_time_s_mean"].get<double>() * 1e3);
  fmt::print("  balancedness   mean {:.4f}, min {:.4f}; imbalance ratio mean {:.4f}\n",
             s["balancedness"]["mean"].get<double>(), s["balancedness"]["min"].get<double>(),
             s["imbalance_ratio"]["mean"].get<double>());
  const auto& r = s["rearrangements"];
  fmt::print(
      "  rearrangements {} started, {} completed, {} skipped; makespan mean {:.3f} s "
      "(schedule predicted {:.3f} s, bound {:.3f} s)\n",
      r["started"].get<int>(), r["completed"].get<int>(), r["skipped"].get<int>(),
      r["makespan_s_mean"].get<double>(), r["predicted_makespan_s_mean"].get<double>(),
      r["lower_bound_s_mean"].get<double>());
  fmt::print(
      "  moved          {:.1f} GB over NVLink, {:.1f} GB over NICs in {} transfers; "
      "steps slowed {:.3f} s, stalled {:.3f} s\n",
      s["bytes_moved"]["nvlink"].get<double>() / 1e9, s["bytes_moved"]["nic"].get<double>() / 1e9,
      s["transfers"].get<int64_t>(), s["slowed_s"].get<double>(), s["stalled_s"].get<double>());
  fmt::print("  run folder     {}\n", dir);
}

#ifdef EPLB_HAVE_SIM
Status SimulateToFolder(const Scenario& scenario, const std::string& dir) {
  auto run = sim::RunSimulation(scenario);
  if (!run.ok()) return run.status();
  return WriteRunFolder(dir, *run);
}
#endif

}  // namespace eplb::cli
