// Helpers shared by the eplb subcommands: exit codes and error reporting.
#pragma once

#include <string>

#include "eplb/status.h"

namespace eplb::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitBadInput = 2;  // bad arguments or input files
inline constexpr int kExitFailed = 1;    // the job itself failed

// Prints "eplb <command>: error: <message>" on stderr and returns the exit code for `status`.
int ReportError(const std::string& command, const Status& status);

}  // namespace eplb::cli
