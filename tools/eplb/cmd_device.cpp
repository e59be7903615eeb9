// eplb device-run: run a scenario's rearrangements on real GPUs and write a run folder.
// eplb validate: a short device run, the bandwidths it measured, the same scenario simulated
// with them, and the simulated against the measured transfer times (validation.h).
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli_util.h"
#include "commands.h"
#include "eplb/load_file.h"
#include "eplb/run_output.h"
#include "eplb/scenario.h"
#include "eplb/validation.h"
#include "sim_jobs.h"
#ifdef EPLB_HAVE_DEVICE
#include "device_run.h"
#include "mpi_session.h"
#endif
#ifdef EPLB_HAVE_SIM
#include "simulation.h"
#endif

namespace eplb::cli {
namespace {

struct DeviceArgs {
  std::string scenario_path;
  std::vector<std::string> overrides;
  std::string out;
  int ranks = 0;
  bool force_virtual = false;
  bool force_nccl = false;
  bool mpi = false;
  int device = 0;
  int64_t expert_bytes = 0;
  double memory_fraction = 0.8;
  double step_scale = 1.0;
  bool no_check = false;
  int steps = 0;  // validate only
};

void AddDeviceOptions(CLI::App* sub, DeviceArgs& a, bool allow_mpi) {
  AddScenarioOptions(sub, a.scenario_path, a.overrides);
  sub->add_option("--ranks", a.ranks,
                  "Ranks (GPUs of the scenario's cluster) to run; default: the scenario's")
      ->check(CLI::PositiveNumber);
  auto* v = sub->add_flag("--virtual", a.force_virtual,
                          "Run every rank on one GPU (virtual ranks; the default when there are "
                          "fewer GPUs than ranks)");
  auto* n =
      sub->add_flag("--nccl", a.force_nccl,
                    "One rank per GPU through NCCL, in this process (the default when possible)");
  n->excludes(v);
  if (allow_mpi) {
    sub->add_flag("--mpi", a.mpi,
                  "One rank per process and GPU: run as mpirun -np RANKS eplb device-run --mpi")
        ->excludes(v)
        ->excludes(n);
  }
  sub->add_option("--device", a.device, "First GPU to use")->check(CLI::NonNegativeNumber);
  sub->add_option("--expert-bytes", a.expert_bytes,
                  "Bytes per expert on the GPU (multiple of 8); default: the scenario's, lowered "
                  "to fit --memory-fraction of the free GPU memory")
      ->check(CLI::PositiveNumber);
  sub->add_option("--memory-fraction", a.memory_fraction,
                  "Share of the free GPU memory the weights may take (default 0.8)");
  sub->add_option("--step-scale", a.step_scale,
                  "An emulated inference step lasts the step model's time times this (default 1)")
      ->check(CLI::PositiveNumber);
  sub->add_flag("--no-check", a.no_check,
                "Skip the weights check after each commit (the final check still runs)");
}

// --ranks as scenario overrides, so the scenario's own checks (slots per GPU) apply.
std::vector<std::string> RankOverrides(const DeviceArgs& a, const Scenario& s) {
  std::vector<std::string> out = a.overrides;
  if (a.ranks == 0 || a.ranks == s.num_gpus()) return out;
  const int per_node = a.ranks % s.cluster.gpus_per_node == 0 ? s.cluster.gpus_per_node : a.ranks;
  out.push_back(fmt::format("cluster.nodes={}", a.ranks / per_node));
  out.push_back(fmt::format("cluster.gpus_per_node={}", per_node));
  return out;
}

[[maybe_unused]] Status DeviceMissing() {
  return Status::Unavailable(
      "this eplb was built without the GPU backend (no CUDA compiler was found at build time; "
      "install CUDA under /usr/local/cuda and rebuild)");
}

#ifdef EPLB_HAVE_DEVICE
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

std::function<void(const StepRecord&)> Progress(int steps) {
  if (!isatty(STDERR_FILENO)) return {};
  return [steps](const StepRecord& s) {
    if (s.step % 20 == 0 || s.step + 1 == steps) {
      fmt::print(stderr, "\r  step {}/{} ({:.0f}%), {:.1f} s", s.step + 1, steps,
                 100.0 * (s.step + 1) / steps, s.start_s + s.step_s);
      if (s.step + 1 == steps) fmt::print(stderr, "\n");
    }
  };
}
#endif

Result<Scenario> LoadDeviceScenario(const DeviceArgs& a) {
  auto base = LoadScenarioArg(a.scenario_path, a.overrides);
  if (!base.ok() || a.ranks == 0) return base;
  auto ranked = LoadScenarioArg(a.scenario_path, RankOverrides(a, *base));
  if (!ranked.ok()) return ranked.status().WithContext(fmt::format("--ranks {}: ", a.ranks));
  return ranked;
}

int RunDeviceRun(const DeviceArgs& a) {
  const std::string cmd = "device-run";
  auto scenario = LoadDeviceScenario(a);
  if (!scenario.ok()) return ReportError(cmd, scenario.status());
#ifdef EPLB_HAVE_DEVICE
  auto options = DeviceOptions(a, *scenario);
  if (!options.ok()) return ReportError(cmd, options.status());
  const bool lead = device::mpi::Rank() == 0;  // under MPI, rank 0 reports and writes
  auto run =
      device::RunOnDevice(*scenario, *options, lead ? Progress(scenario->run.steps) : nullptr);
  if (!run.ok()) {
    return ReportError(
        device::mpi::Size() > 1 ? fmt::format("{} (rank {})", cmd, device::mpi::Rank()) : cmd,
        run.status());
  }
  if (!lead) return kExitOk;
  const std::string dir = a.out.empty() ? "runs/" + scenario->name + "-device" : a.out;
  if (const Status s = WriteRunFolder(dir, *run); !s.ok()) return ReportError(cmd, s);
  fmt::print("  expert bytes   {} on the device\n", run->scenario.model.expert_bytes);
  PrintRunSummary(*run, dir);
  return kExitOk;
#else
  return ReportError(cmd, DeviceMissing());
#endif
}

int RunValidate(const DeviceArgs& a) {
  const std::string cmd = "validate";
  auto scenario = LoadDeviceScenario(a);
  if (!scenario.ok()) return ReportError(cmd, scenario.status());
#if defined(EPLB_HAVE_DEVICE) && defined(EPLB_HAVE_SIM)
  // Short: up to the first rearrangement's last commit with room to spare, unless --steps.
  const EplbSpec& e = scenario->eplb;
  const int first = e.step_interval / 4;
  scenario->run.steps =
      a.steps > 0
          ? a.steps
          : std::min(scenario->run.steps,
                     first + 2 * scenario->model.layers / std::max(1, e.layers_per_step) + 16);
  auto options = DeviceOptions(a, *scenario);
  if (!options.ok()) return ReportError(cmd, options.status());
  fmt::print("validate: {} steps of {} on the device\n", scenario->run.steps, scenario->name);
  auto measured = device::RunOnDevice(*scenario, *options, Progress(scenario->run.steps));
  if (!measured.ok()) return ReportError(cmd, measured.status());

  // Calibrate on a fresh backend of the same shape (the run's has been torn down).
  device::DeviceConfig config;
  config.mode = options->mode;
  config.first_device = options->first_device;
  config.num_layers = 1;
  config.staging_buffers = 1;
  const Topology topology = measured->scenario.topology();
  auto probe = device::DeviceBackend::Create(topology, config);
  if (!probe.ok()) return ReportError(cmd, probe.status());
  auto bw = device::MeasureBandwidths(**probe, topology);
  probe->reset();
  if (!bw.ok()) return ReportError(cmd, bw.status());

  // The simulator with this machine's numbers. Emulated steps carry no all-to-all traffic, so
  // the simulated steps carry next to none (hidden 1); compute is scaled like the emulation.
  Scenario sim = measured->scenario;
  const double peer_gbps = bw->peer_bps / 1e9, latency_us = bw->round_latency_s * 1e6;
  sim.cluster.nvlink = {peer_gbps, latency_us, 1.0};
  sim.cluster.nic = {peer_gbps, latency_us, 1.0};
  sim.cluster.pcie_gbps = 1e6;
  sim.cluster.nvswitch_gbps = 0;
  sim.cluster.fabric_oversubscription = 1;
  sim.cluster.hbm_gbps = bw->local_copy_bps / 1e9;
  sim.model.hidden = 1;
  sim.compute.attention_us *= options->step_scale;
  sim.compute.layer_fixed_us *= options->step_scale;
  sim.compute.per_token_us *= options->step_scale;
  auto simulated = sim::RunSimulation(sim);
  if (!simulated.ok()) return ReportError(cmd, simulated.status());

  const Validation v = CompareTimings(*measured, *simulated);
  nlohmann::ordered_json json = ValidationJson(v);
  json["bandwidths"] = {{"plain_copy_gbps", bw->plain_copy_bps / 1e9},
                        {"local_copy_gbps", bw->local_copy_bps / 1e9},
                        {"peer_gbps", peer_gbps},
                        {"round_latency_us", latency_us}};
  json["mode"] = device::DeviceModeName(options->mode);
  json["expert_bytes"] = measured->scenario.model.expert_bytes;
  const std::string table = ValidationTable(v);
  const std::string dir = a.out.empty() ? "runs/" + scenario->name + "-validate" : a.out;
  const Status written =
      WriteFolderAtomically(dir, "validation", "validation.json", [&](const std::string& p) {
        EPLB_RETURN_IF_ERROR(WriteRunFolder(p + "/measured", *measured));
        EPLB_RETURN_IF_ERROR(WriteRunFolder(p + "/simulated", *simulated));
        EPLB_RETURN_IF_ERROR(WriteTextFile(p + "/validation.txt", table));
        return WriteTextFile(p + "/validation.json", json.dump(2) + "\n");
      });
  if (!written.ok()) return ReportError(cmd, written);
  fmt::print(
      "measured: plain copy {:.1f} GB/s, local copy {:.1f} GB/s, peer {:.1f} GB/s per rank, "
      "round latency {:.1f} us ({} mode, {} bytes per expert)\n",
      bw->plain_copy_bps / 1e9, bw->local_copy_bps / 1e9, peer_gbps, latency_us,
      device::DeviceModeName(options->mode), measured->scenario.model.expert_bytes);
  fmt::print("{}", table);
  fmt::print("validation folder {}\n", dir);
  return kExitOk;
#elif defined(EPLB_HAVE_DEVICE)
  return ReportError(cmd, SimulatorMissing());
#else
  return ReportError(cmd, DeviceMissing());
#endif
}

}  // namespace

void AddDeviceRunCommand(CLI::App& app, Action& action) {
  auto args = std::make_shared<DeviceArgs>();
  CLI::App* sub = app.add_subcommand(
      "device-run", "Run a scenario's rearrangements on real GPUs (CUDA/NCCL), write a run folder");
  AddDeviceOptions(sub, *args, /*allow_mpi=*/true);
  sub->add_option("--out", args->out, "Run folder to write (default: runs/<scenario>-device)");
  sub->callback([&action, args] { action = [args] { return RunDeviceRun(*args); }; });
}

void AddValidateCommand(CLI::App& app, Action& action) {
  auto args = std::make_shared<DeviceArgs>();
  CLI::App* sub = app.add_subcommand(
      "validate",
      "Compare the simulator's transfer times with a short run of the same scenario on GPUs");
  AddDeviceOptions(sub, *args, /*allow_mpi=*/false);  // validate runs in one process
  sub->add_option("--steps", args->steps,
                  "Steps of the device run (default: through the first rearrangement)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--out", args->out,
                  "Folder to write: measured/, simulated/, validation.json, validation.txt "
                  "(default: runs/<scenario>-validate)");
  sub->callback([&action, args] { action = [args] { return RunValidate(*args); }; });
}

}  // namespace eplb::cli
