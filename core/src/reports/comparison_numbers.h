// The numbers a comparison keeps of each run (internal to reports/): report.cpp's table and
// plots read them by key, comparison.cpp computes and writes them (report.h defines each).
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

// Every number a comparison keeps of one run (report.h defines them), once: its key in
// comparison.json, comparison.csv and sweep.json, in their order; where it lives in RunNumbers;
// and whether and how the report's table shows it. The table shows the kAlways columns, then the
// kWithRankFaults ones when a run lost GPUs or scaled (the scenario's gpu_lost, node_lost and
// scale faults: what those cost as the run went), then kWithHeld when a balance gate
// (eplb.min_balancedness) held a rearrangement.
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

// kWithEngine: when a run paid an engine's orchestration (migration.engine other than eplb).
enum class Shown { kNever, kAlways, kWithRankFaults, kWithHeld, kWithEngine };

struct Number {
  const char* key;
  double RunNumbers::*value;
  bool integer;  // written as an integer (a count)
  Shown shown;
  const char* heading;  // in the report's table
  double scale;         // of the value shown
  const char* format;   // a count's fixed format; nullptr: SignificantText (report.h)
};

// The table of every number, in comparison.json's order.
std::span<const Number> Numbers();
// The key of the number stored in `member`: where the report reads a number by name.
const char* KeyOf(double RunNumbers::*member);
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
                                                      const Number& number);
// The entry of Numbers() for `member`.
const Number& NumberOf(double RunNumbers::*member);

// Runs of one label (a policy's seeds), labels in the order they first appear.
std::vector<std::vector<const LabelledRun*>> GroupByLabel(const std::vector<LabelledRun>& runs);

}  // namespace eplb::comparison
