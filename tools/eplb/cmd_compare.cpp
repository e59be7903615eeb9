// eplb compare: run one scenario once per policy and write a comparison report.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli_util.h"
#include "commands.h"
#include "eplb/io/output_folders.h"
#include "eplb/io/run_folder.h"
#include "eplb/io/scenario_file.h"
#include "eplb/reports/report.h"
#include "eplb/studies/studies.h"
#include "policy_command.h"
#include "progress.h"
#include "simulation.h"
#include "study_table.h"

namespace eplb::cli {
namespace {

struct CompareArgs {
  std::string scenario_path;
  std::string policies = "static,deepseek,replicate-lpt,incremental,migration-aware";
  std::string seeds;  // empty: the scenario's run.seed
  std::string out;
  std::vector<std::string> overrides;
  int jobs = 0;
  bool json = false;
  RunFolderOptions folder;
  ReportOptions report;
  PolicyCommandArgs policy_command;
};

Status RunCompare(const CompareArgs& args) {
  studies::ComparisonSpec spec;
  spec.runner = sim::SimulateToFolder;
  // Before the scenario, which may name a program's policy.
  EPLB_ASSIGN_OR_RETURN(const std::vector<std::string> programs,
                        RegisterPolicyCommands(args.policy_command, /*repeatable=*/true));
  EPLB_ASSIGN_OR_RETURN(spec.scenario, LoadScenarioOrDefault(args.scenario_path, args.overrides));
  EPLB_ASSIGN_OR_RETURN(spec.policies, SplitList(args.policies, "--policies"));
  EPLB_ASSIGN_OR_RETURN(spec.policies, WithPolicyCommands(std::move(spec.policies), programs));
  EPLB_RETURN_IF_ERROR(CheckPolicyReplays(spec.policies, spec.scenario));
  EPLB_ASSIGN_OR_RETURN(const std::vector<std::string> seeds, SplitList(args.seeds, "--seeds"));
  EPLB_ASSIGN_OR_RETURN(spec.seeds, studies::ParseSeeds(seeds));
  spec.out = args.out;
  spec.folder = args.folder;
  spec.report = args.report;
  spec.jobs = args.jobs;
  const size_t seed_count = spec.seeds.size();
  const std::string header =
      fmt::format("eplb compare: {} policies{} on {} ({} steps each)", spec.policies.size(),
                  seed_count > 1 ? fmt::format(" × {} seeds", seed_count) : "", spec.scenario.name,
                  spec.scenario.run.steps);
  EPLB_ASSIGN_OR_RETURN(const studies::Comparison comparison,
                        studies::RunComparison(spec, ProgressLines("eplb compare", header)));
  const std::vector<nlohmann::ordered_json>& rows = comparison.rows;
  const std::string& dir = comparison.dir;
  std::FILE* out = HumanOutput(args.json);
  // The policy, then the numbers (report.h TerminalNumbers; over several seeds each is the
  // mean ± half the range of the seeds).
  const TextTable numbers = TerminalNumbers(rows, StudyKind::kComparison);
  std::vector<std::string> headings = {"policy"};
  headings.insert(headings.end(), numbers.headings.begin(), numbers.headings.end());
  std::vector<std::vector<std::string>> table;
  for (size_t i = 0; i < rows.size(); ++i) {
    std::vector<std::string> cells = {rows[i]["label"].get<std::string>()};
    cells.insert(cells.end(), numbers.rows[i].begin(), numbers.rows[i].end());
    table.push_back(std::move(cells));
  }
  PrintTable(out, headings, table);
  if (seed_count > 1) {
    fmt::print(out, "each number: the mean over {} seeds ± half the range between them\n",
               seed_count);
  }
  fmt::print(out,
             "node lost: tokens left without an expert replica if one node fails, % (the "
             "report defines every column)\n");
  fmt::print(out, "report: {}/{}\n", dir, folder_file::kReport);
  if (args.json) {
    if (Status printed = PrintJsonFile(dir + "/" + folder_file::kComparisonJson); !printed.ok())
      return printed;
  }
  return Status::Ok();
}

}  // namespace

void AddCompareCommand(CommandLine& line) {
  auto args = std::make_shared<CompareArgs>();
  Command& sub = line.Add(kCompareName, kCompareAbout);
  AddScenarioOptions(sub, args->scenario_path, args->overrides);
  sub.Option("--policies", &args->policies, "Comma-separated policies")
      .ShowDefault()
      .Check(NotEmpty());
  AddPolicyCommandOptions(sub, args->policy_command, /*repeatable=*/true);
  sub.Option("--out", &args->out, "Folder to write (default: runs/compare-<scenario name>)");
  AddNoTraceFlag(sub, args->folder);
  AddJsonFlag(sub, args->json);
  sub.Option("--seeds", &args->seeds,
             "Comma-separated seeds: each policy runs once per seed, and the report shows "
             "means with the spread over seeds (default: the scenario's run.seed)")
      .Check(NotEmpty());
  sub.Flag("--time-axis", &args->report.time_axis,
           "Plot against simulated seconds instead of steps");
  sub.Option("--map-layer", &args->report.map_layer,
             "Layer of the load maps (tokens per GPU and expert)")
      .ShowDefault()
      .Check(AtLeast(0));
  sub.Option("--map-step", &args->report.map_step, "Step of the load maps (default: the last)")
      .Check(AtLeast(-1));
  sub.Option("--jobs", &args->jobs, "Simulations at once (default: one per core)")
      .Check(AtLeast(0));
  sub.SetAction([args] { return RunCompare(*args); });
}

}  // namespace eplb::cli
