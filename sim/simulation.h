// Runs a scenario on the SimGrid model: builds the platform, runs the EPLB loop in a
// foreground actor with SimBackend and SimStepRunner, and collects what a run folder holds.
// SimGrid allows one engine per process: call once per process.
#pragma once

#include <functional>

#include "eplb/engine/run_result.h"
#include "eplb/engine/scenario.h"

namespace eplb::sim {

// `on_step`, if set, is called after every step (for progress lines).
Result<RunResult> RunSimulation(const Scenario& scenario,
                                std::function<void(const StepRecord&)> on_step = {});

}  // namespace eplb::sim
