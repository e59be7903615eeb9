// eplb run: simulate a scenario on the SimGrid model and write a run folder.
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli_util.h"
#include "commands.h"
#include "eplb/base/excerpt.h"
#include "eplb/base/file_io.h"
#include "eplb/engine/gpu_memory.h"
#include "eplb/engine/scenario.h"
#include "eplb/io/output_folders.h"
#include "eplb/io/run_folder.h"
#include "eplb/io/scenario_file.h"
#include "policy_command.h"
#include "progress.h"
#include "simulation.h"

namespace eplb::cli {
namespace {

struct RunArgs {
  std::string scenario_path;
  std::string out;
  std::vector<std::string> overrides;
  bool json = false;
  RunFolderOptions folder;
  PolicyCommandArgs policy_command;
};

Status RunRun(const RunArgs& args) {
  EPLB_ASSIGN_OR_RETURN(const std::vector<std::string> programs,
                        RegisterPolicyCommands(args.policy_command, /*repeatable=*/false));
  std::vector<std::string> overrides = args.overrides;
  if (!programs.empty()) {
    // Two policies named for one run: which was meant is the user's to say, not the order's.
    for (const std::string& o : args.overrides) {
      const size_t eq = o.find('=');
      if (eq != std::string::npos && o.substr(0, eq) == "eplb.policy" &&
          o.substr(eq + 1) != programs[0]) {
        return Status::InvalidArgument(fmt::format(
            "--set {} and {} name two policies for one run; give one of them (the program's or "
            "recording's policy is '{}')",
            QuoteInput(o),
            args.policy_command.commands.empty() ? "--policy-replay" : "--policy-command",
            programs[0]));
      }
    }
    overrides.push_back("eplb.policy=" + programs[0]);
  }
  auto scenario = LoadScenarioOrDefault(args.scenario_path, overrides);
  if (!scenario.ok()) return scenario.status();
  EPLB_RETURN_IF_ERROR(CheckPolicyGiven(scenario->eplb.policy));
  EPLB_RETURN_IF_ERROR(CheckPolicyReplays({scenario->eplb.policy}, *scenario));
  const std::string dir = args.out.empty() ? "runs/" + scenario->name : args.out;
  if (Status s = CheckOutputFolder(dir, kRunFolderKind); !s.ok()) return s;
  // What the run itself refuses before its first step (RunSimulation, RunLoop), refused before
  // the progress line, so that a refusal is not preceded by "step 0/N" as if the run had begun.
  if (Status s = CheckRunFitsInMemory(*scenario); !s.ok()) return s;
  if (Status s = CheckGpuMemory(*scenario); !s.ok()) return s;
  ProgressReporter reporter("eplb run", isatty(STDERR_FILENO) == 1);
  std::vector<ProgressReporter::Job> progress = {
      {scenario->name, scenario->run.steps, 0, ProgressReporter::State::kRunning}};
  reporter.Report(progress);
  auto run = sim::RunSimulation(*scenario, [&](const StepRecord& s) {
    progress[0].done_steps = s.step + 1;
    if (s.step % 16 == 0) reporter.Report(progress);  // it reads the clock; every step is many
  });
  progress[0].state = run.ok() ? ProgressReporter::State::kDone : ProgressReporter::State::kFailed;
  reporter.Finish(progress);
  if (!run.ok()) return run.status();
  Status written = WriteRunFolder(dir, *run, args.folder);
  if (!written.ok()) return written;
  PrintRunSummary(*run, dir, HumanOutput(args.json));
  if (args.json) {
    if (Status printed = PrintJsonFile(dir + "/summary.json"); !printed.ok()) return printed;
  }
  return Status::Ok();
}

}  // namespace

void AddRunCommand(CommandLine& line) {
  auto args = std::make_shared<RunArgs>();
  Command& sub = line.Add(kRunName, kRunAbout);
  AddScenarioOptions(sub, args->scenario_path, args->overrides);
  sub.Option("--out", &args->out, "Run folder to write (default: runs/<scenario name>)");
  AddNoTraceFlag(sub, args->folder);
  AddJsonFlag(sub, args->json);
  AddPolicyCommandOptions(sub, args->policy_command, /*repeatable=*/false);
  sub.SetAction([args] { return RunRun(*args); });
}

}  // namespace eplb::cli
