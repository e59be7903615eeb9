// Studies: one scenario run many times into one folder with a report. These are the use cases
// behind `eplb compare` (a run per policy and seed) and `eplb sweep` (a run per point of a cross
// product of field values); the command line only reads its options into these types and prints
// what they return. A layer above running a scenario: a study is given the runner
// (ScenarioRunner; the simulator's is sim::SimulateToFolder) and knows nothing of what runs.
//
// Every run is a job in a child process (base/process_pool.h: SimGrid allows one engine per
// process), so a study may be run from a process that has run none, any number of times. The
// folder is written whole or not at all (base/file_io.h WriteFolderAtomically): the runs, then
// the tables, scenario.yaml, report.html and figures/ (io/output_folders.h names each file).
//
// Errors name the fields as the command line's options spell them (--policies, --seeds,
// --vary), which is also how the Python module passes them.
//
// Thread-safety: call from one thread (fork() copies only the calling thread).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "eplb/base/launcher.h"
#include "eplb/base/process_pool.h"
#include "eplb/base/status.h"
#include "eplb/engine/scenario.h"
#include "eplb/io/run_folder.h"
#include "eplb/reports/report.h"

namespace eplb::studies {

// Runs `scenario` in this process and writes its run folder at `dir` (io/run_folder.h) with
// `options`; stores the steps done so far in `steps_done` when given (a job's progress). A study
// calls it in a child process per run.
using ScenarioRunner =
    std::function<Status(const Scenario& scenario, const std::string& dir,
                         const RunFolderOptions& options, std::atomic<int64_t>* steps_done)>;

struct ComparisonSpec {
  ScenarioRunner runner;  // what runs each policy and seed
  Scenario scenario;
  std::vector<std::string> policies;  // distinct, at least one
  // Each policy runs once per seed; empty: once, with scenario.run.seed. With several seeds a
  // policy's runs are DIR/POLICY/seed-S, else DIR/POLICY.
  std::vector<uint64_t> seeds;
  std::string out;  // the folder; empty: runs/compare-<scenario name>
  RunFolderOptions folder;
  ReportOptions report;
  int jobs = 0;  // simulations at once; 0: one per core
};

struct Comparison {
  std::string dir;                           // the folder written
  std::vector<nlohmann::ordered_json> rows;  // comparison.json's "policies", one per policy
};

// Checks the spec, runs every policy and seed, and writes the comparison folder.
Result<Comparison> RunComparison(const ComparisonSpec& spec, const ProgressObserver& observer = {});

// --seeds as the command line gives them: each a seed in decimal digits alone, 0 to 2^63 − 1
// (a sign or space is a slip; -0 or +1 would read as a seed the report then prints otherwise).
Result<std::vector<uint64_t>> ParseSeeds(const std::vector<std::string>& texts);

struct SweepSpec {
  ScenarioRunner runner;               // what runs each point
  std::string scenario_path;           // empty: the built-in default scenario (io/scenario_file.h)
  std::vector<std::string> overrides;  // key.path=value, applied to every point before its own
  // The varied fields in order, each with its distinct values: the points are their cross
  // product, the last key varying fastest.
  std::vector<std::pair<std::string, std::vector<std::string>>> vary;
  std::vector<std::string> policies;  // innermost of the product; empty: the scenario's policy
  // Each point runs once per seed, as compare's policies do; empty: once, with the scenario's
  // run.seed; one: once, with that seed. With several, point I's runs are DIR/points/I/seed-S,
  // and its row holds the mean over seeds of every number, "seeds" and "spread" (report.h,
  // ComparisonRows: the point's seeds measured over one window, the latest of theirs).
  std::vector<uint64_t> seeds;
  std::string out;  // the folder; empty: runs/sweep-<scenario name>
  RunFolderOptions folder;
  int jobs = 0;  // simulations at once in this process; 0: one per core
};

// A sweep's points, every one's scenario loaded and checked before any runs.
struct SweepPlan {
  struct Point {
    std::vector<std::string> values;  // one per varied key
    std::string policy;               // what the point runs
    Scenario scenario;
  };
  ScenarioRunner runner;
  Scenario base;
  std::vector<std::string> keys;
  std::vector<Point> points;
  std::vector<uint64_t> seeds;  // two or more: each point runs once per seed; else once
  std::string dir;
  RunFolderOptions folder;
  int jobs = 0;
};

// Each point (× seed) is a simulation and a folder; more is a typo in --vary more often than
// a plan.
inline constexpr size_t kMaxSweepPoints = 10000;

Result<SweepPlan> PlanSweep(const SweepSpec& spec);

struct SweepOutcome {
  // This process wrote plan.dir: it ran alone, or it was the last of a launch to finish. The
  // other processes of a launch return with `wrote_folder` false after their points.
  bool wrote_folder = false;
  int finished = 0;  // the processes of the launch that had finished when this one did
};

// Runs the points that are `launch`'s share: all of them when alone; run j (point j / seeds,
// seed j mod seeds) in process j mod count of an MPI launch or Slurm array (base/launcher.h).
// Several processes write their points into DIR.shared-partial and mark their end there; the last
// to finish writes the tables and the report into DIR and removes the shared folder. A launch of
// more processes than runs is refused, and so is a shared folder holding another sweep's points.
Result<SweepOutcome> RunSweep(const SweepPlan& plan, const Launch& launch,
                              const ProgressObserver& observer = {});

}  // namespace eplb::studies
