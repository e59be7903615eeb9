#include "eplb/migrate/rearranger.h"

#include <algorithm>
#include <mutex>

#include <fmt/format.h>

namespace eplb {
namespace {

// How often a stop-the-world wait that spans processes agrees with the others (AwaitStaged):
// short against a layer's migration (milliseconds at least), long against an all-reduce.
constexpr double kAgreementPoll = 0.01;

}  // namespace

Rearranger::Rearranger(RearrangementBackend& backend, const Topology& topology,
                       RearrangerOptions options)
    : backend_(backend), topology_(topology), options_(options), monitor_(backend.NewMonitor()) {}

Rearranger::~Rearranger() {
  Cancel();
}

Status Rearranger::Start(const Placement& current, const Placement& target,
                         std::span<const int> lost_ranks) {
  if (in_progress_) return Status::InvalidArgument("a rearrangement is already in progress");
  if (options_.layers_per_step < 1) {
    return Status::InvalidArgument(
        fmt::format("layers per step is {}; it must be at least 1", options_.layers_per_step));
  }
  if (!options_.sync &&
      (options_.staging_layers < 1 || options_.staging_layers > backend_.staging_buffers())) {
    return Status::InvalidArgument(
        fmt::format("staging layers is {}; the backend has staging buffers for 1..{} layers",
                    options_.staging_layers, backend_.staging_buffers()));
  }
  auto plans = PlanMigration(current, target, topology_, options_.sender_rule, lost_ranks);
  if (!plans.ok()) return plans.status();
  if (options_.sync && static_cast<int>(plans->size()) > backend_.staging_buffers()) {
    return Status::InvalidArgument(fmt::format(
        "sync mode stages all {} changing layers at once but the backend has staging buffers "
        "for {}",
        plans->size(), backend_.staging_buffers()));
  }

  if (options_.transfers_from_host) {
    for (LayerPlan& plan : *plans) {
      for (const Transfer& t : plan.transfers) {
        plan.reloads.push_back(Reload{t.dst_rank, t.expert, t.dst_slot, t.bytes});
        plan.reload_bytes += t.bytes;
      }
      plan.transfers.clear();
      for (int64_t& b : plan.bytes) b = 0;
      std::stable_sort(plan.reloads.begin(), plan.reloads.end(),
                       [](const Reload& a, const Reload& b) { return a.rank < b.rank; });
    }
  }
  const int ranks = topology_.num_ranks();
  std::vector<std::vector<int64_t>> staging_bytes(plans->size());
  for (size_t i = 0; i < plans->size(); ++i) {
    const LayerPlan& plan = (*plans)[i];
    staging_bytes[i].resize(static_cast<size_t>(ranks));
    for (int rank = 0; rank < ranks; ++rank) {
      const int64_t bytes =
          static_cast<int64_t>(plan.written_slots[rank].size()) * topology_.expert_bytes();
      staging_bytes[i][static_cast<size_t>(rank)] = bytes;
      if (options_.max_staging_bytes > 0 && bytes > options_.max_staging_bytes) {
        return Status::InvalidArgument(fmt::format(
            "layer {} stages {} bytes on rank {} but the staging budget is {} bytes per rank",
            plan.layer, bytes, rank, options_.max_staging_bytes));
      }
    }
  }
  budget_binds_ = false;
  if (options_.max_staging_bytes > 0) {
    for (int rank = 0; rank < ranks; ++rank) {
      int64_t all = 0;
      for (const auto& layer : staging_bytes) all += layer[static_cast<size_t>(rank)];
      budget_binds_ = budget_binds_ || all > options_.max_staging_bytes;
    }
  }
  plans_ = std::move(plans).value();
  staging_bytes_ = std::move(staging_bytes);
  placement_ = current;
  target_ = target;
  staging_layers_ =
      options_.sync ? std::max<int>(1, static_cast<int>(plans_.size())) : options_.staging_layers;
  schedules_.clear();
  lost_.assign(static_cast<size_t>(ranks), 0);
  for (int r : lost_ranks) lost_[static_cast<size_t>(r)] = 1;
  copies_.assign(plans_.size(), std::vector<std::vector<LocalCopy>>(static_cast<size_t>(ranks)));
  reloads_.assign(plans_.size(), std::vector<std::vector<Reload>>(static_cast<size_t>(ranks)));
  for (size_t i = 0; i < plans_.size(); ++i) {
    schedules_.push_back(ScheduleTransfers(plans_[i].transfers, topology_, options_.schedule));
    for (const LocalCopy& c : plans_[i].local_copies) copies_[i][c.rank].push_back(c);
    for (const Reload& r : plans_[i].reloads) reloads_[i][r.rank].push_back(r);
    for (auto& list : copies_[i]) {
      std::stable_partition(list.begin(), list.end(),
                            [](const LocalCopy& c) { return !c.after_receive; });
    }
  }
  flows_of_rank_.assign(plans_.size(), {});
  for (size_t i = 0; i < plans_.size(); ++i) {
    for (int l = 0; l < kNumLinkClasses; ++l) {
      auto& of_rank = flows_of_rank_[i][l];
      of_rank.assign(static_cast<size_t>(ranks), {});
      const auto& rounds = schedules_[i].lanes[l];
      for (size_t r = 0; r < rounds.size(); ++r) {
        for (size_t f = 0; f < rounds[r].flows.size(); ++f) {
          const Flow& flow = rounds[r].flows[f];
          const FlowRef ref{static_cast<int32_t>(r), static_cast<int32_t>(f)};
          of_rank[flow.src_rank].push_back(ref);
          if (flow.dst_rank != flow.src_rank) of_rank[flow.dst_rank].push_back(ref);
        }
      }
    }
  }
  lanes_done_.assign(plans_.size(), std::vector<int>(static_cast<size_t>(ranks), 0));
  begun_.assign(plans_.size(), std::vector<char>(static_cast<size_t>(ranks), 0));
  staged_now_.assign(static_cast<size_t>(ranks), 0);
  staging_peak_.resize(static_cast<size_t>(ranks), 0);
  ranks_ready_.assign(plans_.size(), 0);
  local_ranks_ = 0;
  spans_processes_ = false;
  for (int rank = 0; rank < ranks; ++rank) {
    local_ranks_ += backend_.IsLocal(rank) && !lost_[static_cast<size_t>(rank)] ? 1 : 0;
    spans_processes_ = spans_processes_ || !backend_.IsLocal(rank);
  }
  committed_ = 0;
  error_ = Status::Ok();
  cancelled_ = false;
  if (plans_.empty()) return Status::Ok();
  // Every process reaches this point together (the plans are the same everywhere), so the
  // backend's collectives line up whatever ranks this process has lost.
  EPLB_RETURN_IF_ERROR(backend_.BeginRearrangement());
  in_progress_ = true;
  // A worker per rank and lane, or one per rank running every lane when the backend merges them.
  const int lanes_per_worker = backend_.MergesLanes() ? kNumLinkClasses : 1;
  for (int rank = 0; rank < ranks; ++rank) {
    if (!backend_.IsLocal(rank)) continue;  // its own process runs it
    if (lost_[static_cast<size_t>(rank)]) continue;
    for (int lane = 0; lane < kNumLinkClasses; lane += lanes_per_worker) {
      backend_.StartWorker(
          rank, [this, rank, lane, lanes_per_worker] { RunWorker(rank, lane, lanes_per_worker); });
    }
  }
  return Status::Ok();
}

double Rearranger::lower_bound_s() const {
  if (staging_layers_ == 1 || plans_.size() < 2) {
    double sum = 0;
    for (const Schedule& s : schedules_) sum += s.lower_bound_s;
    return sum;
  }
  std::vector<Transfer> all;
  for (const LayerPlan& p : plans_) all.insert(all.end(), p.transfers.begin(), p.transfers.end());
  return TransferLowerBound(all, topology_);
}

bool Rearranger::WaitForBuffer(size_t index, int rank) {
  const size_t r = static_cast<size_t>(rank);
  std::unique_lock lock(*monitor_);
  if (begun_[index][r]) return !cancelled_;  // another lane of the rank began it
  const int64_t bytes = staging_bytes_[index][r];
  const auto admits = [&] {
    if (static_cast<int>(index) >= committed_ + staging_layers_) return false;
    // The oldest uncommitted layer always fits: Start checked every layer alone.
    return options_.max_staging_bytes <= 0 || static_cast<int>(index) == committed_ ||
           staged_now_[r] + bytes <= options_.max_staging_bytes;
  };
  while (!cancelled_ && !begun_[index][r] && !admits()) monitor_->Wait();
  if (cancelled_) return false;
  if (!begun_[index][r]) {
    begun_[index][r] = 1;
    staged_now_[r] += bytes;
    staging_peak_[r] = std::max(staging_peak_[r], staged_now_[r]);
  }
  return true;
}

std::vector<int64_t> Rearranger::TakeStagingPeaks() {
  std::unique_lock lock(*monitor_);
  std::vector<int64_t> peaks(static_cast<size_t>(topology_.num_ranks()), 0);
  for (size_t r = 0; r < staging_peak_.size() && r < peaks.size(); ++r) peaks[r] = staging_peak_[r];
  staging_peak_.assign(peaks.size(), 0);
  return peaks;
}

void Rearranger::Fail(const Status& status) {
  std::unique_lock lock(*monitor_);
  if (error_.ok()) error_ = status;
  cancelled_ = true;
  monitor_->NotifyAll();
}

// Runs lanes [first_lane, first_lane + lanes) of `rank`. One lane: its rounds as scheduled.
// Several (MergesLanes): round r of every lane at once, the same sequence on every rank, whatever
// it takes part in.
void Rearranger::RunWorker(int rank, int first_lane, int lanes) {
  const bool merged = lanes > 1;
  for (size_t i = 0; i < plans_.size(); ++i) {
    if (!WaitForBuffer(i, rank)) return;
    const LayerPlan& plan = plans_[i];
    const StagingTarget target{rank, plan.layer, static_cast<int>(i % staging_layers_)};
    if (const Status s = backend_.BeginLayer(target); !s.ok()) {
      return Fail(s.WithContext(fmt::format("rank {}, layer {}: ", rank, plan.layer)));
    }
    const auto& schedule = schedules_[i].lanes;
    // The rank's flows of each lane in round order; a cursor per lane walks them together.
    size_t next[kNumLinkClasses] = {};
    for (;;) {
      if (cancelled_) return;
      int32_t r = -1;  // the earliest round, over the lanes, that the rank takes part in
      for (int l = first_lane; l < first_lane + lanes; ++l) {
        const auto& mine = flows_of_rank_[i][l][rank];
        if (next[l] < mine.size() && (r < 0 || mine[next[l]].round < r)) r = mine[next[l]].round;
      }
      if (r < 0) break;
      // Only this rank's flows: every backend acts on the flows it sends or receives.
      Round round;
      round.link = static_cast<LinkClass>(first_lane);
      bool involved[kNumLinkClasses] = {};
      bool any = false;
      for (int l = first_lane; l < first_lane + lanes; ++l) {
        const size_t rr = static_cast<size_t>(r);
        if (rr < schedule[l].size()) {
          round.duration_s = std::max(round.duration_s, schedule[l][rr].duration_s);
        }
        const auto& mine = flows_of_rank_[i][l][rank];
        for (; next[l] < mine.size() && mine[next[l]].round == r; ++next[l]) {
          if (!any) round.link = static_cast<LinkClass>(l);
          round.flows.push_back(schedule[l][rr].flows[static_cast<size_t>(mine[next[l]].flow)]);
          involved[l] = any = true;
        }
      }
      const double start = backend_.Now();
      const Status s = backend_.ExecuteRound(target, round, plan.transfers);
      if (!s.ok()) {
        return Fail(s.WithContext(
            fmt::format("rank {}, layer {}, {} round {}: ", rank, plan.layer,
                        merged ? "merged" : LinkClassName(static_cast<LinkClass>(first_lane)), r)));
      }
      const double end = backend_.Now();
      for (int l = first_lane; l < first_lane + lanes; ++l) {
        if (involved[l]) {
          on_round(RoundEvent{rank, plan.layer, static_cast<LinkClass>(l), r, start, end});
        }
      }
    }
    {
      std::unique_lock lock(*monitor_);
      // The last of the rank's workers to finish the layer finishes the rank.
      if (++lanes_done_[i][rank] < kNumLinkClasses / lanes) continue;
    }
    if (!FinishRank(rank, i)) return;
  }
}

bool Rearranger::FinishRank(int rank, size_t index) {
  const LayerPlan& plan = plans_[index];
  const StagingTarget target{rank, plan.layer, static_cast<int>(index % staging_layers_)};
  if (!reloads_[index][rank].empty()) {
    const Status s = backend_.ReloadFromBackup(target, reloads_[index][rank]);
    if (!s.ok()) {
      Fail(s.WithContext(fmt::format("rank {}, layer {}, reload from backup: ", rank, plan.layer)));
      return false;
    }
  }
  if (!copies_[index][rank].empty()) {
    const Status s = backend_.CopyLocal(target, copies_[index][rank]);
    if (!s.ok()) {
      Fail(s.WithContext(fmt::format("rank {}, layer {}, local copies: ", rank, plan.layer)));
      return false;
    }
  }
  std::unique_lock lock(*monitor_);
  if (++ranks_ready_[index] == local_ranks_) {
    on_layer_staged(LayerEvent{plan.layer, backend_.Now()});
    monitor_->NotifyAll();
  }
  return true;
}

Status Rearranger::CommitLocked(size_t index) {
  const LayerPlan& plan = plans_[index];
  for (int rank = 0; rank < topology_.num_ranks(); ++rank) {
    if (!backend_.IsLocal(rank) || lost_[static_cast<size_t>(rank)]) continue;
    const StagingTarget target{rank, plan.layer, static_cast<int>(index % staging_layers_)};
    EPLB_RETURN_IF_ERROR(backend_.CommitLayer(target, plan.written_slots[rank]));
  }
  for (size_t r = 0; r < staged_now_.size(); ++r) {
    if (begun_[index][r]) staged_now_[r] -= staging_bytes_[index][r];
  }
  placement_ = placement_->WithLayerFrom(*target_, plan.layer);
  ++committed_;
  on_layer_committed(LayerEvent{plan.layer, backend_.Now()});
  return Status::Ok();
}

Result<std::vector<int>> Rearranger::OnStepBoundary() {
  if (!in_progress_) return std::vector<int>{};
  // A staging budget may not hold every layer at once: commit each as it is staged, the
  // foreground blocked all the same.
  if (options_.sync && budget_binds_) return CommitAll();
  if (options_.sync) {
    // Stop the world: wait for every layer to be staged.
    std::unique_lock lock(*monitor_);
    AwaitStaged(lock, [&] {
      return std::all_of(ranks_ready_.begin(), ranks_ready_.end(),
                         [&](int ready) { return ready == local_ranks_; });
    });
  }
  return CommitStaged(options_.sync ? static_cast<int>(plans_.size()) : options_.layers_per_step);
}

Result<std::vector<int>> Rearranger::CommitAll() {
  std::vector<int> all;
  while (in_progress_) {
    {
      std::unique_lock lock(*monitor_);
      AwaitStaged(lock,
                  [&] { return ranks_ready_[static_cast<size_t>(committed_)] == local_ranks_; });
    }
    EPLB_ASSIGN_OR_RETURN(std::vector<int> some, CommitStaged(static_cast<int>(plans_.size())));
    all.insert(all.end(), some.begin(), some.end());
  }
  return all;
}

void Rearranger::AwaitStaged(std::unique_lock<Monitor>& lock, const std::function<bool()>& staged) {
  if (!spans_processes_) {
    while (!cancelled_ && !staged()) monitor_->Wait();
    return;
  }
  for (;;) {
    if (!cancelled_ && !staged()) monitor_->WaitFor(kAgreementPoll);
    const int here = cancelled_ ? -1 : staged() ? 1 : 0;
    lock.unlock();
    const int agreed = backend_.AgreeOnStagedLayers(here);
    lock.lock();
    if (agreed < 0 && !cancelled_) {
      if (error_.ok()) {
        error_ = Status::Cancelled("the rearrangement failed or was cancelled in another process");
      }
      cancelled_ = true;
      monitor_->NotifyAll();
    }
    if (agreed != 0) return;
  }
}

Result<std::vector<int>> Rearranger::CommitStaged(int limit) {
  std::vector<int> committed;
  std::unique_lock lock(*monitor_);
  const auto staged_here = [&](int ready) { return ready == local_ranks_; };
  // The all-ranks gate: the layers staged here, agreed with the other processes (if any)
  // without holding the lock, which the workers need meanwhile. What happens here after the
  // snapshot (a worker failing) waits for the next boundary, so that every process acts on
  // the same agreed numbers and they all stop at the same boundary.
  const bool failed_here = cancelled_;
  int ready = 0;
  while (!failed_here && static_cast<size_t>(committed_) + ready < plans_.size() &&
         staged_here(ranks_ready_[static_cast<size_t>(committed_) + ready])) {
    ++ready;
  }
  lock.unlock();
  const int agreed = backend_.AgreeOnStagedLayers(failed_here ? -1 : ready);
  lock.lock();
  if (agreed < 0) {
    if (error_.ok() && !failed_here) {
      error_ = Status::Cancelled("the rearrangement failed or was cancelled in another process");
    }
    cancelled_ = true;
  }
  for (int n = 0; n < std::min(agreed, limit); ++n) {
    const int layer = plans_[static_cast<size_t>(committed_)].layer;
    const Status status = CommitLocked(static_cast<size_t>(committed_));
    if (!status.ok()) {
      // Reported to the other processes at the next boundary.
      if (error_.ok()) error_ = status;
      cancelled_ = true;
      break;
    }
    committed.push_back(layer);
  }
  monitor_->NotifyAll();
  lock.unlock();
  if (agreed < 0 || static_cast<size_t>(committed_) == plans_.size()) {
    Finish();
    if (!error_.ok()) return error_;  // once: the rearrangement is over
  }
  return committed;
}

void Rearranger::Cancel() {
  if (!in_progress_) return;
  {
    std::unique_lock lock(*monitor_);
    cancelled_ = true;
    monitor_->NotifyAll();
  }
  Finish();
}

void Rearranger::Finish() {
  // A worker that passed its cancellation check may be inside a round whose peer never came.
  if (cancelled_) backend_.AbortTransfers();
  backend_.JoinWorkers();
  // The workers are gone: nothing else reads or writes error_ now.
  if (const Status ended = backend_.EndRearrangement(); !ended.ok() && error_.ok()) error_ = ended;
  in_progress_ = false;
}

}  // namespace eplb
