// The CSV files of a run folder: their columns, defined once (run_folder_columns.cpp), and the
// writer and reader of each, both driven by that definition. Internal to the io layer; the
// public view of the table is RunFolderFiles() (eplb/io/run_folder.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "eplb/base/status.h"
#include "eplb/engine/run_result.h"

namespace eplb::run_folder {

// A rearrangements.csv line: the record and the balance of the steps it served.
struct RearrangementRow : RearrangementRecord {
  double following_balancedness = 1;
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

// `name` (the file's path) prefixes errors, with the line.
Result<std::vector<StepRecord>> ParseMetricsCsv(std::string_view text, const std::string& name);
// `layers` and `gpus` bound each transfer's layer and ranks.
Result<std::vector<TransferRecord>> ParseTransfersCsv(std::string_view text,
                                                      const std::string& name, int layers,
                                                      int experts, int gpus);
Result<std::vector<RearrangementRow>> ParseRearrangementsCsv(std::string_view text,
                                                             const std::string& name);
// Spans in order, each with every layer once in order, within `steps` and `layers`.
Result<std::vector<LayerBalanceSpan>> ParseLayerBalanceCsv(std::string_view text,
                                                           const std::string& name, int layers,
                                                           int steps);

}  // namespace eplb::run_folder
