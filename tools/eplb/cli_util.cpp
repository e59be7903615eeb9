#include "cli_util.h"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "eplb/base/excerpt.h"
#include "eplb/base/file_io.h"
#include "eplb/base/interrupt.h"
#include "eplb/io/run_folder.h"
#include "eplb/io/scenario_file.h"

namespace eplb::cli {

int ExitCodeFor(const Status& status) {
  if (status.ok()) return kExitOk;
  if (status.is_bad_input()) return kExitBadInput;
  if (status.code() == Status::Code::kCancelled) return InterruptExitCode(status, kExitFailed);
  return kExitFailed;  // kInternal, kUnavailable
}

int ReportError(const std::string& command, const Status& status) {
  const bool interrupted = status.code() == Status::Code::kCancelled && InterruptSignal() != 0;
  fmt::print(stderr, "eplb {}: {}{}\n", command,
             interrupted ? "" : "error: ", PrintableLine(status.message()));
  return ExitCodeFor(status);
}

void AddScenarioOptions(Command& command, std::string& scenario_path,
                        std::vector<std::string>& overrides) {
  command.Option("scenario", &scenario_path,
                 "Scenario file (YAML); default: the built-in DeepSeek-V3 prefill EP32");
  command.Option("--set", &overrides, "Override a scenario field: key.path=value (repeatable)");
}

void AddNoTraceFlag(Command& command, RunFolderOptions& options) {
  command.Flag(
      "--no-trace", [&options](int64_t) { options.trace = false; },
      "Leave out trace.json (two events per expert transfer: the largest file of a run folder, "
      "read only by trace viewers)");
}

Result<std::vector<std::string>> SplitList(const std::string& list, std::string_view option) {
  std::vector<std::string> out;
  if (list.empty()) return out;
  size_t start = 0;
  for (;;) {
    const size_t comma = list.find(',', start);
    out.push_back(list.substr(start, comma == std::string::npos ? comma : comma - start));
    // An empty item is a slip (1,,2 or a trailing comma), not a wish for fewer points.
    if (out.back().empty()) {
      return Status::InvalidArgument(
          fmt::format("{} '{}': item {} is empty; expected values separated by single commas, "
                      "such as a,b,c",
                      option, list, out.size()));
    }
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

void PrintRunSummary(const RunResult& run, const std::string& dir, std::FILE* out) {
  const RunSummary s = Summarize(run);
  fmt::print(out, "{}: {} steps, {:.1f} s {} in {:.1f} s wall\n", run.scenario.name,
             run.steps.size(), s.simulated_s,
             run.backend == "simgrid" ? "simulated" : "run on " + run.backend, run.wall_s);
  // A rearrangement started at the boundary after step k first shows in step k + 1.
  const auto in_window = std::count_if(
      run.rearrangements.begin(), run.rearrangements.end(),
      [&](const RearrangementRecord& r) { return r.step + 1 >= s.measured.from_step; });
  fmt::print(out,
             "  measured       steps {}..{} ({}; the {} before are the warm-up; {} of the {} "
             "rearrangements start in them)\n",
             s.measured.from_step, s.steps - 1,
             s.measured.rule == "first_rearrangement" ? "once the first rearrangement is over"
             : s.measured.rule == "first_commit"      ? "from the first commit"
                                                      : "from run.measure_from",
             s.measured.from_step, in_window, run.rearrangements.size());
  fmt::print(out, "  step time      mean {:.3f} ms, p99 {:.3f} ms (idle links: {:.3f} ms)\n",
             s.step_time_s.mean * 1e3, s.step_time_s.p99 * 1e3, s.idle_step_time_s_mean * 1e3);
  fmt::print(out,
             "  latency        mean {:.3f} ms, p50 {:.3f}, p99 {:.3f}, p99.9 {:.3f}, worst {:.3f} "
             "ms (step {}), stalls included\n",
             s.latency_s.mean * 1e3, s.latency_s.p50 * 1e3, s.latency_s.p99 * 1e3,
             s.latency_s.p999 * 1e3, s.latency_s.max * 1e3, s.latency_s.worst_step);
  fmt::print(out,
             "  waits          stalled {:.3f} s between the measured steps, their steps slowed "
             "{:.3f} s by migration (both in their latency)\n",
             s.stalled_s, s.slowed_s);
  if (s.decode) {
    fmt::print(out, "  inter-token    p50 {:.3f} ms, p99 {:.3f} ms, p99.9 {:.3f} ms\n",
               s.inter_token_latency_s.p50 * 1e3, s.inter_token_latency_s.p99 * 1e3,
               s.inter_token_latency_s.p999 * 1e3);
  }
  fmt::print(out, "  balancedness   mean {:.4f}, min {:.4f}; imbalance ratio mean {:.4f}\n",
             s.balancedness.mean, s.balancedness.min, s.imbalance_ratio.mean);
  const auto& r = s.rearrangements;
  fmt::print(out, "  rearrangements {} started, {} completed, {} skipped, {} held", r.started,
             r.completed, r.skipped, r.held);
  if (r.completed > 0) {  // means over the completed ones: of none, there is nothing to print
    fmt::print(out, "; makespan mean {:.3f} s (schedule predicted {:.3f} s, bound {:.3f} s)",
               r.makespan_s_mean, r.predicted_makespan_s_mean, r.lower_bound_s_mean);
  }
  fmt::print(out, "\n");
  if (const auto& e = r.engine_s_mean; e.total() > 0) {
    fmt::print(out,
               "  engine host    {:.3f} s a rearrangement: once {:.3f}, planning {:.3f}, issuing "
               "{:.3f}, barrier {:.3f}, polling {:.3f}, write-back {:.3f} (migration.engine)\n",
               e.total(), e.once, e.planning, e.transfer, e.barrier, e.polling, e.writeback);
  }
  fmt::print(out, "  moved          {:.1f} GB over NVLink, {:.1f} GB over NICs in {} transfers\n",
             static_cast<double>(s.bytes_moved_nvlink) / 1e9,
             static_cast<double>(s.bytes_moved_nic) / 1e9, s.transfers);
  fmt::print(out,
             "  GPU memory     {:.1f} GB resident of {:.1f} GB; at most {:.2f} GB staged, peak "
             "{:.1f} GB\n",
             s.gpu_memory.resident / 1e9, s.gpu_memory.capacity / 1e9,
             static_cast<double>(s.gpu_memory.staging_peak) / 1e9, s.gpu_memory.peak / 1e9);
  for (const RunSummary::FaultEffect& f : s.faults) {
    if (f.changes_ranks) {
      const std::string recovered = f.recovery_s >= 0
                                        ? fmt::format("recovered in {:.3f} s", f.recovery_s)
                                        : std::string("not recovered by the end");
      fmt::print(out,
                 "  fault          {} at step {}: {} GPUs serve, {}; {:.1f} GB reloaded, {:.1f} GB "
                 "copied, {:.0f} tokens dropped, {:.0f} stalled\n",
                 f.kind, f.step, f.serving_gpus, recovered,
                 static_cast<double>(f.bytes_reloaded) / 1e9,
                 static_cast<double>(f.bytes_copied) / 1e9, f.tokens_lost, f.tokens_stalled);
    } else {
      fmt::print(
          out, "  fault          {} over steps {}..{}: step mean {:.3f} ms (before: {:.3f} ms)\n",
          f.kind, f.step, f.until - 1, f.step_time_mean_s * 1e3, f.baseline_step_time_mean_s * 1e3);
    }
  }
  fmt::print(out, "  run folder     {}\n", dir);
}

void AddJsonFlag(Command& command, bool& json) {
  command.Flag("--json", &json,
               "Print the folder's JSON document on stdout (the lines for people go to "
               "stderr)");
}

Status PrintJsonFile(const std::string& path) {
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  std::fwrite(text->data(), 1, text->size(), stdout);
  std::fflush(stdout);
  return Status::Ok();
}

}  // namespace eplb::cli
