// The numbers a comparison keeps of each run, each defined once in comparison.cpp's table
// (Columns()): its key, how every table shows it, and what it means. Internal to reports/:
// report.cpp's tables, glossary and plots read them by key, comparison.cpp computes and writes
// them, and the terminal tables of `compare` and `sweep` come from TerminalNumbers (report.h).
#pragma once

#include <cmath>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "eplb/reports/report.h"

namespace eplb::comparison {

// Every number a comparison keeps of one run, in the table's order (Columns()).
struct RunNumbers {
  double balancedness_mean, balancedness_min, imbalance_ratio_mean, imbalance_ratio_max,
      following_balancedness, window_balancedness_after, window_balancedness_bound,
      window_gap_to_bound, step_time_mean_s, step_time_p99_s, latency_mean_s, latency_p99_s,
      latency_p999_s, latency_max_s, rearrangements, rearrangements_held, bytes_per_rearrangement,
      transfers_per_rearrangement, rearrangement_makespan_s, slowed_s, stalled_s, policy_ms,
      peak_memory_bytes, staging_peak_bytes, gpu_failure_tokens_lost, node_failure_tokens_lost,
      node_failure_reload_bytes, rank_faults, recovery_s, fault_tokens_lost, fault_tokens_stalled,
      fault_bytes_reloaded, fault_bytes_copied, engine_host_s, engine_once_s, engine_planning_s,
      engine_transfer_s, engine_barrier_s, engine_polling_s, engine_writeback_s;
};

// When the report's table of every number shows a column: always, or when a run lost GPUs or
// scaled (the scenario's gpu_lost, node_lost and scale faults: what those cost as the run went),
// when a balance gate (eplb.min_balancedness) held a rearrangement, when a run paid an engine's
// orchestration (migration.engine other than eplb); never (comparison.json and .csv only).
enum class ShownWhen { kNever, kAlways, kWithRankFaults, kWithHeld, kWithEngine };
// Which terminal tables show it (`eplb compare`'s, `eplb sweep`'s): the few a reader looks at
// first; a kWithRankFaults column only when a run lost GPUs or scaled.
enum class InTerminal { kNo, kComparison, kSweep, kBoth };

// One number a comparison keeps of each run: the whole of what any output says of it.
struct Column {
  const char* key;  // in comparison.json, comparison.csv and sweep.json
  double RunNumbers::*value;
  bool integer;  // written as an integer (a count)
  ShownWhen shown;
  const char* heading;  // in the report's table
  double scale;         // of the value shown
  const char* format;   // a count's fixed format; nullptr: SignificantText (report.h)
  InTerminal terminal;
  const char* short_heading;  // in the terminal tables and the report's deciding table
  const char* meaning;        // the report's glossary: what it is, over which window
};

// The table of every number, in comparison.json's order.
std::span<const Column> Columns();
// The key of the number stored in `member`: where the report reads a number by name.
const char* ColumnKey(double RunNumbers::*member);
// A number that does not exist for a run (the balance after a rearrangement of a run that never
// rearranged, a recovery's time when nothing recovered): NaN in RunNumbers, null in JSON, empty in
// CSV, "—" in tables; never 0, which would read as a measurement.
inline constexpr double kAbsent = std::numeric_limits<double>::quiet_NaN();
inline bool Present(double v) {
  return !std::isnan(v);
}
// ROW's number KEY, or kAbsent when it is null or missing.
inline double ValueOf(const nlohmann::ordered_json& row, const char* key) {
  const auto it = row.find(key);
  return it == row.end() || !it->is_number() ? kAbsent : it->get<double>();
}
// The text of a number as tables show it: v × scale by `format` (SignificantText when null), or
// "—" when absent.
std::string CellText(double v, double scale, const char* format);

// ROW's number as every table shows it: its text, and that of half its spread over seeds to as
// many decimals (empty when the row has none or the number is absent).
std::pair<std::string, std::string> MeanAndSpreadText(const nlohmann::ordered_json& row,
                                                      const Column& column);
// The entry of Columns() for `member`.
const Column& ColumnOf(double RunNumbers::*member);

// Runs of one label (a policy's seeds), labels in the order they first appear.
std::vector<std::vector<const LabelledRun*>> GroupByLabel(const std::vector<LabelledRun>& runs);

}  // namespace eplb::comparison
