// eplb sweep: run a scenario over the cross product of field values (and policies), in
// parallel on the machine's cores, or spread over the processes of an MPI launch or a Slurm
// job array (base/launcher.h).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli_util.h"
#include "commands.h"
#include "eplb/base/csv.h"
#include "eplb/base/file_io.h"
#include "eplb/base/launcher.h"
#include "eplb/io/report.h"
#include "eplb/io/run_folder.h"
#include "eplb/io/scenario_file.h"
#include "eplb/policy/policy.h"
#include "run_pool.h"
#include "simulate.h"

namespace eplb::cli {
namespace {

// Each point is a simulation and a folder; more is a typo in --vary more often than a plan.
constexpr size_t kMaxSweepPoints = 10000;

struct SweepArgs {
  std::string scenario_path;
  std::vector<std::string> vary;
  std::string policies;
  std::string out;
  std::vector<std::string> overrides;
  int jobs = 0;
  bool json = false;
  RunFolderOptions folder;
};

struct Point {
  std::vector<std::string> values;  // one per varied key
  std::string policy;
};

// A claim file created with O_EXCL: true for exactly one of the processes that try.
bool Claim(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

// What makes two sweep processes parts of one sweep: the base scenario and every point.
std::string SweepIdentity(const Scenario& base, const std::vector<std::string>& keys,
                          const std::vector<Point>& points) {
  std::string text = ScenarioToYaml(base);
  for (const std::string& k : keys) text += "\nvary " + k;
  for (const Point& p : points)
    text += fmt::format("\npoint {} {}", fmt::join(p.values, ","), p.policy);
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

Status RunSweep(const SweepArgs& args) {
  auto base = LoadScenarioArg(args.scenario_path, args.overrides);
  if (!base.ok()) return base.status();
  std::vector<std::string> keys;
  std::vector<std::vector<std::string>> values;
  for (const std::string& v : args.vary) {
    const size_t eq = v.find('=');
    if (eq == std::string::npos || eq == 0 || SplitList(v.substr(eq + 1)).empty()) {
      return Status::InvalidArgument(fmt::format("--vary '{}': expected key.path=v1,v2,...", v));
    }
    keys.push_back(v.substr(0, eq));
    values.push_back(SplitList(v.substr(eq + 1)));
    if (Status s = CheckDistinct(values.back(), "--vary " + keys.back()); !s.ok()) {
      return s;
    }
  }
  if (Status s = CheckDistinct(keys, "--vary"); !s.ok()) return s;
  const bool policy_varied = std::find(keys.begin(), keys.end(), "eplb.policy") != keys.end();
  if (policy_varied && !args.policies.empty()) {
    return Status::InvalidArgument(
        "--vary eplb.policy and --policies both name the policies; "
        "give them once, in either");
  }
  std::vector<std::string> policies = args.policies.empty()
                                          ? std::vector<std::string>{base->eplb.policy}
                                          : SplitList(args.policies);
  for (const std::string& p : policies) {
    auto made = MakePolicy(p);
    if (!made.ok()) return made.status().WithContext("--policies: ");
  }
  if (Status s = CheckDistinct(policies, "--policies"); !s.ok()) return s;
  size_t count = policies.size();
  for (const auto& vals : values) count = std::min<size_t>(count * vals.size(), 1000000);
  if (count > kMaxSweepPoints) {
    return Status::InvalidArgument(
        fmt::format("--vary and --policies make {}{} points; a sweep runs at most {} "
                    "(split it, or use MPI ranks over several sweeps)",
                    count >= 1000000 ? "over " : "", count, kMaxSweepPoints));
  }
  // The cross product, policies innermost; every point's scenario is checked before any runs.
  std::vector<Point> points{{}};
  for (const auto& vals : values) {
    std::vector<Point> next;
    for (const Point& p : points) {
      for (const std::string& v : vals) {
        Point q = p;
        q.values.push_back(v);
        next.push_back(q);
      }
    }
    points = next;
  }
  std::vector<Point> all;
  std::vector<Scenario> scenarios;
  for (const Point& p : points) {
    for (const std::string& policy : policies) {
      std::vector<std::string> o = args.overrides;
      for (size_t k = 0; k < keys.size(); ++k) o.push_back(keys[k] + "=" + p.values[k]);
      if (!policy_varied) o.push_back("eplb.policy=" + policy);
      auto s = LoadScenarioArg(args.scenario_path, o);
      if (!s.ok()) return s.status().WithContext(fmt::format("point {}: ", all.size()));
      all.push_back({p.values, s->eplb.policy});  // the label is what the point runs
      scenarios.push_back(std::move(s).value());
    }
  }
  const Launch launch = DetectLaunch();
  const int rank = launch.index, ranks = launch.count;
  if (static_cast<size_t>(ranks) > all.size()) {
    // Every process must mark its end before the report is written: a count beyond the points
    // is a wrong launch (or environment), and would have the last one wait for processes that
    // have nothing to do.
    return Status::InvalidArgument(
        fmt::format("{}, but the sweep has {} point{}: launch at most one process "
                    "per point",
                    launch.Describe(), all.size(), all.size() == 1 ? "" : "s"));
  }
  const std::string dir = args.out.empty() ? "runs/sweep-" + base->name : args.out;
  // Launched as several processes (MPI ranks, or Slurm array tasks that may run at different
  // times), each writes its points into one shared folder and marks when it is done; the last to
  // finish (the one that claims the report once every mark is there) writes the tables and the
  // report.
  auto run_points = [&](const std::string& root) -> Status {
    std::vector<Job> jobs;
    for (size_t i = 0; i < all.size(); ++i) {
      if (static_cast<int>(i % static_cast<size_t>(ranks)) != rank) continue;
      jobs.push_back({fmt::format("point {}", i), scenarios[i].run.steps,
                      [&, i](std::atomic<int64_t>& steps_done) {
                        return SimulateToFolder(scenarios[i], fmt::format("{}/points/{}", root, i),
                                                args.folder, &steps_done);
                      }});
    }
    return RunJobs(jobs, args.jobs, "eplb sweep");
  };
  auto report = [&](const std::string& root) -> Status {
    std::vector<nlohmann::ordered_json> rows;
    for (size_t i = 0; i < all.size(); ++i) {
      auto folder = ReadRunFolder(fmt::format("{}/points/{}", root, i));
      if (!folder.ok()) return folder.status();
      nlohmann::ordered_json row{{"point", i}};
      for (size_t k = 0; k < keys.size(); ++k) {
        double num = 0;
        if (ParseCsvDouble(all[i].values[k], num)) {
          row[keys[k]] = num;
        } else {
          row[keys[k]] = all[i].values[k];
        }
      }
      row["policy"] = all[i].policy;
      const nlohmann::ordered_json numbers =
          ComparisonRow({all[i].policy, std::move(folder).value()});
      for (auto it = numbers.begin(); it != numbers.end(); ++it) {
        if (it.key() != "label") row[it.key()] = *it;
      }
      rows.push_back(std::move(row));
    }
    EPLB_RETURN_IF_ERROR(WriteTextFile(root + "/sweep.csv", ComparisonCsv(rows)));
    EPLB_RETURN_IF_ERROR(WriteTextFile(
        root + "/sweep.json", nlohmann::ordered_json{{"tool", ToolVersion()},
                                                     {"format_version", kFolderFormatVersion},
                                                     {"scenario", base->name},
                                                     {"points", rows}}
                                      .dump(2) +
                                  "\n"));
    EPLB_RETURN_IF_ERROR(WriteTextFile(root + "/scenario.yaml", ScenarioToYaml(*base)));
    std::vector<Figure> figures;
    EPLB_RETURN_IF_ERROR(
        WriteTextFile(root + "/report.html", SweepReportHtml(base->name, keys, rows, &figures)));
    return WriteFigures(root, figures);
  };
  Status s;
  if (ranks == 1) {
    fmt::print(stderr, "eplb sweep: {} points on {}\n", all.size(), base->name);
    s = WriteFolderAtomically(dir, "sweep", [&](const std::string& partial) {
      EPLB_RETURN_IF_ERROR(run_points(partial));
      return report(partial);
    });
  } else {
    namespace fs = std::filesystem;
    const std::string shared = dir + ".shared-partial";
    fs::create_directories(shared + "/points");
    // Processes of another sweep writing to the same --out would mix their points in.
    if (Status joined = JoinSharedSweep(shared, SweepIdentity(*base, keys, all), rank);
        !joined.ok())
      return joined;
    fmt::print(stderr, "eplb sweep: {}: points {} of {} and every {}th after\n", launch.Describe(),
               rank, all.size(), ranks);
    s = run_points(shared);
    const Status marked =
        WriteTextFile(fmt::format("{}/.rank-{}.{}", shared, rank, s.ok() ? "done" : "failed"), "");
    if (s.ok()) s = marked;
    if (!s.ok()) return s;
    auto marks = ReadRankMarks(shared, ranks);
    if (!marks.ok()) return marks.status();
    const std::vector<int>& failed = marks->failed;
    const int finished = marks->finished;
    if (finished < ranks || !Claim(shared + "/.report-claimed")) {
      fmt::print(HumanOutput(args.json), "{}: {} of {} finished; the last to finish writes {}\n",
                 launch.Describe(), finished, ranks, dir);
      return Status::Ok();
    }
    if (!failed.empty()) {
      return Status::Internal(fmt::format(
          "{} {} failed their points (see their output); no report "
          "was written; the points that ran are in {}",
          failed.size() == 1 ? "process" : "processes", fmt::join(failed, ", "), shared));
    }
    s = WriteFolderAtomically(dir, "sweep", [&](const std::string& partial) {
      std::error_code ec;
      fs::rename(shared + "/points", partial + "/points", ec);
      if (ec) return Status::IoError(fmt::format("{}: {}", shared, ec.message()));
      return report(partial);
    });
    if (s.ok()) {
      std::error_code ec;
      fs::remove_all(shared, ec);
    }
  }
  if (!s.ok()) return s;
  fmt::print(HumanOutput(args.json), "{} points: {}/sweep.csv, report {}/report.html\n", all.size(),
             dir, dir);
  if (args.json) {
    if (Status printed = PrintJsonFile(dir + "/sweep.json"); !printed.ok()) return printed;
  }
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
  sub.Option("--out", &args->out, "Folder to write (default: runs/sweep-<scenario name>)");
  AddNoTraceFlag(sub, args->folder);
  AddJsonFlag(sub, args->json);
  sub.Option("--jobs", &args->jobs, "Simulations at once on this machine (default: one per core)")
      .Check(AtLeast(0));
  sub.SetAction([args] { return RunSweep(*args); });
}

}  // namespace eplb::cli
