// One run of the EPLB loop on any backend, collected into the RunResult that a run folder is
// written from. Every backend's runner calls it (the simulator from its inference actor, the
// GPU backend, the tests' host runs), so what a run records is written once: the transfers the
// backend reports, the loop's steps, rearrangements, commits and layer balance, its counts of
// skipped and held rearrangements, the wall time and the peak memory.
//
// Call it in the backend's foreground context. Transfers are collected from any context, and
// a transfer reported after RunLoop returns is dropped (the loop cancels what it started before
// it is destroyed, so none is expected).
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "eplb/base/status.h"
#include "eplb/engine/eplb_loop.h"
#include "eplb/engine/run_result.h"
#include "eplb/engine/scenario.h"
#include "eplb/engine/workload.h"
#include "eplb/migrate/backend.h"

namespace eplb {

struct RunHooks {
  // After the loop is made and before it runs: fill the weights, connect observers.
  std::function<Status(EplbLoop&)> before;
  // After the loop ran every step: the checks that need it (the final weights).
  std::function<Status(EplbLoop&)> after;
  // Called after each step with its record (progress lines).
  std::function<void(const StepRecord&)> on_step;
  // When the run began, for RunResult::wall_s (a runner's own set-up counts as part of it).
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
};

// Runs `scenario` with `workload` on `backend`, stepping through `runner`; `backend_name` is
// RunResult::backend. An error from a hook or the loop ends the run and is returned.
Result<RunResult> RunLoop(const Scenario& scenario, Workload& workload,
                          RearrangementBackend& backend, StepRunner& runner,
                          std::string backend_name, const RunHooks& hooks = {});

}  // namespace eplb
