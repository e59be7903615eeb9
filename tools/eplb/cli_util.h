// Helpers shared by the eplb subcommands: exit codes, error reporting, the scenario argument.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "command.h"
#include "eplb/base/status.h"
#include "eplb/engine/run_result.h"
#include "eplb/engine/scenario.h"
#include "eplb/io/run_folder.h"

namespace eplb::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;    // the job itself failed, or a part is not built
inline constexpr int kExitBadInput = 2;  // bad arguments or input files

// The one mapping from a Status to an exit code: what the user can fix (bad arguments, files
// missing or malformed) is kExitBadInput, an interruption by SIGINT/SIGTERM 128 + the signal
// (130, 143), everything else kExitFailed.
int ExitCodeFor(const Status& status);

// Prints "eplb <command>: error: <message>" on stderr and returns ExitCodeFor(status).
int ReportError(const std::string& command, const Status& status);

// The positional SCENARIO and the repeatable --set every scenario command takes.
void AddScenarioOptions(Command& command, std::string& scenario_path,
                        std::vector<std::string>& overrides);

// The summary lines of a finished run and where its folder is, on `out`.
void PrintRunSummary(const RunResult& run, const std::string& dir, std::FILE* out = stdout);

// --json, for the commands that write a folder: the folder's document (summary.json,
// comparison.json, sweep.json) on stdout for scripts, the lines for people on stderr.
void AddJsonFlag(Command& command, bool& json);
// Copies the document at `path` to stdout.
Status PrintJsonFile(const std::string& path);
// Where a command's lines for people go: stderr when stdout carries --json's document.
inline std::FILE* HumanOutput(bool json) {
  return json ? stderr : stdout;
}

// --no-trace, for the commands that write run folders.
void AddNoTraceFlag(Command& command, RunFolderOptions& options);

// Splits "a,b,c" given to `option`: no items for "", an error naming the option for an empty
// item.
Result<std::vector<std::string>> SplitList(const std::string& list, std::string_view option);

}  // namespace eplb::cli
