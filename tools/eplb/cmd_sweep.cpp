// eplb sweep: run a scenario over the cross product of field values (and policies), in
// parallel on the machine's cores, or spread over the processes of an MPI launch or a Slurm
// job array (base/launcher.h). The sweep itself is sim/studies.h's.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "cli_util.h"
#include "commands.h"
#include "eplb/base/launcher.h"
#include "eplb/io/run_folder.h"
#include "policy_command.h"
#include "progress.h"
#include "studies.h"

namespace eplb::cli {
namespace {

struct SweepArgs {
  std::string scenario_path;
  std::vector<std::string> vary;
  std::string policies;
  std::string out;
  std::vector<std::string> overrides;
  int jobs = 0;
  bool json = false;
  RunFolderOptions folder;
  PolicyCommandArgs policy_command;
};

Status RunSweep(const SweepArgs& args) {
  sim::SweepSpec spec;
  // Before the scenario, which may name a program's policy.
  EPLB_ASSIGN_OR_RETURN(const std::vector<std::string> programs,
                        RegisterPolicyCommands(args.policy_command, /*repeatable=*/true));
  spec.scenario_path = args.scenario_path;
  spec.overrides = args.overrides;
  for (const std::string& v : args.vary) {
    const size_t eq = v.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == v.size()) {
      return Status::InvalidArgument(fmt::format("--vary '{}': expected key.path=v1,v2,...", v));
    }
    EPLB_ASSIGN_OR_RETURN(std::vector<std::string> values,
                          SplitList(v.substr(eq + 1), "--vary " + v.substr(0, eq)));
    spec.vary.emplace_back(v.substr(0, eq), std::move(values));
  }
  EPLB_ASSIGN_OR_RETURN(spec.policies, SplitList(args.policies, "--policies"));
  EPLB_ASSIGN_OR_RETURN(spec.policies, WithPolicyCommands(std::move(spec.policies), programs));
  spec.out = args.out;
  spec.folder = args.folder;
  spec.jobs = args.jobs;
  EPLB_ASSIGN_OR_RETURN(const sim::SweepPlan plan, sim::PlanSweep(spec));
  if (spec.policies.empty()) EPLB_RETURN_IF_ERROR(CheckExternalPolicyGiven(plan.base.eplb.policy));
  const Launch launch = DetectLaunch();
  const std::string header =
      launch.count == 1
          ? fmt::format("eplb sweep: {} points on {}", plan.points.size(), plan.base.name)
          : fmt::format("eplb sweep: {}: points {} of {} and every {}th after", launch.Describe(),
                        launch.index, plan.points.size(), launch.count);
  EPLB_ASSIGN_OR_RETURN(const sim::SweepOutcome outcome,
                        sim::RunSweep(plan, launch, ProgressLines("eplb sweep", header)));
  if (!outcome.wrote_folder) {
    fmt::print(HumanOutput(args.json), "{}: {} of {} finished; the last to finish writes {}\n",
               launch.Describe(), outcome.finished, launch.count, plan.dir);
    return Status::Ok();
  }
  fmt::print(HumanOutput(args.json), "{} points: {}/sweep.csv, report {}/report.html\n",
             plan.points.size(), plan.dir, plan.dir);
  if (args.json) return PrintJsonFile(plan.dir + "/sweep.json");
  return Status::Ok();
}

}  // namespace

void AddSweepCommand(CommandLine& line) {
  auto args = std::make_shared<SweepArgs>();
  Command& sub = line.Add(kSweepName, kSweepAbout);
  AddScenarioOptions(sub, args->scenario_path, args->overrides);
  sub.Option("--vary", &args->vary, "key.path=v1,v2,... (repeatable; the cross product runs)")
      .Required();
  sub.Option("--policies", &args->policies, "Comma-separated policies (default: the scenario's)");
  AddPolicyCommandOptions(sub, args->policy_command, /*repeatable=*/true);
  sub.Option("--out", &args->out, "Folder to write (default: runs/sweep-<scenario name>)");
  AddNoTraceFlag(sub, args->folder);
  AddJsonFlag(sub, args->json);
  sub.Option("--jobs", &args->jobs, "Simulations at once on this machine (default: one per core)")
      .Check(AtLeast(0));
  sub.SetAction([args] { return RunSweep(*args); });
}

}  // namespace eplb::cli
