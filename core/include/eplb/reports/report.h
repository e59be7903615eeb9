// Comparison reports: read run folders back, reduce each to the numbers a comparison shows,
// and write comparison.csv / comparison.json and a self-contained report.html (inline SVG
// plots, no network needed).
//
// The numbers, per run (all from the run folder, io/run_folder.h), are each defined once, in
// comparison.cpp's table (comparison_numbers.h, Columns()): its key in comparison.json,
// comparison.csv and sweep.json, how the report's and the terminal's tables show it, and what it
// means (the report's glossary prints it). The per-step numbers are over one measured window for
// every run of a comparison: from the latest of the runs' own first measured steps
// (run.measure_from; MeasuredFromStep), so that a policy's warm-up on the initial placement is
// no part of any run's statistics; the per-rearrangement numbers over the rearrangements that
// window holds.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eplb/base/status.h"
#include "eplb/io/run_folder.h"

namespace eplb {

// How every table shows a measured number (the report's, `compare`'s and `sweep`'s): to
// `digits` significant digits in fixed notation ("0.05012", "18.18", "651.3", "29118"), so that
// a small value is never rounded away and close policies are told apart; 0 is "0".
std::string SignificantText(double value, int digits = 4);
// The decimals SignificantText gives `value`: a spread printed beside it takes the same.
int SignificantDecimals(double value, int digits = 4);

// The numbers of `compare`'s or `sweep`'s table on the terminal, a row per row of
// comparison.json's `policies` or sweep.json's `points`: the few a reader looks at first, each
// as every table shows it (SignificantText, then " ± " half its spread over seeds; "—" where it
// does not exist), with the recovery's columns when a compared run lost GPUs or scaled. The
// command puts its own leading columns (the policy; a point's values) before them.
enum class StudyKind { kComparison, kSweep };
struct TextTable {
  std::vector<std::string> headings;
  std::vector<std::vector<std::string>> rows;
};
TextTable TerminalNumbers(const std::vector<nlohmann::ordered_json>& rows, StudyKind kind);

// A run folder and what the comparison calls it: the policy, or a sweep point.
struct LabelledRun {
  std::string label;
  RunFolder folder;
};

// A report's figure on its own: `name` is the file's stem, `svg` the chart as the report shows it.
struct Figure {
  std::string name;
  std::string svg;
};

struct ReportOptions {
  bool time_axis = false;  // x in simulated seconds instead of steps
  int map_layer = 0;       // the load maps' layer
  int map_step = -1;       // the load maps' step; -1: the last
};

// The first step of the window every run of `runs` is measured over: the latest of their own.
int CommonMeasuredFrom(const std::vector<LabelledRun>& runs);
// One run's numbers, its per-step statistics over [measured_from, steps) (−1: its own window).
nlohmann::ordered_json ComparisonRow(const LabelledRun& run, int measured_from = -1);
// One row per label: runs sharing a label are one policy's seeds, and their row holds the mean
// of every number, "seeds" (how many) and, with several, "spread": {number: [lowest, highest]}.
std::vector<nlohmann::ordered_json> ComparisonRows(const std::vector<LabelledRun>& runs);
std::string ComparisonCsv(const std::vector<nlohmann::ordered_json>& rows);
// The report of one scenario run once per policy: the summary table, then balancedness and step
// time per step (bucket means with their min-max envelope, rearrangement starts marked), balance
// after rearrangement against bytes moved (a point per policy), bytes per rearrangement and the
// step time CDF, and per policy the load per GPU and expert at one step and layer (a heat map,
// one scale for all). `figures`, when given, receives each chart for WriteFigures.
std::string CompareReportHtml(const std::string& scenario_name, const std::string& scenario_yaml,
                              const std::vector<LabelledRun>& runs,
                              const ReportOptions& options = {},
                              std::vector<Figure>* figures = nullptr);
// Writes each figure as DIR/figures/NAME.svg, a standalone SVG file for papers.
Status WriteFigures(const std::string& dir, const std::vector<Figure>& figures);

// A sweep: one row per point (varied values, policy, the comparison numbers); one plot per
// varied key of mean step time and of balancedness against the key's values, a line per
// policy and combination of the other keys' values (faceted, never averaged over them); rows
// over several seeds (sweep --seeds) draw each point's mean with a band over its seeds.
// Then every point's balance after rearrangement against its bytes moved, a dot per point.
std::string SweepReportHtml(const std::string& scenario_name, const std::vector<std::string>& keys,
                            const std::vector<nlohmann::ordered_json>& rows,
                            std::vector<Figure>* figures = nullptr);

}  // namespace eplb
