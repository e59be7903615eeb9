#include "eplb/base/process_pool.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <time.h>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "eplb/base/interrupt.h"

namespace eplb {
namespace {

// One step counter per job in memory shared with the forked children, which write them.
class SharedCounters {
 public:
  explicit SharedCounters(size_t n)
      : bytes_(std::max<size_t>(1, n) * sizeof(std::atomic<int64_t>)) {
    static_assert(std::atomic<int64_t>::is_always_lock_free, "shared across processes");
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    counters_ = p == MAP_FAILED ? nullptr : static_cast<std::atomic<int64_t>*>(p);
    for (size_t i = 0; counters_ != nullptr && i < n; ++i)
      new (&counters_[i]) std::atomic<int64_t>(0);
  }
  ~SharedCounters() {
    if (counters_ != nullptr) munmap(counters_, bytes_);
  }
  SharedCounters(const SharedCounters&) = delete;
  SharedCounters& operator=(const SharedCounters&) = delete;

  bool ok() const { return counters_ != nullptr; }
  std::atomic<int64_t>& operator[](size_t i) { return counters_[i]; }

 private:
  size_t bytes_;
  std::atomic<int64_t>* counters_ = nullptr;
};

// The child's exit status: 0 for success, kBadInputExit when the job's input was at fault
// (Status::is_bad_input), 1 for any other failure.
constexpr int kBadInputExit = 2;

[[noreturn]] void RunChild(const ProcessJob& job, std::atomic<int64_t>& steps_done, pid_t parent) {
  PrepareForkedChild(parent);
  const Status s = job.run(steps_done);
  if (!s.ok()) fmt::print(stderr, "eplb: {}: {}\n", job.name, s.message());
  std::fflush(nullptr);
  _exit(s.ok() ? 0 : s.is_bad_input() ? kBadInputExit : 1);
}

}  // namespace

Status RunInChildProcesses(const std::vector<ProcessJob>& jobs, int parallel,
                           const ProgressObserver& observer) {
  if (parallel <= 0) parallel = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  struct Running {
    size_t job;
    std::unique_ptr<ScopedChildProcess> registration;
  };
  SharedCounters counters(jobs.size());
  if (!counters.ok()) return Status::Internal(fmt::format("mmap: {}", std::strerror(errno)));
  std::vector<JobProgress> progress;
  for (const ProcessJob& job : jobs) progress.push_back({job.name, job.total_steps});
  std::map<pid_t, Running> running;
  std::map<size_t, std::string> failed;  // by job, so that the error names them in the jobs' order
  bool all_bad_input = true;             // every failed job's input was at fault
  size_t next = 0;
  const pid_t parent = getpid();
  if (observer) observer(progress, false);  // every job waiting, before any child runs
  std::fflush(nullptr);  // children must not flush the parent's buffered output again
  while ((next < jobs.size() && InterruptSignal() == 0) || !running.empty()) {
    while (next < jobs.size() && static_cast<int>(running.size()) < parallel &&
           InterruptSignal() == 0) {
      const size_t index = next++;
      const pid_t pid = fork();
      if (pid < 0) {
        failed[index] = jobs[index].name + " (fork failed)";
        all_bad_input = false;
        break;
      }
      if (pid == 0) RunChild(jobs[index], counters[index], parent);
      running[pid] = {index, std::make_unique<ScopedChildProcess>(pid)};
      progress[index].state = JobState::kRunning;
    }
    if (running.empty()) break;
    for (auto& [pid, r] : running) progress[r.job].done_steps = counters[r.job].load();
    if (observer) observer(progress, false);
    int status = 0;
    const pid_t done = waitpid(-1, &status, WNOHANG);
    if (done < 0) break;
    if (done == 0) {  // none ended: look again shortly (signals are handled by another thread)
      const timespec pause{0, 100'000'000};
      nanosleep(&pause, nullptr);
      continue;
    }
    const auto it = running.find(done);
    if (it == running.end()) continue;
    const size_t job = it->second.job;
    progress[job].done_steps = counters[job].load();
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      failed[job] = jobs[job].name;
      progress[job].state = JobState::kFailed;
      all_bad_input = all_bad_input && WIFEXITED(status) && WEXITSTATUS(status) == kBadInputExit;
    } else {
      progress[job].state = JobState::kDone;
    }
    running.erase(it);
  }
  if (observer) observer(progress, true);
  EPLB_RETURN_IF_ERROR(CheckInterrupt());
  if (!failed.empty()) {
    std::vector<std::string> names;
    for (const auto& [job, name] : failed) names.push_back(name);
    const std::string message = fmt::format("failed: {}", fmt::join(names, ", "));
    // Every failure the input's (a user's policy program that fails, a bad file a job read):
    // the user can fix it, as when one job fails in the foreground.
    return all_bad_input ? Status::InvalidArgument(message) : Status::Internal(message);
  }
  return Status::Ok();
}

}  // namespace eplb
