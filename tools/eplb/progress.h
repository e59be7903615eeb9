// Progress of long work on stderr: the lines `run`, `compare` and `sweep` print while their
// simulations run. Each job is a count of steps done out of a total; the reporter prints, per
// job, the steps done, the share, and an ETA.
//
//   On a terminal: one line per job, redrawn in place at most every 0.2 s.
//   Otherwise (a log file, CI, a pipe): a line per job when it starts and ends, and a line per
//   running job every `interval_s`, so a log shows progress without a line per step.
//
// ETA of a job: (total − done) × elapsed / done since the job's first report, which holds when
// steps cost about the same; the overall ETA (compare and sweep) divides the steps left in all
// jobs by the steps per second of the jobs now running.
//
// Thread-safety: not thread-safe; one thread calls Report.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "eplb/base/process_pool.h"

namespace eplb::cli {

class ProgressReporter {
 public:
  using State = JobState;
  using Job = JobProgress;

  // `command` prefixes every line ("eplb compare"). `terminal`: redraw in place.
  ProgressReporter(std::string command, bool terminal, double interval_s = 10);

  // Prints what changed since the last call, as described above. `jobs` keeps its order and
  // size from call to call.
  void Report(const std::vector<Job>& jobs);
  // Prints the final state of every job once (call when all have ended).
  void Finish(const std::vector<Job>& jobs);

 private:
  using Clock = std::chrono::steady_clock;
  struct Seen {
    State state = State::kWaiting;
    Clock::time_point started;
    int64_t steps_at_start = 0;
  };
  std::string JobLine(const Job& job, const Seen& seen, Clock::time_point now) const;
  std::string Eta(const std::vector<Job>& jobs, Clock::time_point now) const;
  void Redraw(const std::vector<Job>& jobs, Clock::time_point now);
  void Update(const std::vector<Job>& jobs, bool final);

  std::string command_;
  bool terminal_;
  Clock::duration interval_;
  std::vector<Seen> seen_;
  Clock::time_point last_print_{};
  int lines_drawn_ = 0;
};

// An observer for base/process_pool.h that prints these lines on stderr: `header`, when not
// empty, as a line of its own before the first (once the jobs start, so that a study refused
// before it runs prints only its error).
ProgressObserver ProgressLines(const std::string& command, std::string header = {});

// "2 h 05 min", "3 min 20 s", "45 s": a duration as people read it.
std::string HumanDuration(double seconds);

}  // namespace eplb::cli
