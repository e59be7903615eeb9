// Runs jobs in child processes, a few at a time. SimGrid allows one engine per process, so
// every simulation of a comparison or sweep gets its own process.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "eplb/base/status.h"

namespace eplb::cli {

struct Job {
  std::string name;
  std::function<Status()> run;  // runs in the child; its Status decides the exit code
};

// Runs every job, at most `parallel` at once (0: one per core). Fails naming the jobs that
// failed; their errors went to stderr from the children. Children die with this process
// (base/interrupt.h): on SIGINT/SIGTERM they are stopped, no further job starts, and the result
// is Cancelled once every child has exited.
Status RunJobs(const std::vector<Job>& jobs, int parallel);

}  // namespace eplb::cli
