#include "device_run.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "cuda_check.h"
#include "eplb/engine/eplb_loop.h"
#include "eplb/engine/run_loop.h"
#include "eplb/engine/workload.h"
#include "mpi_session.h"
#include "nvtx.h"

namespace eplb::device {
namespace {

constexpr int64_t kGranule = 4096;

// Emulated steps; a failed weights check after a commit ends the run at the next step.
class DeviceStepRunner final : public StepRunner {
 public:
  DeviceStepRunner(DeviceBackend& backend, double scale) : backend_(backend), scale_(scale) {}
  Status RunStep(const StepCost& cost, bool /*contended: the GPU shares for real*/) override {
    // Every process stops at the same step when a check failed in any of them.
    if (!backend_.AllOk(pending_.ok())) {
      return pending_.ok() ? Status::Internal("a weights check failed in another process")
                           : pending_;
    }
    return backend_.RunEmulatedStep(cost.total_s() * scale_);
  }
  void Fail(const Status& status) {
    if (pending_.ok()) pending_ = status;
  }
  const Status& pending() const { return pending_; }

 private:
  DeviceBackend& backend_;
  double scale_;
  Status pending_;
};

int StagingBuffers(const Scenario& s) {
  return s.eplb.use_async ? s.eplb.staging_layers : s.model.layers;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

int64_t FitExpertBytes(int64_t wanted, int64_t slot_buffers, size_t free_bytes, double fraction) {
  if (slot_buffers <= 0) return 0;
  const double budget = static_cast<double>(free_bytes) * fraction;
  int64_t fit = static_cast<int64_t>(budget / static_cast<double>(slot_buffers));
  fit = std::min(fit, std::max<int64_t>(wanted, kGranule));
  fit -= fit % kGranule;
  return fit >= kGranule ? fit : 0;
}

int64_t SlotBuffersPerGpu(const Scenario& scenario, DeviceMode mode) {
  const int64_t ranks_per_gpu = mode == DeviceMode::kVirtual ? scenario.num_gpus() : 1;
  const int64_t per_rank = scenario.num_slots() / scenario.num_gpus();
  return (scenario.model.layers + StagingBuffers(scenario)) * per_rank * ranks_per_gpu;
}

Status CheckDeviceTransport(const Scenario& scenario) {
  // The GPU backend moves weights its own way (NCCL, or CUDA peer copies); the other transports
  // are what-ifs that the simulator prices (migrate/transport.h).
  if (scenario.migration.transport == Transport::kNccl) return Status::Ok();
  return Status::InvalidArgument(fmt::format(
      "{}: migration.transport is '{}', but device-run moves the weights over NCCL or CUDA peer "
      "copies; set it to 'nccl' (the simulator prices the other transports)",
      scenario.source, TransportName(scenario.migration.transport)));
}

Result<Scenario> DeviceScenario(const Scenario& scenario, const DeviceRunOptions& options) {
  EPLB_RETURN_IF_ERROR(CheckDeviceTransport(scenario));
  Scenario s = scenario;
  if (options.expert_bytes > 0) {
    if (options.expert_bytes % 8 != 0) {
      return Status::InvalidArgument(fmt::format(
          "--expert-bytes {}: the device backend moves 8-byte words; use a multiple of 8",
          options.expert_bytes));
    }
    s.model.expert_bytes = options.expert_bytes;
    return s;
  }
  if (options.memory_fraction <= 0 || options.memory_fraction > 1) {
    return Status::InvalidArgument(
        fmt::format("--memory-fraction {}: valid values are in (0, 1]", options.memory_fraction));
  }
  const int gpu = options.first_device + (options.mode == DeviceMode::kMpi ? mpi::LocalRank() : 0);
  auto free = FreeMemory(gpu);
  if (!free.ok()) return free.status();
  const int64_t buffers = SlotBuffersPerGpu(s, options.mode);
  int64_t fit = FitExpertBytes(s.model.expert_bytes, buffers, *free, options.memory_fraction);
  // Every process must move experts of one size: the smallest any GPU can hold.
  if (options.mode == DeviceMode::kMpi) {
    const int64_t cap = std::numeric_limits<int>::max() / kGranule * kGranule;
    fit = mpi::AllMin(static_cast<int>(std::min(fit, cap)));
  }
  if (fit == 0) {
    return Status::InvalidArgument(fmt::format(
        "{} expert slot buffers per GPU do not fit in {:.0f}% of GPU {}'s {:.2f} GiB free, even at "
        "4 KiB per expert: run fewer ranks, layers or slots",
        buffers, options.memory_fraction * 100, gpu, static_cast<double>(*free) / (1ULL << 30)));
  }
  s.model.expert_bytes = fit;
  return s;
}

Result<RunResult> RunOnDevice(const Scenario& requested, const DeviceRunOptions& options,
                              std::function<void(const StepRecord&)> on_step) {
  const auto wall_start = std::chrono::steady_clock::now();
  auto scenario = DeviceScenario(requested, options);
  if (!scenario.ok()) return scenario.status();
  EPLB_RETURN_IF_ERROR(CheckRunFitsInMemory(*scenario));
  auto workload = MakeWorkload(*scenario);
  if (!workload.ok()) return workload.status();
  const Topology topology = scenario->topology();
  DeviceConfig config;
  config.mode = options.mode;
  config.first_device = options.first_device;
  config.num_layers = scenario->model.layers;
  config.staging_buffers = StagingBuffers(*scenario);
  auto backend = DeviceBackend::Create(topology, config);
  if (!backend.ok()) return backend.status();
  DeviceBackend& device = **backend;

  DeviceStepRunner runner(device, options.step_scale);
  RunHooks hooks;
  hooks.started = wall_start;
  // Marked when the loop reports the step at whose boundary the rearrangement started.
  size_t rearrangements = 0;
  hooks.before = [&](EplbLoop& loop) {
    EPLB_RETURN_IF_ERROR(device.Fill(loop.placement()));
    loop.rearranger().on_layer_committed.Connect([](const LayerEvent&) { NvtxMark("commit"); });
    if (options.check_commits) {
      loop.rearranger().on_layer_committed.Connect([&](const LayerEvent& e) {
        const Status s = device.Verify(loop.rearranger().placement(), e.layer);
        if (!s.ok())
          runner.Fail(s.WithContext(fmt::format("after the commit of layer {}: ", e.layer)));
      });
    }
    loop.on_step = [&, report = std::move(on_step)](const StepRecord& step) {
      if (loop.rearrangements().size() > rearrangements) {
        rearrangements = loop.rearrangements().size();
        NvtxMark("rearrangement");
      }
      if (report) report(step);
    };
    return Status::Ok();
  };
  hooks.after = [&](EplbLoop& loop) {
    EPLB_RETURN_IF_ERROR(runner.pending());
    // The whole placement, once more, at the end, on every process's ranks.
    const Status final_check = device.Verify(loop.placement());
    if (!device.AllOk(final_check.ok())) {
      return final_check.ok()
                 ? Status::Internal("the final weights check failed in another process")
                 : final_check.WithContext("at the end of the run: ");
    }
    return Status::Ok();
  };
  EPLB_ASSIGN_OR_RETURN(RunResult result,
                        RunLoop(*scenario, **workload, device, runner,
                                fmt::format("device ({} ranks on {})", DeviceModeName(options.mode),
                                            DescribeDevice(device.device_of(mpi::Rank()))),
                                hooks));
  // Under MPI each process measured its own receives and its own ranks' staging; rank 0 writes
  // them all (every process has the same rearrangements: the loop runs in lockstep).
  result.transfers = mpi::GatherTransfers(result.transfers);
  for (RearrangementRecord& r : result.rearrangements) mpi::AllMax(r.staging_peak_bytes);
  std::sort(result.transfers.begin(), result.transfers.end(),
            [](const TransferRecord& a, const TransferRecord& b) { return a.start_s < b.start_s; });
  return result;
}

Result<double> TimePlainCopy(int device, size_t bytes, int repetitions) {
  EPLB_CUDA(cudaSetDevice(device), "plain copy: ");
  void *a = nullptr, *b = nullptr;
  cudaStream_t stream = nullptr;
  cudaError_t e = cudaMalloc(&a, bytes);
  if (e == cudaSuccess) e = cudaMalloc(&b, bytes);
  if (e == cudaSuccess) e = cudaStreamCreate(&stream);
  double best = 1e30;
  for (int i = 0; e == cudaSuccess && i <= repetitions; ++i) {
    const auto start = std::chrono::steady_clock::now();
    e = cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    if (i > 0) best = std::min(best, Seconds(start));
  }
  if (stream) cudaStreamDestroy(stream);
  if (b) cudaFree(b);
  if (a) cudaFree(a);
  if (e != cudaSuccess) {
    return CudaStatus(e, "cudaMalloc / cudaMemcpyAsync / cudaStreamSynchronize",
                      fmt::format("plain copy of {} bytes: ", bytes));
  }
  return best;
}

Result<double> TimeConcurrentCopies(int device, size_t bytes_per_copy,
                                    std::span<const int> copies_per_stream, int repetitions) {
  EPLB_CUDA(cudaSetDevice(device), "concurrent copies: ");
  int copies = 0;
  for (int n : copies_per_stream) copies += n;
  std::vector<cudaStream_t> streams(copies_per_stream.size(), nullptr);
  void *a = nullptr, *b = nullptr;
  // Each copy has a source and a destination of its own, as each transfer reads its own live
  // slot into its own staged one: one shared source (44 MB) would be read from the L2 cache.
  const size_t bytes = bytes_per_copy * static_cast<size_t>(copies);
  cudaError_t e = cudaMalloc(&a, bytes);
  if (e == cudaSuccess) e = cudaMalloc(&b, bytes);
  for (size_t i = 0; e == cudaSuccess && i < streams.size(); ++i) {
    e = cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking);
  }
  double best = 1e30;
  for (int rep = 0; e == cudaSuccess && rep <= repetitions; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    size_t next = 0;
    for (size_t s = 0; e == cudaSuccess && s < streams.size(); ++s) {
      for (int i = 0; e == cudaSuccess && i < copies_per_stream[s]; ++i, ++next) {
        e = cudaMemcpyAsync(static_cast<char*>(b) + next * bytes_per_copy,
                            static_cast<const char*>(a) + next * bytes_per_copy, bytes_per_copy,
                            cudaMemcpyDeviceToDevice, streams[s]);
      }
    }
    for (size_t s = 0; e == cudaSuccess && s < streams.size(); ++s) {
      e = cudaStreamSynchronize(streams[s]);
    }
    if (rep > 0) best = std::min(best, Seconds(start));
  }
  for (cudaStream_t s : streams) {
    if (s) cudaStreamDestroy(s);
  }
  if (b) cudaFree(b);
  if (a) cudaFree(a);
  if (e != cudaSuccess) {
    return CudaStatus(e,
                      "cudaMalloc / cudaStreamCreateWithFlags / cudaMemcpyAsync / "
                      "cudaStreamSynchronize",
                      fmt::format("{} concurrent copies of {} bytes: ", copies, bytes_per_copy));
  }
  return best;
}

namespace {

// Best seconds of one round in which every rank receives `per_rank` experts from its ring
// neighbour at once (slots 0..per_rank-1 of each), host-timed across every local rank's round.
Result<double> TimeRingRound(DeviceBackend& backend, const Topology& topology, int per_rank,
                             int repetitions) {
  const int ranks = topology.num_ranks(), per_gpu = topology.slots_per_gpu();
  std::vector<Transfer> transfers;
  Round round;
  round.link = LinkClass::kNvlink;
  for (int r = 0; r < ranks; ++r) {
    const int src = (r + 1) % ranks;
    Flow flow{src, r, 0, {}};
    for (int i = 0; i < per_rank; ++i) {
      flow.transfers.push_back(static_cast<int32_t>(transfers.size()));
      Transfer t;
      t.src_rank = src;
      t.src_slot = src * per_gpu + i;
      t.dst_rank = r;
      t.dst_slot = r * per_gpu + i;
      t.bytes = topology.expert_bytes();
      transfers.push_back(t);
    }
    flow.bytes = topology.expert_bytes() * per_rank;
    round.flows.push_back(flow);
  }
  double best = 1e30;
  for (int rep = 0; rep <= repetitions; ++rep) {
    std::vector<Status> status(static_cast<size_t>(ranks));
    std::vector<std::thread> threads;
    // Every rank's thread is started and on its GPU before the clock starts, as the
    // rearranger's workers are before their rounds.
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    for (int r = 0; r < ranks; ++r) {
      if (!backend.IsLocal(r)) continue;
      threads.emplace_back([&, r] {
        cudaSetDevice(backend.device_of(r));
        ++ready;
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        status[r] = backend.ExecuteRound({r, 0, 0}, round, transfers);
      });
    }
    while (ready.load() < static_cast<int>(threads.size())) std::this_thread::yield();
    const double start = backend.Now();
    go.store(true, std::memory_order_release);
    for (auto& t : threads) t.join();
    for (const Status& s : status) EPLB_RETURN_IF_ERROR(s);
    if (rep > 0) best = std::min(best, backend.Now() - start);
  }
  return best;
}

}  // namespace

Result<Bandwidths> MeasureBandwidths(DeviceBackend& backend, const Topology& topology,
                                     int repetitions) {
  Bandwidths out;
  int me = 0;  // the first rank this process runs
  while (!backend.IsLocal(me)) ++me;
  const int device = backend.device_of(me);
  const auto expert = static_cast<size_t>(topology.expert_bytes());
  const int per_gpu = topology.slots_per_gpu();
  const int ranks = topology.num_ranks();
  EPLB_CUDA(cudaSetDevice(device), "");
  {
    // Plain copy on buffers of its own.
    const size_t bytes = expert * static_cast<size_t>(per_gpu) * 8;
    auto plain = TimePlainCopy(device, bytes, repetitions);
    if (!plain.ok()) return plain.status();
    out.plain_copy_bps = static_cast<double>(bytes) / *plain;
  }
  // Local copies: one rank copies each of its live slots into its staging buffer.
  {
    std::vector<LocalCopy> copies;
    for (int i = me * per_gpu; i < (me + 1) * per_gpu; ++i) {
      copies.push_back(LocalCopy{me, 0, i, i, false});
    }
    double best = 1e30;
    for (int rep = 0; rep <= repetitions; ++rep) {
      const double start = backend.Now();
      EPLB_RETURN_IF_ERROR(backend.CopyLocal({me, 0, 0}, copies));
      EPLB_RETURN_IF_ERROR(backend.Synchronize());
      if (rep > 0) best = std::min(best, backend.Now() - start);
    }
    out.local_copy_bps = static_cast<double>(expert) * per_gpu / best;
  }
  // Peer: rounds in which every rank receives experts from its ring neighbour, one expert and
  // all its slots' worth: the line through the two times is the round's start-up (intercept)
  // and the bandwidth its bytes stream at (slope).
  if (ranks > 1) {
    auto full = TimeRingRound(backend, topology, per_gpu, repetitions);
    if (!full.ok()) return full.status();
    out.peer_bps = static_cast<double>(expert) * per_gpu / *full;
    out.peer_stream_bps = out.peer_bps;
    if (per_gpu > 1) {
      auto one = TimeRingRound(backend, topology, 1, repetitions);
      if (!one.ok()) return one.status();
      // A difference within the times' noise gives no slope worth the name.
      if (*full - *one > 0.1 * *full) {
        const double slope = (*full - *one) / (per_gpu - 1);
        // No faster than the GPU's own copy.
        out.peer_stream_bps = std::min(static_cast<double>(expert) / slope, out.plain_copy_bps);
        out.round_latency_s =
            std::max(0.0, *one - static_cast<double>(expert) / out.peer_stream_bps);
      }
    }
  } else {
    out.peer_bps = out.peer_stream_bps = out.local_copy_bps;
  }
  return out;
}

}  // namespace eplb::device
