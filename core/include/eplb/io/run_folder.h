// A run folder: what `eplb run` and `eplb device-run` write, what `compare`, `sweep`, `validate`
// and the viewer read, and the definition of every number in it. This module is the only code
// that knows the folder's format: its files, their columns (RunFolderFiles(), one table that the
// writer, the reader and the documentation all use), the writer and a typed reader.
//
//   scenario.yaml      the resolved scenario (io/scenario_file.h)
//   summary.json       RunSummary below
//   metrics.csv        one line per step               (columns: RunFolderFiles())
//   transfers.csv      one line per expert transfer    (columns: RunFolderFiles())
//   rearrangements.csv one line per rearrangement      (columns: RunFolderFiles())
//   placements.jsonl   the initial placement of each layer (step −1), then one line per layer
//                      commit: {"step", "time_s", "layer", "phy2log"}
//   loads.jsonl        one line per rearrangement: {"step", "time_s", "load": [layer][expert]},
//                      the window's load (tokens) its policy was given
//   layer_balancedness.csv  per span of steps (at most 200) and layer, the layer's balancedness
//                      (columns: RunFolderFiles())
//   gpu_memory.csv     per rearrangement and GPU, the most it held staged and its memory then
//                      (columns: RunFolderFiles(); engine/gpu_memory.h)
//   trace.json         Chrome/Perfetto trace events: a process per GPU with its transfers (async
//                      slices on its receive side), and a "cluster" process with the steps,
//                      balance counters, and rearrangement and commit marks. Written, not read;
//                      left out on request (RunFolderOptions, `--no-trace`).
//   manifest.tsv       every other file with its size, written last (base/file_io.h)
//
// The folder is written as DIR.partial-HOST-PID and put at DIR only when complete, by an atomic
// exchange (WriteFolderAtomically), so a failed or killed run never leaves a folder that looks
// whole; a previous run folder at DIR is replaced only when it holds nothing eplb did not write.
//
// Thread-safety: pure functions over values.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "eplb/base/status.h"
#include "eplb/engine/run_result.h"

namespace eplb {

// What wrote a folder, at the top of summary.json, comparison.json and sweep.json as "tool"
// ("eplb 0.1.0", the project's version) and "format_version". The format version counts changes
// to the meaning or names of the folders' fields; a reader refuses a folder of a later format
// rather than misread it, and reads one without the field (written before it existed) as 0.
inline constexpr int kFolderFormatVersion = 1;
std::string ToolVersion();

// One column of a CSV file of the folder.
struct RunFolderColumn {
  std::string_view name;
  std::string_view unit;  // "s", "bytes", "tokens", "ms", "1" (a ratio), "" (an id or a name)
  std::string_view meaning;
};

struct RunFolderFile {
  std::string_view name;
  std::string_view meaning;
  std::span<const RunFolderColumn> columns;  // empty for files that are not CSV
};

// Every file of a run folder, in the order they are written.
std::span<const RunFolderFile> RunFolderFiles();

// summary.json: the run reduced to the numbers a person reads first.
struct RunSummary {
  std::string scenario;
  std::string backend;  // "simgrid", "host", "device"
  int64_t steps = 0;
  double simulated_s = 0;  // end of the last step, stalls included (the backend's clock)
  // The steps the statistics below are over: [from_step, steps), by run.measure_from's `rule`
  // ("first_rearrangement": the second step after the first finished rearrangement's last
  // commit; "first_commit": the step after the run's first commit; either 0 when nothing was
  // committed; "step": the scenario's step). The steps before are the warm-up.
  struct {
    std::string rule = "first_rearrangement";
    int64_t from_step = 0, steps = 0;
  } measured;
  struct {
    double mean = 0, p50 = 0, p99 = 0, max = 0;
  } step_time_s;  // metrics step_s: the steps as the backend ran them, stalls excluded
  // metrics latency_s: what the steps' requests waited, every stall before a step included;
  // the worst step is the one with the largest.
  struct {
    double mean = 0, p50 = 0, p99 = 0, p999 = 0, max = 0;
    int64_t worst_step = 0;
  } latency_s;
  // Decode only: latency_s over the tokens a sequence emits per step (1 + acceptance × MTP
  // drafts), the time between a sequence's tokens.
  bool decode = false;
  struct {
    double p50 = 0, p99 = 0, p999 = 0;
  } inter_token_latency_s;
  double idle_step_time_s_mean = 0;  // the same steps on idle links
  // Over the measured steps, so that latency_s.mean × measured.steps = step_time_s.mean ×
  // measured.steps + stalled_s:
  double slowed_s = 0;   // Σ (step_s − idle_step_s): what migrations cost the steps
  double stalled_s = 0;  // Σ (latency_s − step_s): the waits between steps their latency holds
  struct {
    double mean = 0, min = 0;
  } balancedness;
  struct {
    double mean = 0, max = 0;
  } imbalance_ratio;
  struct Rearrangements {
    int64_t started = 0, completed = 0, skipped = 0;
    int64_t held = 0;            // not started: the placement in force passed the balance gate
    double makespan_s_mean = 0;  // last commit − start, over completed ones
    double predicted_makespan_s_mean = 0;  // the schedules' prediction, same ones
    double lower_bound_s_mean = 0;         // the schedules' lower bound, same ones
    double policy_ms_mean = 0;             // over started ones
    // The engine's orchestration (rearrangements.csv engine_*_s, migration.engine), over the
    // completed ones: where a rearrangement's host time goes beside its bytes; 0 for eplb.
    struct EngineSeconds {
      double once = 0, planning = 0, transfer = 0, barrier = 0, polling = 0, writeback = 0;
      double total() const { return once + planning + transfer + barrier + polling + writeback; }
      // Adds `r`'s parts (rearrangements.csv engine_*_s): sums, before a mean divides them.
      void Add(const RearrangementRecord& r) {
        once += r.engine_once_s;
        planning += r.engine_planning_s;
        transfer += r.engine_transfer_s;
        barrier += r.engine_barrier_s;
        polling += r.engine_polling_s;
        writeback += r.engine_writeback_s;
      }
    } engine_s_mean;
  } rearrangements;
  // Per GPU (engine/gpu_memory.h), bytes: the scenario's terms, and the fullest any GPU was
  // during a rearrangement (resident + the most it held staged; resident when none staged).
  struct {
    double capacity = 0, resident = 0, dense_weights = 0, expert_weights = 0, kv_cache = 0,
           reserved = 0, staging_budget = 0;
    int64_t staging_peak = 0;
    double peak = 0;
  } gpu_memory;
  int64_t bytes_moved_nvlink = 0;
  int64_t bytes_moved_nic = 0;
  int64_t transfers = 0;
  double wall_s = 0;
  int64_t peak_rss_bytes = 0;
  // Per fault of the scenario that began within the run: when it held in the backend's time,
  // and the mean step time over its steps against as many of the nearest steps before it under
  // no fault (after it, when none before; 0 when no step was healthy).
  struct FaultEffect {
    std::string kind;         // FaultKindName
    int step = 0, until = 0;  // the steps it held within the run: [step, until)
    double start_s = 0, end_s = 0;
    int64_t steps = 0;
    double step_time_mean_s = 0;
    double baseline_step_time_mean_s = 0;
    // Faults that change the GPUs (gpu_lost, node_lost, scale) hold until their recovery's last
    // commit: [step, until) are the steps served meanwhile (none when serving waited), and
    // these say what it cost (absent from the JSON for slowdowns):
    bool changes_ranks = false;
    double recovery_s = -1;      // fault to the recovery's last commit; −1: not within the run
    int64_t bytes_reloaded = 0;  // from the backup: experts no live GPU held
    int64_t bytes_copied = 0;    // from live replicas, NVLink and NICs
    double tokens_lost = 0;      // Σ metrics tokens_lost from the fault to the next such fault
    double tokens_stalled = 0;   // the batch that waited, when serving waited (lost_tokens: wait)
    double stalled_s = 0;        // how long serving waited for the recovery
    bool cancelled_rearrangement = false;  // one was in flight and was cancelled
    int64_t serving_gpus = 0;              // live serving GPUs after the fault
    double after_step_time_mean_s = 0;     // from the recovery to the next such fault or the end
  };
  std::vector<FaultEffect> faults;
};

RunSummary Summarize(const RunResult& run);

// The first step of `run`'s measured window by its scenario's run.measure_from (RunSummary::
// measured), within [0, steps − 1].
int MeasuredFromStep(const RunResult& run);
// Summarize's per-step statistics (measured, step_time_s, latency_s, inter_token_latency_s,
// idle_step_time_s_mean, balancedness, imbalance_ratio) over [from_step, steps) into `out`;
// what comparisons use to measure every run over one window.
void MeasureSteps(const RunResult& run, int from_step, RunSummary& out);

// Balancedness of the steps each rearrangement served: from the step after it started to the
// step its successor started at (or the run's end); the policy's real test.
std::vector<double> FollowingBalancedness(const RunResult& run);

struct RunFolderOptions {
  // trace.json: two events per transfer, the largest file by far (hundreds of MB at thousands of
  // GPUs) and read only by trace viewers; without it the folder is complete for every reader.
  bool trace = true;
};

// Writes `run` as a run folder at `dir`, atomically.
Status WriteRunFolder(const std::string& dir, const RunResult& run,
                      const RunFolderOptions& options = {});

// A run folder read back.
struct RunFolder {
  std::string dir;
  RunSummary summary;
  // Everything the files keep of the run: the scenario, every step, rearrangement (with its
  // window's load, when loads.jsonl is there), commit and transfer (in the file's order);
  // skipped_rearrangements, wall_s and peak_rss_bytes from the summary. Reals as precise as
  // their column's format keeps them (9 significant digits for times, 6 decimals for ratios).
  RunResult run;
  std::vector<std::vector<int32_t>> initial_phy2log;  // per layer: the placement at step −1
  std::vector<double> following_balancedness;         // per rearrangement
  bool has_loads = false;                             // loads.jsonl was there
};

// One CSV table of a run folder as typed columns, in the file's column order (RunFolderFiles),
// for readers outside C++ (the Python module) that would otherwise parse the CSV again and
// guess its types: integer columns as integers, reals as reals, names (a link class, a
// rearrangement's reason) as text. A column the folder's format had not yet added is absent.
struct RunFolderTable {
  std::string_view file;  // "metrics.csv"
  struct Column {
    std::string_view name;
    enum class Kind { kInteger, kReal, kText } kind = Kind::kReal;
    std::vector<int64_t> integers;   // kInteger
    std::vector<double> reals;       // kReal
    std::vector<std::string> texts;  // kText
  };
  std::vector<Column> columns;
};

// The CSV tables of the run folder at `dir`, each file checked by ReadRunFolder first (errors
// as its), in RunFolderFiles' order.
Result<std::vector<RunFolderTable>> ReadRunFolderTables(const std::string& dir);

// Reads a finished run folder and checks it whole: the manifest (every file there, of the size
// written), each file against the scenario (layers, experts, slots, GPUs in range) and against
// summary.json (counts of steps, transfers and rearrangements), every number finite and in its
// range, steps in order, no transfer ending before it starts. Errors name the file and line
// ("DIR/transfers.csv:2: 6 fields, expected 8"); a folder without its manifest is refused as
// unfinished, and so is any DIR.partial-HOST-PID.
Result<RunFolder> ReadRunFolder(const std::string& dir);

// A run folder as a reader outside C++ (the Python module) takes it, from one ReadRunFolder
// that checks it whole, so that such a reader opens and parses none of its files itself.
struct RunFolderDocuments {
  RunFolder folder;
  std::vector<RunFolderTable> tables;  // as ReadRunFolderTables
  nlohmann::ordered_json summary;      // summary.json, every field as written, in its order
  std::string scenario_yaml;           // scenario.yaml as written
  // placements.jsonl's records in the file's order: each layer's initial placement (step −1),
  // then folder.run.commits.
  struct LoadWindow {
    int64_t step = 0;
    double time_s = 0;  // as loads.jsonl writes it (rearrangements.csv rounds start_s)
  };
  std::vector<LoadWindow> load_windows;  // loads.jsonl's lines; their loads: folder.run
};
Result<RunFolderDocuments> ReadRunFolderDocuments(const std::string& dir);

}  // namespace eplb
