#include "nccl_comm.h"

#ifdef EPLB_HAVE_NCCL

#include <chrono>
#include <thread>
#include <vector>

#include "cuda_check.h"

namespace eplb::device {
namespace {

// Long enough not to spin a core, short against a round (tens of µs at least).
constexpr std::chrono::microseconds kPoll{20};

ncclConfig_t NonBlocking() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

// Polls until `comm` has finished its pending calls.
Status Settle(ncclComm_t comm, const std::string& where) {
  while (true) {
    ncclResult_t state = ncclSuccess;
    EPLB_NCCL(ncclCommGetAsyncError(comm, &state), where);
    if (state == ncclSuccess) return Status::Ok();
    if (state != ncclInProgress) return NcclStatus(state, "ncclCommGetAsyncError", where);
    std::this_thread::sleep_for(kPoll);
  }
}

}  // namespace

Status CreateLocalComms(std::span<const int> devices, std::span<ncclComm_t> comms) {
  ncclUniqueId id{};
  EPLB_NCCL(ncclGetUniqueId(&id), "");
  const int ranks = static_cast<int>(devices.size());
  // Several ranks of one process join in one group (NCCL: ncclCommInitRank of many ranks from
  // one thread needs ncclGroupStart/End).
  EPLB_NCCL(ncclGroupStart(), "");
  Status status;
  int made = 0;  // ranks whose communicator NCCL began to make
  // A failure part way leaves no communicator behind: those begun are aborted.
  const auto abandon = [&](Status why) {
    for (int r = 0; r < made; ++r) {
      if (comms[r] != nullptr) ncclCommAbort(comms[r]);
      comms[r] = nullptr;
    }
    return why;
  };
  for (int r = 0; r < ranks && status.ok(); ++r) {
    ncclConfig_t config = NonBlocking();
    const cudaError_t set = cudaSetDevice(devices[r]);
    if (set != cudaSuccess) {
      status = CudaStatus(set, "cudaSetDevice", fmt::format("rank {}: ", r));
      break;
    }
    const ncclResult_t init = ncclCommInitRankConfig(&comms[r], ranks, id, r, &config);
    if (init != ncclSuccess && init != ncclInProgress) {
      status = NcclStatus(init, "ncclCommInitRankConfig", fmt::format("rank {}: ", r));
    } else {
      made = r + 1;
    }
  }
  const ncclResult_t end = ncclGroupEnd();  // always closed, even after an error
  if (!status.ok()) return abandon(status);
  if (end != ncclSuccess && end != ncclInProgress) {
    return abandon(NcclStatus(end, "ncclGroupEnd", ""));
  }
  for (int r = 0; r < ranks; ++r) {
    if (Status settled = Settle(comms[r], fmt::format("rank {}: ", r)); !settled.ok()) {
      return abandon(settled);
    }
  }
  return Status::Ok();
}

Status CreateRankComm(const ncclUniqueId& id, int ranks, int rank, ncclComm_t* comm) {
  const std::string where = fmt::format("rank {}: ", rank);
  ncclConfig_t config = NonBlocking();
  const ncclResult_t init = ncclCommInitRankConfig(comm, ranks, id, rank, &config);
  if (init != ncclSuccess && init != ncclInProgress) {
    return NcclStatus(init, "ncclCommInitRankConfig", where);
  }
  return Settle(*comm, where);
}

namespace {

// Aborts `comm` for good (the next rearrangement replaces it) and returns `status`.
Status AbortWith(ncclComm_t comm, bool* aborted, Status status) {
  ncclCommAbort(comm);
  *aborted = true;
  return status;
}

// One poll of a round's communicator: OK with *pending true while NCCL is still issuing its
// calls, or the communicator aborted on a cancellation or an error.
Status PollRound(ncclComm_t comm, const std::atomic<bool>& cancel, bool* aborted,
                 const std::string& where, bool* pending) {
  if (cancel.load(std::memory_order_acquire)) {
    return AbortWith(comm, aborted, Status::Cancelled(where + "the rearrangement was cancelled"));
  }
  ncclResult_t state = ncclSuccess;
  const ncclResult_t got = ncclCommGetAsyncError(comm, &state);
  if (got != ncclSuccess) {
    return AbortWith(comm, aborted, NcclStatus(got, "ncclCommGetAsyncError", where));
  }
  if (state != ncclSuccess && state != ncclInProgress) {
    return AbortWith(comm, aborted, NcclStatus(state, "a send or receive", where));
  }
  *pending = state == ncclInProgress;
  return Status::Ok();
}

}  // namespace

Status WaitForIssue(ncclComm_t comm, const std::atomic<bool>& cancel, bool* aborted,
                    const std::string& where) {
  for (;;) {
    bool pending = false;
    EPLB_RETURN_IF_ERROR(PollRound(comm, cancel, aborted, where, &pending));
    if (!pending) return Status::Ok();
    std::this_thread::sleep_for(kPoll);
  }
}

Status WaitForRound(ncclComm_t comm, cudaStream_t stream, const std::atomic<bool>& cancel,
                    bool* aborted, const std::string& where) {
  bool drained = false;
  for (;;) {
    bool pending = false;
    EPLB_RETURN_IF_ERROR(PollRound(comm, cancel, aborted, where, &pending));
    if (drained) return Status::Ok();  // the re-check after the stream drained
    if (!pending) {
      const cudaError_t q = cudaStreamQuery(stream);
      if (q == cudaSuccess) {
        drained = true;
        continue;
      }
      if (q != cudaErrorNotReady) {
        return AbortWith(comm, aborted, CudaStatus(q, "cudaStreamQuery", where));
      }
    }
    std::this_thread::sleep_for(kPoll);
  }
}

void ReleaseComm(ncclComm_t comm, bool aborted) {
  if (comm == nullptr || aborted) return;  // ncclCommAbort freed it
  // Finalize flushes pending work; on a non-blocking communicator it may still be in progress.
  const ncclResult_t finalize = ncclCommFinalize(comm);
  ncclResult_t state = finalize;
  while (state == ncclInProgress && ncclCommGetAsyncError(comm, &state) == ncclSuccess) {
    if (state == ncclInProgress) std::this_thread::sleep_for(kPoll);
  }
  if (state != ncclSuccess) {
    ncclCommAbort(comm);  // teardown of a failed communicator: free it whatever its state
    return;
  }
  ncclCommDestroy(comm);
}

}  // namespace eplb::device

#endif  // EPLB_HAVE_NCCL
