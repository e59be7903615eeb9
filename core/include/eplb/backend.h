// The backend interface: what a backend provides so that the rearranger (rearranger.h) can move
// expert weights with it. Like LevelDB's Env, one narrow interface with several
// implementations (host threads and CPU memory, SimGrid actors, CUDA/NCCL), and the protocol
// above does not know which it has.
//
// A backend owns every rank's live expert weights (what inference reads) and per-rank staging
// buffers, each big enough for one layer's slots of that rank. It provides:
//   - a clock;
//   - execution contexts for workers (threads, actors) and a monitor to synchronise them with
//     the foreground, which must block in the backend's own notion of time;
//   - data movement: one round of transfers into a staging buffer, local copies, and the commit
//     of a staged layer into the live weights.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "eplb/schedule.h"
#include "eplb/status.h"
#include "eplb/transfer_plan.h"

namespace eplb {

// A mutex and condition variable in one, usable with std::unique_lock. Wait() must be called
// with the lock held; it releases it, sleeps until NotifyAll() (or spuriously) and relocks.
class Monitor {
 public:
  virtual ~Monitor() = default;
  virtual void lock() = 0;
  virtual void unlock() = 0;
  virtual void Wait() = 0;
  virtual void NotifyAll() = 0;
};

// A Monitor on std::mutex and std::condition_variable, for backends whose workers are threads.
std::unique_ptr<Monitor> NewThreadMonitor();

// Where a worker's writes for one layer go: `rank`'s staging buffer `buffer`.
struct StagingTarget {
  int rank = 0;
  int layer = 0;
  int buffer = 0;
};

class RearrangementBackend {
 public:
  virtual ~RearrangementBackend() = default;

  // Seconds since the backend started: wall time, or simulated time.
  virtual double Now() = 0;
  virtual std::unique_ptr<Monitor> NewMonitor() = 0;
  // Runs `body` in a new execution context placed with `rank` (a thread, an actor).
  virtual void StartWorker(int rank, std::function<void()> body) = 0;
  // Waits for every started worker to return.
  virtual void JoinWorkers() = 0;
  // A cancellation or failure is stopping the workers: make a round waiting for a peer that
  // will not come (a collective library's send or receive) return, failing if need be, so the
  // workers can be joined. Called from the foreground before JoinWorkers; transfers may fail
  // from then on. Backends whose rounds cannot block on a peer need nothing here.
  virtual void AbortTransfers() {}
  // How many layers each rank can stage at once.
  virtual int staging_buffers() const = 0;

  // Ranks spanning processes (one GPU per process under MPI): a backend executes only its own
  // ranks, and the rearranger starts workers and commits for those alone.
  virtual bool IsLocal(int /*rank*/) const { return true; }
  // The all-ranks gate across processes. The foreground calls it at every step boundary of a
  // rearrangement in progress, at the same boundaries in every process, with how many changing
  // layers, in order from the first uncommitted one, every local rank has staged (−1 when the
  // rearrangement failed or was cancelled here). Returns the minimum over the processes: the
  // layers every rank has staged, or −1 if any process failed. A collective where ranks span
  // processes; the identity otherwise.
  virtual int AgreeOnStagedLayers(int staged_here) { return staged_here; }

  // Worker side, called from `target.rank`'s worker for each round of a lane in which that rank
  // sends or receives, in lane order. The rank's part of `round`: receive each flow whose
  // destination it is into its staging buffer (slot positions as in the transfers), and send
  // each flow whose source it is from its live weights. Returns when the rank's part is done.
  // `transfers` is the layer plan's list that the flows index.
  virtual Status ExecuteRound(const StagingTarget& target, const Round& round,
                              std::span<const Transfer> transfers) = 0;
  // Local copies on `target.rank` into its staging buffer: from live weights, or (after_receive)
  // from the staging buffer itself. Called after every receive of the layer on that rank.
  virtual Status CopyLocal(const StagingTarget& target, std::span<const LocalCopy> copies) = 0;

  // Foreground side: makes the staged `slots` (global indices on target.rank) of target.layer
  // live. Called only when every rank has staged the layer, at a step boundary.
  virtual Status CommitLayer(const StagingTarget& target, std::span<const int32_t> slots) = 0;
};

}  // namespace eplb
