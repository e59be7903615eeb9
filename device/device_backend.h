// The rearranger's backend on real GPUs: every rank's expert weights in device memory, transfers
// by NCCL (one rank per GPU) or by device-to-device copies between ranks that share one GPU
// (virtual ranks), and a foreground that emulates inference steps with kernels on each rank's
// main stream, so that migrations and compute really overlap.
//
// Streams and events, per rank:
//   main       the foreground: emulated steps, commits, checks
//   lane[k]    the worker of link lane k: its rounds (receives, and sends under NCCL)
//   local      local copies into the staging buffer
//   staged[b]  recorded on `local` after a layer's local copies into staging buffer b; a commit
//              makes `main` wait on it, so the foreground never reads a slot before its bytes
//              have landed
//   consumed[b] recorded on `main` when a commit swaps buffer b into the live weights; a worker
//              makes its stream wait on it before writing into b, so no transfer overwrites
//              weights a step launched before the commit may still read
// A round returns when its stream has drained, so the rearranger's "rank staged" is a fact
// on the device.
//
// Modes: kVirtual puts every rank on one GPU; a receive is cudaMemcpyAsync from the sender's
// live weights (which stay intact until every rank has staged the layer), a worker per lane.
// kNccl puts rank r on GPU first_device + r, in one process; kMpi runs one rank per process
// under mpirun (rank = MPI rank, GPU = first_device + the process's number on its node, the
// NCCL id broadcast with MPI): the backend executes its own rank only, the rearranger's gate is
// agreed with MPI_Allreduce, and every emulated step ends with a barrier. Under NCCL each rank
// has one non-blocking communicator (nccl_comm.h) and one worker, which runs both lanes' rounds
// merged (MergesLanes), each round one ncclGroupStart/End of sends and receives, polled to
// completion; a cancellation makes each worker abort its own communicator, and the aborted
// communicators are replaced when the next rearrangement starts.
//
// Host threads wait with cudaDeviceScheduleBlockingSync (set before the GPU's context exists),
// so waiting workers do not spin and distort what the foreground measures.
//
// Transfer times (on_transfer) are the GPU's: events on the lane's stream around the round's
// copies or NCCL group, put on the run's clock by an anchor event that BeginRearrangement
// records and spins on (error: about a µs). A round's span starts when its stream may write the
// staging buffer and the host has begun issuing it, and ends when its last byte has landed:
// it leaves out the polling of the round's wait (kPoll, 20 µs, ~70 µs with Linux's timer
// slack), which the rearranger's host-timed round events (RoundEvent) include. Under NCCL it
// includes the group's issue (ncclInProgress while NCCL enqueues it; the first round with a
// peer also connects to it, NCCL connecting lazily) and the wait for the peer's half; the end
// event can follow the kernel only once NCCL has issued it (WaitForIssue), so a round shorter
// than one poll reads as one poll. A merged round (NVLink and RDMA flows in one group, one
// kernel) gives all its transfers the round's span; NCCL shows no finer one. Rounds run outside
// a rearrangement (MeasureBandwidths) are host-timed.
//
// Thread-safety: the RearrangementBackend calls follow that interface's contract; Fill,
// Verify and RunEmulatedStep are foreground calls. on_transfer (backend.h) fires from worker
// threads, with each received transfer's round's start and end (receiver side).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "eplb/base/status.h"
#include "eplb/migrate/backend.h"
#include "eplb/migrate/lost_ranks.h"
#include "eplb/migrate/thread_workers.h"
#include "eplb/model/placement.h"
#include "eplb/model/topology.h"

namespace eplb::device {

enum class DeviceMode { kVirtual, kNccl, kMpi };
const char* DeviceModeName(DeviceMode mode);

struct DeviceConfig {
  DeviceMode mode = DeviceMode::kVirtual;
  int num_layers = 1;
  int staging_buffers = 1;
  // kVirtual: the GPU every rank shares; kNccl: rank r runs on GPU first_device + r; kMpi: on
  // GPU first_device + the process's number among those on its node.
  int first_device = 0;
};

// The CUDA GPUs this process sees; an error that says why when there are none (no driver, no
// device), naming the CUDA call.
Result<int> CountDevices();
// "NVIDIA H200 (sm_90, 139.8 GiB)"
std::string DescribeDevice(int device);
// Free bytes on `device`.
Result<size_t> FreeMemory(int device);
// Whether this build has NCCL.
bool HaveNccl();

class DeviceBackend final : public RearrangementBackend {
 public:
  // Allocates every rank's weights and staging buffers (topology.expert_bytes() each, which
  // must be a multiple of 8). Fails with the CUDA or NCCL call that failed, or with the memory
  // needed against what the GPU has.
  static Result<std::unique_ptr<DeviceBackend>> Create(const Topology& topology,
                                                       const DeviceConfig& config);
  ~DeviceBackend() override;
  DeviceBackend(const DeviceBackend&) = delete;
  DeviceBackend& operator=(const DeviceBackend&) = delete;

  // Writes every slot's expert pattern (weight_pattern.h) under `placement`.
  Status Fill(const Placement& placement);
  // Checks on the GPU that every non-empty slot of `layer` (every layer when −1) holds its
  // expert's pattern exactly; the error names the layer, slot, rank, expert and word. Runs on
  // the main streams, so it sees what the next inference step would read.
  Status Verify(const Placement& placement, int layer = -1);
  // One emulated inference step of at least `seconds` on every rank, each reading all of its
  // live weights (kernels.h). Returns when every rank's step is over, or, with wait = false, as
  // soon as it is launched: a commit at the next step boundary then overlaps the step's reads,
  // which the `consumed` events must protect.
  Status RunEmulatedStep(double seconds, bool wait = true);
  // Per local rank, the XOR of every word its steps read since the last call (then reset to 0),
  // after waiting for them: a step that read a buffer being overwritten has the wrong checksum.
  Result<std::vector<uint64_t>> TakeStepChecksums();

  // Waits for every stream of every rank.
  Status Synchronize();

  // Whether every process is fine: `ok_here` agreed over the processes (kMpi), else itself.
  bool AllOk(bool ok_here);

  int device_of(int rank) const;

  double Now() override;
  std::unique_ptr<Monitor> NewMonitor() override;
  Status BeginRearrangement() override;
  void StartWorker(int rank, std::function<void()> body) override;
  void JoinWorkers() override;
  // NCCL: tells the workers to abort their communicators (a cancelled peer may never post its
  // half of a round); the next rearrangement gets new ones.
  void AbortTransfers() override;
  bool MergesLanes() const override { return config_.mode != DeviceMode::kVirtual; }
  int staging_buffers() const override { return config_.staging_buffers; }
  bool IsLocal(int rank) const override;
  int AgreeOnStagedLayers(int staged_here) override;
  Status ExecuteRound(const StagingTarget& target, const Round& round,
                      std::span<const Transfer> transfers) override;
  Status CopyLocal(const StagingTarget& target, std::span<const LocalCopy> copies) override;
  // From a pinned host copy of the expert's weights over PCIe.
  Status ReloadFromBackup(const StagingTarget& target, std::span<const Reload> reloads) override;
  // Rounds with the lost rank fail before they are posted; those already posted are released by
  // AbortTransfers when the rearranger cancels.
  void LoseRank(int rank) override;
  Status CommitLayer(const StagingTarget& target, std::span<const int32_t> slots) override;

 private:
  struct RankState;
  DeviceBackend(const Topology& topology, const DeviceConfig& config);
  // This process's part of Create: the checks, the devices and the memory; no collective.
  static Result<std::unique_ptr<DeviceBackend>> CreateLocal(const Topology& topology,
                                                            const DeviceConfig& config);
  Status Init();
  // The communicators and, under MPI, the common time origin: collective.
  Status Connect();
  uint64_t*& live(int layer, int slot) { return live_[static_cast<size_t>(layer) * slots_ + slot]; }
  uint64_t*& staged(int buffer, int slot) {
    return staging_[static_cast<size_t>(buffer) * slots_ + slot];
  }
  Status CheckSlots(const Placement& placement, int first_layer, int last_layer);
  // Before the first worker of a rearrangement: earlier commits' local copies finished on every
  // rank (receivers read other ranks' live weights), communicators whole.
  Status CreateComms();

  Topology topology_;
  DeviceConfig config_;
  int slots_;
  size_t expert_bytes_;
  std::vector<std::unique_ptr<RankState>> ranks_;  // null for other processes' ranks
  std::vector<int> local_ranks_;
  std::vector<uint64_t*> live_;     // [layer][global slot]
  std::vector<uint64_t*> staging_;  // [buffer][global slot]
  ThreadWorkers workers_;
  // Set by AbortTransfers, read by polling workers; cleared by BeginRearrangement once it has
  // replaced the communicators the abort left, not at EndRearrangement: a round run outside a
  // rearrangement meanwhile fails as cancelled instead of using a stale communicator.
  std::atomic<bool> cancel_{false};
  LostRanks lost_;  // LoseRank
  std::chrono::steady_clock::time_point epoch_;
};

}  // namespace eplb::device
