#include "io/perfetto_trace.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

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
          {"name", "rearrangement"},
          {"cat", "eplb"},
          {"pid", cluster},
          {"tid", 1},
          {"ts", us(r.start_s)},
          {"args", {{"step", r.step}, {"layers", r.layers}, {"transfers", r.transfers}}}});
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
  int64_t id = 0;
  for (const TransferRecord& t : run.transfers) {
    const std::string name = fmt::format("expert {} layer {}", t.expert, t.layer);
    const Json args = {{"layer", t.layer},  {"expert", t.expert}, {"src", t.src_rank},
                       {"dst", t.dst_rank}, {"bytes", t.bytes},   {"link", LinkClassName(t.link)}};
    const std::string cat = fmt::format("recv {}", LinkClassName(t.link));
    emit({{"ph", "b"},
          {"name", name},
          {"cat", cat},
          {"id", id},
          {"pid", t.dst_rank},
          {"tid", 0},
          {"ts", us(t.start_s)},
          {"args", args}});
    emit({{"ph", "e"},
          {"name", name},
          {"cat", cat},
          {"id", id},
          {"pid", t.dst_rank},
          {"tid", 0},
          {"ts", us(t.end_s)}});
    ++id;
  }
  out += "\n]}\n";
  return out;
}

}  // namespace eplb
