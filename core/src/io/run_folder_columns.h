// The CSV files of a run folder: their columns, defined once (run_folder_fields.cpp), and the
// writer and reader of each, both driven by that definition. Internal to the io layer; the
// public view of the table is RunFolderFiles() (eplb/io/run_folder.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "eplb/base/status.h"
#include "eplb/engine/run_result.h"
#include "eplb/io/run_folder.h"

namespace eplb::run_folder {

// A rearrangements.csv line: the record and the balance of the steps it served.
struct RearrangementRow : RearrangementRecord {
  double following_balancedness = 1;
  // Over ranks: the most any GPU held staged, and that GPU's memory then (gpu_memory.csv).
  int64_t staging_peak_max_bytes = 0;
  int64_t peak_memory_bytes = 0;
};

// A gpu_memory.csv line: one GPU during one rearrangement (engine/gpu_memory.h).
struct GpuMemoryRow {
  int rearrangement = 0;  // its line in rearrangements.csv, from 0
  int step = 0;
  int rank = 0;
  int64_t staging_peak_bytes = 0;
  int64_t peak_memory_bytes = 0;
};

// A layer_balancedness.csv line: one layer over one span of steps (eplb_loop.h).
struct LayerBalanceRow {
  int first_step = 0;
  int last_step = 0;
  int layer = 0;
  double balancedness = 1;
};

std::string MetricsCsv(const std::vector<StepRecord>& steps);
std::string LayerBalanceCsv(const std::vector<LayerBalanceSpan>& spans);
std::string TransfersCsv(const std::vector<TransferRecord>& transfers);
std::string RearrangementsCsv(const std::vector<RearrangementRow>& rows);
// A GPU's resident memory (engine/gpu_memory.h) as the folder writes it: whole bytes.
int64_t ResidentBytes(const Scenario& scenario);
// A line per rearrangement that recorded its staging, and rank; `resident_bytes` per GPU.
std::string GpuMemoryCsv(const std::vector<RearrangementRecord>& rearrangements,
                         int64_t resident_bytes);

// The readers. `name` (the file's path) prefixes errors, with the line. `typed`, when given,
// receives the same table as typed columns (RunFolderTable), from the same parse.
Result<std::vector<StepRecord>> ParseMetricsCsv(std::string_view text, const std::string& name,
                                                RunFolderTable* typed = nullptr);
// `layers` and `gpus` bound each transfer's layer and ranks; `run_end_s` (the end of the last
// step of metrics.csv) its end, with TransferEndLimit's slack.
Result<std::vector<TransferRecord>> ParseTransfersCsv(std::string_view text,
                                                      const std::string& name, int layers,
                                                      int experts, int gpus, double run_end_s,
                                                      RunFolderTable* typed = nullptr);
// The latest a transfer of a run ending at `run_end_s` may end. A round in flight when the last
// step ended still records its transfers (the host and GPU backends join their workers at the
// end), so a transfer may end after the run: by the run's length or 1 s, whichever is more.
// Past that, a time is a damaged file (1e300 s in a 0.03 s run), which a viewer would scale its
// timeline to.
inline double TransferEndLimit(double run_end_s) {
  return run_end_s + (run_end_s > 1 ? run_end_s : 1.0);
}
Result<std::vector<RearrangementRow>> ParseRearrangementsCsv(std::string_view text,
                                                             const std::string& name,
                                                             RunFolderTable* typed = nullptr);
// Fills each rearrangement's staging_peak_bytes from the lines (rearrangement and rank in
// order, every rank of `gpus` once per rearrangement that has lines, each peak the GPU's
// `resident_bytes` + its staging).
Status ParseGpuMemoryCsv(std::string_view text, const std::string& name, int gpus,
                         int64_t resident_bytes, std::vector<RearrangementRecord>& rearrangements,
                         RunFolderTable* typed = nullptr);
// Spans in order, each with every layer once in order, within `steps` and `layers`.
Result<std::vector<LayerBalanceSpan>> ParseLayerBalanceCsv(std::string_view text,
                                                           const std::string& name, int layers,
                                                           int steps,
                                                           RunFolderTable* typed = nullptr);

}  // namespace eplb::run_folder
