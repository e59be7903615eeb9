// eplb compare: run one scenario once per policy and write a comparison report.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli_util.h"
#include "commands.h"
#include "eplb/base/csv.h"
#include "eplb/base/file_io.h"
#include "eplb/io/report.h"
#include "eplb/io/run_folder.h"
#include "eplb/io/scenario_file.h"
#include "eplb/policy/policy.h"
#include "run_pool.h"
#include "simulate.h"

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
};

Status RunCompare(const CompareArgs& args) {
  auto scenario = LoadScenarioArg(args.scenario_path, args.overrides);
  if (!scenario.ok()) return scenario.status();
  const std::vector<std::string> policies = SplitList(args.policies);
  if (policies.empty()) return Status::InvalidArgument("--policies names no policy");
  if (Status s = CheckDistinct(policies, "--policies"); !s.ok()) return s;
  for (const std::string& p : policies) {
    auto made = MakePolicy(p);
    if (!made.ok()) return made.status().WithContext("--policies: ");
  }
  // Seeds: the scenario's own, or each of --seeds, every policy run once per seed.
  std::vector<uint64_t> seeds;
  for (const std::string& text : SplitList(args.seeds)) {
    int64_t seed = 0;
    if (!ParseCsvInt64(text, seed) || seed < 0) {
      return Status::InvalidArgument(
          fmt::format("--seeds: '{}' is not a seed; seeds are integers of at least 0", text));
    }
    seeds.push_back(static_cast<uint64_t>(seed));
  }
  if (Status s = CheckDistinct(SplitList(args.seeds), "--seeds"); !s.ok()) return s;
  if (!args.seeds.empty() && seeds.empty()) return Status::InvalidArgument("--seeds names no seed");
  const bool several = seeds.size() > 1;
  if (seeds.empty()) seeds.push_back(scenario->run.seed);
  // One policy's runs: DIR/POLICY, or DIR/POLICY/seed-S for each of several seeds.
  auto run_dir = [&](const std::string& root, const std::string& policy, uint64_t seed) {
    return several ? fmt::format("{}/{}/seed-{}", root, policy, seed) : root + "/" + policy;
  };
  if (args.report.map_layer >= scenario->model.layers) {
    return Status::InvalidArgument(
        fmt::format("--map-layer is {}; the scenario's model has layers 0..{}",
                    args.report.map_layer, scenario->model.layers - 1));
  }
  if (args.report.map_step >= scenario->run.steps) {
    return Status::InvalidArgument(
        fmt::format("--map-step is {}; the run has steps 0..{} (-1: the last)",
                    args.report.map_step, scenario->run.steps - 1));
  }
  const std::string dir = args.out.empty() ? "runs/compare-" + scenario->name : args.out;
  std::vector<nlohmann::ordered_json> rows;
  const Status s =
      WriteFolderAtomically(dir, "comparison", [&](const std::string& partial) -> Status {
        std::vector<Job> jobs;
        for (const std::string& p : policies) {
          for (const uint64_t seed : seeds) {
            jobs.push_back({several ? fmt::format("{} seed {}", p, seed) : p, scenario->run.steps,
                            [&, p, seed](std::atomic<int64_t>& steps_done) {
                              Scenario one = *scenario;
                              one.eplb.policy = p;
                              one.run.seed = seed;
                              return SimulateToFolder(one, run_dir(partial, p, seed), args.folder,
                                                      &steps_done);
                            }});
          }
        }
        fmt::print(stderr, "eplb compare: {} policies{} on {} ({} steps each)\n", policies.size(),
                   several ? fmt::format(" × {} seeds", seeds.size()) : "", scenario->name,
                   scenario->run.steps);
        EPLB_RETURN_IF_ERROR(RunJobs(jobs, args.jobs, "eplb compare"));
        std::vector<LabelledRun> runs;
        for (const std::string& p : policies) {
          for (const uint64_t seed : seeds) {
            auto folder = ReadRunFolder(run_dir(partial, p, seed));
            if (!folder.ok()) return folder.status();
            runs.push_back({p, std::move(folder).value()});
          }
        }
        rows = ComparisonRows(runs);
        const std::string yaml = ScenarioToYaml(*scenario);
        EPLB_RETURN_IF_ERROR(WriteTextFile(partial + "/scenario.yaml", yaml));
        EPLB_RETURN_IF_ERROR(WriteTextFile(partial + "/comparison.csv", ComparisonCsv(rows)));
        std::vector<Figure> figures;
        EPLB_RETURN_IF_ERROR(
            WriteTextFile(partial + "/report.html",
                          CompareReportHtml(scenario->name, yaml, runs, args.report, &figures)));
        EPLB_RETURN_IF_ERROR(WriteFigures(partial, figures));
        nlohmann::ordered_json doc{{"tool", ToolVersion()},
                                   {"format_version", kFolderFormatVersion},
                                   {"scenario", scenario->name},
                                   {"policies", rows}};
        return WriteTextFile(partial + "/comparison.json", doc.dump(2) + "\n");
      });
  if (!s.ok()) return s;
  std::FILE* out = HumanOutput(args.json);
  // Runs that lost GPUs (or scaled) also say what it cost them.
  const bool faults = std::any_of(rows.begin(), rows.end(), [](const auto& r) {
    return r["rank_faults"].template get<double>() > 0;
  });
  fmt::print(out, "{:<18} {:>12} {:>12} {:>12} {:>14} {:>10} {:>14}", "policy", "balancedness",
             "after rearr.", "step ms", "GB / rearr.", "policy ms", "node lost: %");
  if (faults) {
    fmt::print(out, " {:>11} {:>14} {:>14} {:>12}", "recovery s", "tokens dropped",
               "tokens stalled", "reloaded GB");
  }
  fmt::print(out, "\n");
  for (const auto& r : rows) {
    fmt::print(out, "{:<18} {:>12.4f} {:>12.4f} {:>12.2f} {:>14.1f} {:>10.1f} {:>14.2f}",
               r["label"].get<std::string>(), r["balancedness_mean"].get<double>(),
               r["following_balancedness"].get<double>(), r["step_time_mean_s"].get<double>() * 1e3,
               r["bytes_per_rearrangement"].get<double>() / 1e9, r["policy_ms"].get<double>(),
               r["node_failure_tokens_lost"].get<double>() * 100);
    if (faults) {
      fmt::print(out, " {:>11.3f} {:>14.0f} {:>14.0f} {:>12.2f}", r["recovery_s"].get<double>(),
                 r["fault_tokens_lost"].get<double>(), r["fault_tokens_stalled"].get<double>(),
                 r["fault_bytes_reloaded"].get<double>() / 1e9);
    }
    fmt::print(out, "\n");
  }
  fmt::print(out,
             "node lost: tokens left without an expert replica if one node fails, % (the "
             "report defines every column)\n");
  fmt::print(out, "report: {}/report.html\n", dir);
  if (args.json) {
    if (Status printed = PrintJsonFile(dir + "/comparison.json"); !printed.ok()) return printed;
  }
  return Status::Ok();
}

}  // namespace

void AddCompareCommand(CommandLine& line) {
  auto args = std::make_shared<CompareArgs>();
  Command& sub = line.Add(kCompareName, kCompareAbout);
  AddScenarioOptions(sub, args->scenario_path, args->overrides);
  sub.Option("--policies", &args->policies, "Comma-separated policies").ShowDefault();
  sub.Option("--out", &args->out, "Folder to write (default: runs/compare-<scenario name>)");
  AddNoTraceFlag(sub, args->folder);
  AddJsonFlag(sub, args->json);
  sub.Option("--seeds", &args->seeds,
             "Comma-separated seeds: each policy runs once per seed, and the report shows "
             "means with the spread over seeds (default: the scenario's run.seed)");
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
