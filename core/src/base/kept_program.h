// A user's program started under a keeper, so that nothing it starts outlives eplb.
//
// PR_SET_PDEATHSIG reaches one process, and a process group only those that stay in it: a
// program that starts a child with setsid(), or runs under a shell that the kill reaches
// first, would leave that child running, holding eplb's socket. The keeper is a process of
// eplb's between eplb and the program: the subreaper of everything the program starts (an
// orphan of any depth becomes its child), it ends all of it when the program ends, when it is
// sent SIGTERM, or when eplb itself dies in any way (its parent-death signal is SIGTERM, which
// it catches). It then ends with the program's own status, so that the caller's waitpid on the
// keeper reads how the program ended. Internal to the core's layers.
#pragma once

#include <sys/types.h>

namespace eplb {

// Starts `/bin/sh -c shell_command` under a keeper, with `stdio_fd` as the program's stdin and
// stdout (the keeper closes its own copy, so that the descriptor's peer sees the program's end).
// `parent` is the calling process (getpid() before the call). Returns the keeper's PID, which
// leads a process group of its own (the program leads another); -1 with errno when fork fails.
// To stop it: SIGTERM to the keeper, then waitpid. Async-signal-safe after the fork.
pid_t StartKeptProgram(const char* shell_command, int stdio_fd, pid_t parent);

}  // namespace eplb
