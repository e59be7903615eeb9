#include "io/perfetto_trace.h"

#include <algorithm>
#include <iterator>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "eplb/io/run_folder.h"

namespace eplb {

std::string PerfettoTraceJson(const RunResult& run) {
  using Json = nlohmann::ordered_json;
  const Scenario& s = run.scenario;
  const int gpus = s.num_gpus(), cluster = gpus;
  const auto us = [](double seconds) { return seconds * 1e6; };
  std::string out = "{\"traceEvents\":[\n";
  bool first = true;
  auto emit = [&](const Json& e) {
    if (!first) out += ",\n";
    first = false;
    out += e.dump();
  };
  for (int g = 0; g < gpus; ++g) {
    emit({{"ph", "M"},
          {"name", "process_name"},
          {"pid", g},
          {"tid", 0},
          {"args", {{"name", fmt::format("GPU {} (node {})", g, g / s.cluster.gpus_per_node)}}}});
    emit({{"ph", "M"},
          {"name", "process_sort_index"},
          {"pid", g},
          {"tid", 0},
          {"args", {{"sort_index", g + 1}}}});
  }
  emit({{"ph", "M"},
        {"name", "process_name"},
        {"pid", cluster},
        {"tid", 0},
        {"args", {{"name", "cluster"}}}});
  emit({{"ph", "M"},
        {"name", "process_sort_index"},
        {"pid", cluster},
        {"tid", 0},
        {"args", {{"sort_index", 0}}}});
  emit({{"ph", "M"},
        {"name", "thread_name"},
        {"pid", cluster},
        {"tid", 1},
        {"args", {{"name", "steps"}}}});
  for (const StepRecord& st : run.steps) {
    emit({{"ph", "X"},
          {"name", "step"},
          {"cat", "step"},
          {"pid", cluster},
          {"tid", 1},
          {"ts", us(st.start_s)},
          {"dur", us(st.step_s + st.stalled_s)},
          {"args", {{"step", st.step}, {"idle_step_s", st.idle_s}, {"stalled_s", st.stalled_s}}}});
    emit({{"ph", "C"},
          {"name", "balance"},
          {"pid", cluster},
          {"ts", us(st.start_s)},
          {"args", {{"balancedness", st.balancedness}, {"imbalance_ratio", st.imbalance_ratio}}}});
  }
  for (const RearrangementRecord& r : run.rearrangements) {
    emit({{"ph", "i"},
          {"s", "g"},
          {"name", r.reason == RearrangeReason::kInterval
                       ? std::string("rearrangement")
                       : std::string(RearrangeReasonName(r.reason)) + " rearrangement"},
          {"cat", "eplb"},
          {"pid", cluster},
          {"tid", 1},
          {"ts", us(r.start_s)},
          {"args",
           {{"step", r.step},
            {"layers", r.layers},
            {"transfers", r.transfers},
            {"reason", RearrangeReasonName(r.reason)},
            {"cancelled", r.cancelled},
            {"bytes_reloaded", r.bytes_reloaded}}}});
  }
  // Faults: a span each on the cluster's "faults" track (losses and scales until their recovery's
  // last commit), and on every GPU a loss takes, the moment it is gone.
  const RunSummary summary = Summarize(run);
  if (!summary.faults.empty()) {
    emit({{"ph", "M"},
          {"name", "thread_name"},
          {"pid", cluster},
          {"tid", 2},
          {"args", {{"name", "faults"}}}});
  }
  size_t next = 0;
  for (const FaultSpec& f : s.faults) {
    if (next >= summary.faults.size() || f.step >= static_cast<int>(run.steps.size())) continue;
    const RunSummary::FaultEffect& e = summary.faults[next++];
    Json args = {{"kind", e.kind}, {"step", e.step}, {"until", e.until}};
    if (e.changes_ranks) {
      args["recovery_s"] = e.recovery_s;
      args["bytes_reloaded"] = e.bytes_reloaded;
      args["tokens_lost"] = e.tokens_lost;
      args["tokens_stalled"] = e.tokens_stalled;
    }
    emit({{"ph", "X"},
          {"name", e.kind},
          {"cat", "fault"},
          {"pid", cluster},
          {"tid", 2},
          {"ts", us(e.start_s)},
          {"dur", us(std::max(0.0, e.end_s - e.start_s))},
          {"args", args}});
    if (!f.is_loss()) continue;
    for (int g = f.first_rank(s.cluster.gpus_per_node); g <= f.last_rank(s.cluster.gpus_per_node);
         ++g) {
      emit({{"ph", "i"},
            {"s", "p"},
            {"name", "lost"},
            {"cat", "fault"},
            {"pid", g},
            {"tid", 0},
            {"ts", us(e.start_s)},
            {"args", {{"step", f.step}}}});
    }
  }
  for (const CommitRecord& c : run.commits) {
    emit({{"ph", "i"},
          {"s", "p"},
          {"name", "commit"},
          {"cat", "eplb"},
          {"pid", cluster},
          {"tid", 1},
          {"ts", us(c.time_s)},
          {"args", {{"step", c.step}, {"layer", c.layer}}}});
  }
  // Transfers are most of a large trace (two events each, millions at thousands of GPUs): they
  // are formatted straight into the output instead of through a JSON tree per event. Every
  // string in them is built from numbers and link names, so nothing needs escaping.
  auto sink = std::back_inserter(out);
  int64_t id = 0;
  for (const TransferRecord& t : run.transfers) {
    const std::string_view link = LinkClassName(t.link);
    fmt::format_to(sink,
                   ",\n{{\"ph\":\"b\",\"name\":\"expert {} layer {}\",\"cat\":\"recv {}\","
                   "\"id\":{},\"pid\":{},\"tid\":0,\"ts\":{},\"args\":{{\"layer\":{},"
                   "\"expert\":{},\"src\":{},\"dst\":{},\"bytes\":{},\"link\":\"{}\"}}}}",
                   t.expert, t.layer, link, id, t.dst_rank, us(t.start_s), t.layer, t.expert,
                   t.src_rank, t.dst_rank, t.bytes, link);
    fmt::format_to(sink,
                   ",\n{{\"ph\":\"e\",\"name\":\"expert {} layer {}\",\"cat\":\"recv {}\","
                   "\"id\":{},\"pid\":{},\"tid\":0,\"ts\":{}}}",
                   t.expert, t.layer, link, id, t.dst_rank, us(t.end_s));
    ++id;
  }
  out += "\n]}\n";
  return out;
}

}  // namespace eplb
