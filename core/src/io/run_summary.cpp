// summary.json's numbers from a run: Summarize and what it needs (the run folder's reader and
// writer are in run_folder.cpp).
#include <algorithm>
#include <limits>
#include <string_view>
#include <vector>

#include "eplb/engine/gpu_memory.h"
#include "eplb/io/run_folder.h"

namespace eplb {
namespace {

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  const size_t k = std::min(
      v.size() - 1, static_cast<size_t>(std::lround(q * static_cast<double>(v.size() - 1))));
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(k), v.end());
  return v[k];
}

// Mean step time over steps [first, last); 0 when the range is empty.
double MeanStepTime(const RunResult& run, int first, int last) {
  double sum = 0;
  for (int i = first; i < last; ++i) sum += run.steps[static_cast<size_t>(i)].step_s;
  return last > first ? sum / (last - first) : 0.0;
}

}  // namespace

std::vector<double> FollowingBalancedness(const RunResult& run) {
  std::vector<double> out;
  for (size_t i = 0; i < run.rearrangements.size(); ++i) {
    const int first = run.rearrangements[i].step + 1;
    const int last = i + 1 < run.rearrangements.size() ? run.rearrangements[i + 1].step
                                                       : static_cast<int>(run.steps.size()) - 1;
    double sum = 0;
    int n = 0;
    for (int s = first; s <= last && s < static_cast<int>(run.steps.size()); ++s, ++n)
      sum += run.steps[s].balancedness;
    out.push_back(n > 0 ? sum / n : 1.0);
  }
  return out;
}

namespace {

// What a fault that changed the GPUs cost, from the run's steps and its recovery rearrangement
// (the one started at the fault's step for it), so that a folder read back summarises alike.
RunSummary::FaultEffect RecoveryEffect(const RunResult& run, const FaultSpec& f) {
  RunSummary::FaultEffect e;
  e.kind = FaultKindName(f.kind);
  e.changes_ranks = true;
  e.step = f.step;
  const int ran = static_cast<int>(run.steps.size());
  const auto& steps = run.steps;
  const RearrangementRecord* recovery = nullptr;
  for (size_t i = 0; i < run.rearrangements.size(); ++i) {
    const RearrangementRecord& r = run.rearrangements[i];
    if (r.step == f.step && r.reason != RearrangeReason::kInterval) {
      recovery = &r;
      e.cancelled_rearrangement = i > 0 && run.rearrangements[i - 1].cancelled;
      break;
    }
  }
  // The next fault that changes the GPUs ends what this one is charged with.
  int next = ran;
  for (const FaultSpec& g : run.scenario.faults) {
    if (g.changes_ranks() && g.step > f.step) next = std::min(next, g.step);
  }
  const StepRecord& at = steps[static_cast<size_t>(f.step)];
  e.start_s = recovery != nullptr ? recovery->start_s : at.start_s;
  int end = next;
  if (recovery != nullptr && recovery->end_s >= 0) {
    e.recovery_s = recovery->end_s - recovery->start_s;
    end = f.step;
    while (end < next && steps[static_cast<size_t>(end)].start_s < recovery->end_s) ++end;
  }
  if (recovery != nullptr) {
    e.bytes_reloaded = recovery->bytes_reloaded;
    e.bytes_copied = recovery->bytes.sum();
  }
  e.until = end;
  e.end_s = recovery != nullptr && recovery->end_s >= 0
                ? recovery->end_s
                : steps[static_cast<size_t>(end - 1)].start_s +
                      steps[static_cast<size_t>(end - 1)].step_s;
  e.steps = end - f.step;
  e.serving_gpus = at.serving_gpus;
  e.stalled_s = at.stalled_s;
  // Serving waited when the recovery was over before the fault's step ran.
  if (recovery != nullptr && recovery->end_s >= 0 && recovery->end_s <= at.start_s &&
      recovery->layers > 0) {
    e.tokens_stalled = run.scenario.workload.tokens_per_step;
  }
  for (int i = f.step; i < next; ++i) e.tokens_lost += steps[static_cast<size_t>(i)].tokens_lost;
  e.step_time_mean_s = MeanStepTime(run, f.step, end);
  e.after_step_time_mean_s = MeanStepTime(run, end, next);
  // Baseline: as many steps before the fault as it lasted (at least 100, as many as there are).
  const int k = std::min(f.step, std::max(100, end - f.step));
  e.baseline_step_time_mean_s = MeanStepTime(run, f.step - k, f.step);
  return e;
}

std::string_view MeasuredRule(int measure_from) {
  switch (measure_from) {
    case RunSpec::kFromFirstRearrangement:
      return "first_rearrangement";
    case RunSpec::kFromFirstCommit:
      return "first_commit";
    default:
      return "step";
  }
}

}  // namespace

int MeasuredFromStep(const RunResult& run) {
  const int last = std::max(0, static_cast<int>(run.steps.size()) - 1);
  const int rule = run.scenario.run.measure_from;
  if (rule >= 0) return std::min(rule, last);
  if (run.commits.empty()) return 0;
  // A layer committed at the boundary after step k serves from step k + 1 on, and step k + 1's
  // latency holds the wait for that commit (the stall before it): k + 2 holds nothing of it.
  const int first_commit = std::min(run.commits.front().step + 1, last);
  if (rule == RunSpec::kFromFirstCommit) return first_commit;
  for (const RearrangementRecord& r : run.rearrangements) {
    if (r.cancelled || r.end_s < 0) continue;
    int k = r.step;  // a rearrangement that moved nothing: its start's stall
    for (const CommitRecord& c : run.commits) {
      // Times as the folder holds them (nanoseconds): the commit that ended it is at its end.
      if (c.time_s <= r.end_s + 1e-9) k = std::max(k, c.step);
    }
    return std::min(k + 2, last);
  }
  return first_commit;  // none finished: the run never left its first transition
}

void MeasureSteps(const RunResult& run, int from_step, RunSummary& out) {
  out.measured.rule = MeasuredRule(run.scenario.run.measure_from);
  const size_t first = std::min(static_cast<size_t>(std::max(0, from_step)), run.steps.size());
  out.measured.from_step = static_cast<int64_t>(first);
  out.measured.steps = static_cast<int64_t>(run.steps.size() - first);
  std::vector<double> step_s, latency_s;
  double sum_step = 0, sum_latency = 0, sum_wait = 0, sum_idle = 0, sum_bal = 0, min_bal = 1,
         sum_imb = 0, max_imb = 0;
  out.latency_s.worst_step = static_cast<int64_t>(first);
  for (size_t i = first; i < run.steps.size(); ++i) {
    const StepRecord& s = run.steps[i];
    step_s.push_back(s.step_s);
    latency_s.push_back(s.latency_s);
    if (s.latency_s > run.steps[static_cast<size_t>(out.latency_s.worst_step)].latency_s) {
      out.latency_s.worst_step = s.step;
    }
    sum_step += s.step_s;
    sum_latency += s.latency_s;
    sum_idle += s.idle_s;
    sum_wait += s.latency_s - s.step_s;
    sum_bal += s.balancedness;
    min_bal = std::min(min_bal, s.balancedness);
    sum_imb += s.imbalance_ratio;
    max_imb = std::max(max_imb, s.imbalance_ratio);
  }
  const double n = std::max<double>(1, static_cast<double>(step_s.size()));
  const auto max_of = [](const std::vector<double>& v) {
    return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
  };
  out.step_time_s = {sum_step / n, Quantile(step_s, 0.5), Quantile(step_s, 0.99), max_of(step_s)};
  out.latency_s.mean = sum_latency / n;
  out.latency_s.p50 = Quantile(latency_s, 0.5);
  out.latency_s.p99 = Quantile(latency_s, 0.99);
  out.latency_s.p999 = Quantile(latency_s, 0.999);
  out.latency_s.max = max_of(latency_s);
  out.decode = run.scenario.compute.stage == InferenceStage::kDecode;
  const double tokens = run.scenario.output_tokens_per_sequence();
  out.inter_token_latency_s = {};
  if (out.decode) {
    out.inter_token_latency_s = {out.latency_s.p50 / tokens, out.latency_s.p99 / tokens,
                                 out.latency_s.p999 / tokens};
  }
  out.idle_step_time_s_mean = sum_idle / n;
  // Steps on contended links are never faster than on idle ones; a difference of a few ulps
  // below zero is the sums' rounding (it printed "-0.000 s"). So are the waits.
  out.slowed_s = std::max(0.0, sum_step - sum_idle);
  out.stalled_s = std::max(0.0, sum_wait);
  out.balancedness = {sum_bal / n, min_bal};
  out.imbalance_ratio = {sum_imb / n, max_imb};
}

RunSummary Summarize(const RunResult& run) {
  RunSummary out;
  out.scenario = run.scenario.name;
  out.backend = run.backend;
  out.steps = static_cast<int64_t>(run.steps.size());
  MeasureSteps(run, MeasuredFromStep(run), out);
  if (!run.steps.empty()) {
    const StepRecord& last = run.steps.back();
    out.simulated_s = last.start_s + last.step_s + last.stalled_s;
  }

  auto& r = out.rearrangements;
  double makespan = 0, predicted = 0, bound = 0, policy_ms = 0;
  for (const RearrangementRecord& rec : run.rearrangements) {
    out.bytes_moved_nvlink += rec.bytes[LinkClass::kNvlink];
    out.bytes_moved_nic += rec.bytes[LinkClass::kNic];
    out.transfers += rec.transfers;
    policy_ms += rec.policy_ms;
    if (rec.end_s >= 0) {
      ++r.completed;
      makespan += rec.end_s - rec.start_s;
      predicted += rec.predicted_makespan_s;
      bound += rec.lower_bound_s;
      r.engine_s_mean.Add(rec);
    }
  }
  r.started = static_cast<int64_t>(run.rearrangements.size());
  const GpuMemory memory = GpuMemoryOf(run.scenario);
  auto& m = out.gpu_memory;
  m.capacity = memory.capacity;
  m.resident = memory.resident();
  m.dense_weights = memory.dense_weights;
  m.expert_weights = memory.expert_weights;
  m.kv_cache = memory.kv_cache;
  m.reserved = memory.reserved;
  m.staging_budget = memory.staging_budget;
  for (const RearrangementRecord& rec : run.rearrangements)
    m.staging_peak = std::max(m.staging_peak, rec.most_staged_bytes());
  m.peak = m.resident + static_cast<double>(m.staging_peak);
  const int ran = static_cast<int>(run.steps.size());
  for (const FaultSpec& f : run.scenario.faults) {
    if (f.step >= ran) continue;
    if (f.changes_ranks()) {
      out.faults.push_back(RecoveryEffect(run, f));
      continue;
    }
    RunSummary::FaultEffect e;
    e.kind = FaultKindName(f.kind);
    e.step = f.step;
    const int end = std::min(f.until, ran), k = end - f.step;
    e.until = end;
    const StepRecord& last = run.steps[static_cast<size_t>(end - 1)];
    e.start_s = run.steps[static_cast<size_t>(f.step)].start_s;
    e.end_s = last.start_s + last.step_s;
    e.steps = k;
    e.step_time_mean_s = MeanStepTime(run, f.step, end);
    // Baseline: the k steps nearest before it under no fault at all (after it, if none before).
    const auto healthy = [&](int i) {
      return std::none_of(run.scenario.faults.begin(), run.scenario.faults.end(),
                          [&](const FaultSpec& g) { return g.active_at(i); });
    };
    double sum = 0;
    int taken = 0;
    for (int i = f.step - 1; i >= 0 && taken < k; --i) {
      if (healthy(i)) sum += run.steps[static_cast<size_t>(i)].step_s, ++taken;
    }
    for (int i = end; taken == 0 && i < ran; ++i) {
      if (!healthy(i)) continue;
      for (; i < ran && taken < k; ++i) {
        if (healthy(i)) sum += run.steps[static_cast<size_t>(i)].step_s, ++taken;
      }
    }
    e.baseline_step_time_mean_s = taken > 0 ? sum / taken : 0.0;
    out.faults.push_back(e);
  }
  r.skipped = run.skipped_rearrangements;
  r.held = run.held_rearrangements;
  const double started = std::max<double>(1, static_cast<double>(r.started));
  const double done = std::max<double>(1, static_cast<double>(r.completed));
  r.makespan_s_mean = makespan / done;
  r.predicted_makespan_s_mean = predicted / done;
  r.lower_bound_s_mean = bound / done;
  r.policy_ms_mean = policy_ms / started;
  for (double* part :
       {&r.engine_s_mean.once, &r.engine_s_mean.planning, &r.engine_s_mean.transfer,
        &r.engine_s_mean.barrier, &r.engine_s_mean.polling, &r.engine_s_mean.writeback}) {
    *part /= done;
  }
  out.wall_s = run.wall_s;
  out.peak_rss_bytes = run.peak_rss_bytes;
  return out;
}

}  // namespace eplb
