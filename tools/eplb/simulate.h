// Simulating one scenario into a run folder: what `run`, `compare` and `sweep` share. Part of
// eplb-sim, the executable that links SimGrid.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "eplb/base/status.h"
#include "eplb/engine/scenario.h"
#include "eplb/io/run_folder.h"

namespace eplb::cli {

// Simulates `scenario` and writes its run folder at `dir`.
Status SimulateToFolder(const Scenario& scenario, const std::string& dir,
                        const RunFolderOptions& options = {});

// --no-trace, for the commands that write run folders.
void AddNoTraceFlag(CLI::App* command, RunFolderOptions& options);

}  // namespace eplb::cli
