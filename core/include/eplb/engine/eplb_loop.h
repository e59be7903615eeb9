// The EPLB loop with vLLM's semantics, on any backend: each step's logical load enters a
// sliding window of `window_size` steps; every `step_interval` steps (the first after a quarter
// of an interval, as vLLM starts its counter at interval − interval/4) the policy gets the
// window's load and the placement in force, and the rearranger moves the weights, async (a
// layer per step boundary) or stop-the-world. A rearrangement due while one is still in
// flight is skipped and counted.
//
// What engines add to that trigger, each a scenario field (scenario.h's EplbSpec):
//   statistics: decayed   the policy gets each step's load decayed per step since the last
//                         rearrangement, not the window (TensorRT-LLM's online statistics);
//   min_balancedness      an interval's rearrangement is held, and counted, while the placement
//                         in force is balanced at least that well (ROCm ATOM, SGLang #8345);
//   layers_per_chunk      stop-the-world in chunks: from the step after the policy ran, one
//                         chunk of layers moves at each step boundary, which waits for it
//                         (SGLang, ATOM). Recovery and scale move every layer at once.
//
// Faults (scenario.h) that change the GPUs: at a gpu_lost or node_lost fault's step the backend
// loses the ranks (their transfers fail), a rearrangement in flight is cancelled (every layer
// stays wholly old or wholly new), and recovery starts at once: the policy places over the live
// serving GPUs, experts with a live replica are copied from it and the others reloaded from the
// backup (cluster.backup). Until a layer's recovery commits, its tokens routed to an expert with
// no live replica are dropped (eplb.lost_tokens: drop, counted per step) or serving waits for
// the whole recovery (wait: the step boundary blocks, and the step's tokens count as stalled).
// A scale fault changes the serving GPUs and rearranges onto them: new ranks receive experts,
// removed ones send theirs away. Every later rearrangement places around lost and idle GPUs.
//
// Run() must be called in the backend's foreground context (the main thread for the host
// backend, an actor for the simulator). Thread-safety: not thread-safe.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "eplb/base/name_table.h"
#include "eplb/engine/scenario.h"
#include "eplb/engine/step_cost.h"
#include "eplb/engine/workload.h"
#include "eplb/migrate/backend.h"
#include "eplb/migrate/rearranger.h"
#include "eplb/model/placement.h"
#include "eplb/policy/policy.h"

namespace eplb {

// The step model prices each step; it is eplb's own (engine/step_model.h is not installed).
class StepModel;
struct Slowdowns;

// How an inference step's time passes on a backend.
class StepRunner {
 public:
  virtual ~StepRunner() = default;
  // Runs one step whose cost on idle links is `cost`; `contended` says that migration flows may
  // share the links. Returns when the step is over, in the backend's time; an error (a device
  // failure) ends the run.
  virtual Status RunStep(const StepCost& cost, bool contended) = 0;
};

struct StepRecord {
  int step;
  double start_s;
  double step_s;  // as the backend ran it
  double idle_s;  // the same step on idle links (step_model.h)
  double balancedness;
  double imbalance_ratio;
  int64_t bytes_in_flight;  // migration bytes of layers not yet committed
  // Time the boundary after the step blocked (a rearrangement's policy and start, a stop-the-world
  // wait, layer commits; a fault's recovery at the step's start): the next step's latency holds
  // it (a fault's: this step's).
  double stalled_s;
  double tokens_lost = 0;  // StepCost::tokens_lost: routed to experts with no live replica
  int serving_gpus = 0;    // GPUs live and serving during the step
  // What the step's requests waited for its output: from the previous step's end to this one's
  // (the first step: from its faults' stall), so every stall between two steps is in the
  // latency of the step it delayed, as in an engine where every in-flight request waits.
  double latency_s = 0;
};

// Why a rearrangement ran; rearrangements.csv's `reason` column spells it as the table does.
enum class RearrangeReason { kInterval, kRecovery, kScale };
inline constexpr auto kRearrangeReasonNames =
    MakeNameTable<RearrangeReason>("rearrangements.reason", {"interval", "recovery", "scale"});
const char* RearrangeReasonName(RearrangeReason reason);

struct RearrangementRecord {
  int step;  // the step after which it started (recovery and scale: before which)
  RearrangeReason reason = RearrangeReason::kInterval;
  bool cancelled = false;  // stopped part way by a lost GPU; its committed layers stay new
  double start_s;
  double end_s = -1;  // last commit; -1 if it never finished
  double policy_ms;   // wall time of the policy
  int layers = 0;     // layers whose placement changed
  int64_t transfers = 0;
  PerLink<int64_t> bytes;
  // From the backup: experts no live GPU held, and with the host_pool transport every expert a
  // GPU would have received from another.
  int64_t bytes_reloaded = 0;
  int64_t reloads = 0;
  double predicted_makespan_s = 0;  // Σ over layers of the schedule's makespan
  double lower_bound_s = 0;         // no backend could move it faster (Rearranger::lower_bound_s)
  double window_balancedness_before = 1;  // of the window's load, old placement
  double window_balancedness_after = 1;   // of the window's load, new placement
  double window_balancedness_bound =
      1;  // no placement can beat it on that window (balance_bound.h)
  // The window's load the policy was given: tokens per (layer, logical expert), row-major.
  std::vector<float> window_load;
  // Per rank: the most bytes it held staged at once (engine/gpu_memory.h); empty when not
  // recorded (older run folders), 0 for ranks another process ran.
  std::vector<int64_t> staging_peak_bytes;
  // The engine's orchestration priced from its operation counts (migrate/engine_profile.h; all
  // 0 with migration.engine eplb): its once-per-rearrangement host work (window, policy, maps),
  // then summed over the layers the slowest rank's planning, transfer calls, barrier, polling
  // beyond the links, and write-back. The simulator charges the same counts on its clock.
  double engine_once_s = 0;
  double engine_planning_s = 0;
  double engine_transfer_s = 0;
  double engine_barrier_s = 0;
  double engine_polling_s = 0;
  double engine_writeback_s = 0;
  // What serving paid for it, over all its steps (the measured window or not): the time step
  // boundaries blocked for it (its policy on the main thread, the engine's host work as it
  // starts, a stop-the-world wait, each layer's commit or apply) and its steps' time beyond the
  // same steps on idle links.
  double stalled_s = 0;
  double slowed_s = 0;
  // The most any GPU held staged (0 when not recorded).
  int64_t most_staged_bytes() const {
    return staging_peak_bytes.empty()
               ? 0
               : *std::max_element(staging_peak_bytes.begin(), staging_peak_bytes.end());
  }
};

// Balancedness per layer over consecutive steps: the run cut into at most kLayerBalanceBuckets
// spans of equal length (the last may be shorter), each layer's Σ mean / Σ max GPU tokens over
// the span's steps (metrics.h's balancedness, one layer at a time). What a layer × step heat map
// draws without a line per step and layer.
inline constexpr int kLayerBalanceBuckets = 200;
struct LayerBalanceSpan {
  int first_step;
  int last_step;
  std::vector<float> balancedness;  // per layer, in [0, 1]
};

struct CommitRecord {
  int step;
  double time_s;
  int layer;
  std::vector<int32_t> phy2log;
};

class EplbLoop {
 public:
  EplbLoop(const Scenario& scenario, Workload& workload, RearrangementBackend& backend,
           StepRunner& runner);
  ~EplbLoop();

  Status Run();

  const std::vector<StepRecord>& steps() const { return steps_; }
  const std::vector<RearrangementRecord>& rearrangements() const { return rearrangements_; }
  const std::vector<CommitRecord>& commits() const { return commits_; }
  int skipped_rearrangements() const { return skipped_; }
  int held_rearrangements() const { return held_; }
  std::vector<LayerBalanceSpan> layer_balance() const;
  const Placement& placement() const;
  // The placement the run started from when a recording gave it (Policy::Recorded); null when
  // it started from vLLM's.
  const Placement* recorded_initial() const { return recorded_.initial ? &initial_ : nullptr; }
  Rearranger& rearranger() { return *rearranger_; }
  // Called after each step with its record; for progress lines.
  std::function<void(const StepRecord&)> on_step;

 private:
  // Runs the policy (or, with `forced`, moves to that placement instead) and starts moving.
  Status Rearrange(int step, RearrangeReason reason = RearrangeReason::kInterval,
                   const Placement* forced = nullptr);
  // Slowdowns in force at `step`; and losses and scales due at it, with their recovery.
  Status ApplyFaults(int step, double& stalled_s);
  void ApplySlowdowns(int step);
  void AddToWindow(const LoadMatrix& load);
  // The balancedness the balance gate compares with EplbSpec::min_balancedness.
  double GateBalancedness(const LoadMatrix& window, const Placement& current) const;
  // Adds the plans the rearranger just started to `record`, and counts their bytes as pending.
  void AccountPlans(RearrangementRecord& record);
  // Chunked stop-the-world: moves the next chunk of layers toward chunk_target_, waiting for
  // it (adds the wait to `stalled_s`).
  Status MoveNextChunk(double& stalled_s);

  const Scenario& scenario_;
  Workload& workload_;
  RearrangementBackend& backend_;
  StepRunner& runner_;
  Topology topology_;
  std::unique_ptr<StepModel> model_;
  std::unique_ptr<Slowdowns> slowdowns_;  // the faults in force (step_model.h)
  std::unique_ptr<Policy> policy_;
  std::unique_ptr<Rearranger> rearranger_;
  bool rearranger_started_ = false;  // it holds the placement in force once it has started
  // A recording's schedule (Policy::Recorded): when set, it replaces the interval's trigger,
  // and next_recorded_ is its first step not yet reached.
  RecordedSchedule recorded_;
  size_t next_recorded_ = 0;
  Placement initial_;
  // Per rank: gone for good; serving (live, and among the scale's GPUs). excluded_: the ranks
  // policies place around (lost or not serving), lost_list_: those the planner leaves out.
  std::vector<char> lost_, serving_;
  std::vector<int> excluded_, lost_list_;
  int serving_gpus_ = 0;  // the GPUs the latest scale asked for (lost ones among them or not)
  int serving_live_ = 0;  // of them, live: the count of serving_

  // Sliding window: the last window_size steps' loads and their sum.
  std::vector<float> window_steps_;
  LoadMatrix window_sum_;
  int window_filled_ = 0;
  int window_next_ = 0;
  double decayed_weight_ = 0;  // decayed statistics: Σ decay^j over the steps summed

  // The step_mean gate: each of the last window_size steps' balancedness, and their sum.
  std::vector<double> step_gate_;
  double step_gate_sum_ = 0;
  int step_gate_filled_ = 0;
  int step_gate_next_ = 0;

  // Chunked stop-the-world: where the rearrangement goes, where it came from, and the first
  // layer not yet moved; no target when none is under way.
  std::optional<Placement> chunk_target_;
  std::optional<Placement> chunk_base_;
  int chunk_next_layer_ = 0;

  double migration_sm_slowdown_ = 1;  // compute's time × this while a migration holds SMs
  int64_t bytes_pending_ = 0;
  std::vector<int64_t> layer_bytes_;  // per layer, bytes of the rearrangement in flight
  int current_step_ = 0;
  std::vector<StepRecord> steps_;
  std::vector<RearrangementRecord> rearrangements_;
  std::vector<CommitRecord> commits_;
  int skipped_ = 0;
  int held_ = 0;
  // Per span of steps and layer: Σ mean and Σ max GPU tokens (layer_balance()).
  int span_steps_ = 1;
  std::vector<double> span_mean_, span_max_;
};

}  // namespace eplb
