// eplb run: simulate a scenario on the SimGrid model and write a run folder.
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli_util.h"
#include "commands.h"
#include "eplb/io/run_folder.h"
#include "simulate.h"
#include "simulation.h"

namespace eplb::cli {
namespace {

struct RunArgs {
  std::string scenario_path;
  std::string out;
  std::vector<std::string> overrides;
  RunFolderOptions folder;
};

int RunRun(const RunArgs& args) {
  const std::string cmd = "run";
  auto scenario = LoadScenarioArg(args.scenario_path, args.overrides);
  if (!scenario.ok()) return ReportError(cmd, scenario.status());
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
  const Status written = WriteRunFolder(dir, *run, args.folder);
  if (!written.ok()) return ReportError(cmd, written);
  PrintRunSummary(*run, dir);
  return kExitOk;
}

}  // namespace

void AddRunCommand(CLI::App& app, Action& action) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* sub = app.add_subcommand(kRunName, kRunAbout);
  AddScenarioOptions(sub, args->scenario_path, args->overrides);
  sub->add_option("--out", args->out, "Run folder to write (default: runs/<scenario name>)");
  AddNoTraceFlag(sub, args->folder);
  sub->callback([&action, args] { action = [args] { return RunRun(*args); }; });
}

}  // namespace eplb::cli
