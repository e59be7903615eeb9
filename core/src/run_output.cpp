#include "eplb/run_output.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>

#include <fmt/format.h>

#include "eplb/load_file.h"

namespace eplb {
namespace fs = std::filesystem;

int64_t PeakRssBytes() {
  struct rusage usage {};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

namespace {

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  const size_t k =
      std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5));
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(k), v.end());
  return v[k];
}

std::string MetricsCsv(const RunResult& run) {
  std::string out =
      "step,time_s,step_s,idle_step_s,balancedness,imbalance_ratio,bytes_in_flight,stalled_s\n";
  for (const StepRecord& s : run.steps) {
    out += fmt::format("{},{:.9g},{:.9g},{:.9g},{:.6f},{:.6f},{},{:.9g}\n", s.step, s.start_s,
                       s.step_s, s.idle_s, s.balancedness, s.imbalance_ratio, s.bytes_in_flight,
                       s.stalled_s);
  }
  return out;
}

std::string TransfersCsv(const RunResult& run) {
  std::string out = "layer,expert,src_rank,dst_rank,bytes,link,start_s,end_s\n";
  for (const TransferRecord& t : run.transfers) {
    out += fmt::format("{},{},{},{},{},{},{:.9g},{:.9g}\n", t.layer, t.expert, t.src_rank,
                       t.dst_rank, t.bytes, LinkClassName(t.link), t.start_s, t.end_s);
  }
  return out;
}

// Balancedness of the load that follows each rearrangement: the steps from its start to the
// next one's (or the run's end), the policy's real test rather than the window it was given.
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

std::string RearrangementsCsv(const RunResult& run) {
  std::string out =
      "step,start_s,end_s,layers,transfers,bytes_nvlink,bytes_nic,predicted_makespan_s,"
      "lower_bound_s,policy_ms,window_balancedness_before,window_balancedness_after,window_"
      "balancedness_bound,following_balancedness\n";
  const auto following = FollowingBalancedness(run);
  for (size_t i = 0; i < run.rearrangements.size(); ++i) {
    const RearrangementRecord& r = run.rearrangements[i];
    out += fmt::format(
        "{},{:.9g},{:.9g},{},{},{},{},{:.9g},{:.9g},{:.3f},{:.6f},{:.6f},{:.6f},{:.6f}\n", r.step,
        r.start_s, r.end_s, r.layers, r.transfers, r.bytes[0], r.bytes[1], r.predicted_makespan_s,
        r.lower_bound_s, r.policy_ms, r.window_balancedness_before, r.window_balancedness_after,
        r.window_balancedness_bound, following[i]);
  }
  return out;
}

std::string PlacementsJsonl(const RunResult& run) {
  std::string out;
  const Scenario& s = run.scenario;
  auto initial = Placement::Initial(s.model.layers, s.model.experts, s.num_slots());
  for (int l = 0; l < s.model.layers; ++l) {
    const auto row = initial->phy2log(l);
    out += nlohmann::ordered_json{{"step", -1},
                                  {"time_s", 0.0},
                                  {"layer", l},
                                  {"phy2log", std::vector<int32_t>(row.begin(), row.end())}}
               .dump() +
           "\n";
  }
  for (const CommitRecord& c : run.commits) {
    out +=
        nlohmann::ordered_json{
            {"step", c.step}, {"time_s", c.time_s}, {"layer", c.layer}, {"phy2log", c.phy2log}}
            .dump() +
        "\n";
  }
  return out;
}

std::string LoadsJsonl(const RunResult& run) {
  std::string out;
  const int experts = run.scenario.model.experts;
  for (const RearrangementRecord& r : run.rearrangements) {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (size_t first = 0; first + experts <= r.window_load.size(); first += experts) {
      rows.push_back(
          std::vector<float>(r.window_load.begin() + static_cast<ptrdiff_t>(first),
                             r.window_load.begin() + static_cast<ptrdiff_t>(first + experts)));
    }
    out += nlohmann::ordered_json{{"step", r.step}, {"time_s", r.start_s}, {"load", rows}}.dump() +
           "\n";
  }
  return out;
}

std::string TraceJson(const RunResult& run) {
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

}  // namespace

nlohmann::ordered_json RunSummary(const RunResult& run) {
  std::vector<double> step_s;
  double sum_step = 0, sum_idle = 0, sum_bal = 0, min_bal = 1, sum_imb = 0, max_imb = 0,
         stalled = 0;
  for (const StepRecord& s : run.steps) {
    step_s.push_back(s.step_s);
    sum_step += s.step_s;
    sum_idle += s.idle_s;
    sum_bal += s.balancedness;
    min_bal = std::min(min_bal, s.balancedness);
    sum_imb += s.imbalance_ratio;
    max_imb = std::max(max_imb, s.imbalance_ratio);
    stalled += s.stalled_s;
  }
  const double n = std::max<double>(1, static_cast<double>(run.steps.size()));
  int64_t bytes[kNumLinkClasses] = {0, 0}, transfers = 0;
  int completed = 0;
  double makespan = 0, predicted = 0, bound = 0, policy_ms = 0;
  for (const RearrangementRecord& r : run.rearrangements) {
    for (int c = 0; c < kNumLinkClasses; ++c) bytes[c] += r.bytes[c];
    transfers += r.transfers;
    policy_ms += r.policy_ms;
    if (r.end_s >= 0) {
      ++completed;
      makespan += r.end_s - r.start_s;
      predicted += r.predicted_makespan_s;
      bound += r.lower_bound_s;
    }
  }
  const double started = std::max<double>(1, static_cast<double>(run.rearrangements.size()));
  const double done = std::max(1, completed);
  const double end = run.steps.empty() ? 0
                                       : run.steps.back().start_s + run.steps.back().step_s +
                                             run.steps.back().stalled_s;
  return {{"scenario", run.scenario.name},
          {"backend", run.backend},
          {"steps", run.steps.size()},
          {"simulated_s", end},
          {"step_time_s",
           {{"mean", sum_step / n},
            {"p50", Quantile(step_s, 0.5)},
            {"p99", Quantile(step_s, 0.99)},
            {"max", step_s.empty() ? 0 : *std::max_element(step_s.begin(), step_s.end())}}},
          {"idle_step_time_s_mean", sum_idle / n},
          {"slowed_s", sum_step - sum_idle},
          {"stalled_s", stalled},
          {"balancedness", {{"mean", sum_bal / n}, {"min", min_bal}}},
          {"imbalance_ratio", {{"mean", sum_imb / n}, {"max", max_imb}}},
          {"rearrangements",
           {{"started", run.rearrangements.size()},
            {"completed", completed},
            {"skipped", run.skipped_rearrangements},
            {"makespan_s_mean", makespan / done},
            {"predicted_makespan_s_mean", predicted / done},
            {"lower_bound_s_mean", bound / done},
            {"policy_ms_mean", policy_ms / started}}},
          {"bytes_moved", {{"nvlink", bytes[0]}, {"nic", bytes[1]}}},
          {"transfers", transfers},
          {"wall_s", run.wall_s},
          {"peak_rss_bytes", run.peak_rss_bytes}};
}

Status WriteFolderAtomically(const std::string& dir, const std::string& kind,
                             const std::string& marker,
                             const std::function<Status(const std::string&)>& fill) {
  const std::string partial = dir + ".partial-" + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(partial, ec);
  if (!fs::create_directories(partial, ec) && ec) {
    return Status::IoError(fmt::format("{}: cannot create: {}", partial, ec.message()));
  }
  Status s = fill(partial);
  if (s.ok() && fs::exists(dir) && !fs::exists(fs::path(dir) / marker)) {
    s = Status::InvalidArgument(fmt::format(
        "{} exists and is not an eplb {} folder (no {}); choose another --out", dir, kind, marker));
  }
  if (!s.ok()) {
    fs::remove_all(partial, ec);
    return s;
  }
  fs::remove_all(dir, ec);
  fs::rename(partial, dir, ec);
  if (ec)
    return Status::IoError(fmt::format("{}: cannot rename into place: {}", dir, ec.message()));
  return Status::Ok();
}

Status WriteRunFolder(const std::string& dir, const RunResult& run) {
  return WriteFolderAtomically(dir, "run", "summary.json", [&](const std::string& partial) {
    const std::vector<std::pair<const char*, std::string>> files = {
        {"scenario.yaml", ScenarioToYaml(run.scenario)},
        {"metrics.csv", MetricsCsv(run)},
        {"transfers.csv", TransfersCsv(run)},
        {"rearrangements.csv", RearrangementsCsv(run)},
        {"placements.jsonl", PlacementsJsonl(run)},
        {"loads.jsonl", LoadsJsonl(run)},
        {"trace.json", TraceJson(run)},
        // The summary last: a folder without it was never finished.
        {"summary.json", RunSummary(run).dump(2) + "\n"}};
    for (const auto& [name, text] : files)
      EPLB_RETURN_IF_ERROR(WriteTextFile(partial + "/" + name, text));
    return Status::Ok();
  });
}

}  // namespace eplb
