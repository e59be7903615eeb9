// Interruption of a long command by SIGINT (Ctrl-C) or SIGTERM, with nothing left half-done.
//
// InstallInterruptHandler(), called once at the top of main before any thread starts, blocks
// both signals in every thread and starts a watcher thread that waits for them. When one comes:
//   1. InterruptSignal() turns non-zero and CheckInterrupt() returns Cancelled: long loops poll
//      it and unwind, removing what they had begun to write;
//   2. every child process registered with ScopedChildProcess gets SIGTERM;
//   3. if the process is still running kInterruptGrace later (or at a second signal), the
//      watcher removes every folder registered with ScopedCleanupFolder and ends the process
//      with exit status 128 + the signal, the shell's convention.
// Without InstallInterruptHandler the signals keep their default action.
//
// A folder commit (the renames that put a finished folder in place) runs under
// CommitLock(): the watcher never removes a registered folder in the middle of one, and
// CheckInterrupt() under the lock decides whether the commit happens at all.
//
// Thread-safety: every function may be called from any thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <mutex>
#include <string>

#include "eplb/base/status.h"

namespace eplb {

inline constexpr std::chrono::milliseconds kInterruptGrace{500};

void InstallInterruptHandler();

// 0 until SIGINT or SIGTERM arrived; then that signal's number.
int InterruptSignal();
// Cancelled ("interrupted by SIGINT") once a signal arrived, else OK.
Status CheckInterrupt();
// The exit status for `status`: 128 + the signal for a Cancelled status after a signal,
// `otherwise` for any other.
int InterruptExitCode(const Status& status, int otherwise);

// Call first in a child created by fork(): default signal actions, and death with the parent
// (PR_SET_PDEATHSIG), so no child outlives a killed parent and goes on writing.
void PrepareForkedChild(pid_t parent);

// Held while a folder is committed; see above.
std::unique_lock<std::mutex> CommitLock();

// Registers a folder for removal should the watcher have to end the process.
class ScopedCleanupFolder {
 public:
  explicit ScopedCleanupFolder(std::string path);
  ~ScopedCleanupFolder();
  ScopedCleanupFolder(const ScopedCleanupFolder&) = delete;
  ScopedCleanupFolder& operator=(const ScopedCleanupFolder&) = delete;

 private:
  std::string path_;
};

// Registers a child process to be sent SIGTERM when a signal arrives.
class ScopedChildProcess {
 public:
  explicit ScopedChildProcess(pid_t pid);
  ~ScopedChildProcess();
  ScopedChildProcess(const ScopedChildProcess&) = delete;
  ScopedChildProcess& operator=(const ScopedChildProcess&) = delete;

 private:
  pid_t pid_;
};

}  // namespace eplb
