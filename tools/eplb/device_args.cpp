#include "device_args.h"

#include <unistd.h>

#include <cstdio>
#include <limits>

#include <fmt/format.h>

#include "cli_util.h"
#include "device_run.h"
#include "eplb/io/scenario_file.h"
#include "mpi_session.h"
#include "progress.h"

namespace eplb::cli {
namespace {

// --ranks as scenario overrides, so the scenario's own checks (slots per GPU) apply.
std::vector<std::string> RankOverrides(const DeviceArgs& a, const Scenario& s) {
  std::vector<std::string> out = a.overrides;
  if (a.ranks == 0 || a.ranks == s.num_gpus()) return out;
  const int per_node = a.ranks % s.cluster.gpus_per_node == 0 ? s.cluster.gpus_per_node : a.ranks;
  out.push_back(fmt::format("cluster.nodes={}", a.ranks / per_node));
  out.push_back(fmt::format("cluster.gpus_per_node={}", per_node));
  return out;
}

}  // namespace

void AddDeviceOptions(Command& sub, DeviceArgs& a, bool allow_mpi) {
  AddScenarioOptions(sub, a.scenario_path, a.overrides);
  sub.Option("--ranks", &a.ranks,
             "Ranks (GPUs of the scenario's cluster) to run; default: the scenario's")
      .Check(Positive());
  OptionSpec& v = sub.Flag("--virtual", &a.force_virtual,
                           "Run every rank on one GPU (virtual ranks; the default when there are "
                           "fewer GPUs than ranks)");
  OptionSpec& n =
      sub.Flag("--nccl", &a.force_nccl,
               "One rank per GPU through NCCL, in this process (the default when possible)");
  n.Excludes(v);
  if (allow_mpi) {
    sub.Flag("--mpi", &a.mpi,
             "One rank per process and GPU: run as mpirun -np RANKS eplb device-run --mpi")
        .Excludes(v)
        .Excludes(n);
  }
  sub.Option("--device", &a.device, "First GPU to use").Check(AtLeast(0));
  sub.Option("--expert-bytes", &a.expert_bytes,
             "Bytes per expert on the GPU (multiple of 8); default: the scenario's, lowered "
             "to fit --memory-fraction of the free GPU memory")
      .Check(Positive());
  sub.Option("--memory-fraction", &a.memory_fraction,
             "Share of the free GPU memory the weights may take (default 0.8)");
  sub.Option("--step-scale", &a.step_scale,
             "An emulated inference step lasts the step model's time times this (default 1)")
      .Check(Positive());
  sub.Flag("--no-check", &a.no_check,
           "Skip the weights check after each commit (the final check still runs)");
}

Result<device::DeviceRunOptions> DeviceOptions(const DeviceArgs& a, const Scenario& s) {
  device::DeviceRunOptions o;
  o.first_device = a.device;
  o.expert_bytes = a.expert_bytes;
  o.memory_fraction = a.memory_fraction;
  o.step_scale = a.step_scale;
  o.check_commits = !a.no_check;
  if (a.mpi) {
    EPLB_RETURN_IF_ERROR(device::CountDevices().status());
    EPLB_RETURN_IF_ERROR(device::mpi::Init());
    o.mode = device::DeviceMode::kMpi;
    return o;
  }
  if (device::mpi::Launched()) {
    return Status::InvalidArgument(
        "started by an MPI launcher without --mpi: every process would run every rank; add --mpi");
  }
  auto gpus = device::CountDevices();
  if (!gpus.ok()) return gpus.status();
  const int available = *gpus - a.device;
  if (a.force_virtual || (!a.force_nccl && (available < s.num_gpus() || !device::HaveNccl()))) {
    o.mode = device::DeviceMode::kVirtual;
    if (!a.force_virtual) {
      fmt::print("{} ranks and {} GPU(s) from GPU {}{}: running virtual ranks on GPU {}\n",
                 s.num_gpus(), available, a.device, device::HaveNccl() ? "" : " (no NCCL)",
                 a.device);
    }
  } else {
    o.mode = device::DeviceMode::kNccl;
  }
  return o;
}

std::function<void(const StepRecord&)> Progress(const std::string& command,
                                                const Scenario& scenario) {
  using State = ProgressReporter::State;
  auto reporter = std::make_shared<ProgressReporter>(command, isatty(STDERR_FILENO) == 1);
  auto jobs = std::make_shared<std::vector<ProgressReporter::Job>>(
      std::vector<ProgressReporter::Job>{{scenario.name, scenario.run.steps, 0, State::kRunning}});
  reporter->Report(*jobs);
  return [reporter, jobs](const StepRecord& s) {
    ProgressReporter::Job& job = (*jobs)[0];
    job.done_steps = s.step + 1;
    if (job.done_steps == job.total_steps) {
      job.state = State::kDone;
      reporter->Finish(*jobs);
    } else if (s.step % 4 == 0) {
      reporter->Report(*jobs);
    }
  };
}

Result<Scenario> LoadDeviceScenario(const DeviceArgs& a) {
  auto base = LoadScenarioOrDefault(a.scenario_path, a.overrides);
  if (!base.ok()) return base;
  // Before any GPU is probed: a what-if transport is an error in the scenario, not the machine.
  EPLB_RETURN_IF_ERROR(device::CheckDeviceTransport(*base));
  if (a.ranks != 0) {
    base = LoadScenarioOrDefault(a.scenario_path, RankOverrides(a, *base));
    if (!base.ok()) return base.status().WithContext(fmt::format("--ranks {}: ", a.ranks));
  }
  if ((a.fail_rank >= 0) != (a.fail_at >= 0)) {
    return Status::InvalidArgument(
        "--fail-rank and --at go together: the rank to lose and the "
        "step to lose it at");
  }
  if (a.fail_rank < 0) return base;
  FaultSpec lost;
  lost.kind = FaultKind::kGpuLost;
  lost.rank = a.fail_rank;
  lost.step = a.fail_at;
  lost.until = std::numeric_limits<int>::max();
  auto failed = WithFault(*base, lost);
  if (!failed.ok()) {
    return failed.status().WithContext(
        fmt::format("--fail-rank {} --at {}: ", a.fail_rank, a.fail_at));
  }
  return failed;
}

}  // namespace eplb::cli
