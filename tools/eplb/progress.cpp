#include "progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include <fmt/format.h>

namespace eplb::cli {

std::string HumanDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<int64_t>(std::llround(seconds));
  if (s >= 3600) return fmt::format("{} h {:02} min", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{} min {:02} s", s / 60, s % 60);
  return fmt::format("{} s", s);
}

ProgressReporter::ProgressReporter(std::string command, bool terminal, double interval_s)
    : command_(std::move(command)),
      terminal_(terminal),
      interval_(std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(terminal ? 0.2 : interval_s))) {}

std::string ProgressReporter::JobLine(const Job& job, const Seen& seen,
                                      Clock::time_point now) const {
  const double share = job.total_steps > 0 ? 100.0 * static_cast<double>(job.done_steps) /
                                                 static_cast<double>(job.total_steps)
                                           : 0;
  std::string line = fmt::format("{}: {}: step {}/{} ({:.0f}%)", command_, job.name, job.done_steps,
                                 job.total_steps, share);
  switch (job.state) {
    case State::kWaiting:
      return fmt::format("{}: {}: waiting", command_, job.name);
    case State::kDone:
      return fmt::format("{}, done in {}", line,
                         HumanDuration(std::chrono::duration<double>(now - seen.started).count()));
    case State::kFailed:
      return line + ", failed";
    case State::kRunning:
      break;
  }
  const double elapsed = std::chrono::duration<double>(now - seen.started).count();
  const int64_t done = job.done_steps - seen.steps_at_start;
  if (done > 0 && elapsed > 0) {
    line += ", ETA " + HumanDuration(static_cast<double>(job.total_steps - job.done_steps) *
                                     elapsed / static_cast<double>(done));
  }
  return line;
}

std::string ProgressReporter::Eta(const std::vector<Job>& jobs, Clock::time_point now) const {
  double left = 0, rate = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (jobs[i].state == State::kDone || jobs[i].state == State::kFailed) continue;
    left += static_cast<double>(jobs[i].total_steps - jobs[i].done_steps);
    if (jobs[i].state != State::kRunning) continue;
    const double elapsed = std::chrono::duration<double>(now - seen_[i].started).count();
    const int64_t done = jobs[i].done_steps - seen_[i].steps_at_start;
    if (done > 0 && elapsed > 0) rate += static_cast<double>(done) / elapsed;
  }
  const auto ended = std::count_if(jobs.begin(), jobs.end(), [](const Job& j) {
    return j.state == State::kDone || j.state == State::kFailed;
  });
  std::string out = fmt::format("{}: {} of {} jobs ended", command_, ended, jobs.size());
  if (rate > 0) out += ", ETA " + HumanDuration(left / rate);
  return out;
}

void ProgressReporter::Redraw(const std::vector<Job>& jobs, Clock::time_point now) {
  std::string out;
  if (lines_drawn_ > 0) out += fmt::format("\x1b[{}F", lines_drawn_);  // to the block's start
  for (size_t i = 0; i < jobs.size(); ++i)
    out += "\x1b[2K" + JobLine(jobs[i], seen_[i], now) + "\n";
  lines_drawn_ = static_cast<int>(jobs.size());
  if (jobs.size() > 1) {
    out += "\x1b[2K" + Eta(jobs, now) + "\n";
    ++lines_drawn_;
  }
  std::fputs(out.c_str(), stderr);
  std::fflush(stderr);
}

void ProgressReporter::Report(const std::vector<Job>& jobs) {
  Update(jobs, false);
}

void ProgressReporter::Finish(const std::vector<Job>& jobs) {
  Update(jobs, true);
}

void ProgressReporter::Update(const std::vector<Job>& jobs, bool final) {
  const Clock::time_point now = Clock::now();
  const bool first = seen_.empty();
  seen_.resize(jobs.size());
  bool changed = false;
  std::vector<bool> printed(jobs.size(), false);
  std::string lines;
  for (size_t i = 0; i < jobs.size(); ++i) {
    Seen& seen = seen_[i];
    if (jobs[i].state == seen.state) continue;
    changed = true;
    if (seen.state == State::kWaiting) {  // started now (or started and ended between reports)
      seen.started = now;
      seen.steps_at_start = jobs[i].done_steps;
    }
    seen.state = jobs[i].state;
    if (!terminal_) {
      lines += JobLine(jobs[i], seen, now) + "\n";
      printed[i] = true;
    }
  }
  const bool due = first || final || now - last_print_ >= interval_;
  if (terminal_) {
    if (changed || due) {
      Redraw(jobs, now);
      last_print_ = now;
    }
    return;
  }
  if (due && !first) {
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (jobs[i].state == State::kRunning && !printed[i])
        lines += JobLine(jobs[i], seen_[i], now) + "\n";
    }
    if (jobs.size() > 1) lines += Eta(jobs, now) + "\n";
  }
  if (due) last_print_ = now;
  if (!lines.empty()) {
    std::fputs(lines.c_str(), stderr);
    std::fflush(stderr);
  }
}

ProgressObserver ProgressLines(const std::string& command, std::string header) {
  auto reporter = std::make_shared<ProgressReporter>(command, isatty(STDERR_FILENO) == 1);
  return [reporter, header = std::move(header)](const std::vector<JobProgress>& jobs,
                                                bool final) mutable {
    if (!header.empty()) {
      fmt::print(stderr, "{}\n", header);
      header.clear();
    }
    if (final) {
      reporter->Finish(jobs);
    } else {
      reporter->Report(jobs);
    }
  };
}

}  // namespace eplb::cli
