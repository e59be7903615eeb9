// The device backend's half of the rearrangement contract (migrate/backend.h): the clock and
// the monitor, beginning a rearrangement (each GPU's clock anchor; NCCL communicators replaced
// after a cancellation), the rank workers, lost ranks, and moving the weights: reloads from the
// host backup, rounds of transfers (peer copies between virtual ranks, or NCCL sends and
// receives), local copies and commits. Set-up, teardown, weights and steps are in
// device_backend.cpp.
#include "device_backend.h"

#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cuda_check.h"
#include "device_rank_state.h"
#include "eplb/migrate/weight_pattern.h"
#include "mpi_session.h"
#include "nccl_comm.h"
#include "nvtx.h"

namespace eplb::device {

double DeviceBackend::Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_).count();
}

std::unique_ptr<Monitor> DeviceBackend::NewMonitor() {
  return NewThreadMonitor();
}

Status DeviceBackend::BeginRearrangement() {
  // A new rearrangement pulls from live weights that earlier commits made live; their local
  // copies may still be in flight on any rank's local stream, and a receiver reads the sender's.
  // A failure here is only noted: every process must reach the agreement below.
  Status local;
  const RankState* clock_of_device = nullptr;  // the last GPU's first rank (ranks go by GPU)
  for (int r : local_ranks_) {
    if (!local.ok()) break;
    const std::string at = At(r);
    local = [&]() -> Status {
      RankState& s = *ranks_[r];
      EPLB_CUDA(cudaSetDevice(s.device), at);
      // Usually idle by now: a query answers at once, where a blocking-sync wait costs a call
      // into the driver per rank even on an idle stream.
      if (const cudaError_t idle = cudaStreamQuery(s.local); idle == cudaErrorNotReady) {
        EPLB_CUDA(cudaStreamSynchronize(s.local), at);
      } else if (idle != cudaSuccess) {
        return CudaStatus(idle, "cudaStreamQuery", at);
      }
      if (clock_of_device != nullptr && clock_of_device->device == s.device) {
        // Events of one GPU share its clock: one anchor serves all its ranks, and 32 virtual
        // ranks do not wait for 32 anchors before their first transfer.
        s.clock = clock_of_device->clock;
        s.anchor_s = clock_of_device->anchor_s;
        return Status::Ok();
      }
      // The anchor of this rearrangement's GPU-timed transfers: on the idle local stream it
      // completes at once, and the host notes when. Spinning, not blocking: a blocking-sync
      // wake-up takes tens of µs, which would shift every transfer of the rank.
      clock_of_device = &s;
      s.clock = s.anchor;
      EPLB_CUDA(cudaEventRecord(s.anchor, s.local), at);
      cudaError_t done = cudaEventQuery(s.anchor);
      while (done == cudaErrorNotReady) done = cudaEventQuery(s.anchor);
      s.anchor_s = Now();
      (void)cudaGetLastError();  // NotReady is no error for a kernel launch to find later
      if (done != cudaSuccess) return CudaStatus(done, "cudaEventQuery", at);
      return Status::Ok();
    }();
  }
  bool replace_here = false;
#ifdef EPLB_HAVE_NCCL
  // After any cancellation every communicator is replaced, in every process at once: an
  // aborted one is unusable, and one that was not may hold operations its peers never matched
  // (NCCL lets a sender run ahead of its receiver, so a cancelled round can leave a completed
  // send whose bytes the next rearrangement's receive would take). cancel_ is still set here
  // if the last rearrangement was cancelled: only this function clears it.
  if (config_.mode != DeviceMode::kVirtual) {
    replace_here = cancel_.load(std::memory_order_acquire);
    for (int r : local_ranks_) replace_here = replace_here || ranks_[r]->comm_aborted;
  }
#endif
  // One agreement carries both facts: 0 some process failed, 1 some needs new communicators.
  const int here = !local.ok() ? 0 : replace_here ? 1 : 2;
  const int all = config_.mode == DeviceMode::kMpi ? mpi::AllMin(here) : here;
  if (all == 0) {
    return local.ok() ? Status::Unavailable(
                            "another process failed to begin the rearrangement (its error is in "
                            "its own log)")
                      : local;
  }
#ifdef EPLB_HAVE_NCCL
  if (all == 1) {
    for (int r : local_ranks_) {
      EPLB_CUDA(cudaSetDevice(ranks_[r]->device), At(r));
      if (!ranks_[r]->comm_aborted && ranks_[r]->comm != nullptr) ncclCommAbort(ranks_[r]->comm);
      ranks_[r]->comm = nullptr;
    }
    EPLB_RETURN_IF_ERROR(CreateComms());
  }
#endif
  cancel_.store(false, std::memory_order_release);
  return Status::Ok();
}

void DeviceBackend::StartWorker(int rank, std::function<void()> body) {
  workers_.Start([device = ranks_[rank]->device, body = std::move(body)] {
    cudaSetDevice(device);  // an error here resurfaces at the worker's first CUDA call
    body();
  });
}

void DeviceBackend::AbortTransfers() {
  // The workers poll it and abort their own communicators: none is freed under another thread.
  cancel_.store(true, std::memory_order_release);
}

void DeviceBackend::JoinWorkers() {
  workers_.JoinAll();
}

void DeviceBackend::LoseRank(int rank) {
  lost_.Lose(rank);
}

Status DeviceBackend::ReloadFromBackup(const StagingTarget& target,
                                       std::span<const Reload> reloads) {
  RankState& s = *ranks_[target.rank];
  const std::string at = fmt::format("reload on {}", At(target.rank, target.layer));
  EPLB_CUDA(cudaSetDevice(s.device), at);
  if (s.backup == nullptr) {
    EPLB_CUDA(cudaMallocHost(reinterpret_cast<void**>(&s.backup), expert_bytes_), at);
  }
  EPLB_CUDA(cudaStreamWaitEvent(s.local, s.consumed[target.buffer], 0), at);
  for (const Reload& r : reloads) {
    // The host copy of the expert, then over PCIe into the staging slot; the buffer is reused
    // only after the copy has read it.
    WritePattern(target.layer, r.expert, s.backup, expert_bytes_);
    EPLB_CUDA(cudaMemcpyAsync(staged(target.buffer, r.dst_slot), s.backup, expert_bytes_,
                              cudaMemcpyHostToDevice, s.local),
              at);
    EPLB_CUDA(cudaStreamSynchronize(s.local), at);
  }
  return Status::Ok();
}

Status DeviceBackend::ExecuteRound(const StagingTarget& target, const Round& round,
                                   std::span<const Transfer> transfers) {
  EPLB_RETURN_IF_ERROR(lost_.CheckLive(round));
  RankState& s = *ranks_[target.rank];
  const std::string at = At(target.rank, target.layer);
  // Merged rounds (NCCL) mix link classes: they use the first lane's stream.
  const int lane = MergesLanes() ? 0 : static_cast<int>(round.link);
  cudaStream_t stream = s.lane[lane];
  EPLB_CUDA(cudaStreamWaitEvent(stream, s.consumed[target.buffer], 0), at);
  // The round's span on the GPU: from when its stream may write the staging buffer to when its
  // last copy or receive has landed, without the host's issue and polling.
  EPLB_CUDA(cudaEventRecord(s.round_begin[lane], stream), at);
  std::vector<const Transfer*> received;
  for (const Flow& flow : round.flows) {
    if (flow.dst_rank != target.rank) continue;
    for (int32_t t : flow.transfers) received.push_back(&transfers[t]);
  }
  std::vector<std::unique_ptr<NvtxRange>> ranges;
  for (const Transfer* t : received) {
    ranges.push_back(
        std::make_unique<NvtxRange>(fmt::format("expert {} layer {}", t->expert, target.layer)));
  }
  const double start = Now();
  if (config_.mode == DeviceMode::kVirtual) {
    // Receivers pull; the sender's live weights stay intact until the layer is committed.
    for (const Transfer* t : received) {
      EPLB_CUDA(cudaMemcpyAsync(staged(target.buffer, t->dst_slot), live(target.layer, t->src_slot),
                                expert_bytes_, cudaMemcpyDeviceToDevice, stream),
                at);
    }
    EPLB_CUDA(cudaEventRecord(s.round_end[lane], stream), at);
    EPLB_CUDA(cudaStreamSynchronize(stream), at);
  } else {
#ifdef EPLB_HAVE_NCCL
    if (s.comm_aborted) return Status::Cancelled(at + "the rearrangement was cancelled");
    if (cancel_.load(std::memory_order_acquire)) {
      // Peers may have posted their halves: this communicator is done with; the next
      // rearrangement replaces it (BeginRearrangement).
      ncclCommAbort(s.comm);
      s.comm_aborted = true;
      return Status::Cancelled(at + "the rearrangement was cancelled");
    }
    EPLB_NCCL(ncclGroupStart(), at);
    Status issued;  // the group is closed whatever happens inside it
    for (const Flow& flow : round.flows) {
      const bool receives = flow.dst_rank == target.rank, sends = flow.src_rank == target.rank;
      if (!receives && !sends) continue;
      // A flow to itself posts both halves: NCCL refuses a receive from self without the
      // matching send in the same group ("Trying to recv to self without a matching send").
      for (int32_t i : flow.transfers) {
        if (!issued.ok()) break;
        const Transfer& t = transfers[i];
        if (sends) {
          const ncclResult_t r = ncclSend(live(target.layer, t.src_slot), expert_bytes_, ncclUint8,
                                          flow.dst_rank, s.comm, stream);
          if (r != ncclSuccess && r != ncclInProgress) issued = NcclStatus(r, "ncclSend", at);
        }
        if (receives && issued.ok()) {
          const ncclResult_t r = ncclRecv(staged(target.buffer, t.dst_slot), expert_bytes_,
                                          ncclUint8, flow.src_rank, s.comm, stream);
          if (r != ncclSuccess && r != ncclInProgress) issued = NcclStatus(r, "ncclRecv", at);
        }
      }
    }
    const ncclResult_t end = ncclGroupEnd();
    if (issued.ok() && end != ncclSuccess && end != ncclInProgress) {
      issued = NcclStatus(end, "ncclGroupEnd", at);
    }
    if (issued.ok()) {
      // A non-blocking communicator may still be enqueueing the group's kernel: the end event
      // follows it on the stream only once ncclGroupEnd's work is issued (nccl_comm.h).
      issued = WaitForIssue(s.comm, cancel_, &s.comm_aborted, at);
      if (issued.ok()) {
        const cudaError_t recorded = cudaEventRecord(s.round_end[lane], stream);
        if (recorded != cudaSuccess) issued = CudaStatus(recorded, "cudaEventRecord", at);
      }
    }
    if (!issued.ok()) {
      if (!s.comm_aborted) ncclCommAbort(s.comm);  // its state after a failed group is unknown
      s.comm_aborted = true;
      return issued;
    }
    EPLB_RETURN_IF_ERROR(WaitForRound(s.comm, stream, cancel_, &s.comm_aborted, at));
#endif
  }
  // The GPU's span once this rearrangement has its anchor (calibration rounds have none), else
  // the host's, which adds issue and polling.
  double begin_s = start, end_s = Now();
  if (s.anchor_s >= 0) {
    float begin_ms = 0, end_ms = 0;
    if (cudaEventElapsedTime(&begin_ms, s.clock, s.round_begin[lane]) == cudaSuccess &&
        cudaEventElapsedTime(&end_ms, s.clock, s.round_end[lane]) == cudaSuccess) {
      begin_s = s.anchor_s + begin_ms * 1e-3;
      end_s = s.anchor_s + end_ms * 1e-3;
    } else {
      (void)cudaGetLastError();  // a failed read is not the next kernel launch's error
    }
  }
  for (const Transfer* t : received) {
    on_transfer(TransferRecord{target.layer, t->expert, t->src_rank, t->dst_rank, t->bytes, t->link,
                               begin_s, end_s});
  }
  return Status::Ok();
}

Status DeviceBackend::CopyLocal(const StagingTarget& target, std::span<const LocalCopy> copies) {
  RankState& s = *ranks_[target.rank];
  const std::string at = At(target.rank, target.layer);
  EPLB_CUDA(cudaStreamWaitEvent(s.local, s.consumed[target.buffer], 0), at);
  for (const LocalCopy& c : copies) {
    const uint64_t* src =
        c.after_receive ? staged(target.buffer, c.src_slot) : live(target.layer, c.src_slot);
    EPLB_CUDA(cudaMemcpyAsync(staged(target.buffer, c.dst_slot), src, expert_bytes_,
                              cudaMemcpyDeviceToDevice, s.local),
              at);
  }
  // No wait here: the commit orders the main stream after these copies.
  EPLB_CUDA(cudaEventRecord(s.staged[target.buffer], s.local), at);
  return Status::Ok();
}

Status DeviceBackend::CommitLayer(const StagingTarget& target, std::span<const int32_t> slots) {
  RankState& s = *ranks_[target.rank];
  const std::string at = fmt::format("commit of {}", At(target.rank, target.layer));
  EPLB_CUDA(cudaSetDevice(s.device), at);
  EPLB_CUDA(cudaStreamWaitEvent(s.main, s.staged[target.buffer], 0), at);
  for (int32_t slot : slots) std::swap(live(target.layer, slot), staged(target.buffer, slot));
  EPLB_CUDA(cudaEventRecord(s.consumed[target.buffer], s.main), at);
  s.step_slots_stale = true;
  return Status::Ok();
}

}  // namespace eplb::device
