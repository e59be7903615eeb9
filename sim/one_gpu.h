// The set-up `eplb device-run --virtual` and `eplb validate` really run: every rank of the
// scenario a virtual one on the same GPU, so that the simulator predicts that run and not one
// on a cluster of separate GPUs (docs/gpu_validation.md).
//
// The model (each number a measurement of the device run's own, never fitted to the layer times
// it predicts):
//   copies      a round's receive from rank a to rank b crosses a's and b's copy stream (at most
//               stream_gbps each) and one link every copy on the GPU shares (copy_gbps: the
//               GPU's device-to-device rate, its HBM and copy engines); local copies within a
//               rank take bytes / local_copy_gbps
//   rounds      every round pays round_us before its bytes move (the launch and the host's wait
//               for the round before it): the links' start-up latency
//   start       a rearrangement's Start costs start_us on the caller (planning, a stream sync
//               per rank, the anchor events, waking the workers)
//   commit      each layer's commit costs commit_us on the caller, all ranks together
//   steps       with step_read_gbps > 0, every emulated step also reads every live weight of
//               every rank from HBM (layers × slots × expert bytes) over the shared copy link,
//               at most at that rate: a step lasts at least that long, and a migration beside it
//               shares the link (the 1.13× slowdown the device shows, on both sides)
//
// Where each number comes from on the GPU: copy_gbps, stream_gbps, local_copy_gbps and round_us
// from MeasureBandwidths (device/device_run.h: plain copy, peer stream rate, local copy, round
// latency); start_us and commit_us from bench_device's BM_LayerMigration (start_ms, commit_ms
// less its local copies); step_read_gbps from BM_StepSlowdown (idle_read_GBps).
// tools/bench/one_gpu_calibration.py writes the file from bench_device's JSON.
//
// Thread-safety: SimulateOnOneGpu runs a SimGrid engine: one call per process.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "eplb/base/status.h"
#include "eplb/engine/eplb_loop.h"
#include "eplb/engine/run_result.h"
#include "eplb/engine/scenario.h"
#include "eplb/migrate/backend.h"

namespace eplb::sim {

struct OneGpuModel {
  double copy_gbps = 0;        // 10^9 bytes/s that all copies on the GPU share
  double stream_gbps = 0;      // the most one rank's receives reach
  double local_copy_gbps = 0;  // copies within one rank
  double round_us = 0;         // each round's start-up
  double start_us = 0;         // each rearrangement's start, on the caller
  double commit_us = 0;        // each layer's commit, all ranks together, on the caller
  double step_read_gbps = 0;   // an emulated step's HBM reads (0: steps read nothing)
};

// The keys of a calibration file, in order: copy_gbps, stream_gbps, local_copy_gbps, round_us,
// start_us, commit_us, step_read_gbps.
const std::vector<std::string>& OneGpuModelKeys();

// OK when the rates are positive and the costs finite and not negative; else InvalidArgument
// naming `where`, the field, its value and what is valid.
Status CheckOneGpuModel(const OneGpuModel& model, const std::string& where);

// `base` with each key `json` (an object) gives replaced. Unknown keys, values that are not
// numbers and values CheckOneGpuModel refuses are errors naming `file` and the key.
Result<OneGpuModel> ParseOneGpuModel(const nlohmann::json& json, const std::string& file,
                                     OneGpuModel base = {});
Result<OneGpuModel> LoadOneGpuModel(const std::string& path, OneGpuModel base = {});
nlohmann::ordered_json OneGpuModelJson(const OneGpuModel& model);

// `scenario` with its cluster's links set to the model's: NVLink and NIC at stream_gbps with
// round_us of start-up and no loss, PCIe and the fabric out of the way, HBM (local copies) at
// local_copy_gbps. Its topology, hence every plan and schedule, stays the scenario's.
Scenario OnOneGpu(Scenario scenario, const OneGpuModel& model);

// RunSimulation (simulation.h) of OnOneGpu(scenario, model) on the one-GPU platform
// (platform.h) with the model's start, commit and step costs. Defined in simulation.cpp, which
// builds every simulation the same way.
Result<RunResult> SimulateOnOneGpu(const Scenario& scenario, const OneGpuModel& model,
                                   std::function<void(const StepRecord&)> on_step = {});

// For simulation.cpp: the model's backend and step runner around the simulator's. The backend
// adds start_us on the caller at each rearrangement's start and commit_us per layer committed;
// the steps read every rank's live weights over the shared copy link at step_read_gbps.
class Platform;
class SimBackend;
class SimStepRunner;
std::unique_ptr<RearrangementBackend> OneGpuBackend(SimBackend& inner, const OneGpuModel& model,
                                                    int ranks);
std::unique_ptr<StepRunner> OneGpuSteps(SimStepRunner& inner, const Platform& platform,
                                        const Scenario& scenario, const OneGpuModel& model);

}  // namespace eplb::sim
