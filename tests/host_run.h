// A whole run of the EPLB loop on the host backend: real threads moving real bytes, no
// simulator. Builds the RunResult a run folder is written from, in any build of eplb.
#pragma once

#include <chrono>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "eplb/base/file_io.h"
#include "eplb/engine/eplb_loop.h"
#include "eplb/engine/run_loop.h"
#include "eplb/engine/run_result.h"
#include "eplb/engine/workload.h"
#include "eplb/migrate/host_backend.h"

namespace eplb::testing {

// Steps that take a little wall time, so that workers move bytes between step boundaries as
// they would beside real inference.
class SleepingStepRunner final : public StepRunner {
 public:
  Status RunStep(const StepCost& /*cost*/, bool /*contended*/) override {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    return Status::Ok();
  }
};

struct HostRun {
  RunResult result;
  Status verified;          // every slot's bytes equal its expert's under the final placement
  Status commits_verified;  // the same after every commit, as device-run checks on the GPU
};

// Runs `scenario` on a HostBackend whose experts are `expert_bytes` long.
inline Result<HostRun> RunOnHost(const Scenario& scenario, size_t expert_bytes = 4096) {
  auto workload = MakeWorkload(scenario);
  if (!workload.ok()) return workload.status();
  const Topology topology = scenario.topology();
  HostBackend backend(topology, scenario.model.layers, scenario.model.layers, expert_bytes);
  HostRun out;
  SleepingStepRunner runner;
  RunHooks hooks;
  hooks.before = [&](EplbLoop& loop) {
    backend.Fill(loop.placement());
    loop.rearranger().on_layer_committed.Connect([&](const LayerEvent& e) {
      if (!out.commits_verified.ok()) return;
      const Status v = backend.Verify(loop.rearranger().placement());
      if (!v.ok()) out.commits_verified = v.WithContext(fmt::format("after layer {}: ", e.layer));
    });
    return Status::Ok();
  };
  hooks.after = [&](EplbLoop& loop) {
    out.verified = backend.Verify(loop.placement());
    return Status::Ok();
  };
  auto run = RunLoop(scenario, **workload, backend, runner, "host", hooks);
  if (!run.ok()) return run.status();
  out.result = std::move(run).value();
  return out;
}

}  // namespace eplb::testing
