#include "eplb/reports/report.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <span>
#include <sstream>

#include <fmt/format.h>

#include "eplb/base/file_io.h"
#include "eplb/io/output_folders.h"
#include "reports/comparison_numbers.h"
#include "reports/svg_plot.h"

namespace eplb {
namespace {

using comparison::CellText;
using comparison::Column;
using comparison::ColumnKey;
using comparison::Columns;
using comparison::GroupByLabel;
using comparison::kAbsent;
using comparison::Present;
using comparison::RunNumbers;
using comparison::ShownWhen;
using comparison::ValueOf;

// Averages of consecutive buckets, at most `points` of them: a readable line for long runs.
// At most `points` buckets of consecutive values: each bucket's mean as the line, its minimum and
// maximum as the envelope, so a short dip stays visible however long the run.
svg::Series Downsample(const std::string& name, const std::vector<double>& x,
                       const std::vector<double>& y, size_t points) {
  svg::Series out{name, {}};
  const size_t bucket = std::max<size_t>(1, (y.size() + points - 1) / points);
  for (size_t i = 0; i < y.size(); i += bucket) {
    const size_t end = std::min(y.size(), i + bucket);
    double sy = 0, lo = y[i], hi = y[i];
    for (size_t k = i; k < end; ++k) {
      sy += y[k];
      lo = std::min(lo, y[k]);
      hi = std::max(hi, y[k]);
    }
    out.points.emplace_back(x[i], sy / static_cast<double>(end - i));
    if (bucket > 1) out.band.push_back({x[i], lo, hi});
  }
  return out;
}

// The spread over seeds of the same buckets Downsample forms: per bucket, the lowest and highest
// seed's bucket mean.
std::vector<svg::Band> SeedBand(const std::vector<double>& x,
                                const std::vector<std::vector<double>>& per_seed, size_t points) {
  std::vector<svg::Band> band;
  const size_t n = x.size();
  const size_t bucket = std::max<size_t>(1, (n + points - 1) / points);
  for (size_t i = 0; i < n; i += bucket) {
    const size_t end = std::min(n, i + bucket);
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (const std::vector<double>& y : per_seed) {
      double sum = 0;
      for (size_t k = i; k < end; ++k) sum += y[k];
      const double mean = sum / static_cast<double>(end - i);
      lo = std::min(lo, mean);
      hi = std::max(hi, mean);
    }
    band.push_back({x[i], lo, hi});
  }
  return band;
}

// Tokens per GPU and expert of `layer` at `step`: the placement in force then (the initial one and
// the commits up to that step) under the window load of the latest rearrangement at or before it
// (the load its policy balanced). Empty when the run kept no loads.
std::vector<std::vector<double>> GpuExpertLoad(const RunFolder& folder, int layer, int step) {
  const RunResult& run = folder.run;
  const RearrangementRecord* window = nullptr;
  for (const RearrangementRecord& r : run.rearrangements) {
    if (r.step <= step && !r.window_load.empty()) window = &r;
  }
  if (window == nullptr || layer >= static_cast<int>(folder.initial_phy2log.size())) return {};
  std::vector<int32_t> row = folder.initial_phy2log[static_cast<size_t>(layer)];
  for (const CommitRecord& c : run.commits) {
    if (c.layer == layer && c.step <= step) row = c.phy2log;
  }
  const int experts = run.scenario.model.experts, gpus = run.scenario.num_gpus();
  const int per_gpu = static_cast<int>(row.size()) / gpus;
  std::vector<int> count(static_cast<size_t>(experts), 0);
  for (int32_t e : row) {
    if (e >= 0) ++count[static_cast<size_t>(e)];
  }
  std::vector<std::vector<double>> map(static_cast<size_t>(gpus),
                                       std::vector<double>(static_cast<size_t>(experts), 0.0));
  for (size_t s = 0; s < row.size(); ++s) {
    const int32_t e = row[s];
    if (e < 0) continue;
    const double tokens = window->window_load[static_cast<size_t>(layer) * experts + e];
    map[s / static_cast<size_t>(per_gpu)][static_cast<size_t>(e)] += tokens / count[e];
  }
  return map;
}

// One heat map per policy, of one kind.
struct LabelledMap {
  std::string label;
  std::vector<std::vector<double>> values;
};
struct HeatMapKind {
  std::string stem;   // the figure's file name before the label
  std::string title;  // before the label
  std::string x_label, y_label;
  int base_px, row_px;      // the chart's height: base + a row's pixels per row, at least 160
  std::string scale_label;  // the colour bar's
  std::pair<double, double> x_range = {0, 0};  // svg::HeatMapScale's
};

// Appends each map to the page and the figures, on one scale: the largest value of any map, so
// that a shade means the same in every policy's.
void AppendHeatMaps(const std::vector<LabelledMap>& maps, const HeatMapKind& kind,
                    std::string& body, std::vector<Figure>& made) {
  double top = 0;
  for (const LabelledMap& m : maps) {
    for (const auto& row : m.values) {
      for (double v : row) top = std::max(top, v);
    }
  }
  for (const LabelledMap& m : maps) {
    const int height =
        std::max(200, kind.base_px + kind.row_px * static_cast<int>(m.values.size()));
    Figure f{kind.stem + m.label,
             svg::HeatMap({kind.title + m.label, kind.x_label, kind.y_label, 760, height}, m.values,
                          {top, kind.scale_label, kind.x_range})};
    body += f.svg + "\n";
    made.push_back(std::move(f));
  }
}

// Per policy, the numbers behind the peak-memory plot: the resident memory every policy shares,
// the most any GPU held staged, their sum and what the GPU could hold; the largest over seeds.
std::string MemoryTable(const std::vector<LabelledRun>& runs) {
  std::string out =
      "<table id=\"memory\"><tr><th>policy</th><th>resident GB</th><th>most staged GB</th>"
      "<th>peak GB / GPU</th><th>capacity GB</th><th>headroom at the peak GB</th></tr>\n";
  for (const auto& group : GroupByLabel(runs)) {
    double resident = 0, staged = 0, peak = 0, capacity = 0;
    for (const LabelledRun* r : group) {
      const auto& m = r->folder.summary.gpu_memory;
      resident = std::max(resident, m.resident);
      staged = std::max(staged, static_cast<double>(m.staging_peak));
      peak = std::max(peak, m.peak);
      capacity = std::max(capacity, m.capacity);
    }
    out += fmt::format(
        "<tr><td>{}</td><td>{:.3f}</td><td>{:.3f}</td><td>{:.3f}</td><td>{:.2f}</td><td>{:.3f}"
        "</td></tr>\n",
        svg::Escape(group[0]->label), resident / 1e9, staged / 1e9, peak / 1e9, capacity / 1e9,
        (capacity - peak) / 1e9);
  }
  return out + "</table>\n";
}

const char* kStyle =
    R"(body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1100px;color:#222}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}table{border-collapse:collapse;font-size:12px}
td,th{border:1px solid #ccc;padding:3px 5px;text-align:right}th{background:#f3f3f3;font-weight:600;vertical-align:bottom}
td:first-child{text-align:left}td small{display:block;font-size:11px;color:#666;white-space:nowrap}
#summary td:first-child,#summary th:first-child{position:sticky;left:0;background:#fff;z-index:1}
#summary th:first-child{background:#f3f3f3}#decides td.best{font-weight:700;background:#eaf4ea}
.wide{overflow-x:auto}pre{background:#f7f7f7;padding:12px;overflow:auto;font-size:12px}
dt{font-weight:600}dd{margin:0 0 6px 16px})";

// A varied value as people write it: 4 rather than 4.0, 0.8 rather than 0.80000000000000004.
std::string LeadText(const nlohmann::ordered_json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (d == std::trunc(d) && std::abs(d) < 1e15) return fmt::format("{}", static_cast<int64_t>(d));
    return fmt::format("{}", d);
  }
  return v.dump();
}

// Where a sweep's plots put each value of a varied field: numbers at themselves, anything else
// (true, false; nccl, gloo) at its rank in the order the sweep ran them, which at 0 each would
// stack; a tick per value, labelled as the sweep wrote it.
struct SweepAxis {
  std::map<std::string, double> at;  // LeadText(value) to x
  std::vector<std::pair<double, std::string>> ticks;
};
SweepAxis AxisOf(const std::string& key, const std::vector<nlohmann::ordered_json>& rows) {
  SweepAxis axis;
  const bool numbers =
      std::all_of(rows.begin(), rows.end(), [&](const auto& r) { return r[key].is_number(); });
  for (const auto& row : rows) {
    const std::string text = LeadText(row[key]);
    if (axis.at.contains(text)) continue;
    const double x =
        numbers ? row[key].template get<double>() : static_cast<double>(axis.at.size());
    axis.at[text] = x;
    axis.ticks.emplace_back(x, text);
  }
  std::sort(axis.ticks.begin(), axis.ticks.end());
  return axis;
}

// Where a rearrangement's time goes, per run, when an engine's orchestration was priced
// (migration.engine): the engine's host work part by part (rearrangements.csv engine_*_s, means
// over the completed rearrangements), and the rest of the makespan: the bytes on the links and
// what overlaps them.
void AppendRearrangementCost(const std::vector<nlohmann::ordered_json>& rows, std::string& body,
                             std::vector<Figure>& made) {
  // A run with no completed rearrangement has no parts: an empty bar.
  const auto value = [](const nlohmann::ordered_json& row, double RunNumbers::*member) {
    const double v = ValueOf(row, ColumnKey(member));
    return Present(v) ? v : 0.0;
  };
  if (std::none_of(rows.begin(), rows.end(),
                   [&](const auto& r) { return value(r, &RunNumbers::engine_host_s) > 0; })) {
    return;
  }
  const std::pair<const char*, double RunNumbers::*> parts[] = {
      {"once", &RunNumbers::engine_once_s},        {"planning", &RunNumbers::engine_planning_s},
      {"issuing", &RunNumbers::engine_transfer_s}, {"barrier", &RunNumbers::engine_barrier_s},
      {"polling", &RunNumbers::engine_polling_s},  {"write-back", &RunNumbers::engine_writeback_s},
  };
  std::vector<std::string> groups;
  std::vector<svg::Series> series(std::size(parts) + 1);
  for (size_t i = 0; i < std::size(parts); ++i) series[i].name = parts[i].first;
  series.back().name = "links, rest";
  for (const auto& row : rows) {
    groups.push_back(row["label"].get<std::string>());
    const double x = static_cast<double>(groups.size() - 1);
    for (size_t i = 0; i < std::size(parts); ++i) {
      series[i].points.emplace_back(x, value(row, parts[i].second));
    }
    const double rest =
        value(row, &RunNumbers::rearrangement_makespan_s) - value(row, &RunNumbers::engine_host_s);
    series.back().points.emplace_back(x, std::max(0.0, rest));
  }
  Figure figure{
      "rearrangement-cost",
      svg::StackedBarChart({"Where a rearrangement's time goes", "run", "s"}, groups, series)};
  body +=
      "<h2>Where a rearrangement's time goes</h2>\n<p>The mean completed rearrangement of each "
      "run: the engine's host work as migration.engine prices it (once: the load window, the "
      "policy and the maps, once per rearrangement; then summed over layers: planning, issuing "
      "(the calls issuing and completing the transfers), the barrier, the polling beyond the "
      "links' time, the write-back), and the rest of the makespan (last commit − start; links, "
      "rest). A synchronous rearrangement stalls serving for all of it, and the rest is the bytes "
      "on the links. An asynchronous one moves a few layers per step: its makespan spans the "
      "steps it overlaps, so the rest is mostly those steps, and the host work is what the "
      "engine spends beside them, not time on the clock.</p>\n" +
      figure.svg + "\n";
  made.push_back(std::move(figure));
}

// What every number of the table is over, then each shown column's meaning from the table of
// every number (Columns()).
std::string Glossary(const std::vector<const Column*>& columns) {
  std::string out =
      "<p>Every per-step number is over the measured window, the same steps for every run: from "
      "the latest "
      "of the runs' first steps whose latency holds nothing of leaving the initial placement "
      "(run.measure_from: first_rearrangement, the second step after a run's first finished "
      "rearrangement's last commit), so that no run's numbers include the warm-up on the initial "
      "placement or the transition from it; later rearrangements are in, and the plots shade the "
      "warm-up grey. Every per-rearrangement number is a mean over the rearrangements the window "
      "holds, those first showing in a measured step. The memory peaks, the rearrangements held "
      "and the faults' numbers are over the whole run.</p>\n<dl>";
  for (const Column* c : columns) {
    out += fmt::format("<dt>{} <code>{}</code></dt><dd>{}.</dd>\n", svg::Escape(c->heading), c->key,
                       svg::Escape(c->meaning));
  }
  return out + "</dl>\n";
}

std::string Table(const std::vector<nlohmann::ordered_json>& rows,
                  const std::vector<std::string>& lead) {
  const auto any = [&](double RunNumbers::*member) {
    const char* key = ColumnKey(member);
    return std::any_of(rows.begin(), rows.end(), [&](const auto& r) {
      const double v = ValueOf(r, key);
      return Present(v) && v > 0;
    });
  };
  std::vector<const Column*> columns;
  for (const ShownWhen shown : {ShownWhen::kAlways, ShownWhen::kWithRankFaults,
                                ShownWhen::kWithHeld, ShownWhen::kWithEngine}) {
    if (shown == ShownWhen::kWithRankFaults && !any(&RunNumbers::rank_faults)) continue;
    if (shown == ShownWhen::kWithHeld && !any(&RunNumbers::rearrangements_held)) continue;
    if (shown == ShownWhen::kWithEngine && !any(&RunNumbers::engine_host_s)) continue;
    for (const Column& n : Columns()) {
      if (n.shown == shown) columns.push_back(&n);
    }
  }
  std::string out = R"(<div class="wide"><table id="summary"><tr>)";
  for (const auto& l : lead) out += "<th>" + svg::Escape(l) + "</th>";
  for (const Column* c : columns) out += "<th>" + svg::Escape(c->heading) + "</th>";
  out += "</tr>\n";
  for (const auto& row : rows) {
    out += "<tr>";
    for (const auto& l : lead) {
      const auto& v = row[l];
      out += "<td>" + svg::Escape(LeadText(v)) + "</td>";
    }
    for (const Column* c : columns) {
      const double v = ValueOf(row, c->key);
      // Over seeds: the mean, then half the range between the lowest and highest seed.
      auto [text, half] = comparison::MeanAndSpreadText(row, *c);
      if (!half.empty()) text.append("<small>± ").append(half).append("</small>");
      // An absent number has no data-value: nothing to sort or read back as 0.
      out += Present(v)
                 ? fmt::format(R"(<td data-key="{}" data-value="{:.17g}">{}</td>)", c->key, v, text)
                 : fmt::format(R"(<td data-key="{}">{}</td>)", c->key, text);
    }
    out += "</tr>\n";
  }
  return out + "</table></div>\n" + Glossary(columns);
}

// The few numbers that decide between policies, each with which way is better, and the best
// policy on each marked: the first thing a reader sees (the full table follows the plots).
std::string DecidingTable(const std::vector<nlohmann::ordered_json>& rows) {
  // Which numbers decide, and which way is better; each one's heading, key, scale and format are
  // the table of every number's.
  struct Decides {
    double RunNumbers::*member;
    bool higher_is_better;
  };
  static constexpr Decides kColumns[] = {
      {&RunNumbers::balancedness_mean, true},        {&RunNumbers::latency_p99_s, false},
      {&RunNumbers::step_time_mean_s, false},        {&RunNumbers::stalled_s, false},
      {&RunNumbers::bytes_per_rearrangement, false},
  };
  const auto heading = [](const Column& n) {
    return *n.short_heading != '\0' ? n.short_heading : n.heading;
  };
  const auto shown = [](const Column& n, const nlohmann::ordered_json& row) {
    return CellText(ValueOf(row, n.key), n.scale, n.format);
  };
  std::string out = R"(<table id="decides"><tr><th>policy</th>)";
  std::vector<std::string> best_of, best_text;
  for (const Decides& d : kColumns) {
    const Column& n = comparison::ColumnOf(d.member);
    out += fmt::format("<th>{} ({})</th>", heading(n),
                       d.higher_is_better ? "higher is better" : "lower is better");
    double best = kAbsent;
    for (const auto& row : rows) {
      const double v = ValueOf(row, n.key);
      if (Present(v) && (!Present(best) || (d.higher_is_better ? v > best : v < best))) best = v;
    }
    // The best as shown, to four significant digits: a tie there is a tie.
    best_text.push_back(Present(best) ? CellText(best, n.scale, n.format) : std::string());
    std::vector<std::string> who;
    for (const auto& row : rows) {
      if (Present(best) && shown(n, row) == best_text.back()) {
        who.push_back(row["label"].get<std::string>());
      }
    }
    best_of.push_back(
        fmt::format("{}: {}", heading(n),
                    who.empty() ? std::string("—") : fmt::format("{}", fmt::join(who, ", "))));
  }
  out += "</tr>\n";
  for (const auto& row : rows) {
    out += R"(<tr><td class="policy">)" + svg::Escape(row["label"].get<std::string>()) + "</td>";
    for (size_t c = 0; c < std::size(kColumns); ++c) {
      const std::string text = shown(comparison::ColumnOf(kColumns[c].member), row);
      const bool is_best = !best_text[c].empty() && text == best_text[c];
      out += fmt::format(R"(<td{}>{}</td>)", is_best ? R"( class="best")" : "", text);
    }
    out += "</tr>\n";
  }
  out += "</table>\n<p>Best on each: " + svg::Escape(fmt::format("{}", fmt::join(best_of, "; "))) +
         ". Over the measured window; every number, its spread over seeds and its definition are "
         "in <a href=\"#all-numbers\">all numbers</a> below the plots.</p>\n";
  return out;
}

std::string Page(const std::string& title, const std::string& body) {
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<title>" +
         svg::Escape(title) + "</title>\n<style>" + kStyle + svg::ChartStyle() +
         "</style>\n</head>\n<body>\n<h1>" + svg::Escape(title) + "</h1>\n" + body +
         "</body>\n</html>\n";
}

}  // namespace

std::string CompareReportHtml(const std::string& scenario_name, const std::string& scenario_yaml,
                              const std::vector<LabelledRun>& runs, const ReportOptions& options,
                              std::vector<Figure>* figures) {
  const std::vector<nlohmann::ordered_json> rows = ComparisonRows(runs);
  // Every run's statistics start here (report.h); the CDF is of these steps alone.
  const size_t measured_from = static_cast<size_t>(CommonMeasuredFrom(runs));
  std::vector<svg::Series> balance, step, cdf, bytes, memory, tradeoff;
  std::vector<std::string> groups;
  std::vector<double> marks;
  size_t most = 0, seeds = 1;
  const char* x_label = options.time_axis ? "simulated seconds" : "step";
  for (const auto& group : GroupByLabel(runs)) {
    const std::string& label = group[0]->label;
    seeds = std::max(seeds, group.size());
    // Per step: the mean over seeds; the band is the spread over seeds when there are several,
    // else the spread within each bucket of steps.
    const size_t n = std::ranges::min(group, {}, [](const LabelledRun* r) {
                       return r->folder.run.steps.size();
                     })->folder.run.steps.size();
    std::vector<double> x(n), balancedness(n, 0.0), ms(n, 0.0), pooled_ms;
    std::vector<std::vector<double>> balancedness_of_seed, ms_of_seed;
    for (const LabelledRun* r : group) {
      const std::vector<StepRecord>& steps = r->folder.run.steps;
      std::vector<double> b(n), t(n);
      for (size_t i = 0; i < n; ++i) {
        x[i] = options.time_axis ? steps[i].start_s : static_cast<double>(steps[i].step);
        b[i] = steps[i].balancedness;
        t[i] = steps[i].latency_s * 1e3;
        balancedness[i] += b[i] / static_cast<double>(group.size());
        ms[i] += t[i] / static_cast<double>(group.size());
      }
      pooled_ms.insert(pooled_ms.end(),
                       t.begin() + static_cast<std::ptrdiff_t>(std::min(measured_from, n)),
                       t.end());
      balancedness_of_seed.push_back(std::move(b));
      ms_of_seed.push_back(std::move(t));
    }
    balance.push_back(Downsample(label, x, balancedness, 400));
    step.push_back(Downsample(label, x, ms, 400));
    if (group.size() > 1) {
      balance.back().band = SeedBand(x, balancedness_of_seed, 400);
      step.back().band = SeedBand(x, ms_of_seed, 400);
    }
    std::sort(pooled_ms.begin(), pooled_ms.end());
    svg::Series c{label, {}};
    const size_t stride = std::max<size_t>(1, pooled_ms.size() / 400);
    for (size_t i = 0; i < pooled_ms.size(); i += stride)
      c.points.emplace_back(pooled_ms[i],
                            static_cast<double>(i + 1) / static_cast<double>(pooled_ms.size()));
    if (!pooled_ms.empty()) c.points.emplace_back(pooled_ms.back(), 1.0);
    cdf.push_back(std::move(c));
    svg::Series b{label, {}};
    svg::Series m{label, {}};
    svg::Series t{label, {}};
    t.line = false;
    for (const LabelledRun* r : group) {
      const auto& rearrangements = r->folder.run.rearrangements;
      const double resident = r->folder.summary.gpu_memory.resident;
      for (size_t i = 0; i < rearrangements.size(); ++i) {
        const RearrangementRecord& rr = rearrangements[i];
        if (b.points.size() <= i) b.points.emplace_back(static_cast<double>(i), 0.0);
        if (m.points.size() <= i) m.points.emplace_back(static_cast<double>(i + 1), 0.0);
        b.points[i].second +=
            static_cast<double>(rr.bytes.sum()) / 1e9 / static_cast<double>(group.size());
        m.points[i].second += (resident + static_cast<double>(rr.most_staged_bytes())) / 1e9 /
                              static_cast<double>(group.size());
        marks.push_back(options.time_axis ? rr.start_s : static_cast<double>(rr.step));
      }
      most = std::max(most, rearrangements.size());
      // A dot per seed.
      const nlohmann::ordered_json row = ComparisonRow(*r, static_cast<int>(measured_from));
      const double gb = ValueOf(row, ColumnKey(&RunNumbers::bytes_per_rearrangement)) / 1e9;
      const double after = ValueOf(row, ColumnKey(&RunNumbers::following_balancedness));
      if (Present(gb) && Present(after)) t.points.emplace_back(gb, after);
    }
    bytes.push_back(std::move(b));
    m.markers = true;
    memory.push_back(std::move(m));
    tradeoff.push_back(std::move(t));
  }
  std::sort(marks.begin(), marks.end());
  marks.erase(std::unique(marks.begin(), marks.end()), marks.end());
  // The workload's phase changes (the same scenario in every run), where the load shifts.
  std::vector<double> phases;
  if (!runs.empty()) {
    const std::vector<StepRecord>& steps = runs[0].folder.run.steps;
    for (const PhaseChange& change : runs[0].folder.run.scenario.workload.phases) {
      if (change.step < 0 || change.step >= static_cast<int>(steps.size())) continue;
      phases.push_back(options.time_axis ? steps[static_cast<size_t>(change.step)].start_s
                                         : static_cast<double>(change.step));
    }
  }
  // The faults in force (the same scenario in every run), over [step, until) of the run.
  std::vector<std::pair<double, double>> faults;
  if (!runs.empty()) {
    const std::vector<StepRecord>& steps = runs[0].folder.run.steps;
    const auto at = [&](int s) {
      if (!options.time_axis) return static_cast<double>(s);
      if (s < static_cast<int>(steps.size())) return steps[static_cast<size_t>(s)].start_s;
      return steps.empty() ? 0.0 : steps.back().start_s + steps.back().step_s;
    };
    for (const FaultSpec& f : runs[0].folder.run.scenario.faults) {
      const int last = static_cast<int>(steps.size());
      if (f.step >= last) continue;
      faults.emplace_back(at(f.step), at(std::min(f.until, last)));
    }
  }
  for (size_t i = 0; i < most; ++i) groups.push_back(std::to_string(i + 1));

  svg::Chart balance_chart{"Balancedness over the run", x_label,
                           "balancedness (mean, min-max band)"};
  balance_chart.x_marks = marks;
  balance_chart.phase_marks = phases;
  balance_chart.spans = faults;
  svg::Chart step_chart{"Step latency over the run", x_label, "ms (mean, min-max band)"};
  step_chart.x_marks = marks;
  step_chart.phase_marks = phases;
  step_chart.spans = faults;
  // The warm-up: the steps before the measured window, on either axis.
  if (!runs.empty() && measured_from > 0) {
    const std::vector<StepRecord>& steps = runs[0].folder.run.steps;
    const size_t end = std::min(measured_from, steps.size() - 1);
    const double x = options.time_axis ? steps[end].start_s : static_cast<double>(end);
    balance_chart.warm_up = {0, x};
    step_chart.warm_up = {0, x};
  }
  std::vector<Figure> made = {
      {"balancedness", svg::LineChart(balance_chart, balance)},
      {"step-time", svg::LineChart(step_chart, step)},
      {"balance-vs-bytes",
       svg::LineChart({"Balance against bytes moved", "GB moved per rearrangement",
                       "balancedness after rearrangement"},
                      tradeoff)},
      {"bytes-per-rearrangement",
       svg::BarChart({"Bytes moved per rearrangement", "rearrangement", "GB"}, groups, bytes)},
      {"step-time-cdf",
       svg::LineChart({fmt::format("CDF of step latency, steps {} on", measured_from), "ms",
                       "fraction of steps"},
                      cdf)},
      {"peak-memory", svg::LineChart({"Peak GPU memory per rearrangement", "rearrangement",
                                      "GB per GPU (axis not from 0)"},
                                     memory)},
  };
  const char* titles[] = {"Balancedness over the run",   "Step latency over the run",
                          "Balance against bytes moved", "Bytes moved per rearrangement",
                          "CDF of step latency",         "Peak GPU memory per rearrangement"};
  const char* captions[] = {
      ("Balancedness of each step; grey dashed lines mark where rearrangements start, dotted "
       "purple ones where the workload's popularity shifts (its phases); red shading where the "
       "scenario's faults are in force."),
      ("Each step's latency as its requests see it (metrics latency_s): the step as the "
       "backend ran it, migrations' contention and faults included, plus every stall before it "
       "(a stop-the-world rearrangement's, a recovery's). Grey: the warm-up before the measured "
       "window, which no statistic includes."),
      ("Each policy's balance on the steps after its rearrangements against the bytes it moved "
       "for them: up and to the left is better."),
      "Bytes moved by each rearrangement.",
      ("Distribution of step latency, stalls included, over the measured window: from the "
       "step after the last of the runs' first commits (run.measure_from), the same steps for "
       "every policy."),
      ("The fullest GPU during each rearrangement: its resident memory (weights, redundant slots, "
       "KV cache, reserve) and the most it held staged at once (engine/gpu_memory.h). The axis "
       "spans the values, not 0 to the top: the resident memory is the same for every policy "
       "and the staging is what differs; policies that staged alike draw one line over another, "
       "and the table gives each, with the GPU's capacity."),
  };
  std::string body =
      "<p>Scenario <b>" + svg::Escape(scenario_name) + "</b>, " +
      (seeds > 1 ? fmt::format("run {} times per policy, once per seed: numbers are means over "
                               "seeds, ± half the range between the lowest and highest seed; "
                               "bands in the plots span the seeds",
                               seeds)
                 : std::string("run once per policy with the same seed and workload")) +
      ".</p>\n";
  body += "<h2>What decides</h2>\n" + DecidingTable(rows);
  for (size_t i = 0; i < made.size(); ++i) {
    body += "<h2>" + std::string(titles[i]) + "</h2>\n<p>" + captions[i] + "</p>\n" + made[i].svg +
            "\n";
  }
  body += "<h2 id=\"all-numbers\">All numbers</h2>\n" + Table(rows, {"label"});
  AppendRearrangementCost(rows, body, made);
  body += MemoryTable(runs);
  // Per policy, imbalance (1 − balancedness) per layer and span of steps: which layers a policy
  // leaves unbalanced, and when.
  std::vector<LabelledMap> heat;
  int span_steps = 1;
  size_t span_count = 0;
  for (const auto& group : GroupByLabel(runs)) {
    const auto& spans = group[0]->folder.run.layer_balance;
    if (spans.empty()) continue;
    span_steps = spans[0].last_step - spans[0].first_step + 1;
    span_count = std::max(span_count, spans.size());
    std::vector<std::vector<double>> map(spans[0].balancedness.size(),
                                         std::vector<double>(spans.size(), 0.0));
    for (size_t c = 0; c < spans.size(); ++c) {
      for (size_t l = 0; l < map.size() && l < spans[c].balancedness.size(); ++l)
        map[l][c] = 1.0 - static_cast<double>(spans[c].balancedness[l]);
    }
    heat.push_back({group[0]->label, std::move(map)});
  }
  if (!heat.empty()) {
    body += fmt::format(
        "<h2>1 − balancedness per layer over the run</h2>\n<p>1 − balancedness of each layer (a "
        "row; "
        "layer 0 at the top) over spans of {} steps (a column, at its steps on the x axis), "
        "darker is worse, one scale for every policy{}.</p>\n",
        span_steps, seeds > 1 ? "; the first seed" : "");
  }
  // Steps on the x axis (whatever options.time_axis: the spans are of steps), each column
  // span_steps wide from step 0.
  AppendHeatMaps(heat,
                 {"layer-imbalance-",
                  "1 − balancedness per layer and step: ",
                  fmt::format("step (columns of {} steps)", span_steps),
                  "layer",
                  80,
                  4,
                  "1 − balancedness",
                  {0.0, static_cast<double>(span_count) * span_steps}},
                 body, made);
  // The load map of each policy at one step and layer.
  std::vector<LabelledMap> maps;
  int map_step = options.map_step;
  for (const auto& group : GroupByLabel(runs)) {
    const RunFolder& folder = group[0]->folder;
    if (map_step < 0) map_step = static_cast<int>(folder.run.steps.size()) - 1;
    auto map = GpuExpertLoad(folder, options.map_layer, map_step);
    if (!map.empty()) maps.push_back({group[0]->label, std::move(map)});
  }
  if (!maps.empty()) {
    body += fmt::format(
        "<h2>Load per GPU and expert</h2>\n<p>Layer {} at step {}{}: the tokens each GPU serves "
        "for each expert under the placement in force, with the load the latest rearrangement's "
        "policy was given; one scale for every policy. A row per GPU, a column per expert.</p>\n",
        options.map_layer, map_step, seeds > 1 ? " (the first seed)" : "");
  }
  AppendHeatMaps(
      maps,
      {"load-map-",
       fmt::format("Load per GPU and expert, layer {} at step {}: ", options.map_layer, map_step),
       "expert", "GPU", 60, 8, "tokens in the window"},
      body, made);
  body += "<h2>Scenario</h2>\n<pre>" + svg::Escape(scenario_yaml) + "</pre>\n";
  if (figures != nullptr) *figures = made;
  return Page("eplb comparison: " + scenario_name, body);
}

Status WriteFigures(const std::string& dir, const std::vector<Figure>& figures) {
  std::error_code ec;
  const std::string folder = dir + "/" + folder_file::kFigures;
  std::filesystem::create_directories(folder, ec);
  if (ec) return Status::IoError(fmt::format("{}: {}", folder, ec.message()));
  for (const Figure& f : figures) {
    EPLB_RETURN_IF_ERROR(WriteTextFile(folder + "/" + f.name + ".svg", svg::StandaloneSvg(f.svg)));
  }
  return Status::Ok();
}

std::string SweepReportHtml(const std::string& scenario_name, const std::vector<std::string>& keys,
                            const std::vector<nlohmann::ordered_json>& rows,
                            std::vector<Figure>* figures) {
  std::vector<std::string> lead = keys;
  lead.emplace_back("policy");
  // Each point run once per seed (sweep --seeds): rows hold the means and their spread.
  const int64_t seeds =
      rows.empty() || !rows[0].contains("seeds") ? 1 : rows[0]["seeds"].get<int64_t>();
  std::string body = "<p>Scenario <b>" + svg::Escape(scenario_name) +
                     "</b>: " + std::to_string(rows.size()) +
                     " points. Each plot shows one varied field against a metric, a line per "
                     "policy and combination of the other varied fields' values.";
  if (seeds > 1) {
    body += fmt::format(
        " Each point ran once per seed ({} seeds): every number is the mean over them, ± half "
        "the range between the lowest and highest seed, and the plots' bands span the seeds.",
        seeds);
  }
  body += "</p>\n";
  body += "<h2>Points</h2>\n" + Table(rows, lead);
  std::vector<Figure> made;
  // Each point's total bytes moved: per rearrangement alone hides it when the interval varies.
  std::vector<nlohmann::ordered_json> plotted = rows;
  for (auto& row : plotted) {
    const double rearrangements = ValueOf(row, ColumnKey(&RunNumbers::rearrangements));
    row["bytes_moved"] =
        rearrangements > 0
            ? rearrangements * ValueOf(row, ColumnKey(&RunNumbers::bytes_per_rearrangement))
            : 0.0;
  }
  for (const std::string& key : keys) {
    const SweepAxis axis = AxisOf(key, rows);
    for (const auto& [metric, title, scale, stem] :
         {std::tuple{"step_time_mean_s", "mean step time (ms)", 1e3, "step-time"},
          std::tuple{"latency_p99_s", "p99 latency, stalls included (ms)", 1e3, "latency-p99"},
          std::tuple{"balancedness_mean", "balancedness", 1.0, "balancedness"},
          std::tuple{"bytes_moved", "GB moved in all", 1e-9, "bytes-moved"},
          std::tuple{"peak_memory_bytes", "peak GPU memory (GB)", 1e-9, "peak-memory"}}) {
      // Faceted, not averaged: a line per policy and values of the other varied fields; over
      // seeds, each point's mean with a band from its lowest to its highest seed.
      struct Value {
        double mean, low, high;
      };
      std::map<std::string, std::map<double, Value>> by_line;
      for (const auto& row : plotted) {
        std::string line = row["policy"].get<std::string>();
        for (const std::string& other : keys) {
          if (other != key) line += " · " + other + "=" + LeadText(row[other]);
        }
        const auto& v = row[key];
        const double x = axis.at.at(LeadText(v)), y = ValueOf(row, metric);
        if (!Present(y)) continue;  // no point where the number does not exist
        Value value{y * scale, y * scale, y * scale};
        if (row.contains("spread") && row["spread"].contains(metric)) {
          value.low = row["spread"][metric][0].get<double>() * scale;
          value.high = row["spread"][metric][1].get<double>() * scale;
        }
        by_line[line][x] = value;
      }
      std::vector<svg::Series> series;
      for (const auto& [line, points] : by_line) {
        svg::Series s{line, {}};
        for (const auto& [x, v] : points) {
          s.points.emplace_back(x, v.mean);
          if (seeds > 1) s.band.push_back({x, v.low, v.high});
        }
        s.markers = true;
        series.push_back(std::move(s));
      }
      const std::string heading = std::string(title) + " against " + key;
      svg::Chart chart{heading, key, title};
      chart.x_ticks = axis.ticks;
      made.push_back({std::string(stem) + "-against-" + key, svg::LineChart(chart, series)});
      body += "<h2>" + svg::Escape(heading) + "</h2>\n" + made.back().svg + "\n";
    }
  }
  // Every point of the sweep, by policy: the trade-off migration-aware policies are about.
  std::map<std::string, svg::Series> tradeoff;
  for (const auto& row : rows) {
    svg::Series& s = tradeoff[row["policy"].get<std::string>()];
    s.name = row["policy"].get<std::string>();
    s.line = false;
    const double gb = ValueOf(row, ColumnKey(&RunNumbers::bytes_per_rearrangement)) / 1e9;
    const double after = ValueOf(row, ColumnKey(&RunNumbers::following_balancedness));
    if (!Present(gb) || !Present(after)) continue;
    s.points.emplace_back(gb, after);
    // Which point it is: its varied values, beside the dot.
    std::string label;
    for (const std::string& key : keys) {
      label +=
          (label.empty() ? "" : ", ") + key.substr(key.rfind('.') + 1) + "=" + LeadText(row[key]);
    }
    s.point_labels.push_back(label);
  }
  std::vector<svg::Series> scatter;
  for (auto& [policy, s] : tradeoff) scatter.push_back(std::move(s));
  made.push_back({"balance-vs-bytes",
                  svg::LineChart({"Balance against bytes moved, every point",
                                  "GB moved per rearrangement", "balancedness after rearrangement"},
                                 scatter)});
  body +=
      "<h2>Balance against bytes moved</h2>\n<p>One dot per sweep point, named by its varied "
      "values (the field's last part).</p>\n" +
      made.back().svg + "\n";
  if (figures != nullptr) *figures = made;
  return Page("eplb sweep: " + scenario_name, body);
}

}  // namespace eplb
