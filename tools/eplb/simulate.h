// Simulating one scenario into a run folder: what `run`, `compare` and `sweep` share. Part of
// eplb-sim, the executable that links SimGrid.
#pragma once

#include <string>

#include "eplb/base/status.h"
#include "eplb/engine/scenario.h"

namespace eplb::cli {

// Simulates `scenario` and writes its run folder at `dir`.
Status SimulateToFolder(const Scenario& scenario, const std::string& dir);

}  // namespace eplb::cli
