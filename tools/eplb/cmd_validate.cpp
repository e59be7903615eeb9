// eplb validate: a short device run, the bandwidths it measured, the set-up that run really is
// simulated with them (on virtual ranks one GPU whose copies every rank shares: sim/one_gpu.h),
// and the simulated against the measured times (usecases/validation.h, docs/gpu_validation.md).
#include <algorithm>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"
#include "device_args.h"
#include "device_run.h"
#include "eplb/base/file_io.h"
#include "eplb/io/output_folders.h"
#include "eplb/io/run_folder.h"
#include "eplb/usecases/validation.h"
#include "one_gpu.h"
#include "simulation.h"

namespace eplb::cli {
namespace {

// `calibration`: a file of one-GPU model numbers (sim/one_gpu.h) that replace the probes' and
// give what they cannot measure (start, commit, step reads); empty: the probes' alone.
Status RunValidate(const DeviceArgs& a, const std::string& calibration) {
  auto scenario = LoadDeviceScenario(a);
  if (!scenario.ok()) return scenario.status();
  if (!calibration.empty()) {
    // Refused before the device run, not after it: every rate of the base is a stand-in here.
    sim::OneGpuModel stand_in{1, 1, 1, 0, 0, 0, 0};
    if (auto m = sim::LoadOneGpuModel(calibration, stand_in); !m.ok()) return m.status();
  }
  // Short: up to the first rearrangement's last commit with room to spare, unless --steps.
  const EplbSpec& e = scenario->eplb;
  const int first = e.step_interval / 4;
  scenario->run.steps =
      a.steps > 0
          ? a.steps
          : std::min(scenario->run.steps,
                     first + 2 * scenario->model.layers / std::max(1, e.layers_per_step) + 16);
  auto options = DeviceOptions(a, *scenario);
  if (!options.ok()) return options.status();
  const std::string dir = a.out.empty() ? "runs/" + scenario->name + "-validate" : a.out;
  if (Status s = CheckOutputFolder(dir, kValidationFolderKind); !s.ok()) return s;
  fmt::print("validate: {} steps of {} on the device\n", scenario->run.steps, scenario->name);
  auto measured = device::RunOnDevice(*scenario, *options, Progress("eplb validate", *scenario));
  if (!measured.ok()) return measured.status();

  // Calibrate on a fresh backend of the same shape (the run's has been torn down).
  device::DeviceConfig config;
  config.mode = options->mode;
  config.first_device = options->first_device;
  config.num_layers = 1;
  config.staging_buffers = 1;
  const Topology topology = measured->scenario.topology();
  auto probe = device::DeviceBackend::Create(topology, config);
  if (!probe.ok()) return probe.status();
  auto bw = device::MeasureBandwidths(**probe, topology);
  probe->reset();
  if (!bw.ok()) return bw.status();

  // The simulator with this machine's numbers. Emulated steps carry no all-to-all traffic, so
  // the simulated steps carry next to none (hidden 1); compute is scaled like the emulation.
  Scenario sim = measured->scenario;
  const double peer_gbps = bw->peer_bps / 1e9, stream_gbps = bw->peer_stream_bps / 1e9,
               latency_us = bw->round_latency_s * 1e6;
  sim.cluster.nvlink = {stream_gbps, latency_us, 1.0};
  sim.cluster.nic = {stream_gbps, latency_us, 1.0};
  sim.cluster.pcie_gbps = 1e6;
  sim.cluster.nvswitch_gbps = 0;
  sim.cluster.fabric_oversubscription = 1;
  sim.cluster.hbm_gbps = bw->local_copy_bps / 1e9;
  sim.model.hidden = 1;
  sim.compute.attention_us *= options->step_scale;
  sim.compute.layer_fixed_us *= options->step_scale;
  sim.compute.per_token_us *= options->step_scale;
  // On virtual ranks the run is one GPU: its copies share the GPU's copy rate and pay the host
  // protocol's costs; with NCCL (one rank per GPU) the cluster model with the links above.
  sim::OneGpuModel model;
  model.copy_gbps = bw->plain_copy_bps / 1e9;
  model.stream_gbps = stream_gbps;
  model.local_copy_gbps = bw->local_copy_bps / 1e9;
  model.round_us = latency_us;
  if (!calibration.empty()) {
    auto m = sim::LoadOneGpuModel(calibration, model);
    if (!m.ok()) return m.status();
    model = *m;
  }
  const bool one_gpu = options->mode == device::DeviceMode::kVirtual;
  auto simulated = one_gpu ? sim::SimulateOnOneGpu(sim, model) : sim::RunSimulation(sim);
  if (!simulated.ok()) return simulated.status();

  const Validation v = CompareTimings(*measured, *simulated);
  nlohmann::ordered_json json = ValidationJson(v);
  json["bandwidths"] = {{"plain_copy_gbps", bw->plain_copy_bps / 1e9},
                        {"local_copy_gbps", bw->local_copy_bps / 1e9},
                        {"peer_gbps", peer_gbps},
                        {"peer_stream_gbps", stream_gbps},
                        {"round_latency_us", latency_us}};
  json["mode"] = device::DeviceModeName(options->mode);
  json["simulated_as"] = one_gpu ? "one GPU" : "cluster";
  if (one_gpu) json["one_gpu_model"] = sim::OneGpuModelJson(model);
  json["calibration"] = calibration;
  json["expert_bytes"] = measured->scenario.model.expert_bytes;
  const std::string table = ValidationTable(v);
  Status written = WriteValidationFolder(dir, *measured, *simulated, table, json);
  if (!written.ok()) return written;
  fmt::print(
      "measured: plain copy {:.1f} GB/s, local copy {:.1f} GB/s, peer {:.1f} GB/s per rank "
      "({:.1f} GB/s streaming after a round latency of {:.1f} us; {} mode, {} bytes per "
      "expert)\n",
      bw->plain_copy_bps / 1e9, bw->local_copy_bps / 1e9, peer_gbps, stream_gbps, latency_us,
      device::DeviceModeName(options->mode), measured->scenario.model.expert_bytes);
  if (one_gpu) {
    fmt::print(
        "simulated as one GPU: copies share {:.1f} GB/s, {:.1f} GB/s a rank, {:.1f} us a "
        "round, {:.1f} us a start, {:.1f} us a commit, steps read at {:.1f} GB/s{}\n",
        model.copy_gbps, model.stream_gbps, model.round_us, model.start_us, model.commit_us,
        model.step_read_gbps,
        calibration.empty() ? " (no --calibration: start, commit and step reads unpriced)"
                            : " (--calibration " + calibration + ")");
  }
  fmt::print("{}", table);
  fmt::print("validation folder {}\n", dir);
  return Status::Ok();
}

}  // namespace

void AddValidateCommand(CommandLine& line) {
  auto args = std::make_shared<DeviceArgs>();
  auto published = std::make_shared<PublishedArgs>();
  auto calibration = std::make_shared<std::string>();
  Command& sub = line.Add(kValidateName, kValidateAbout);
  AddPublishedOptions(sub, *published);
  AddDeviceOptions(sub, *args, /*allow_mpi=*/false);  // validate runs in one process
  sub.Option("--steps", &args->steps,
             "Steps of the device run (default: through the first rearrangement)")
      .Check(Positive());
  sub.Option("--out", &args->out,
             "Folder to write: measured/, simulated/, validation.json, validation.txt "
             "(default: runs/<scenario>-validate)");
  sub.Option("--calibration", calibration.get(),
             "JSON of one-GPU model numbers (sim/one_gpu.h; tools/bench/one_gpu_calibration.py "
             "writes it from bench_device's output): start, commit, step reads, copy rate");
  sub.SetAction([args, published, calibration] {
    published->out = args->out;
    return published->published ? RunPublished(*published) : RunValidate(*args, *calibration);
  });
}

}  // namespace eplb::cli
