// The backend interface: what a backend provides so that the rearranger (rearranger.h) can move
// expert weights with it. Like LevelDB's Env, one narrow interface with several
// implementations (HostBackend: threads and CPU memory; sim::SimBackend: SimGrid actors;
// DeviceBackend: CUDA/NCCL), and the protocol above does not know which it has.
//
// A backend owns every rank's live expert weights (what inference reads) and per-rank staging
// buffers, each big enough for one layer's slots of that rank. It provides a clock, execution
// contexts for workers and a monitor to synchronise them with the foreground, and data
// movement: rounds of transfers into a staging buffer, local copies, and the commit of a staged
// layer into the live weights.
//
// The contract (what the rearranger does, and so what every backend must allow):
//
// Contexts. The *foreground* is the context that drives inference: the thread or actor that
// constructed the Rearranger and calls Start, OnStepBoundary and Cancel. *Workers* are the
// contexts the backend creates in StartWorker: the rearranger starts one per local rank and
// link lane (kNumLinkClasses of them per rank) for each rearrangement, or one per local rank
// when the backend MergesLanes().
//
// Concurrency. Calls marked [worker] come from workers, concurrently with each other and with
// the foreground:
//   - ExecuteRound for the same rank from its two lanes at once (different rounds, the same
//     staging buffer, disjoint destination slots; never when MergesLanes()), and for
//     different ranks at once;
//   - ReloadFromBackup, then CopyLocal, for a rank after both of its lanes finished that layer
//     (never concurrently with that rank's rounds of the same layer);
//   - CommitLayer [foreground] for layer i while workers stage later layers into other staging
//     buffers (never the buffer being committed: a buffer is reused only after its commit).
// Now() and on_transfer may be called from any context. Every other call is [foreground] only:
// BeginRearrangement, StartWorker, JoinWorkers, AbortTransfers, EndRearrangement,
// AgreeOnStagedLayers, NewMonitor, LoseRank.
//
// Lifecycle of a rearrangement, as the rearranger drives it on the foreground:
//   BeginRearrangement, StartWorker for each worker, [AbortTransfers,] JoinWorkers,
//   EndRearrangement.
// Begin comes before the first worker starts. Every rearrangement whose Begin succeeded ends
// with one End, after its last worker is joined, whether its layers all committed or it was
// cancelled or failed (a failed Begin has no End). AbortTransfers comes only between them.
//
// Blocking. ExecuteRound and CopyLocal may block until their data has moved (in the backend's
// time: a simulated flow, a stream synchronisation) and may wait for a peer's matching call
// (NCCL send/receive); AbortTransfers must release such waits. The foreground blocks only in
// Monitor::Wait, which must advance the backend's time (an actor's wait in the simulator).
// CommitLayer must not wait for workers.
//
// Lifetimes. `body` given to StartWorker, `round` and `transfers` given to ExecuteRound, and the
// spans given to CopyLocal, ReloadFromBackup and CommitLayer stay valid until the call returns
// (bodies until JoinWorkers returns). Every worker is joined (JoinWorkers) before a rearrangement's
// state is released and before the next rearrangement starts. A backend readies what the workers
// use in BeginRearrangement and ends what one rearrangement left (an abort in force) in
// EndRearrangement. The backend outlives the Rearranger.
//
// Errors. A failing ExecuteRound, CopyLocal, ReloadFromBackup or CommitLayer returns a Status
// naming what failed; the rearranger then cancels the rearrangement (every layer stays wholly old
// or wholly new). A failing BeginRearrangement fails the rearrangement before anything moves; a
// failing EndRearrangement is reported by the step boundary (OnStepBoundary, CommitAll) that
// ended the rearrangement, unless an earlier error is; Rearranger::Cancel reports nothing.
// Expected failures are Statuses; nothing here throws.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "eplb/base/status.h"
#include "eplb/migrate/schedule.h"
#include "eplb/migrate/transfer_plan.h"
#include "eplb/migrate/transfer_record.h"

namespace eplb {

// A mutex and condition variable in one, usable with std::unique_lock. Wait() must be called
// with the lock held; it releases it, sleeps until NotifyAll() (or spuriously) and relocks.
// WaitFor() does the same for at most `seconds` of the backend's clock.
class Monitor {
 public:
  virtual ~Monitor() = default;
  virtual void lock() = 0;
  virtual void unlock() = 0;
  virtual void Wait() = 0;
  virtual void WaitFor(double seconds) = 0;
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
  // Whether each local rank gets one worker that executes the lanes' rounds merged: round r of
  // every lane in one ExecuteRound call (its flows mixing link classes; `round.link` is the
  // first lane's), layer by layer and round by round, so every rank issues its operations in
  // the same order. A backend whose transfers go through one communicator per rank needs it
  // (NCCL: one issuing thread per communicator, the same order on every rank).
  virtual bool MergesLanes() const { return false; }
  // Called by the rearranger on the foreground when a rearrangement begins, before any of its
  // workers starts, in every process (ranks spanning processes: every process calls it at the
  // same point, its ranks lost or not, so a backend may run a collective here). Readies what the
  // workers use (e.g. replaces communicators a cancellation left unusable); a failure here fails
  // the rearrangement before anything moves.
  virtual Status BeginRearrangement() { return Status::Ok(); }
  // Runs `body` in a new execution context placed with `rank` (a thread, an actor).
  virtual void StartWorker(int rank, std::function<void()> body) = 0;
  // Waits for every started worker to return.
  virtual void JoinWorkers() = 0;
  // Called by the rearranger on the foreground when a rearrangement is over, after JoinWorkers:
  // every layer committed, or it was cancelled or failed. Ends what the rearrangement left in
  // force, such as an AbortTransfers. An abort that only a repair where every process meets can
  // end (the GPU backend's communicators) may last until the next BeginRearrangement.
  virtual Status EndRearrangement() { return Status::Ok(); }
  // A cancellation or failure is stopping the workers: make a round waiting for a peer that
  // will not come (a collective library's send or receive) return, failing if need be, so the
  // workers can be joined. Called from the foreground before JoinWorkers; transfers may fail
  // from then on, until EndRearrangement (or the next BeginRearrangement, see there). Backends
  // whose rounds cannot block on a peer need nothing here.
  virtual void AbortTransfers() {}
  // How many layers each rank can stage at once.
  virtual int staging_buffers() const = 0;
  // A fault (engine/scenario.h) slows `rank`'s links of class `link` to their bandwidth ÷
  // `factor` from now on (1: healthy again). Backends that model links (the simulator) slow
  // every transfer and flow on them, in flight or later; backends whose links are real (host,
  // device) cannot slow them and keep what the hardware gives.
  virtual void SetLinkSlowdown(int /*rank*/, LinkClass /*link*/, double /*factor*/) {}
  // A fault (engine/scenario.h) takes `rank` away for good: from now on every transfer from or
  // to it fails, those in flight included, instead of waiting for it; the rearranger's workers
  // then see a failed round and the rearrangement is cancelled. Rearrangements started later
  // leave the rank out (Rearranger::Start's lost ranks). The default fails nothing, for
  // backends whose rounds never wait on a peer that is gone.
  virtual void LoseRank(int /*rank*/) {}

  // Ranks spanning processes (one GPU per process under MPI): a backend executes only its own
  // ranks, and the rearranger starts workers and commits for those alone.
  virtual bool IsLocal(int /*rank*/) const { return true; }
  // The all-ranks gate across processes. The foreground calls it at every step boundary of a
  // rearrangement in progress, at the same boundaries in every process, with how many changing
  // layers, in order from the first uncommitted one, every local rank has staged (−1 when the
  // rearrangement failed or was cancelled here). Returns the minimum over the processes: the
  // layers every rank has staged, or −1 if any process failed. A stop-the-world boundary also
  // calls it while it waits, every few milliseconds in every process at once, with 1 (all
  // staged here), 0 (not yet) or −1 (Rearranger::AwaitStaged). A collective where ranks span
  // processes; the identity otherwise.
  virtual int AgreeOnStagedLayers(int staged_here) { return staged_here; }

  // Worker side, called by each of `target.rank`'s workers as it begins a layer, before its
  // rounds: what the transport does once per layer (a barrier, buffer registration). The
  // simulator prices it (migrate/transport.h); the real backends have nothing to add.
  virtual Status BeginLayer(const StagingTarget& /*target*/) { return Status::Ok(); }
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
  // Reads experts no live rank holds from the backup (host memory or storage) into
  // `target.rank`'s staging buffer: each reload's expert into its slot. Called after every
  // receive of the layer on that rank, before its local copies (some of which copy a reload).
  virtual Status ReloadFromBackup(const StagingTarget& target, std::span<const Reload> reloads) = 0;

  // Foreground side: makes the staged `slots` (global indices on target.rank) of target.layer
  // live. Called only when every rank has staged the layer, at a step boundary.
  virtual Status CommitLayer(const StagingTarget& target, std::span<const int32_t> slots) = 0;

  // Every transfer a local rank received, reported by the receiving worker when its bytes have
  // arrived (times in Now()'s clock). The one place every backend reports transfers through;
  // connect observers before the first rearrangement starts.
  TransferObserver on_transfer;
};

}  // namespace eplb
