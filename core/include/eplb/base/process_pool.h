// Runs jobs in child processes, a few at a time. SimGrid allows one engine per process, so every
// simulation of a comparison or sweep (sim/studies.h) gets its own process; a child that
// crashes or runs out of memory fails its job, not the caller.
//
// Progress: each job counts the steps it has done in memory shared with the parent, which hands
// every job's state to the caller's observer once before the first child starts (all waiting),
// about ten times a second while they run, and once more at the end.
// The observer decides how to show it (the command line's progress lines, tools/eplb/progress.h).
//
// Interruption (base/interrupt.h): children die with this process; on SIGINT/SIGTERM they are
// stopped, no further job starts, and the result is Cancelled once every child has exited.
//
// Thread-safety: call from one thread; the observer runs on that thread. fork() copies only the
// calling thread, so a job must not need locks that other threads of the caller may hold.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "eplb/base/status.h"

namespace eplb {

enum class JobState { kWaiting, kRunning, kDone, kFailed };

// What the observer sees of one job.
struct JobProgress {
  std::string name;
  int64_t total_steps = 0;
  int64_t done_steps = 0;
  JobState state = JobState::kWaiting;
};

struct ProcessJob {
  std::string name;
  int64_t total_steps = 0;
  // Runs in the child and stores the steps it has done in `steps_done`. A failed Status is
  // printed on the child's stderr, prefixed by the job's name, and fails the job.
  std::function<Status(std::atomic<int64_t>& steps_done)> run;
};

// `final` is true on the last call, when every job has ended.
using ProgressObserver = std::function<void(const std::vector<JobProgress>& jobs, bool final)>;

// Runs every job, at most `parallel` at once (0: one per core). Fails naming the jobs that
// failed, in the order they ended; OK when all succeeded.
Status RunInChildProcesses(const std::vector<ProcessJob>& jobs, int parallel,
                           const ProgressObserver& observer = {});

}  // namespace eplb
