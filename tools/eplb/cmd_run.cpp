// eplb run: simulate a scenario on the SimGrid model and write a run folder.
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli_util.h"
#include "commands.h"
#include "eplb/run_output.h"
#include "eplb/scenario.h"
#include "sim_jobs.h"
#ifdef EPLB_HAVE_SIM
#include "simulation.h"
#endif

namespace eplb::cli {
namespace {

struct RunArgs {
  std::string scenario_path;
  std::string out;
  std::vector<std::string> overrides;
};

#ifdef EPLB_HAVE_SIM
void PrintSummary(const RunResult& run, const std::string& dir) {
  const auto s = RunSummary(run);
  fmt::print("{}: {} steps, {:.1f} s simulated in {:.1f} s wall\n", run.scenario.name,
             run.steps.size(), s["simulated_s"].get<double>(), run.wall_s);
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
#endif

int RunRun(const RunArgs& args) {
  const std::string cmd = "run";
  auto scenario =
      args.scenario_path.empty()
          ? ParseScenario(DefaultScenarioText(), "(built-in default scenario)", args.overrides)
          : LoadScenarioFile(args.scenario_path, args.overrides);
  if (!scenario.ok()) return ReportError(cmd, scenario.status());
#ifdef EPLB_HAVE_SIM
  const std::string dir = args.out.empty() ? "runs/" + scenario->name : args.out;
  const bool progress = isatty(STDERR_FILENO);
  const int steps = scenario->run.steps;
  auto run = sim::RunSimulation(*scenario, [&](const StepRecord& s) {
    if (progress && (s.step % 100 == 0 || s.step + 1 == steps)) {
      fmt::print(stderr, "\r  step {}/{} ({:.0f}%), simulated {:.1f} s", s.step + 1, steps,
                 100.0 * (s.step + 1) / steps, s.start_s + s.step_s);
    }
  });
  if (progress) fmt::print(stderr, "\n");
  if (!run.ok()) return ReportError(cmd, run.status());
  const Status written = WriteRunFolder(dir, *run);
  if (!written.ok()) return ReportError(cmd, written);
  PrintSummary(*run, dir);
  return kExitOk;
#else
  return ReportError(cmd, SimulatorMissing());
#endif
}

}  // namespace

void AddRunCommand(CLI::App& app, Action& action) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* sub = app.add_subcommand(
      "run", "Simulate a scenario on the SimGrid cluster model and write a run folder");
  AddScenarioOptions(sub, args->scenario_path, args->overrides);
  sub->add_option("--out", args->out, "Run folder to write (default: runs/<scenario name>)");
  sub->callback([&action, args] { action = [args] { return RunRun(*args); }; });
}

}  // namespace eplb::cli
