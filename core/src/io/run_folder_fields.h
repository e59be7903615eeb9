// The run folder's CSV columns as data: each column's documentation, how its value is written
// and where it lives in its record. run_folder_fields.cpp defines every column once;
// the writers and readers (run_folder_columns.cpp) are driven by those tables. Internal to the
// io layer.
#pragma once

#include <cstdint>
#include <vector>

#include "eplb/engine/run_result.h"
#include "eplb/io/run_folder.h"
#include "io/run_folder_columns.h"

namespace eplb::run_folder {

// How a column's value is written; the reader accepts what the writer writes.
enum class Format {
  kInt32,   // an integer that fits 32 bits
  kInt64,   // an integer
  kReal9,   // 9 significant digits: times in seconds
  kFixed6,  // 6 decimals: ratios
  kFixed3,  // 3 decimals: milliseconds
  kLink,    // a link class name: nvlink, nic
  kReason,  // a rearrangement's reason: interval, recovery, scale
};

struct Cell {
  int64_t i = 0;
  double d = 0;
};

template <typename Row>
struct Field {
  RunFolderColumn doc;
  Format format;
  Cell (*get)(const Row&);
  void (*set)(Row&, const Cell&);
  // Columns added after run folders were first written come last and are optional on reading:
  // a folder without them reads with the row's defaults.
  bool added_later = false;
};

// The columns of each file, in the order they are written.
const std::vector<Field<StepRecord>>& MetricsFields();
const std::vector<Field<TransferRecord>>& TransferFields();
const std::vector<Field<LayerBalanceRow>>& LayerBalanceFields();
const std::vector<Field<RearrangementRow>>& RearrangementFields();
const std::vector<Field<GpuMemoryRow>>& GpuMemoryFields();

}  // namespace eplb::run_folder
