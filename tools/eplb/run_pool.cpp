#include "run_pool.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <thread>

#include <fmt/format.h>

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
        _exit(s.ok() ? 0 : (s.code() == Status::Code::kInvalidArgument ? 2 : 1));
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

Status WriteFolderAtomically(const std::string& dir, const std::string& marker,
                             const std::function<Status(const std::string&)>& fill) {
  namespace fs = std::filesystem;
  const std::string partial = dir + ".partial-" + std::to_string(getpid());
  std::error_code ec;
  fs::remove_all(partial, ec);
  fs::create_directories(partial, ec);
  if (ec) return Status::IoError(fmt::format("{}: cannot create: {}", partial, ec.message()));
  Status s = fill(partial);
  if (s.ok() && fs::exists(dir) && !fs::exists(fs::path(dir) / marker)) {
    s = Status::InvalidArgument(fmt::format(
        "{} exists and was not written by eplb (no {}); choose another --out", dir, marker));
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

}  // namespace eplb::cli
