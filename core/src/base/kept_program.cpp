#include "base/kept_program.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "eplb/base/interrupt.h"

// Everything below the fork runs in a child of a process that may have other threads: only
// system calls, no allocation, no library that takes a lock.
namespace eplb {
namespace {

// The parent PID of `pid` from /proc/PID/stat ("PID (comm) S PPID ..."), or -1.
pid_t ParentOf(const char* pid_text) {
  char path[64] = "/proc/";
  size_t n = 6;
  for (const char* p = pid_text; *p != '\0' && n < sizeof(path) - 6; ++p) path[n++] = *p;
  std::memcpy(path + n, "/stat", 6);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buffer[512];
  const ssize_t got = ::read(fd, buffer, sizeof(buffer) - 1);
  ::close(fd);
  if (got <= 0) return -1;
  buffer[got] = '\0';
  // The command name may hold spaces and parentheses: the state follows the last ')'.
  const char* close = std::strrchr(buffer, ')');
  if (close == nullptr || close[1] != ' ' || close[2] == '\0' || close[3] != ' ') return -1;
  pid_t ppid = 0;
  for (const char* p = close + 4; *p >= '0' && *p <= '9'; ++p) ppid = ppid * 10 + (*p - '0');
  return ppid;
}

// SIGKILL to every child of this process: the program's descendants, once orphaned, are ours.
void KillChildren(pid_t self) {
  const int dir = ::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return;
  alignas(8) char buffer[8192];
  for (;;) {
    const long got = ::syscall(SYS_getdents64, dir, buffer, sizeof(buffer));
    if (got <= 0) break;
    for (long at = 0; at < got;) {
      // struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name.
      unsigned short reclen = 0;
      std::memcpy(&reclen, buffer + at + 16, sizeof(reclen));
      const char* name = buffer + at + 19;
      at += reclen;
      if (name[0] < '1' || name[0] > '9') continue;
      if (ParentOf(name) != self) continue;
      pid_t pid = 0;
      for (const char* p = name; *p >= '0' && *p <= '9'; ++p) pid = pid * 10 + (*p - '0');
      ::kill(pid, SIGKILL);
    }
  }
  ::close(dir);
}

// Ends the program's group and every descendant, and reaps them all.
void EndEverything(pid_t program) {
  const pid_t self = ::getpid();
  ::kill(-program, SIGKILL);
  const timespec pause{0, 1000000};  // 1 ms: for the killed to die and their orphans to move
  for (int round = 0; round < 10000; ++round) {
    KillChildren(self);
    int status = 0;
    while (::waitpid(-1, &status, WNOHANG) > 0) {
    }
    if (::waitpid(-1, &status, WNOHANG) < 0 && errno == ECHILD) return;
    ::nanosleep(&pause, nullptr);
  }
}

// Ends this process as the program ended: its exit status, or its signal (without a core file).
[[noreturn]] void EndAs(int program_status) {
  if (WIFSIGNALED(program_status)) {
    const int sig = WTERMSIG(program_status);
    const rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    ::signal(sig, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    ::sigprocmask(SIG_UNBLOCK, &one, nullptr);
    ::kill(::getpid(), sig);
    ::_exit(128 + sig);
  }
  ::_exit(WIFEXITED(program_status) ? WEXITSTATUS(program_status) : 1);
}

// Closes every descriptor but 0-2 and `keep`, which becomes 3: the keeper holds none of eplb's
// (its end of the program's socket above all, whose peer would then never see the end).
int CloseAllBut(int keep) {
  constexpr int kKept = 3;
  if (keep != kKept) {
    ::dup2(keep, kKept);
    ::close(keep);
  }
  if (::syscall(SYS_close_range, kKept + 1, ~0U, 0) != 0) {
    rlimit files{};
    const int top = ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < 65536
                        ? static_cast<int>(files.rlim_cur)
                        : 65536;
    for (int fd = kKept + 1; fd < top; ++fd) ::close(fd);
  }
  return kKept;
}

[[noreturn]] void Keep(const char* shell_command, int stdio_fd, pid_t parent) {
  PrepareForkedChild(parent);
  stdio_fd = CloseAllBut(stdio_fd);
  // Caught, not fatal: the keeper must outlive eplb long enough to end what it keeps.
  sigset_t waited;
  sigemptyset(&waited);
  sigaddset(&waited, SIGTERM);
  sigaddset(&waited, SIGINT);
  sigaddset(&waited, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &waited, nullptr);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != parent) ::_exit(128 + SIGTERM);  // eplb died before prctl
  ::setpgid(0, 0);
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  const pid_t keeper = ::getpid();
  const pid_t program = ::fork();
  if (program < 0) ::_exit(127);
  if (program == 0) {
    ::sigprocmask(SIG_UNBLOCK, &waited, nullptr);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != keeper) ::_exit(128 + SIGKILL);
    ::setpgid(0, 0);  // its own group: what the shell starts is killed with it
    ::dup2(stdio_fd, STDIN_FILENO);
    ::dup2(stdio_fd, STDOUT_FILENO);
    ::execl("/bin/sh", "sh", "-c", shell_command, static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(program, program);  // also here: whichever runs first
  ::close(stdio_fd);
  for (;;) {
    siginfo_t info;
    const int sig = ::sigwaitinfo(&waited, &info);
    if (sig == SIGTERM || sig == SIGINT) {
      EndEverything(program);
      ::_exit(128 + sig);
    }
    if (sig != SIGCHLD) continue;
    int status = 0;
    for (pid_t done; (done = ::waitpid(-1, &status, WNOHANG)) > 0;) {
      if (done == program) {
        EndEverything(program);
        EndAs(status);
      }
    }
  }
}

}  // namespace

pid_t StartKeptProgram(const char* shell_command, int stdio_fd, pid_t parent) {
  const pid_t keeper = ::fork();
  if (keeper == 0) Keep(shell_command, stdio_fd, parent);
  if (keeper > 0) ::setpgid(keeper, keeper);  // also in the keeper: whichever runs first
  return keeper;
}

}  // namespace eplb
