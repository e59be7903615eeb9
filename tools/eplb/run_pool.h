// Runs jobs in child processes, a few at a time. SimGrid allows one engine per process, so
// every simulation of a comparison or sweep gets its own process.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "eplb/base/status.h"

namespace eplb::cli {

struct Job {
  std::string name;
  int64_t total_steps = 0;  // for the progress lines
  // Runs in the child and stores the steps it has done in `steps_done` (memory shared with the
  // parent, which reads it for the progress lines); its Status decides the exit code.
  std::function<Status(std::atomic<int64_t>& steps_done)> run;
};

// Runs every job, at most `parallel` at once (0: one per core), with progress lines on stderr
// prefixed by `command` (progress.h). Fails naming the jobs that failed; their errors went to
// stderr from the children. Children die with this process (base/interrupt.h): on
// SIGINT/SIGTERM they are stopped, no further job starts, and the result is Cancelled once every
// child has exited.
Status RunJobs(const std::vector<Job>& jobs, int parallel, const std::string& command);

}  // namespace eplb::cli
