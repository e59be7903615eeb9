#include "simulation.h"

#include <chrono>

#include <fmt/format.h>
#include <xbt/log.h>
#include <simgrid/s4u.hpp>

#include "eplb/engine/run_loop.h"
#include "eplb/engine/workload.h"
#include "sim_backend.h"

namespace sg4 = simgrid::s4u;

namespace eplb::sim {

Result<RunResult> RunSimulation(const Scenario& scenario,
                                std::function<void(const StepRecord&)> on_step) {
  const auto wall_start = std::chrono::steady_clock::now();
  EPLB_RETURN_IF_ERROR(CheckRunFitsInMemory(scenario));
  auto workload = MakeWorkload(scenario);
  if (!workload.ok()) return workload.status();

  int argc = 1;
  char name[] = "eplb";
  char* argv[] = {name, nullptr};
  xbt_log_control_set("root.thresh:critical");
  sg4::Engine engine(&argc, argv);
  ConfigureEngine(engine);
  const Topology topology = scenario.topology();
  BackupSpec backup;
  backup.storage = scenario.cluster.backup == ClusterSpec::Backup::kStorage;
  backup.host_read_bytes_per_s = scenario.cluster.host_read_gbps * 1e9;
  backup.host_read_latency_s = scenario.cluster.host_read_latency_us * 1e-6;
  backup.storage_bytes_per_s = scenario.cluster.storage_read_gbps * 1e9;
  backup.storage_latency_s = scenario.cluster.storage_read_latency_us * 1e-6;
  const Platform platform(topology, scenario.cluster.pcie_gbps * 1e9, backup);
  // Stop-the-world stages every layer at once; async needs only its staging depth.
  SimBackend backend(platform, scenario.model.layers, scenario.cluster.hbm_gbps * 1e9,
                     CostOf(scenario.migration.transport, scenario.migration.engine));
  backend.SetEngine(scenario.migration.engine, scenario.migration.transport,
                    scenario.model.expert_tensors, scenario.model.layers, scenario.num_slots(),
                    scenario.migration.batching);
  const StepModel model(scenario);
  SimStepRunner runner(platform, model);
  if (scenario.eplb.use_async) {
    runner.SetInFlightOverhead(AsyncStepOverheadS(scenario.migration.engine, scenario.num_gpus()));
  }

  Result<RunResult> result = Status::Internal("the simulation's inference actor never ran");
  RunHooks hooks;
  hooks.on_step = std::move(on_step);
  hooks.started = wall_start;
  sg4::Actor::create("inference", platform.host(0), [&] {
    result = RunLoop(scenario, **workload, backend, runner, "simgrid", hooks);
  });
  engine.run();
  if (!result.ok()) return result.status();
  if (result->steps.size() != static_cast<size_t>(scenario.run.steps)) {
    // SimGrid ends a simulation in which no actor can go on (a deadlock, or a clock that
    // stopped advancing) without an error of its own.
    return Status::Internal(fmt::format(
        "the simulation stopped after {} of {} steps at t = {} s: SimGrid found no actor able "
        "to go on; please report this scenario",
        result->steps.size(), scenario.run.steps, sg4::Engine::get_clock()));
  }
  return result;
}

}  // namespace eplb::sim
