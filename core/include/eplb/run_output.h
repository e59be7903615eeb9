// A run folder: what `eplb run` writes, and the definitions of the numbers in it.
//
//   scenario.yaml     the resolved scenario
//   summary.json      the numbers below
//   metrics.csv       per step: step, time_s (start), step_s, idle_step_s (the same step on idle
//                     links), balancedness, imbalance_ratio (metrics.h, of that step's load under
//                     the placement in force), bytes_in_flight (migration bytes not yet
//                     committed), stalled_s (time the step boundary blocked)
//   transfers.csv     every expert transfer: layer, expert, src_rank, dst_rank, bytes, link,
//                     start_s, end_s (its flow's start and end)
//   rearrangements.csv one line per rearrangement: step, start_s, end_s (last commit, −1 if
//                     none), layers, transfers, bytes_nvlink, bytes_nic, predicted_makespan_s and
//                     lower_bound_s (schedule.h, summed over layers), policy_ms (wall time),
//                     window_balancedness_before/after (of the window the policy saw, under the
//                     old and new placements), window_balancedness_bound (the best any placement
//                     could do on that window, balance_bound.h) and following_balancedness (mean
//                     balancedness of the steps it served, up to the next rearrangement)
//   placements.jsonl  the initial placement of each layer (step −1), then one line per layer
//                     commit: {"step", "time_s", "layer", "phy2log"}
//   loads.jsonl       one line per rearrangement: {"step", "time_s", "load": [layer][expert]},
//                     the window's load (tokens) its policy was given
//   trace.json        Chrome/Perfetto trace events: a process per GPU with its transfers (async
//                     slices on its receive side), and a "cluster" process with the steps,
//                     balance counters, and rearrangement and commit marks
//
// Summary numbers: step time mean/p50/p99/max (seconds); slowed_s = Σ (step_s − idle_step_s),
// the time migrations cost running steps; stalled_s = Σ stalled_s; rearrangement makespan = last
// commit − start, for those that finished; bytes moved per link class.
//
// The folder is written as DIR.partial-PID and renamed to DIR only when complete, so a failed
// run never leaves a folder that looks whole; a previous run folder at DIR is replaced.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eplb/eplb_loop.h"
#include "eplb/scenario.h"
#include "eplb/status.h"

namespace eplb {

struct TransferRecord {
  int layer;
  int expert;
  int src_rank;
  int dst_rank;
  int64_t bytes;
  LinkClass link;
  double start_s;
  double end_s;
};

struct RunResult {
  Scenario scenario;
  std::string backend;  // "simgrid", "host", "device"
  std::vector<StepRecord> steps;
  std::vector<RearrangementRecord> rearrangements;
  std::vector<CommitRecord> commits;
  std::vector<TransferRecord> transfers;
  int skipped_rearrangements = 0;
  double wall_s = 0;
  int64_t peak_rss_bytes = 0;
};

nlohmann::ordered_json RunSummary(const RunResult& run);

// Writes a folder atomically: fill(partial) builds DIR.partial-PID, which then replaces DIR, but
// only when DIR does not exist or holds `marker` (an eplb `kind` folder written before).
// On any failure the partial folder is removed and DIR is left as it was.
Status WriteFolderAtomically(const std::string& dir, const std::string& kind,
                             const std::string& marker,
                             const std::function<Status(const std::string&)>& fill);
Status WriteRunFolder(const std::string& dir, const RunResult& run);
// The process's peak resident set so far (0 where unknown).
int64_t PeakRssBytes();

}  // namespace eplb
