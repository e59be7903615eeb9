#include "simulation.h"

#include <chrono>

#include <fmt/format.h>
#include <xbt/log.h>
#include <simgrid/s4u.hpp>

#include "eplb/base/file_io.h"
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
  SimBackend backend(platform, scenario.model.layers, scenario.cluster.hbm_gbps * 1e9);
  const StepModel model(scenario);
  SimStepRunner runner(platform, model);

  RunResult result;
  result.scenario = scenario;
  result.backend = "simgrid";
  backend.on_transfer.Connect([&](const TransferRecord& t) { result.transfers.push_back(t); });
  Status status;
  sg4::Actor::create("inference", platform.host(0), [&] {
    EplbLoop loop(scenario, **workload, backend, runner);
    loop.on_step = on_step;
    status = loop.Run();
    result.steps = loop.steps();
    result.rearrangements = loop.rearrangements();
    result.commits = loop.commits();
    result.skipped_rearrangements = loop.skipped_rearrangements();
    result.held_rearrangements = loop.held_rearrangements();
    result.layer_balance = loop.layer_balance();
  });
  engine.run();
  if (!status.ok()) return status;
  if (result.steps.size() != static_cast<size_t>(scenario.run.steps)) {
    // SimGrid ends a simulation in which no actor can go on (a deadlock, or a clock that
    // stopped advancing) without an error of its own.
    return Status::Internal(fmt::format(
        "the simulation stopped after {} of {} steps at t = {} s: SimGrid found no actor able "
        "to go on; please report this scenario",
        result.steps.size(), scenario.run.steps, sg4::Engine::get_clock()));
  }
  result.wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  result.peak_rss_bytes = PeakRssBytes();
  return result;
}

}  // namespace eplb::sim
