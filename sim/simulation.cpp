#include "simulation.h"

#include <chrono>

#include <fmt/format.h>
#include <xbt/log.h>
#include <simgrid/s4u.hpp>

#include "eplb/engine/run_loop.h"
#include "eplb/engine/workload.h"
#include "one_gpu.h"
#include "sim_backend.h"

namespace sg4 = simgrid::s4u;

namespace eplb::sim {

double SetUpSecondsEstimate(int gpus) {
  constexpr double kSecondsPerGpuPair = 4e-7;  // 6.4 s / 4,096², the slowest shape measured
  return kSecondsPerGpuPair * static_cast<double>(gpus) * static_cast<double>(gpus);
}

namespace {

// A cluster, or with `one_gpu` every rank on one GPU (one_gpu.h; `scenario` OnOneGpu already).
Result<RunResult> Simulate(const Scenario& scenario, const OneGpuModel* one_gpu,
                           std::function<void(const StepRecord&)> on_step) {
  const auto wall_start = std::chrono::steady_clock::now();
  EPLB_RETURN_IF_ERROR(CheckRunFitsInMemory(scenario));
  // Said before it starts: a cluster of tens of thousands of GPUs takes minutes to build.
  if (const double set_up = SetUpSecondsEstimate(scenario.num_gpus()); set_up > 60) {
    fmt::print(stderr,
               "{}: warning: building the simulated cluster of {} GPUs takes about {:.0f} min "
               "before the first step (it grows with the square of the GPUs; "
               "sim/simulation.h)\n",
               scenario.source.empty() ? scenario.name : scenario.source, scenario.num_gpus(),
               set_up / 60);
  }
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
  const Platform platform(topology, scenario.cluster.pcie_gbps * 1e9, backup,
                          one_gpu != nullptr ? one_gpu->copy_gbps * 1e9 : 0);
  const MigrationPricing pricing(scenario.migration_set_up());
  // Stop-the-world stages every layer at once; async needs only its staging depth.
  SimBackend sim_backend(platform, scenario.model.layers, pricing);
  const StepModel model(scenario);
  SimStepRunner sim_runner(platform, model);
  sim_runner.SetInFlightOverhead(pricing.InFlightStepS());
  std::unique_ptr<RearrangementBackend> one_gpu_backend;
  std::unique_ptr<StepRunner> one_gpu_steps;
  if (one_gpu != nullptr) {
    one_gpu_backend = OneGpuBackend(sim_backend, *one_gpu, topology.num_ranks());
    one_gpu_steps = OneGpuSteps(sim_runner, platform, scenario, *one_gpu);
  }
  RearrangementBackend& backend =
      one_gpu_backend ? *one_gpu_backend : static_cast<RearrangementBackend&>(sim_backend);
  StepRunner& runner = one_gpu_steps ? *one_gpu_steps : static_cast<StepRunner&>(sim_runner);

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

}  // namespace

Result<RunResult> RunSimulation(const Scenario& scenario,
                                std::function<void(const StepRecord&)> on_step) {
  return Simulate(scenario, nullptr, std::move(on_step));
}

Result<RunResult> SimulateOnOneGpu(const Scenario& scenario, const OneGpuModel& model,
                                   std::function<void(const StepRecord&)> on_step) {
  EPLB_RETURN_IF_ERROR(CheckOneGpuModel(model, "the one-GPU model"));
  return Simulate(OnOneGpu(scenario, model), &model, std::move(on_step));
}

}  // namespace eplb::sim
