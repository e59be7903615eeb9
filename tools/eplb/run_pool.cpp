#include "run_pool.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "cli_util.h"
#include "eplb/base/interrupt.h"

namespace eplb::cli {

Status RunJobs(const std::vector<Job>& jobs, int parallel) {
  if (parallel <= 0) parallel = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  struct Running {
    std::string name;
    std::unique_ptr<ScopedChildProcess> registration;
  };
  std::map<pid_t, Running> running;
  std::vector<std::string> failed;
  size_t next = 0;
  const pid_t parent = getpid();
  std::fflush(nullptr);  // children must not flush the parent's buffered output again
  while ((next < jobs.size() && InterruptSignal() == 0) || !running.empty()) {
    while (next < jobs.size() && static_cast<int>(running.size()) < parallel &&
           InterruptSignal() == 0) {
      const Job& job = jobs[next++];
      const pid_t pid = fork();
      if (pid < 0) {
        failed.push_back(job.name + " (fork failed)");
        break;
      }
      if (pid == 0) {
        PrepareForkedChild(parent);
        const Status s = job.run();
        if (!s.ok()) fmt::print(stderr, "eplb: {}: {}\n", job.name, s.message());
        std::fflush(nullptr);
        _exit(ExitCodeFor(s));
      }
      running[pid] = {job.name, std::make_unique<ScopedChildProcess>(pid)};
    }
    if (running.empty()) break;
    int status = 0;
    const pid_t done = wait(&status);
    if (done < 0) break;
    const auto it = running.find(done);
    if (it == running.end()) continue;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed.push_back(it->second.name);
    running.erase(it);
  }
  EPLB_RETURN_IF_ERROR(CheckInterrupt());
  if (!failed.empty()) return Status::Internal(fmt::format("failed: {}", fmt::join(failed, ", ")));
  return Status::Ok();
}

}  // namespace eplb::cli
