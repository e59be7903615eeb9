#include "run_pool.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "cli_util.h"

namespace eplb::cli {

Status RunJobs(const std::vector<Job>& jobs, int parallel) {
  if (parallel <= 0) parallel = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::map<pid_t, std::string> running;
  std::vector<std::string> failed;
  size_t next = 0;
  std::fflush(nullptr);  // children must not flush the parent's buffered output again
  while (next < jobs.size() || !running.empty()) {
    while (next < jobs.size() && static_cast<int>(running.size()) < parallel) {
      const Job& job = jobs[next++];
      const pid_t pid = fork();
      if (pid < 0) return Status::Internal(fmt::format("fork failed for {}", job.name));
      if (pid == 0) {
        const Status s = job.run();
        if (!s.ok()) fmt::print(stderr, "eplb: {}: {}\n", job.name, s.message());
        std::fflush(nullptr);
        _exit(ExitCodeFor(s));
      }
      running[pid] = job.name;
    }
    int status = 0;
    const pid_t done = wait(&status);
    if (done < 0) break;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed.push_back(running[done]);
    running.erase(done);
  }
  if (!failed.empty()) return Status::Internal(fmt::format("failed: {}", fmt::join(failed, ", ")));
  return Status::Ok();
}

}  // namespace eplb::cli
