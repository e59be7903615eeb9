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

// Seconds SimGrid takes to build the platform of `gpus` simulated GPUs, before the first step:
// it grows with their square (SimGrid 3.32 looks each new host's and link's name up across the
// whole platform: 85% of the time at 4,096 GPUs). Measured here on 2 cores, tiny.yaml widened
// to 2 GPUs a node: 0.5, 1.6 and 6.4 s at 1,024, 2,048 and 4,096 GPUs; 8 a node, 3.3 s at 4,096.
double SetUpSecondsEstimate(int gpus);

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
