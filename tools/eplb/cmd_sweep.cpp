// eplb sweep: run a scenario over the cross product of field values (and policies), in
// parallel on the machine's cores, or spread over the processes of an MPI launch or a Slurm
// job array (base/launcher.h). The sweep itself is sim/studies.h's.
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"
#include "eplb/base/file_io.h"
#include "eplb/base/launcher.h"
#include "eplb/io/output_folders.h"
#include "eplb/io/run_folder.h"
#include "eplb/reports/report.h"
#include "eplb/studies/studies.h"
#include "policy_command.h"
#include "progress.h"
#include "simulation.h"
#include "study_table.h"

namespace eplb::cli {
namespace {

struct SweepArgs {
  std::string scenario_path;
  std::vector<std::string> vary;
  std::string policies;
  std::string seeds;  // empty: each point's run.seed
  std::string out;
  std::vector<std::string> overrides;
  int jobs = 0;
  bool json = false;
  RunFolderOptions folder;
  PolicyCommandArgs policy_command;
};

// A row per point from sweep.json: its varied values, policy and the numbers people read first;
// over several seeds each is the mean ± half the range of the seeds (study_table.h).
Status PrintSweepTable(std::FILE* out, const studies::SweepPlan& plan) {
  EPLB_ASSIGN_OR_RETURN(const StudyFolder sweep, ReadSweepFolder(plan.dir));
  const nlohmann::ordered_json& doc = sweep.document;
  if (!doc.contains("points")) {
    return Status::Internal(
        fmt::format("{}/{}: not the table just written", plan.dir, folder_file::kSweepJson));
  }
  const std::vector<nlohmann::ordered_json> points(doc["points"].begin(), doc["points"].end());
  const TextTable numbers = TerminalNumbers(points, StudyKind::kSweep);
  std::vector<std::string> headings = {"point"};
  headings.insert(headings.end(), plan.keys.begin(), plan.keys.end());
  headings.emplace_back("policy");
  headings.insert(headings.end(), numbers.headings.begin(), numbers.headings.end());
  std::vector<std::vector<std::string>> table;
  for (size_t i = 0; i < points.size(); ++i) {
    const auto& row = points[i];
    std::vector<std::string> cells = {row["point"].dump()};
    for (const std::string& key : plan.keys) {
      cells.push_back(row[key].is_string() ? row[key].get<std::string>() : row[key].dump());
    }
    cells.push_back(row["policy"].get<std::string>());
    cells.insert(cells.end(), numbers.rows[i].begin(), numbers.rows[i].end());
    table.push_back(std::move(cells));
  }
  PrintTable(out, headings, table, plan.keys.size() + 2);
  if (!plan.seeds.empty()) {
    fmt::print(out, "each number: the mean over {} seeds ({}) ± half the range between them\n",
               plan.seeds.size(), fmt::join(plan.seeds, ", "));
  }
  return Status::Ok();
}

Status RunSweep(const SweepArgs& args) {
  studies::SweepSpec spec;
  spec.runner = sim::SimulateToFolder;
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
  EPLB_ASSIGN_OR_RETURN(const std::vector<std::string> seeds, SplitList(args.seeds, "--seeds"));
  EPLB_ASSIGN_OR_RETURN(spec.seeds, studies::ParseSeeds(seeds));
  spec.out = args.out;
  spec.folder = args.folder;
  spec.jobs = args.jobs;
  EPLB_ASSIGN_OR_RETURN(const studies::SweepPlan plan, studies::PlanSweep(spec));
  if (spec.policies.empty()) EPLB_RETURN_IF_ERROR(CheckPolicyGiven(plan.base.eplb.policy));
  EPLB_RETURN_IF_ERROR(CheckPolicyReplays(
      spec.policies.empty() ? std::vector<std::string>{plan.base.eplb.policy} : spec.policies,
      plan.base));
  const Launch launch = DetectLaunch();
  const std::string header =
      launch.count == 1
          ? fmt::format("eplb sweep: {} points{} on {}", plan.points.size(),
                        plan.seeds.empty() ? "" : fmt::format(" × {} seeds", plan.seeds.size()),
                        plan.base.name)
          : fmt::format("eplb sweep: {}: points {} of {} and every {}th after", launch.Describe(),
                        launch.index, plan.points.size(), launch.count);
  EPLB_ASSIGN_OR_RETURN(const studies::SweepOutcome outcome,
                        studies::RunSweep(plan, launch, ProgressLines("eplb sweep", header)));
  if (!outcome.wrote_folder) {
    fmt::print(HumanOutput(args.json), "{}: {} of {} finished; the last to finish writes {}\n",
               launch.Describe(), outcome.finished, launch.count, plan.dir);
    return Status::Ok();
  }
  std::FILE* out = HumanOutput(args.json);
  EPLB_RETURN_IF_ERROR(PrintSweepTable(out, plan));
  fmt::print(out, "{} points: {}/{}, report {}/{}\n", plan.points.size(), plan.dir,
             folder_file::kSweepCsv, plan.dir, folder_file::kReport);
  if (args.json) return PrintJsonFile(plan.dir + "/" + folder_file::kSweepJson);
  return Status::Ok();
}

}  // namespace

void AddSweepCommand(CommandLine& line) {
  auto args = std::make_shared<SweepArgs>();
  Command& sub = line.Add(kSweepName, kSweepAbout);
  AddScenarioOptions(sub, args->scenario_path, args->overrides);
  sub.Option("--vary", &args->vary, "key.path=v1,v2,... (repeatable; the cross product runs)")
      .Required();
  sub.Option("--policies", &args->policies, "Comma-separated policies (default: the scenario's)")
      .Check(NotEmpty());
  AddPolicyCommandOptions(sub, args->policy_command, /*repeatable=*/true);
  sub.Option("--seeds", &args->seeds,
             "Comma-separated seeds: each point runs once per seed, and the tables and report "
             "show means with the spread over seeds (default: the scenario's run.seed)")
      .Check(NotEmpty());
  sub.Option("--out", &args->out, "Folder to write (default: runs/sweep-<scenario name>)");
  AddNoTraceFlag(sub, args->folder);
  AddJsonFlag(sub, args->json);
  sub.Option("--jobs", &args->jobs, "Simulations at once on this machine (default: one per core)")
      .Check(AtLeast(0));
  sub.SetAction([args] { return RunSweep(*args); });
}

}  // namespace eplb::cli
