// Runs a scenario on the SimGrid model: builds the platform, runs the EPLB loop in a
// foreground actor with SimBackend and SimStepRunner, and collects what a run folder holds.
// SimGrid allows one engine per process: call once per process.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "eplb/engine/run_result.h"
#include "eplb/engine/scenario.h"
#include "eplb/io/run_folder.h"

namespace eplb::sim {

// `on_step`, if set, is called after every step (for progress lines).
Result<RunResult> RunSimulation(const Scenario& scenario,
                                std::function<void(const StepRecord&)> on_step = {});

// Simulates `scenario` in this process and writes its run folder at `dir`; stores the steps
// done so far in `steps_done` when given (a job's progress). The studies' runner
// (studies/studies.h ScenarioRunner). Runs SimGrid's engine: once per process.
Status SimulateToFolder(const Scenario& scenario, const std::string& dir,
                        const RunFolderOptions& options = {},
                        std::atomic<int64_t>* steps_done = nullptr);

}  // namespace eplb::sim
