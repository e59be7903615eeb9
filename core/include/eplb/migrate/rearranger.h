// The rearranger: the async rearrangement protocol (vLLM's "async worker that transfers
// experts in the background"), written once for every backend.
//
// Start() plans and schedules each layer whose placement changes, then starts one background
// worker per (rank, link lane), or per rank with both lanes' rounds merged round by round when
// the backend MergesLanes(). Workers go through the changing layers in order. For each layer a
// worker waits for a free staging buffer and for room in its rank's staging budget
// (RearrangerOptions::max_staging_bytes), executes its lane's rounds into it, and the last lane
// of a rank to finish does the rank's local copies and marks the rank ready.
//
// The foreground (the inference loop) calls OnStepBoundary() between steps. A layer is
// committed only when every rank has staged it (the all-ranks gate); committing swaps the
// layer's weights on every rank and its routing table (phy2log/log2phy/logcnt) together, and
// frees its staging buffer. So inference never sees a layer half-updated, and every layer is
// at all times wholly old or wholly new. Where the backend's ranks span processes (MPI), each
// process runs the workers and commits of its own ranks, and the gate is agreed between the
// processes at every step boundary (RearrangementBackend::AgreeOnStagedLayers). Cancel() stops the
// workers at their next round; the committed layers stay new, the rest stay old, and the placement
// stays valid.
//
// Thread-safety: Start, OnStepBoundary, Cancel and the accessors are for the foreground
// context only. Signals fire from worker contexts (on_round, on_layer_staged) and from the
// foreground (on_layer_committed).
#pragma once

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "eplb/base/signal.h"
#include "eplb/base/status.h"
#include "eplb/migrate/backend.h"
#include "eplb/migrate/schedule.h"
#include "eplb/migrate/transfer_plan.h"
#include "eplb/model/placement.h"
#include "eplb/model/topology.h"

namespace eplb {

struct RearrangerOptions {
  // Layers committed per step boundary at most.
  int layers_per_step = 1;
  // Layers each rank can stage ahead of the commits; at most the backend's staging buffers.
  int staging_layers = 1;
  // Stop the world: stage every layer, then commit them all at one step boundary, blocking
  // the foreground until then. Needs a staging buffer per changing layer (even when the budget
  // below keeps them from all being staged at once).
  bool sync = false;
  // Bytes a rank may hold staged at once: the layers it has begun and not yet committed, each
  // its written slots × expert bytes (0: no limit but staging_layers). A rank begins a layer
  // only when it fits; stop-the-world then commits each layer as soon as it is staged, inside
  // the same blocked step boundary. Every layer must fit alone.
  int64_t max_staging_bytes = 0;
  // Every written slot is read from the backup in host memory instead of from another GPU
  // (a host memory pool: TensorRT-LLM): transfers become reloads (migrate/transport.h).
  bool transfers_from_host = false;
  SenderRule sender_rule = SenderRule::kLocal;
  ScheduleStrategy schedule = ScheduleStrategy::kBest;
};

struct RoundEvent {
  int rank;
  int layer;
  LinkClass link;
  int round;  // index within the lane
  double start_s;
  double end_s;
};

struct LayerEvent {
  int layer;
  double time_s;
};

class Rearranger {
 public:
  // `backend` must outlive the rearranger.
  Rearranger(RearrangementBackend& backend, const Topology& topology, RearrangerOptions options);
  ~Rearranger();  // cancels a rearrangement in progress
  Rearranger(const Rearranger&) = delete;
  Rearranger& operator=(const Rearranger&) = delete;

  // Begins moving from `current` (the placement the backend's weights hold) to `target`.
  // Fails when one is in progress, the options do not fit the backend, or the placements do
  // not fit the topology. A target equal to `current` completes at once. `lost_ranks`
  // (ascending) are gone: they send nothing, get no worker and commit nothing; `target` must
  // leave their slots empty (or as they were), and experts only they held are reloaded from the
  // backup (transfer_plan.h).
  Status Start(const Placement& current, const Placement& target,
               std::span<const int> lost_ranks = {});

  // At a step boundary: commits the staged layers allowed (see RearrangerOptions) and returns
  // them. Returns a worker's error once, after which the rearrangement has stopped.
  Result<std::vector<int>> OnStepBoundary();
  // Blocks until every layer is staged, committing each as soon as it is, and returns them:
  // the rearrangement made stop-the-world from here (recovery when serving waits for it).
  Result<std::vector<int>> CommitAll();

  // Stops the workers and waits for them; uncommitted layers stay old.
  void Cancel();

  bool in_progress() const { return in_progress_; }
  // The routing table in force.
  const Placement& placement() const { return *placement_; }
  const std::vector<LayerPlan>& plans() const { return plans_; }
  const std::vector<Schedule>& schedules() const { return schedules_; }
  // No backend can finish the current rearrangement sooner (from its start to the last layer
  // staged). With one staging buffer the layers move one after another, so the bound is the sum
  // of the layers' bounds (schedule.h); with more buffers (stop-the-world stages every layer at
  // once) layers overlap, and the bound is that of all their transfers taken together: the
  // busiest rank's bytes on each link class over its bandwidth, plus one latency.
  double lower_bound_s() const;
  int committed_layers() const { return committed_; }
  // Per rank: the most bytes it held staged at once since the last call, which resets them.
  // Ranks of other processes read 0. Call between rearrangements (none in progress).
  std::vector<int64_t> TakeStagingPeaks();

  Signal<void(const RoundEvent&)> on_round;
  Signal<void(const LayerEvent&)> on_layer_staged;
  Signal<void(const LayerEvent&)> on_layer_committed;

 private:
  void RunWorker(int rank, int first_lane, int lanes);
  // After a rank's rounds of layer `index`: its local copies, then the rank is ready.
  bool FinishRank(int rank, size_t index);
  // Waits until `rank` may begin layer `index` (a staging buffer free, its bytes within the
  // budget), and counts them as staged; false when cancelled.
  bool WaitForBuffer(size_t index, int rank);
  void Fail(const Status& status);
  Status CommitLocked(size_t index);
  // OnStepBoundary's commits, of `limit` staged layers at most.
  Result<std::vector<int>> CommitStaged(int limit);
  // The foreground's wait for staging (stop-the-world), `lock` held: until `staged()` holds or
  // the rearrangement is cancelled. When ranks run in other processes the wait is agreed with
  // them every kAgreementPoll seconds (AgreeOnStagedLayers: 1 staged here, 0 not yet, -1
  // failed), and ends in every process at once: a process whose worker failed stages nothing,
  // and the others, were they to wait for their own ranks alone, would never reach the
  // collective it waits in. An agreement that some process failed cancels this one too.
  void AwaitStaged(std::unique_lock<Monitor>& lock, const std::function<bool()>& staged);
  void Finish();

  RearrangementBackend& backend_;
  Topology topology_;
  RearrangerOptions options_;
  std::unique_ptr<Monitor> monitor_;

  std::optional<Placement> placement_;
  std::optional<Placement> target_;
  std::vector<LayerPlan> plans_;
  std::vector<Schedule> schedules_;
  // Per changing layer and rank: its local copies, those from old slots first, and its reloads.
  std::vector<std::vector<std::vector<LocalCopy>>> copies_;
  std::vector<std::vector<std::vector<Reload>>> reloads_;
  std::vector<char> lost_;  // per rank
  // Per changing layer, lane and rank: (round, flow) for every flow the rank sends or receives,
  // in round order, so that a worker visits its own rounds only instead of every round's flows
  // (that scan made a rearrangement quadratic in GPUs).
  struct FlowRef {
    int32_t round;
    int32_t flow;
  };
  std::vector<std::array<std::vector<std::vector<FlowRef>>, kNumLinkClasses>> flows_of_rank_;
  int staging_layers_ = 1;
  std::vector<std::vector<int64_t>> staging_bytes_;  // [layer index][rank]: written × expert
  bool budget_binds_ = false;  // some rank cannot hold every layer staged at once

  // Guarded by monitor_.
  std::vector<std::vector<char>> begun_;      // [layer index][rank]: counted in staged_now_
  std::vector<int64_t> staged_now_;           // per rank: begun, not committed
  std::vector<int64_t> staging_peak_;         // per rank, since TakeStagingPeaks
  std::vector<std::vector<int>> lanes_done_;  // [layer index][rank]
  std::vector<int> ranks_ready_;              // [layer index]: local ranks staged
  int local_ranks_ = 0;                       // ranks this process executes
  bool spans_processes_ = false;              // some rank runs in another process (IsLocal)
  int committed_ = 0;
  Status error_;
  std::atomic<bool> cancelled_{false};
  bool in_progress_ = false;
};

}  // namespace eplb
