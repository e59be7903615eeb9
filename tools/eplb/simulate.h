// Simulating one scenario into a run folder: what `run`, `compare` and `sweep` share. Part of
// eplb-sim, the executable that links SimGrid.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "command.h"
#include "eplb/base/status.h"
#include "eplb/engine/scenario.h"
#include "eplb/io/run_folder.h"

namespace eplb::cli {

// Simulates `scenario` and writes its run folder at `dir`; stores the steps done so far in
// `steps_done` when given (a job's progress, run_pool.h).
Status SimulateToFolder(const Scenario& scenario, const std::string& dir,
                        const RunFolderOptions& options = {},
                        std::atomic<int64_t>* steps_done = nullptr);

// --no-trace, for the commands that write run folders.
void AddNoTraceFlag(Command& command, RunFolderOptions& options);

}  // namespace eplb::cli
