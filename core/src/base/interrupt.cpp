#include "eplb/base/interrupt.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <set>
#include <thread>

#include <fmt/format.h>

namespace eplb {
namespace {

// Never destroyed: the watcher may still use it while the process runs its exit handlers.
struct State {
  std::atomic<int> signal{0};
  std::mutex commit;
  std::mutex registry;
  std::set<std::string> folders;
  std::set<pid_t> children;
};
State& state() {
  static State* const s = new State;
  return *s;
}

sigset_t InterruptSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

const char* SignalName(int sig) {
  return sig == SIGINT ? "SIGINT" : "SIGTERM";
}

void Watch() {
  State& s = state();
  const sigset_t set = InterruptSignals();
  int sig = 0;
  while (sig != SIGINT && sig != SIGTERM) sig = sigwaitinfo(&set, nullptr);
  s.signal.store(sig);
  {
    std::lock_guard<std::mutex> lock(s.registry);
    for (pid_t child : s.children) ::kill(child, SIGTERM);
  }
  // The grace period, cut short by a second signal.
  const auto grace = std::chrono::duration_cast<std::chrono::nanoseconds>(kInterruptGrace);
  const timespec timeout{static_cast<time_t>(grace.count() / 1000000000),
                         static_cast<long>(grace.count() % 1000000000)};
  sigtimedwait(&set, nullptr, &timeout);
  // Still running: the main thread is inside work that does not poll. Finish for it.
  std::lock_guard<std::mutex> commit(s.commit);
  std::lock_guard<std::mutex> lock(s.registry);
  for (pid_t child : s.children) ::kill(child, SIGKILL);
  std::error_code ec;
  for (const std::string& folder : s.folders) std::filesystem::remove_all(folder, ec);
  const std::string message =
      fmt::format("eplb: interrupted by {}; removed the unfinished output\n", SignalName(sig));
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, message.data(), message.size());
  ::_exit(128 + sig);
}

}  // namespace

void InstallInterruptHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    const sigset_t set = InterruptSignals();
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::thread(Watch).detach();
  });
}

int InterruptSignal() {
  return state().signal.load();
}

Status CheckInterrupt() {
  const int sig = InterruptSignal();
  if (sig == 0) return Status::Ok();
  return Status::Cancelled(fmt::format("interrupted by {}", SignalName(sig)));
}

int InterruptExitCode(const Status& status, int otherwise) {
  const int sig = InterruptSignal();
  if (status.code() == Status::Code::kCancelled && sig != 0) return 128 + sig;
  return otherwise;
}

void PrepareForkedChild(pid_t parent) {
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  const sigset_t set = InterruptSignals();
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(128 + SIGKILL);  // the parent died before prctl
}

std::unique_lock<std::mutex> CommitLock() {
  return std::unique_lock<std::mutex>(state().commit);
}

ScopedCleanupFolder::ScopedCleanupFolder(std::string path) : path_(std::move(path)) {
  std::lock_guard<std::mutex> lock(state().registry);
  state().folders.insert(path_);
}
ScopedCleanupFolder::~ScopedCleanupFolder() {
  std::lock_guard<std::mutex> lock(state().registry);
  state().folders.erase(path_);
}

ScopedChildProcess::ScopedChildProcess(pid_t pid) : pid_(pid) {
  std::lock_guard<std::mutex> lock(state().registry);
  state().children.insert(pid_);
  // A child forked just after the signal would miss the SIGTERM the watcher sent.
  if (state().signal.load() != 0) ::kill(pid_, SIGTERM);
}
ScopedChildProcess::~ScopedChildProcess() {
  std::lock_guard<std::mutex> lock(state().registry);
  state().children.erase(pid_);
}

}  // namespace eplb
