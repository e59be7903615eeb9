// Runs a scenario on real GPUs: the EPLB loop with DeviceBackend, emulated inference steps
// whose durations follow the step model, a weights check after every commit, and the run
// folder's records measured on the device. Also the bandwidth probes `eplb validate` and the
// device benchmark calibrate with.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "device_backend.h"
#include "eplb/engine/run_result.h"
#include "eplb/engine/scenario.h"

namespace eplb::device {

struct DeviceRunOptions {
  DeviceMode mode = DeviceMode::kVirtual;
  int first_device = 0;
  // Bytes per expert on the device; 0: the scenario's, lowered to fit `memory_fraction` of the
  // GPU's free memory.
  int64_t expert_bytes = 0;
  double memory_fraction = 0.8;
  // An emulated step lasts the step model's time × step_scale.
  double step_scale = 1.0;
  // Check every committed layer's weights on the GPU (a checksum kernel).
  bool check_commits = true;
};

// The largest multiple of 4 KiB (at most `wanted`, at least 4 KiB) such that `slot_buffers`
// experts fit in `fraction` × `free_bytes`; 0 when not even 4 KiB experts fit.
int64_t FitExpertBytes(int64_t wanted, int64_t slot_buffers, size_t free_bytes, double fraction);

// Expert slot buffers one GPU holds for `scenario`: (layers + staging) × slots per GPU × ranks
// sharing the GPU.
int64_t SlotBuffersPerGpu(const Scenario& scenario, DeviceMode mode);

// OK when the device can move the weights as `scenario` says: over NCCL or CUDA peer copies, its
// only way (migration.transport nccl); the other transports are the simulator's what-ifs.
Status CheckDeviceTransport(const Scenario& scenario);

// The scenario as it will run on the device: expert bytes chosen per `options`. Fails when the
// GPU cannot hold it or moves weights another way (CheckDeviceTransport).
Result<Scenario> DeviceScenario(const Scenario& scenario, const DeviceRunOptions& options);

// Runs `scenario` (as DeviceScenario gives it) and collects the run folder's records; the run's
// scenario is the device scenario. `on_step` is called after every step.
Result<RunResult> RunOnDevice(const Scenario& scenario, const DeviceRunOptions& options,
                              std::function<void(const StepRecord&)> on_step = {});

// Seconds of one cudaMemcpyAsync of `bytes` device to device on `device`, issue to completion,
// best of `repetitions` after a warm-up, on buffers of its own.
Result<double> TimePlainCopy(int device, size_t bytes, int repetitions);

// Seconds of copies of `bytes_per_copy` device to device on `device`, copies_per_stream[s] of
// them on stream s, all issued from this thread before the first wait, best of `repetitions`
// after a warm-up: what a migration's copies reach with nothing between them (no rounds, no
// host waits), the reference for the rearranger's.
Result<double> TimeConcurrentCopies(int device, size_t bytes_per_copy,
                                    std::span<const int> copies_per_stream, int repetitions);

// Effective bandwidths on this machine, bytes per second, and the start-up time of one round,
// each the best of `repetitions` after a warm-up, host-timed:
//   plain_copy_bps   one large cudaMemcpyAsync device to device (all slot buffers of rank 0 at
//                    once): the GPU's copy bandwidth, the reference for the benchmark
//   local_copy_bps   copies of one expert within one rank, back to back on one stream
//   peer_bps         per rank, a round in which every rank receives all its slots' experts from
//                    its ring neighbour at once (virtual ranks: copies between ranks' buffers;
//                    NCCL: send/recv), its bytes over its whole time
//   round_latency_s  and peer_stream_bps: the line through that round's time and the time of
//                    the same round with one expert per rank, t(n) = round_latency_s + n ×
//                    expert bytes / peer_stream_bps: the start-up every round pays (issue,
//                    NCCL's kernel launch and peer handshake, the host's wait) and the rate its
//                    bytes then stream at, which is what the simulator's links take as latency
//                    and bandwidth (never above plain_copy_bps). With one slot per GPU, or
//                    when the two times differ by less than a tenth (noise, not bytes),
//                    peer_stream_bps = peer_bps and round_latency_s = 0. Each round is timed
//                    from when every rank's thread waits at its start; the start-up includes
//                    the host's wait for the last rank's stream, which the transfer records
//                    (GPU-timed) leave out.
struct Bandwidths {
  double plain_copy_bps = 0;
  double local_copy_bps = 0;
  double peer_bps = 0;
  double peer_stream_bps = 0;
  double round_latency_s = 0;
};
Result<Bandwidths> MeasureBandwidths(DeviceBackend& backend, const Topology& topology,
                                     int repetitions = 5);

}  // namespace eplb::device
