#include "eplb/studies/studies.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "eplb/base/csv.h"
#include "eplb/base/file_io.h"
#include "eplb/engine/workload.h"
#include "eplb/io/output_folders.h"
#include "eplb/io/scenario_file.h"
#include "eplb/policy/policy.h"

namespace eplb::studies {
namespace {

// Two runs of one policy would write one folder; a key varied twice would hide one.
template <typename T>
Status CheckDistinct(const std::vector<T>& items, const std::string& option) {
  for (size_t i = 0; i < items.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (items[i] == items[j]) {
        return Status::InvalidArgument(
            fmt::format("{} names '{}' twice; give each once", option, items[i]));
      }
    }
  }
  return Status::Ok();
}

Status CheckPolicies(const std::vector<std::string>& policies) {
  for (const std::string& p : policies) {
    auto made = MakePolicy(p);
    if (!made.ok()) return made.status().WithContext("--policies: ");
  }
  return CheckDistinct(policies, "--policies");
}

// What `eplb run` checks of a scenario before its simulation starts, for a run a study made by
// changing fields of a checked scenario (a policy, a seed): the scenario file's validation again
// (a policy that cannot place around a lost GPU), the memory the run would need, and its
// workload (a trace that cannot be read; each trace once). A study checks every run before the
// first starts, so that a wrong input is refused at once, as `run` refuses it, and not after
// everything else ran.
Status CheckRunnable(const Scenario& scenario, bool revalidate,
                     std::unordered_set<std::string>& traces_read) {
  if (revalidate) {
    auto parsed = ParseScenario(ScenarioToYaml(scenario), scenario.source);
    if (!parsed.ok()) {
      // Its line and column are the generated text's, not a line of the user's file: drop them.
      const std::string& m = parsed.status().message();
      const std::string file = scenario.source + ":";
      const size_t rest = m.find(": ", file.size());
      if (m.rfind(file, 0) == 0 && rest != std::string::npos && rest > file.size() &&
          m.find_first_not_of("0123456789:", file.size()) == rest + 1) {
        return Status::InvalidArgument(scenario.source + m.substr(rest));
      }
      return parsed.status();
    }
  }
  EPLB_RETURN_IF_ERROR(CheckRunFitsInMemory(scenario));
  if (scenario.workload.kind != "generator") {
    const std::string key =
        fmt::format("{}\n{}\n{}\n{}", scenario.base_dir, scenario.workload.trace,
                    scenario.model.layers, scenario.model.experts);
    if (traces_read.insert(key).second) {
      auto workload = MakeWorkload(scenario);
      if (!workload.ok()) return workload.status();
    }
  }
  return Status::Ok();
}

// A job holds its own copies: it runs in a child forked later, and a ProcessJob may be copied.
ProcessJob RunJob(const ScenarioRunner& runner, std::string name, const Scenario& scenario,
                  std::string dir, const RunFolderOptions& folder) {
  return {std::move(name), scenario.run.steps,
          [runner, scenario, dir = std::move(dir), folder](std::atomic<int64_t>& steps_done) {
            return runner(scenario, dir, folder, &steps_done);
          }};
}

Status CheckRunner(const ScenarioRunner& runner) {
  if (runner) return Status::Ok();
  return Status::InvalidArgument("a study was given no runner (ScenarioRunner) for its runs");
}

}  // namespace

Result<std::vector<uint64_t>> ParseSeeds(const std::vector<std::string>& texts) {
  std::vector<uint64_t> seeds;
  for (const std::string& text : texts) {
    const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
    int64_t seed = 0;
    if (!digits || !ParseCsvInt64(text, seed)) {
      return Status::InvalidArgument(
          fmt::format("--seeds: '{}' is not a seed; a seed is written in decimal digits alone, "
                      "0 to 9223372036854775807",
                      text));
    }
    seeds.push_back(static_cast<uint64_t>(seed));
  }
  return seeds;
}

Result<Comparison> RunComparison(const ComparisonSpec& spec, const ProgressObserver& observer) {
  EPLB_RETURN_IF_ERROR(CheckRunner(spec.runner));
  if (spec.policies.empty()) return Status::InvalidArgument("--policies names no policy");
  EPLB_RETURN_IF_ERROR(CheckPolicies(spec.policies));
  EPLB_RETURN_IF_ERROR(CheckDistinct(spec.seeds, "--seeds"));
  const Scenario& base = spec.scenario;
  if (spec.report.map_layer < 0 || spec.report.map_layer >= base.model.layers) {
    return Status::InvalidArgument(
        fmt::format("--map-layer is {}; the scenario's model has layers 0..{}",
                    spec.report.map_layer, base.model.layers - 1));
  }
  if (spec.report.map_step < -1 || spec.report.map_step >= base.run.steps) {
    return Status::InvalidArgument(
        fmt::format("--map-step is {}; the run has steps 0..{} (-1: the last)",
                    spec.report.map_step, base.run.steps - 1));
  }
  const bool several = spec.seeds.size() > 1;
  const std::vector<uint64_t> seeds =
      spec.seeds.empty() ? std::vector<uint64_t>{base.run.seed} : spec.seeds;
  // One scenario per run, policies outermost.
  struct Run {
    std::string label;
    std::string subdir;
    Scenario scenario;
  };
  std::vector<Run> runs;
  for (const std::string& p : spec.policies) {
    for (const uint64_t seed : seeds) {
      Run run{several ? fmt::format("{} seed {}", p, seed) : p,
              ComparisonRunPath(p, several ? std::optional<uint64_t>(seed) : std::nullopt), base};
      run.scenario.eplb.policy = p;
      run.scenario.run.seed = seed;
      runs.push_back(std::move(run));
    }
  }
  std::unordered_set<std::string> traces_read;
  for (const Run& run : runs) {
    const Status runnable = CheckRunnable(run.scenario, /*revalidate=*/true, traces_read);
    if (!runnable.ok()) {
      return runnable.WithContext(fmt::format("--policies {}: ", run.label));
    }
  }
  Comparison result;
  result.dir = spec.out.empty() ? "runs/compare-" + base.name : spec.out;
  const Status written = WriteFolderAtomically(
      result.dir, kComparisonFolderKind, [&](const std::string& partial) -> Status {
        std::vector<ProcessJob> jobs;
        for (const Run& run : runs) {
          jobs.push_back(RunJob(spec.runner, run.label, run.scenario, partial + "/" + run.subdir,
                                spec.folder));
        }
        EPLB_RETURN_IF_ERROR(RunInChildProcesses(jobs, spec.jobs, observer));
        std::vector<LabelledRun> folders;
        for (const Run& run : runs) {
          EPLB_ASSIGN_OR_RETURN(RunFolder folder, ReadRunFolder(partial + "/" + run.subdir));
          folders.push_back({run.scenario.eplb.policy, std::move(folder)});
        }
        result.rows = ComparisonRows(folders);
        StudyFiles files{base.name, ScenarioToYaml(base), result.rows, ComparisonCsv(result.rows),
                         ""};
        std::vector<Figure> figures;
        files.report_html =
            CompareReportHtml(base.name, files.scenario_yaml, folders, spec.report, &figures);
        EPLB_RETURN_IF_ERROR(WriteFigures(partial, figures));
        return WriteComparisonFiles(partial, files);
      });
  if (!written.ok()) return written;
  return result;
}

namespace {

std::string DescribePoint(const SweepPlan& plan, size_t i) {
  const SweepPlan::Point& point = plan.points[i];
  std::string text;
  for (size_t k = 0; k < plan.keys.size(); ++k) {
    text += fmt::format("{}={}, ", plan.keys[k], point.values[k]);
  }
  return fmt::format("point {} ({}{})", i, text, point.policy);
}

// Two spellings of one value (1 and 1.0, 1e3 and 1000) pass CheckDistinct but load the same
// scenario: its runs would be one simulation twice, under two labels.
Status CheckPointsDiffer(const SweepPlan& plan) {
  std::unordered_map<std::string, size_t> seen;  // the resolved scenario -> its first point
  for (size_t i = 0; i < plan.points.size(); ++i) {
    const auto [it, added] = seen.emplace(ScenarioToYaml(plan.points[i].scenario), i);
    if (!added) {
      return Status::InvalidArgument(
          fmt::format("--vary: {} and {} are the same scenario (two spellings of one value); "
                      "give each value once",
                      DescribePoint(plan, it->second), DescribePoint(plan, i)));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<SweepPlan> PlanSweep(const SweepSpec& spec) {
  EPLB_RETURN_IF_ERROR(CheckRunner(spec.runner));
  SweepPlan plan;
  EPLB_ASSIGN_OR_RETURN(plan.base, LoadScenarioOrDefault(spec.scenario_path, spec.overrides));
  for (const auto& [key, values] : spec.vary) {
    if (values.empty()) {
      return Status::InvalidArgument(fmt::format("--vary '{}': expected key.path=v1,v2,...", key));
    }
    EPLB_RETURN_IF_ERROR(CheckDistinct(values, "--vary " + key));
    plan.keys.push_back(key);
  }
  EPLB_RETURN_IF_ERROR(CheckDistinct(plan.keys, "--vary"));
  EPLB_RETURN_IF_ERROR(CheckDistinct(spec.seeds, "--seeds"));
  if (!spec.seeds.empty() &&
      std::find(plan.keys.begin(), plan.keys.end(), "run.seed") != plan.keys.end()) {
    return Status::InvalidArgument(
        "--vary run.seed and --seeds both name the seeds; give them once: --vary run.seed for a "
        "point per seed, --seeds for each point's mean over seeds with their spread");
  }
  const bool policy_varied =
      std::find(plan.keys.begin(), plan.keys.end(), "eplb.policy") != plan.keys.end();
  if (policy_varied && !spec.policies.empty()) {
    return Status::InvalidArgument(
        "--vary eplb.policy and --policies both name the policies; give them once, in either");
  }
  const std::vector<std::string> policies =
      spec.policies.empty() ? std::vector<std::string>{plan.base.eplb.policy} : spec.policies;
  EPLB_RETURN_IF_ERROR(CheckPolicies(policies));
  const bool several_seeds = spec.seeds.size() > 1;
  size_t count = policies.size() * std::max<size_t>(1, spec.seeds.size());
  for (const auto& [key, values] : spec.vary)
    count = std::min<size_t>(count * values.size(), 1000000);
  if (count > kMaxSweepPoints) {
    return Status::InvalidArgument(fmt::format(
        "{} make {}{} {}; a sweep runs at most {} (split it, or use MPI ranks over several "
        "sweeps)",
        several_seeds ? "--vary, --policies and --seeds" : "--vary and --policies",
        count >= 1000000 ? "over " : "", count, several_seeds ? "runs (points × seeds)" : "points",
        kMaxSweepPoints));
  }
  // The cross product, policies innermost; every point's scenario is checked before any runs.
  std::unordered_set<std::string> traces_read;
  std::vector<std::vector<std::string>> combinations{{}};
  for (const auto& [key, values] : spec.vary) {
    std::vector<std::vector<std::string>> next;
    for (const auto& c : combinations) {
      for (const std::string& v : values) {
        next.push_back(c);
        next.back().push_back(v);
      }
    }
    combinations = std::move(next);
  }
  for (const auto& values : combinations) {
    for (const std::string& policy : policies) {
      std::vector<std::string> o = spec.overrides;
      // One seed: every point runs with it. Several: each run sets its own (RunPoints).
      if (spec.seeds.size() == 1) o.push_back(fmt::format("run.seed={}", spec.seeds[0]));
      for (size_t k = 0; k < plan.keys.size(); ++k) o.push_back(plan.keys[k] + "=" + values[k]);
      if (!policy_varied) o.push_back("eplb.policy=" + policy);
      auto s = LoadScenarioOrDefault(spec.scenario_path, o);
      if (!s.ok()) return s.status().WithContext(fmt::format("point {}: ", plan.points.size()));
      const std::string runs = s->eplb.policy;  // the label is what the point runs
      plan.points.push_back({values, runs, std::move(s).value()});
      // Loaded from its file, the point's scenario is validated: what is left is what `run`
      // checks before it simulates.
      const Status runnable =
          CheckRunnable(plan.points.back().scenario, /*revalidate=*/false, traces_read);
      if (!runnable.ok()) {
        return runnable.WithContext(DescribePoint(plan, plan.points.size() - 1) + ": ");
      }
    }
  }
  EPLB_RETURN_IF_ERROR(CheckPointsDiffer(plan));
  plan.dir = spec.out.empty() ? "runs/sweep-" + plan.base.name : spec.out;
  if (several_seeds) plan.seeds = spec.seeds;
  plan.folder = spec.folder;
  plan.jobs = spec.jobs;
  plan.runner = spec.runner;
  return plan;
}

namespace {

// A sweep's runs: each point once per seed (seeds innermost), or once.
size_t RunsPerPoint(const SweepPlan& plan) {
  return std::max<size_t>(1, plan.seeds.size());
}
size_t RunCount(const SweepPlan& plan) {
  return plan.points.size() * RunsPerPoint(plan);
}

// Run j's folder under ROOT: point I's, or with several seeds its seed S's (SweepRunPath).
std::string RunDir(const SweepPlan& plan, const std::string& root, size_t j) {
  const size_t point = j / RunsPerPoint(plan);
  return root + "/" +
         SweepRunPath(point, plan.seeds.empty()
                                 ? std::nullopt
                                 : std::optional<uint64_t>(plan.seeds[j % RunsPerPoint(plan)]));
}

// A claim file created with O_EXCL: true for exactly one of the processes that try.
bool Claim(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

// What makes two sweep processes parts of one sweep: the base scenario and every point.
std::string SweepIdentity(const SweepPlan& plan) {
  std::string text = ScenarioToYaml(plan.base);
  for (const std::string& k : plan.keys) text += "\nvary " + k;
  for (const SweepPlan::Point& p : plan.points)
    text += fmt::format("\npoint {} {}", fmt::join(p.values, ","), p.policy);
  if (!plan.seeds.empty()) text += fmt::format("\nseeds {}", fmt::join(plan.seeds, ","));
  return text;
}

// The first process to reach the shared folder records the sweep it runs; the others check
// that they run the same one.
Status JoinSharedSweep(const std::string& shared, const std::string& identity, int rank) {
  const std::string path = shared + "/.sweep";
  // Named by rank, unique within a launch (a PID may repeat on another machine of a shared file
  // system).
  const std::string mine = fmt::format("{}.rank-{}", path, rank);
  EPLB_RETURN_IF_ERROR(WriteTextFile(mine, identity));
  const bool first = ::link(mine.c_str(), path.c_str()) == 0;  // atomic: one process wins
  ::unlink(mine.c_str());
  if (first) return Status::Ok();
  EPLB_ASSIGN_OR_RETURN(const std::string recorded, ReadTextFile(path));
  if (recorded == identity) return Status::Ok();
  return Status::InvalidArgument(fmt::format(
      "{} holds the points of another sweep (another scenario, --vary or --policies); give each "
      "sweep its own --out, or remove {} if that sweep was abandoned",
      shared, shared));
}

struct RankMarks {
  int finished = 0;
  std::vector<int> failed;
};

// The processes that have marked their end: one listing of the folder, whatever the count.
Result<RankMarks> ReadRankMarks(const std::string& shared, int ranks) {
  namespace fs = std::filesystem;
  RankMarks marks;
  std::error_code ec;
  for (fs::directory_iterator it(shared, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    int32_t r = -1;
    const size_t dot = name.rfind('.');
    if (name.rfind(".rank-", 0) != 0 || dot == std::string::npos ||
        !ParseCsvInt32(name.substr(6, dot - 6), r) || r < 0 || r >= ranks) {
      continue;
    }
    const std::string mark = name.substr(dot + 1);
    if (mark == "done") ++marks.finished;
    if (mark == "failed") {
      ++marks.finished;
      marks.failed.push_back(r);
    }
  }
  if (ec) return Status::IoError(fmt::format("{}: cannot list: {}", shared, ec.message()));
  std::sort(marks.failed.begin(), marks.failed.end());
  return marks;
}

Status RunPoints(const SweepPlan& plan, const std::string& root, const Launch& launch,
                 const ProgressObserver& observer) {
  std::vector<ProcessJob> jobs;
  for (size_t j = 0; j < RunCount(plan); ++j) {
    if (static_cast<int>(j % static_cast<size_t>(launch.count)) != launch.index) continue;
    const size_t i = j / RunsPerPoint(plan);
    Scenario scenario = plan.points[i].scenario;
    std::string name = fmt::format("point {}", i);
    if (!plan.seeds.empty()) {
      scenario.run.seed = plan.seeds[j % RunsPerPoint(plan)];
      name += fmt::format(" seed {}", scenario.run.seed);
    }
    jobs.push_back(
        RunJob(plan.runner, std::move(name), scenario, RunDir(plan, root, j), plan.folder));
  }
  return RunInChildProcesses(jobs, plan.jobs, observer);
}

// A varied value as the sweep's tables hold it: an integer exactly (a seed past 2^53 too), a
// real as a number, and anything else, "007" included, as the text given.
nlohmann::ordered_json TableValue(const std::string& text) {
  const size_t first = text.rfind('-', 0) == 0 ? 1 : 0;  // the first digit
  const bool leading_zero = text.size() > first + 1 && text[first] == '0' &&
                            std::isdigit(static_cast<unsigned char>(text[first + 1])) != 0;
  int64_t integer = 0;
  if (ParseCsvInt64(text, integer) && std::to_string(integer) == text) return integer;
  double real = 0;
  if (!leading_zero && ParseCsvDouble(text, real)) return real;
  return text;
}

// Rows for a CSV: each number's spread over seeds, JSON's "spread": {key: [lo, hi]}, as two
// columns KEY.seed_min and KEY.seed_max after the others, so that a spreadsheet has it too.
std::vector<nlohmann::ordered_json> SpreadColumns(std::vector<nlohmann::ordered_json> rows) {
  for (nlohmann::ordered_json& row : rows) {
    if (!row.contains("spread")) continue;
    const nlohmann::ordered_json spread = row["spread"];
    row.erase("spread");
    for (auto it = spread.begin(); it != spread.end(); ++it) {
      row[it.key() + ".seed_min"] = (*it)[0];
      row[it.key() + ".seed_max"] = (*it)[1];
    }
  }
  return rows;
}

// sweep.csv, sweep.json, scenario.yaml, report.html and figures/ from the points in ROOT.
Status WriteSweepReport(const SweepPlan& plan, const std::string& root) {
  std::vector<nlohmann::ordered_json> rows;
  for (size_t i = 0; i < plan.points.size(); ++i) {
    const SweepPlan::Point& point = plan.points[i];
    // The point's runs, one per seed, measured over one window (the latest of theirs) as a
    // comparison's are; each point keeps its own window, since its fields may move it.
    std::vector<LabelledRun> seeds;
    for (size_t s = 0; s < RunsPerPoint(plan); ++s) {
      EPLB_ASSIGN_OR_RETURN(RunFolder folder,
                            ReadRunFolder(RunDir(plan, root, i * RunsPerPoint(plan) + s)));
      seeds.push_back({point.policy, std::move(folder)});
    }
    nlohmann::ordered_json row{{"point", i}};
    for (size_t k = 0; k < plan.keys.size(); ++k) row[plan.keys[k]] = TableValue(point.values[k]);
    row["policy"] = point.policy;
    const nlohmann::ordered_json numbers = ComparisonRows(seeds).at(0);
    for (auto it = numbers.begin(); it != numbers.end(); ++it) {
      if (it.key() != "label") row[it.key()] = *it;
    }
    rows.push_back(std::move(row));
  }
  StudyFiles files{plan.base.name, ScenarioToYaml(plan.base), rows,
                   ComparisonCsv(SpreadColumns(rows)), ""};
  std::vector<Figure> figures;
  files.report_html = SweepReportHtml(plan.base.name, plan.keys, rows, &figures);
  EPLB_RETURN_IF_ERROR(WriteSweepFiles(root, files));
  return WriteFigures(root, figures);
}

}  // namespace

Result<SweepOutcome> RunSweep(const SweepPlan& plan, const Launch& launch,
                              const ProgressObserver& observer) {
  const int rank = launch.index, ranks = launch.count;
  if (static_cast<size_t>(ranks) > RunCount(plan)) {
    // Every process must mark its end before the report is written: a count beyond the runs
    // is a wrong launch (or environment), and would have the last one wait for processes that
    // have nothing to do.
    if (!plan.seeds.empty()) {
      return Status::InvalidArgument(fmt::format(
          "{}, but the sweep has {} runs ({} points × {} seeds): launch at most one process per "
          "run",
          launch.Describe(), RunCount(plan), plan.points.size(), plan.seeds.size()));
    }
    return Status::InvalidArgument(
        fmt::format("{}, but the sweep has {} point{}: launch at most one process per point",
                    launch.Describe(), plan.points.size(), plan.points.size() == 1 ? "" : "s"));
  }
  SweepOutcome outcome;
  if (ranks == 1) {
    const Status written =
        WriteFolderAtomically(plan.dir, kSweepFolderKind, [&](const std::string& partial) {
          EPLB_RETURN_IF_ERROR(RunPoints(plan, partial, launch, observer));
          return WriteSweepReport(plan, partial);
        });
    if (!written.ok()) return written;
    outcome.wrote_folder = true;
    outcome.finished = 1;
    return outcome;
  }
  // Launched as several processes (MPI ranks, or Slurm array tasks that may run at different
  // times), each writes its points into one shared folder and marks when it is done; the last to
  // finish (the one that claims the report once every mark is there) writes the folder.
  namespace fs = std::filesystem;
  const std::string shared = plan.dir + ".shared-partial";
  std::error_code made;
  const std::string points = std::string("/") + folder_file::kSweepPoints;
  fs::create_directories(shared + points, made);
  if (made) return Status::IoError(fmt::format("{}: {}", shared, made.message()));
  // Processes of another sweep writing to the same folder would mix their points in.
  EPLB_RETURN_IF_ERROR(JoinSharedSweep(shared, SweepIdentity(plan), rank));
  Status s = RunPoints(plan, shared, launch, observer);
  const Status marked =
      WriteTextFile(fmt::format("{}/.rank-{}.{}", shared, rank, s.ok() ? "done" : "failed"), "");
  if (s.ok()) s = marked;
  if (!s.ok()) return s;
  EPLB_ASSIGN_OR_RETURN(const RankMarks marks, ReadRankMarks(shared, ranks));
  outcome.finished = marks.finished;
  if (marks.finished < ranks || !Claim(shared + "/.report-claimed")) return outcome;
  if (!marks.failed.empty()) {
    return Status::Internal(fmt::format(
        "{} {} failed their points (see their output); no report was written; the points that "
        "ran are in {}",
        marks.failed.size() == 1 ? "process" : "processes", fmt::join(marks.failed, ", "), shared));
  }
  const Status written =
      WriteFolderAtomically(plan.dir, kSweepFolderKind, [&](const std::string& partial) {
        std::error_code ec;
        fs::rename(shared + points, partial + points, ec);
        if (ec) return Status::IoError(fmt::format("{}: {}", shared, ec.message()));
        return WriteSweepReport(plan, partial);
      });
  if (!written.ok()) return written;
  std::error_code ec;
  fs::remove_all(shared, ec);
  outcome.wrote_folder = true;
  return outcome;
}

}  // namespace eplb::studies
