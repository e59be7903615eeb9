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

std::span<const Column> Columns() {
  using R = RunNumbers;
  using S = ShownWhen;
  using T = InTerminal;
  static const Column columns[] = {
      {"balancedness_mean", &R::balancedness_mean, false, S::kAlways, "balancedness mean", 1,
       nullptr, T::kBoth, "balancedness",
       "vLLM's balancedness of each measured step's load under the placement in force (Σ over "
       "layers of the mean GPU load / Σ of the max; 1 is perfect), averaged over the measured "
       "window"},
      {"balancedness_min", &R::balancedness_min, false, S::kAlways, "min", 1, nullptr, T::kNo, "",
       "the lowest balancedness of a measured step"},
      {"imbalance_ratio_mean", &R::imbalance_ratio_mean, false, S::kAlways, "imbalance mean", 1,
       nullptr, T::kNo, "",
       "TensorRT-LLM's imbalance, (max − mean) / mean GPU load averaged over layers, averaged over "
       "the measured steps; 0 is perfect"},
      {"imbalance_ratio_max", &R::imbalance_ratio_max, false, S::kNever, "", 1, "", T::kNo, "",
       "the largest imbalance of a measured step"},
      {"following_balancedness", &R::following_balancedness, false, S::kAlways,
       "balancedness after rearr.", 1, nullptr, T::kBoth, "after rearr.",
       "the balancedness of the steps each new placement then served, mean over the window's "
       "rearrangements"},
      {"window_balancedness_after", &R::window_balancedness_after, false, S::kAlways,
       "on the window", 1, nullptr, T::kNo, "",
       "the balancedness the policy reached on the load window it was given, mean over the "
       "window's rearrangements"},
      {"window_balancedness_bound", &R::window_balancedness_bound, false, S::kAlways, "bound", 1,
       nullptr, T::kNo, "",
       "the best balancedness any placement could reach on that window, mean over the window's "
       "rearrangements: the exact optimum on layers small enough to search (≤ 32 experts, ≤ 48 "
       "slots), else the mean GPU load and the hottest replica raised by counting arguments over "
       "every replica count (policy/balance_bound.h); on the shipped scenarios a placement reaches "
       "within 0.05% of it with 9 or more slots per GPU, 0.2% with 2"},
      {"window_gap_to_bound", &R::window_gap_to_bound, false, S::kAlways, "gap to bound", 1,
       nullptr, T::kNo, "",
       "bound − on the window: what a better placement could still have gained"},
      {"step_time_mean_s", &R::step_time_mean_s, false, S::kAlways, "step ms mean", 1e3, nullptr,
       T::kBoth, "step ms",
       "simulated time of a measured step as the backend ran it (attention, each MoE layer's "
       "straggler, dispatch and combine, slowed where migrations share the links), stalls "
       "excluded; the mean"},
      {"step_time_p99_s", &R::step_time_p99_s, false, S::kAlways, "step ms p99", 1e3, nullptr,
       T::kNo, "", "the 99th percentile of the step time"},
      {"latency_mean_s", &R::latency_mean_s, false, S::kNever, "", 1, "", T::kNo, "",
       "the mean latency of a measured step (latency ms p99 says what it is)"},
      {"latency_p99_s", &R::latency_p99_s, false, S::kAlways, "latency ms p99", 1e3, nullptr,
       T::kBoth, "latency p99 ms",
       "the 99th percentile of a measured step's latency as its requests see it: the step plus "
       "every stall before it (a stop-the-world rearrangement's, a recovery's), from the previous "
       "step's end to its own (metrics.csv latency_s)"},
      {"latency_p999_s", &R::latency_p999_s, false, S::kNever, "", 1, "", T::kNo, "",
       "the 99.9th percentile of the latency"},
      {"latency_max_s", &R::latency_max_s, false, S::kAlways, "worst", 1e3, nullptr, T::kSweep,
       "worst ms", "the largest latency of a measured step"},
      {"rearrangements", &R::rearrangements, true, S::kNever, "", 1, "", T::kNo, "",
       "rearrangements the measured window holds: those first showing in a measured step, so the "
       "one leaving the initial placement is not among them"},
      {"rearrangements_held", &R::rearrangements_held, true, S::kWithHeld, "rearr. held", 1,
       "{:.0f}", T::kNo, "",
       "rearrangements due at an interval and not started, the placement in force being balanced "
       "enough (eplb.min_balancedness)"},
      {"bytes_per_rearrangement", &R::bytes_per_rearrangement, false, S::kAlways, "GB / rearr.",
       1e-9, nullptr, T::kBoth, "GB / rearr.",
       "expert weights moved between GPUs per rearrangement, mean over the window's "
       "rearrangements"},
      {"transfers_per_rearrangement", &R::transfers_per_rearrangement, false, S::kAlways,
       "transfers / rearr.", 1, "{:.0f}", T::kNo, "",
       "expert transfers between GPUs per rearrangement, mean over the window's rearrangements"},
      {"rearrangement_makespan_s", &R::rearrangement_makespan_s, false, S::kAlways, "makespan s", 1,
       nullptr, T::kNo, "",
       "from a rearrangement's start to its last layer's commit (layers commit at step "
       "boundaries), mean over the window's finished rearrangements"},
      {"slowed_s", &R::slowed_s, false, S::kAlways, "slowed s", 1, nullptr, T::kNo, "",
       "Σ over the measured steps of (step time − the same step on idle links): what migrations "
       "sharing the links cost"},
      {"stalled_s", &R::stalled_s, false, S::kAlways, "stalled s", 1, nullptr, T::kNo, "",
       "Σ over the measured steps of (latency − step time), so that latency = step time + stalled: "
       "what the steps waited between them (a rearrangement's policy and host work, a "
       "stop-the-world wait, layer commits, recoveries)"},
      {"policy_ms", &R::policy_ms, false, S::kAlways, "policy ms", 1, nullptr, T::kComparison,
       "policy ms", "wall time of one policy call, mean over the window's rearrangements"},
      {"peak_memory_bytes", &R::peak_memory_bytes, false, S::kAlways, "peak GB / GPU", 1e-9,
       nullptr, T::kNo, "",
       "the fullest any GPU was during a rearrangement: its resident memory (dense and expert "
       "weights with the redundant slots, KV cache, and the 1 − cluster.memory_utilization "
       "reserve) plus the most it held staged at once (engine/gpu_memory.h)"},
      {"staging_peak_bytes", &R::staging_peak_bytes, true, S::kAlways, "staged GB", 1e-9, nullptr,
       T::kNo, "",
       "the most a GPU held staged at once: layers begun and not committed, each its written slots "
       "× model.expert_bytes"},
      {"gpu_failure_tokens_lost", &R::gpu_failure_tokens_lost, false, S::kAlways,
       "tokens lost, a GPU fails %", 100, nullptr, T::kNo, "",
       "what losing one GPU would cost the placement the run ended with, averaged over which one: "
       "the share of the last window's tokens routed to experts left with no replica, lost or "
       "stalled until reloaded (model/survivability.h)"},
      {"node_failure_tokens_lost", &R::node_failure_tokens_lost, false, S::kAlways,
       "a node fails %", 100, nullptr, T::kComparison, "node lost: %",
       "the same when a whole node fails, averaged over which one"},
      {"node_failure_reload_bytes", &R::node_failure_reload_bytes, false, S::kAlways, "reload GB",
       1e-9, nullptr, T::kNo, "",
       "the weights of the experts a node's loss leaves with no replica, averaged over which node: "
       "what recovery from a "
       "host-memory backup or storage must reload"},
      {"rank_faults", &R::rank_faults, false, S::kNever, "", 1, "", T::kNo, "",
       "the scenario's faults that lose GPUs or scale the serving GPUs (gpu_lost, node_lost, "
       "scale)"},
      {"recovery_s", &R::recovery_s, false, S::kWithRankFaults, "recovery s", 1, nullptr,
       T::kComparison, "recovery s", "mean time from such a fault to its recovery's last commit"},
      {"fault_tokens_lost", &R::fault_tokens_lost, false, S::kWithRankFaults, "tokens dropped", 1,
       "{:.0f}", T::kComparison, "tokens dropped",
       "Σ tokens routed to experts with no live replica until the recovery, dropped "
       "(eplb.lost_tokens: drop)"},
      {"fault_tokens_stalled", &R::fault_tokens_stalled, false, S::kWithRankFaults,
       "tokens stalled", 1, "{:.0f}", T::kComparison, "tokens stalled",
       "Σ such tokens held while serving waited (eplb.lost_tokens: wait)"},
      {"fault_bytes_reloaded", &R::fault_bytes_reloaded, false, S::kWithRankFaults, "reloaded GB",
       1e-9, nullptr, T::kComparison, "reloaded GB",
       "Σ expert weights the recoveries read from the backup (experts only the lost GPUs held)"},
      {"fault_bytes_copied", &R::fault_bytes_copied, false, S::kWithRankFaults, "copied GB", 1e-9,
       nullptr, T::kNo, "", "Σ expert weights the recoveries copied from live replicas"},
      {"engine_host_s", &R::engine_host_s, false, S::kWithEngine, "engine host s / rearr.", 1,
       nullptr, T::kNo, "",
       "the engine's host work per finished rearrangement (migration.engine other than eplb): its "
       "once-per-rearrangement work, planning, transfer calls, barriers, polling and write-back "
       "together (docs/rearrangement_cost.md)"},
      {"engine_once_s", &R::engine_once_s, false, S::kNever, "", 1, "", T::kNo, "",
       "the engine's once-per-rearrangement host work: the load window's reduction, the policy on "
       "the CPU, the maps' rebuild"},
      {"engine_planning_s", &R::engine_planning_s, false, S::kNever, "", 1, "", T::kNo, "",
       "the engine's per-layer planning, over the layers"},
      {"engine_transfer_s", &R::engine_transfer_s, false, S::kNever, "", 1, "", T::kNo, "",
       "the engine's calls issuing and completing the transfers"},
      {"engine_barrier_s", &R::engine_barrier_s, false, S::kNever, "", 1, "", T::kNo, "",
       "the engine's barriers, the wait for the slowest rank included"},
      {"engine_polling_s", &R::engine_polling_s, false, S::kNever, "", 1, "", T::kNo, "",
       "time the engine lost to completion polling beyond the links' own"},
      {"engine_writeback_s", &R::engine_writeback_s, false, S::kNever, "", 1, "", T::kNo, "",
       "the engine's copies from the buffer back into the weights"},
  };
  return columns;
}

std::string CellText(double v, double scale, const char* format) {
  if (!Present(v)) return "—";
  return format != nullptr ? fmt::format(fmt::runtime(format), v * scale)
                           : SignificantText(v * scale);
}

const char* ColumnKey(double RunNumbers::*member) {
  return ColumnOf(member).key;
}

const Column& ColumnOf(double RunNumbers::*member) {
  for (const Column& c : Columns()) {
    if (c.value == member) return c;
  }
  // Every member of RunNumbers has its entry (the table is RunNumbers' fields in order).
  return Columns().front();
}

std::pair<std::string, std::string> MeanAndSpreadText(const nlohmann::ordered_json& row,
                                                      const Column& number) {
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
  using comparison::Column;
  using comparison::InTerminal;
  const bool faults = std::any_of(rows.begin(), rows.end(), [](const auto& row) {
    return comparison::ValueOf(row, comparison::ColumnKey(&comparison::RunNumbers::rank_faults)) >
           0;
  });
  const InTerminal mine =
      kind == StudyKind::kComparison ? InTerminal::kComparison : InTerminal::kSweep;
  TextTable table;
  std::vector<const Column*> columns;
  for (const Column& c : comparison::Columns()) {
    if (c.terminal != mine && c.terminal != InTerminal::kBoth) continue;
    if (c.shown == comparison::ShownWhen::kWithRankFaults && !faults) continue;
    table.headings.emplace_back(c.short_heading);
    columns.push_back(&c);
  }
  for (const auto& row : rows) {
    std::vector<std::string> cells;
    for (const Column* c : columns) {
      auto [text, half] = comparison::MeanAndSpreadText(row, *c);
      if (!half.empty()) text.append(" ± ").append(half);
      cells.push_back(std::move(text));
    }
    table.rows.push_back(std::move(cells));
  }
  return table;
}

namespace {

using comparison::Column;
using comparison::Columns;
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
  for (const Column& column : Columns()) {
    const double v = numbers.*column.value;
    row[column.key] = !Present(v)      ? nlohmann::ordered_json(nullptr)
                      : column.integer ? nlohmann::ordered_json(static_cast<int64_t>(v))
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
