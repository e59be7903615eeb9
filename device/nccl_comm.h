// NCCL communicators for the device backend, by NCCL's rules (NCCL 2.28 documentation):
// - non-blocking communicators (config.blocking = 0): no call blocks, so a worker never sits
//   inside NCCL where a cancellation could not reach it; pending work is polled with
//   ncclCommGetAsyncError until it is no longer ncclInProgress;
// - one communicator per rank, used by one thread at a time (the rank's single worker, the
//   rearranger merging its lanes: RearrangementBackend::MergesLanes);
// - a cancelled worker aborts its own communicator (ncclCommAbort), never one another thread
//   may be inside; an aborted communicator is replaced before the next rearrangement.
//
// Thread-safety: each function touches only the communicators it is given.
#pragma once

#ifdef EPLB_HAVE_NCCL

#include <atomic>
#include <span>
#include <string>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "eplb/base/status.h"

namespace eplb::device {

// One non-blocking communicator per GPU of `devices` (rank r on devices[r]), all in this process.
Status CreateLocalComms(std::span<const int> devices, std::span<ncclComm_t> comms);

// This process's communicator among `ranks` processes (rank `rank`), from the unique id every
// process was given (rank 0 makes it; the caller broadcasts it).
Status CreateRankComm(const ncclUniqueId& id, int ranks, int rank, ncclComm_t* comm);

// Waits until the communicator has issued its pending NCCL calls (no longer ncclInProgress):
// a non-blocking ncclGroupEnd may return before its kernel is on the stream, and work recorded
// on the stream after it (a timing event) must follow the kernel. Cancellation and errors abort
// the communicator as WaitForRound's do.
Status WaitForIssue(ncclComm_t comm, const std::atomic<bool>& cancel, bool* aborted,
                    const std::string& where);

// Waits until the communicator has no pending NCCL call (ncclInProgress), then until `stream` has
// drained, polling both. When `cancel` turns true first, or NCCL reports an error, aborts the
// communicator (setting *aborted) and returns Cancelled or the error. A round that returns OK has
// really moved its bytes: the check after the stream drained sees an abort that let it drain.
Status WaitForRound(ncclComm_t comm, cudaStream_t stream, const std::atomic<bool>& cancel,
                    bool* aborted, const std::string& where);

// Frees a communicator that no thread uses: destroyed when healthy, aborted otherwise.
void ReleaseComm(ncclComm_t comm, bool aborted);

}  // namespace eplb::device

#endif  // EPLB_HAVE_NCCL
