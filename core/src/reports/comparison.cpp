// A comparison's numbers of each run, their table, and comparison.csv (report.h).
#include "eplb/reports/report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <span>

#include <fmt/format.h>

#include "eplb/model/survivability.h"
#include "reports/comparison_numbers.h"

namespace eplb {
namespace comparison {

std::span<const Number> Numbers() {
  using R = RunNumbers;
  using S = Shown;
  static const Number numbers[] = {
      {"balancedness_mean", &R::balancedness_mean, false, S::kAlways, "balancedness mean", 1,
       nullptr},
      {"balancedness_min", &R::balancedness_min, false, S::kAlways, "min", 1, nullptr},
      {"imbalance_ratio_mean", &R::imbalance_ratio_mean, false, S::kAlways, "imbalance mean", 1,
       nullptr},
      {"imbalance_ratio_max", &R::imbalance_ratio_max, false, S::kNever, "", 1, ""},
      {"following_balancedness", &R::following_balancedness, false, S::kAlways,
       "balancedness after rearr.", 1, nullptr},
      {"window_balancedness_after", &R::window_balancedness_after, false, S::kAlways,
       "on the window", 1, nullptr},
      {"window_balancedness_bound", &R::window_balancedness_bound, false, S::kAlways, "bound", 1,
       nullptr},
      {"window_gap_to_bound", &R::window_gap_to_bound, false, S::kAlways, "gap to bound", 1,
       nullptr},
      {"step_time_mean_s", &R::step_time_mean_s, false, S::kAlways, "step ms mean", 1e3, nullptr},
      {"step_time_p99_s", &R::step_time_p99_s, false, S::kAlways, "step ms p99", 1e3, nullptr},
      {"latency_mean_s", &R::latency_mean_s, false, S::kNever, "", 1, ""},
      {"latency_p99_s", &R::latency_p99_s, false, S::kAlways, "latency ms p99", 1e3, nullptr},
      {"latency_p999_s", &R::latency_p999_s, false, S::kNever, "", 1, ""},
      {"latency_max_s", &R::latency_max_s, false, S::kAlways, "worst", 1e3, nullptr},
      {"rearrangements", &R::rearrangements, true, S::kNever, "", 1, ""},
      {"rearrangements_held", &R::rearrangements_held, true, S::kWithHeld, "rearr. held", 1,
       "{:.0f}"},
      {"bytes_per_rearrangement", &R::bytes_per_rearrangement, false, S::kAlways, "GB / rearr.",
       1e-9, nullptr},
      {"transfers_per_rearrangement", &R::transfers_per_rearrangement, false, S::kAlways,
       "transfers / rearr.", 1, "{:.0f}"},
      {"rearrangement_makespan_s", &R::rearrangement_makespan_s, false, S::kAlways, "makespan s", 1,
       nullptr},
      {"slowed_s", &R::slowed_s, false, S::kAlways, "slowed s", 1, nullptr},
      {"stalled_s", &R::stalled_s, false, S::kAlways, "stalled s", 1, nullptr},
      {"policy_ms", &R::policy_ms, false, S::kAlways, "policy ms", 1, nullptr},
      {"peak_memory_bytes", &R::peak_memory_bytes, false, S::kAlways, "peak GB / GPU", 1e-9,
       nullptr},
      {"staging_peak_bytes", &R::staging_peak_bytes, true, S::kAlways, "staged GB", 1e-9, nullptr},
      {"gpu_failure_tokens_lost", &R::gpu_failure_tokens_lost, false, S::kAlways,
       "tokens lost, a GPU fails %", 100, nullptr},
      {"node_failure_tokens_lost", &R::node_failure_tokens_lost, false, S::kAlways,
       "a node fails %", 100, nullptr},
      {"node_failure_reload_bytes", &R::node_failure_reload_bytes, false, S::kAlways, "reload GB",
       1e-9, nullptr},
      {"rank_faults", &R::rank_faults, false, S::kNever, "", 1, ""},
      {"recovery_s", &R::recovery_s, false, S::kWithRankFaults, "recovery s", 1, nullptr},
      {"fault_tokens_lost", &R::fault_tokens_lost, false, S::kWithRankFaults, "tokens dropped", 1,
       "{:.0f}"},
      {"fault_tokens_stalled", &R::fault_tokens_stalled, false, S::kWithRankFaults,
       "tokens stalled", 1, "{:.0f}"},
      {"fault_bytes_reloaded", &R::fault_bytes_reloaded, false, S::kWithRankFaults, "reloaded GB",
       1e-9, nullptr},
      {"fault_bytes_copied", &R::fault_bytes_copied, false, S::kWithRankFaults, "copied GB", 1e-9,
       nullptr},
      {"engine_host_s", &R::engine_host_s, false, S::kWithEngine, "engine host s / rearr.", 1,
       nullptr},
      {"engine_once_s", &R::engine_once_s, false, S::kNever, "", 1, ""},
      {"engine_planning_s", &R::engine_planning_s, false, S::kNever, "", 1, ""},
      {"engine_transfer_s", &R::engine_transfer_s, false, S::kNever, "", 1, ""},
      {"engine_barrier_s", &R::engine_barrier_s, false, S::kNever, "", 1, ""},
      {"engine_polling_s", &R::engine_polling_s, false, S::kNever, "", 1, ""},
      {"engine_writeback_s", &R::engine_writeback_s, false, S::kNever, "", 1, ""},
  };
  return numbers;
}

std::string CellText(double v, double scale, const char* format) {
  if (!Present(v)) return "—";
  return format != nullptr ? fmt::format(fmt::runtime(format), v * scale)
                           : SignificantText(v * scale);
}

const char* KeyOf(double RunNumbers::*member) {
  return NumberOf(member).key;
}

const Number& NumberOf(double RunNumbers::*member) {
  for (const Number& n : Numbers()) {
    if (n.value == member) return n;
  }
  // Every member of RunNumbers has its entry (the table is RunNumbers' fields in order).
  return Numbers().front();
}

std::pair<std::string, std::string> MeanAndSpreadText(const nlohmann::ordered_json& row,
                                                      const Number& number) {
  const double v = ValueOf(row, number.key);
  std::pair<std::string, std::string> text{CellText(v, number.scale, number.format), ""};
  const auto spread = row.find("spread");
  if (!Present(v) || spread == row.end() || !spread->contains(number.key)) return text;
  const auto& range = (*spread)[number.key];
  if (!range[0].is_number()) return text;
  const double half = (range[1].get<double>() - range[0].get<double>()) / 2 * number.scale;
  text.second = number.format != nullptr
                    ? fmt::format(fmt::runtime(number.format), half)
                    : fmt::format("{:.{}f}", half, SignificantDecimals(v * number.scale));
  return text;
}

std::vector<std::vector<const LabelledRun*>> GroupByLabel(const std::vector<LabelledRun>& runs) {
  std::vector<std::vector<const LabelledRun*>> groups;
  std::map<std::string, size_t> index;
  for (const LabelledRun& r : runs) {
    const auto [it, added] = index.emplace(r.label, groups.size());
    if (added) groups.emplace_back();
    groups[it->second].push_back(&r);
  }
  return groups;
}

}  // namespace comparison

int SignificantDecimals(double value, int digits) {
  if (value == 0 || !std::isfinite(value)) return 0;
  const int exponent = static_cast<int>(std::floor(std::log10(std::fabs(value))));
  // Up to nine decimals: a number below 1e-6 of its unit is shown as 0.000000000-something.
  return std::clamp(digits - 1 - exponent, 0, 9);
}

std::string SignificantText(double value, int digits) {
  return fmt::format("{:.{}f}", value, SignificantDecimals(value, digits));
}

TextTable TerminalNumbers(const std::vector<nlohmann::ordered_json>& rows, StudyKind kind) {
  using R = comparison::RunNumbers;
  // Each column's heading here; its key, scale and format are the table of every number's.
  struct Column {
    double R::*member;
    const char* heading;
    bool in_comparison, in_sweep;
    bool with_rank_faults;  // a comparison's, when a run lost GPUs or scaled
  };
  static constexpr Column kColumns[] = {
      {&R::balancedness_mean, "balancedness", true, true, false},
      {&R::following_balancedness, "after rearr.", true, true, false},
      {&R::step_time_mean_s, "step ms", true, true, false},
      {&R::latency_p99_s, "latency p99 ms", true, true, false},
      {&R::latency_max_s, "worst ms", false, true, false},
      {&R::bytes_per_rearrangement, "GB / rearr.", true, true, false},
      {&R::policy_ms, "policy ms", true, false, false},
      {&R::node_failure_tokens_lost, "node lost: %", true, false, false},
      {&R::recovery_s, "recovery s", true, false, true},
      {&R::fault_tokens_lost, "tokens dropped", true, false, true},
      {&R::fault_tokens_stalled, "tokens stalled", true, false, true},
      {&R::fault_bytes_reloaded, "reloaded GB", true, false, true},
  };
  const bool faults = std::any_of(rows.begin(), rows.end(), [](const auto& row) {
    return comparison::ValueOf(row, comparison::KeyOf(&R::rank_faults)) > 0;
  });
  TextTable table;
  std::vector<const comparison::Number*> numbers;
  for (const Column& c : kColumns) {
    if (!(kind == StudyKind::kComparison ? c.in_comparison : c.in_sweep)) continue;
    if (c.with_rank_faults && !faults) continue;
    table.headings.emplace_back(c.heading);
    numbers.push_back(&comparison::NumberOf(c.member));
  }
  for (const auto& row : rows) {
    std::vector<std::string> cells;
    for (const comparison::Number* n : numbers) {
      auto [text, half] = comparison::MeanAndSpreadText(row, *n);
      if (!half.empty()) text.append(" ± ").append(half);
      cells.push_back(std::move(text));
    }
    table.rows.push_back(std::move(cells));
  }
  return table;
}

namespace {

using comparison::Number;
using comparison::Numbers;
using comparison::RunNumbers;

using comparison::kAbsent;
using comparison::Present;

// Of nothing: absent.
double Mean(const std::vector<double>& v) {
  return v.empty() ? kAbsent
                   : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// What losing one GPU or node would cost the placement the run ended with, over the window
// load of its last rearrangement (model/survivability.h); none when the run kept no loads.
std::optional<FailureExposure> FinalExposure(const RunFolder& folder, FailureDomain domain) {
  const RunResult& run = folder.run;
  const RearrangementRecord* window = nullptr;
  for (const RearrangementRecord& r : run.rearrangements) {
    if (!r.window_load.empty()) window = &r;
  }
  const int layers = run.scenario.model.layers, experts = run.scenario.model.experts;
  if (window == nullptr || static_cast<int>(folder.initial_phy2log.size()) != layers) {
    return std::nullopt;
  }
  std::vector<std::vector<int32_t>> rows = folder.initial_phy2log;
  for (const CommitRecord& c : run.commits) rows[static_cast<size_t>(c.layer)] = c.phy2log;
  auto placement = Placement::Create(experts, rows);
  if (!placement.ok()) return std::nullopt;
  LoadMatrix load(layers, experts);
  for (int l = 0; l < layers; ++l) {
    for (int e = 0; e < experts; ++e) load(l, e) = window->window_load[size_t(l) * experts + e];
  }
  return ExposureToFailure(load, *placement, run.scenario.topology(), domain);
}

}  // namespace

int CommonMeasuredFrom(const std::vector<LabelledRun>& runs) {
  int from = 0;
  for (const LabelledRun& r : runs) from = std::max(from, MeasuredFromStep(r.folder.run));
  return from;
}

nlohmann::ordered_json ComparisonRow(const LabelledRun& labelled, int measured_from) {
  // The per-step statistics over the comparison's window; the rest as summary.json has them.
  RunSummary s = labelled.folder.summary;
  const RunResult& run = labelled.folder.run;
  const int from = measured_from >= 0 ? measured_from : MeasuredFromStep(run);
  MeasureSteps(run, from, s);
  // Per rearrangement: over those the window holds, as every per-step number is the window's (a
  // rearrangement started at the boundary after step k first shows in step k + 1), so that the
  // one leaving the initial placement is in neither; of none, absent.
  std::vector<double> after, bound, following, makespan, policy_ms;
  double bytes = 0, transfers = 0, rearrangements = 0;
  RunSummary::Rearrangements::EngineSeconds engine;
  for (size_t i = 0; i < run.rearrangements.size(); ++i) {
    const RearrangementRecord& r = run.rearrangements[i];
    if (r.step + 1 < from) continue;
    ++rearrangements;
    after.push_back(r.window_balancedness_after);
    bound.push_back(r.window_balancedness_bound);
    if (i < labelled.folder.following_balancedness.size()) {
      following.push_back(labelled.folder.following_balancedness[i]);
    }
    for (int64_t b : r.bytes) bytes += static_cast<double>(b);
    transfers += static_cast<double>(r.transfers);
    policy_ms.push_back(r.policy_ms);
    if (r.end_s >= 0) {
      makespan.push_back(r.end_s - r.start_s);
      engine.Add(r);
    }
  }
  const double n = rearrangements > 0 ? rearrangements : kAbsent;
  const double completed = makespan.empty() ? kAbsent : static_cast<double>(makespan.size());
  const std::optional<FailureExposure> gpu = FinalExposure(labelled.folder, FailureDomain::kGpu);
  const std::optional<FailureExposure> node = FinalExposure(labelled.folder, FailureDomain::kNode);
  double rank_faults = 0, recovered = 0, recovery_s = 0, dropped = 0, stalled = 0, reloaded = 0,
         copied = 0;
  for (const RunSummary::FaultEffect& f : s.faults) {
    if (!f.changes_ranks) continue;
    ++rank_faults;
    if (f.recovery_s >= 0) recovery_s += f.recovery_s, ++recovered;
    dropped += f.tokens_lost;
    stalled += f.tokens_stalled;
    reloaded += static_cast<double>(f.bytes_reloaded);
    copied += static_cast<double>(f.bytes_copied);
  }
  const RunNumbers numbers{.balancedness_mean = s.balancedness.mean,
                           .balancedness_min = s.balancedness.min,
                           .imbalance_ratio_mean = s.imbalance_ratio.mean,
                           .imbalance_ratio_max = s.imbalance_ratio.max,
                           .following_balancedness = Mean(following),
                           .window_balancedness_after = Mean(after),
                           .window_balancedness_bound = Mean(bound),
                           .window_gap_to_bound = Mean(bound) - Mean(after),
                           .step_time_mean_s = s.step_time_s.mean,
                           .step_time_p99_s = s.step_time_s.p99,
                           .latency_mean_s = s.latency_s.mean,
                           .latency_p99_s = s.latency_s.p99,
                           .latency_p999_s = s.latency_s.p999,
                           .latency_max_s = s.latency_s.max,
                           .rearrangements = rearrangements,
                           .rearrangements_held = static_cast<double>(s.rearrangements.held),
                           .bytes_per_rearrangement = bytes / n,
                           .transfers_per_rearrangement = transfers / n,
                           .rearrangement_makespan_s = Mean(makespan),
                           .slowed_s = s.slowed_s,
                           .stalled_s = s.stalled_s,
                           .policy_ms = Mean(policy_ms),
                           .peak_memory_bytes = s.gpu_memory.peak,
                           .staging_peak_bytes = static_cast<double>(s.gpu_memory.staging_peak),
                           .gpu_failure_tokens_lost = gpu ? gpu->tokens_lost_mean : kAbsent,
                           .node_failure_tokens_lost = node ? node->tokens_lost_mean : kAbsent,
                           .node_failure_reload_bytes = node ? node->reload_bytes_mean : kAbsent,
                           .rank_faults = rank_faults,
                           .recovery_s = recovered > 0 ? recovery_s / recovered : kAbsent,
                           .fault_tokens_lost = dropped,
                           .fault_tokens_stalled = stalled,
                           .fault_bytes_reloaded = reloaded,
                           .fault_bytes_copied = copied,
                           .engine_host_s = engine.total() / completed,
                           .engine_once_s = engine.once / completed,
                           .engine_planning_s = engine.planning / completed,
                           .engine_transfer_s = engine.transfer / completed,
                           .engine_barrier_s = engine.barrier / completed,
                           .engine_polling_s = engine.polling / completed,
                           .engine_writeback_s = engine.writeback / completed};
  nlohmann::ordered_json row = {{"label", labelled.label}};
  for (const Number& number : Numbers()) {
    const double v = numbers.*number.value;
    row[number.key] = !Present(v)      ? nlohmann::ordered_json(nullptr)
                      : number.integer ? nlohmann::ordered_json(static_cast<int64_t>(v))
                                       : nlohmann::ordered_json(v);
  }
  return row;
}

std::vector<nlohmann::ordered_json> ComparisonRows(const std::vector<LabelledRun>& runs) {
  std::vector<nlohmann::ordered_json> rows;
  const int from = CommonMeasuredFrom(runs);
  for (const auto& group : comparison::GroupByLabel(runs)) {
    std::vector<nlohmann::ordered_json> seeds;
    for (const LabelledRun* r : group) seeds.push_back(ComparisonRow(*r, from));
    nlohmann::ordered_json row = seeds[0];
    row["seeds"] = seeds.size();
    if (seeds.size() > 1) {
      // Over the seeds a number exists for; absent (null, and a spread of nulls) where none.
      nlohmann::ordered_json spread = nlohmann::ordered_json::object();
      for (auto it = row.begin(); it != row.end(); ++it) {
        if (!(it->is_number() || it->is_null()) || it.key() == "seeds") continue;
        double sum = 0, lo = kAbsent, hi = kAbsent, present = 0;
        for (const auto& one : seeds) {
          const double v = comparison::ValueOf(one, it.key().c_str());
          if (!Present(v)) continue;
          sum += v;
          lo = Present(lo) ? std::min(lo, v) : v;
          hi = Present(hi) ? std::max(hi, v) : v;
          ++present;
        }
        if (present == 0) {
          *it = nullptr;
          spread[it.key()] = {nullptr, nullptr};
        } else {
          *it = sum / present;
          spread[it.key()] = {lo, hi};
        }
      }
      row["spread"] = std::move(spread);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string ComparisonCsv(const std::vector<nlohmann::ordered_json>& rows) {
  if (rows.empty()) return "";
  std::string out;
  bool first_key = true;
  for (auto it = rows[0].begin(); it != rows[0].end(); ++it) {
    if (it->is_object()) continue;  // the seeds' spread: in the JSON only
    out += (first_key ? "" : ",") + it.key();
    first_key = false;
  }
  out += "\n";
  for (const auto& row : rows) {
    bool first = true;
    for (auto it = row.begin(); it != row.end(); ++it) {
      if (it->is_object()) continue;
      out += first ? "" : ",";
      first = false;
      out += it->is_null()           ? std::string()  // absent
             : it->is_string()       ? it->get<std::string>()
             : it->is_number_float() ? fmt::format("{:.10g}", it->get<double>())
                                     : it->dump();
    }
    out += "\n";
  }
  return out;
}

}  // namespace eplb
