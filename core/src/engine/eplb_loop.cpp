#include "eplb/engine/eplb_loop.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "eplb/base/interrupt.h"
#include "eplb/engine/gpu_memory.h"
#include "eplb/engine/hardware.h"
#include "eplb/engine/step_model.h"
#include "eplb/model/metrics.h"
#include "eplb/model/recovery.h"
#include "eplb/model/slot_preservation.h"
#include "eplb/policy/balance_bound.h"

namespace eplb {

const char* RearrangeReasonName(RearrangeReason reason) {
  return kRearrangeReasonNames.Name(reason);
}

namespace {

// Each policy option (policy/policy.h's PolicyOptions()) from the scenario field its row names;
// `filled`: the steps the load window holds.
PolicyTuning TuningOf(const Scenario& s, int filled) {
  PolicyTuning t;
  t.window_steps = filled;
  t.serve_steps = s.eplb.step_interval;
  t.seconds_per_token = s.compute.per_token_us * 1e-6;
  t.weight = s.eplb.migration_weight;
  t.max_moves_per_layer = s.eplb.max_moves_per_layer;
  return t;
}

// vLLM's initial placement over the GPUs serving at the start (cluster.initial_gpus); the
// others' slots empty.
Placement InitialPlacement(const Scenario& s) {
  const int slots = s.num_slots(), serving = s.initial_gpus() * (slots / s.num_gpus());
  Placement compact = *Placement::Initial(s.model.layers, s.model.experts, serving);
  if (serving == slots) return compact;
  std::vector<int32_t> flat(static_cast<size_t>(s.model.layers) * slots, kEmptySlot);
  for (int l = 0; l < s.model.layers; ++l) {
    const auto row = compact.phy2log(l);
    std::copy(row.begin(), row.end(), flat.begin() + static_cast<ptrdiff_t>(l) * slots);
  }
  return *Placement::Create(s.model.experts, slots, std::move(flat));
}

}  // namespace

EplbLoop::EplbLoop(const Scenario& scenario, Workload& workload, RearrangementBackend& backend,
                   StepRunner& runner)
    : scenario_(scenario),
      workload_(workload),
      backend_(backend),
      runner_(runner),
      topology_(scenario.topology()),
      model_(std::make_unique<StepModel>(scenario)),
      slowdowns_(std::make_unique<Slowdowns>(scenario.num_gpus())),
      initial_(InitialPlacement(scenario)),
      lost_(static_cast<size_t>(scenario.num_gpus()), 0),
      serving_(static_cast<size_t>(scenario.num_gpus()), 0),
      serving_gpus_(scenario.initial_gpus()),
      serving_live_(scenario.initial_gpus()) {
  for (int g = 0; g < scenario.num_gpus(); ++g) {
    serving_[static_cast<size_t>(g)] = g < serving_gpus_;
    if (g >= serving_gpus_) excluded_.push_back(g);
  }
  if (!excluded_.empty()) model_->SetRanks(lost_, serving_);
  RearrangerOptions o;
  o.layers_per_step = scenario.eplb.layers_per_step;
  o.staging_layers = scenario.eplb.staging_layers;
  o.sync = !scenario.eplb.use_async;
  const MigrationPricing pricing(scenario.migration_set_up());
  o.transfers_from_host = pricing.from_host();
  if (const GpuSpec* gpu = FindGpuPreset(scenario.compute.gpu);
      gpu != nullptr && scenario.migration.sms > 0 && pricing.uses_sms()) {
    const double left = gpu->sms - scenario.compute.normal_sms;
    migration_sm_slowdown_ = left / std::max(1.0, left - scenario.migration.sms);
  }
  // A run checked its scenario first (CheckGpuMemory); a loop built on an unchecked one, with no
  // headroom, stages without a limit rather than not at all.
  const double budget = GpuMemoryOf(scenario).staging_budget;
  o.max_staging_bytes = budget >= 1 && budget < 9e18 ? std::llround(budget) : 0;
  o.sender_rule = scenario.eplb.sender_rule;
  o.schedule = scenario.eplb.schedule;
  rearranger_ = std::make_unique<Rearranger>(backend, topology_, o);
  // The rearranger holds the placement in force once it has run; before, vLLM's initial one.
  rearranger_->on_layer_committed.Connect([this](const LayerEvent& e) {
    commits_.push_back({current_step_, e.time_s, e.layer,
                        std::vector<int32_t>(rearranger_->placement().phy2log(e.layer).begin(),
                                             rearranger_->placement().phy2log(e.layer).end())});
    bytes_pending_ -= layer_bytes_[e.layer];
    if (rearranger_->committed_layers() == static_cast<int>(rearranger_->plans().size()) &&
        !chunk_target_) {
      rearrangements_.back().end_s = e.time_s;
    }
  });
  const size_t cells = static_cast<size_t>(scenario.model.layers) * scenario.model.experts;
  if (scenario.eplb.statistics == EplbSpec::Statistics::kWindow)
    window_steps_.assign(cells * scenario.eplb.window_size, 0.0f);
  window_sum_ = LoadMatrix::Zero(scenario.model.layers, scenario.model.experts);
  if (scenario.eplb.gated() &&
      scenario.eplb.balancedness_gate == EplbSpec::BalancednessGate::kStepMean) {
    step_gate_.assign(static_cast<size_t>(scenario.eplb.window_size), 0.0);
  }
}

EplbLoop::~EplbLoop() {
  rearranger_->Cancel();
}

const Placement& EplbLoop::placement() const {
  return rearranger_started_ ? rearranger_->placement() : initial_;
}

void EplbLoop::AddToWindow(const LoadMatrix& load) {
  if (scenario_.eplb.statistics == EplbSpec::Statistics::kDecayed) {
    window_sum_ *= scenario_.eplb.decay;
    window_sum_ += load;
    decayed_weight_ = decayed_weight_ * scenario_.eplb.decay + 1;
    return;
  }
  const size_t cells = static_cast<size_t>(load.size());
  float* slot = window_steps_.data() + static_cast<size_t>(window_next_) * cells;
  const double* in = load.data();
  double* sum = window_sum_.data();
  for (size_t i = 0; i < cells; ++i) {
    sum[i] += in[i] - slot[i];
    slot[i] = static_cast<float>(in[i]);
  }
  window_next_ = (window_next_ + 1) % scenario_.eplb.window_size;
  window_filled_ = std::min(window_filled_ + 1, scenario_.eplb.window_size);
}

double EplbLoop::GateBalancedness(const LoadMatrix& window, const Placement& current) const {
  if (scenario_.eplb.balancedness_gate == EplbSpec::BalancednessGate::kStepMean) {
    return step_gate_filled_ > 0 ? step_gate_sum_ / step_gate_filled_ : 1.0;
  }
  const std::vector<double> layers =
      LayerBalancedness(GpuLoads(window, current, topology_, lost_list_), excluded_);
  if (layers.empty()) return 1.0;
  if (scenario_.eplb.balancedness_gate == EplbSpec::BalancednessGate::kWindowMin) {
    return *std::min_element(layers.begin(), layers.end());
  }
  return std::accumulate(layers.begin(), layers.end(), 0.0) / static_cast<double>(layers.size());
}

void EplbLoop::AccountPlans(RearrangementRecord& rec) {
  layer_bytes_.assign(static_cast<size_t>(scenario_.model.layers), 0);
  int64_t bytes = 0;
  for (size_t i = 0; i < rearranger_->plans().size(); ++i) {
    const LayerPlan& plan = rearranger_->plans()[i];
    const Schedule& s = rearranger_->schedules()[i];
    ++rec.layers;
    rec.transfers += static_cast<int64_t>(plan.transfers.size());
    for (LinkClass link : kLinkClasses) rec.bytes[link] += plan.bytes[link];
    rec.bytes_reloaded += plan.reload_bytes;
    rec.reloads += static_cast<int64_t>(plan.reloads.size());
    layer_bytes_[plan.layer] = plan.bytes.sum() + plan.reload_bytes;
    bytes += layer_bytes_[plan.layer];
    rec.predicted_makespan_s += s.makespan_s;
  }
  rec.lower_bound_s += rearranger_->lower_bound_s();
  bytes_pending_ = bytes;
  if (scenario_.migration.engine != Engine::kEplb) {
    std::vector<double> links;
    std::vector<int> batches;  // migration.batching: each round of the schedule an execution
    for (const Schedule& s : rearranger_->schedules()) {
      links.push_back(s.makespan_s);
      if (scenario_.migration.batching) batches.push_back(std::max(1, s.num_rounds()));
    }
    const RearrangementOrchestration o = PriceRearrangement(
        scenario_.migration.engine, scenario_.migration.transport, scenario_.model.expert_tensors,
        rearranger_->placement(), rearranger_->plans(), links, scenario_.ep_shape(), batches);
    rec.engine_once_s += o.once.total_s();
    rec.engine_planning_s += o.layers.planning_s;
    rec.engine_transfer_s += o.layers.transfer_s;
    rec.engine_barrier_s += o.layers.barrier_s;
    rec.engine_polling_s += o.layers.polling_s;
    rec.engine_writeback_s += o.layers.writeback_s;
  }
}

Status EplbLoop::MoveNextChunk(double& stalled_s) {
  const int layers = scenario_.model.layers;
  const int first = chunk_next_layer_;
  const int end = std::min(layers, first + scenario_.eplb.layers_per_chunk);
  // The target's layers below `upto`, the base's from it on.
  auto mix = [&](int upto) {
    const int slots = chunk_base_->num_slots();
    std::vector<int32_t> flat;
    flat.reserve(static_cast<size_t>(layers) * static_cast<size_t>(slots));
    for (int l = 0; l < layers; ++l) {
      const auto row = (l < upto ? *chunk_target_ : *chunk_base_).phy2log(l);
      flat.insert(flat.end(), row.begin(), row.end());
    }
    return Placement::Create(chunk_base_->num_experts(), slots, std::move(flat));
  };
  EPLB_ASSIGN_OR_RETURN(Placement from, mix(first));
  EPLB_ASSIGN_OR_RETURN(Placement to, mix(end));
  chunk_next_layer_ = end;
  if (end == layers) {
    chunk_target_.reset();
    chunk_base_.reset();
  }
  // The boundary waits for the chunk's start (the engine's host work) and every layer of it.
  const double t = backend_.Now();
  EPLB_RETURN_IF_ERROR(rearranger_->Start(from, to, lost_list_));
  rearranger_started_ = true;
  RearrangementRecord& rec = rearrangements_.back();
  AccountPlans(rec);
  EPLB_RETURN_IF_ERROR(rearranger_->CommitAll().status());
  stalled_s += backend_.Now() - t;
  if (end == layers && rec.end_s < 0) rec.end_s = backend_.Now();
  return Status::Ok();
}

Status EplbLoop::Rearrange(int step, RearrangeReason reason, const Placement* forced) {
  if (rearranger_->in_progress() || chunk_target_) {
    ++skipped_;
    return Status::Ok();
  }
  const Placement current = placement();
  // Float accumulation leaves crumbs around zero; the policy needs non-negative loads.
  const LoadMatrix window = window_sum_.cwiseMax(0.0);
  if (reason == RearrangeReason::kInterval && scenario_.eplb.gated() && !recorded_.replays &&
      GateBalancedness(window, current) >= scenario_.eplb.min_balancedness) {
    ++held_;
    return Status::Ok();
  }
  const bool decayed = scenario_.eplb.statistics == EplbSpec::Statistics::kDecayed;
  // The window in consecutive chunks of steps, oldest first, for policies that look at time;
  // decayed statistics keep no steps apart, and are one chunk.
  constexpr int kChunks = 16;
  const int filled = decayed ? std::max(1, static_cast<int>(std::lround(decayed_weight_)))
                             : std::max(1, window_filled_);
  const int per_chunk = std::max(1, (filled + kChunks - 1) / kChunks);
  const size_t cells = static_cast<size_t>(window.size());
  const int size = scenario_.eplb.window_size;
  std::vector<LoadMatrix> chunks;
  if (decayed) chunks.push_back(window);
  for (int first = 0; !decayed && first < filled; first += per_chunk) {
    LoadMatrix chunk = LoadMatrix::Zero(window.rows(), window.cols());
    for (int i = first; i < std::min(filled, first + per_chunk); ++i) {
      const int slot = ((window_next_ - filled + i) % size + size) % size;
      const float* recorded = window_steps_.data() + static_cast<size_t>(slot) * cells;
      for (size_t c = 0; c < cells; ++c) chunk.data()[c] += recorded[c];
    }
    chunks.push_back(std::move(chunk));
  }
  PolicyInput input{window, topology_, &current, scenario_.model.groups, chunks};
  input.tuning = TuningOf(scenario_, filled);
  input.lost_ranks = excluded_;
  input.step = step;
  const auto start = std::chrono::steady_clock::now();
  const double clock_before = backend_.Now();
  auto target = forced != nullptr ? Result<Placement>(*forced) : policy_->Rebalance(input);
  const double policy_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!target.ok())
    return target.status().WithContext(
        fmt::format("step {}: policy {}: ", step, scenario_.eplb.policy));
  if (forced == nullptr && policy_->prices_wall_time()) {
    // As in an engine, the rearrangement starts when the policy returns: the step boundary
    // waits for it on a simulated clock too (a real one has already passed it).
    const double until = clock_before + policy_ms * 1e-3;
    if (backend_.Now() < until) {
      auto monitor = backend_.NewMonitor();
      std::lock_guard<Monitor> lock(*monitor);
      while (backend_.Now() < until) monitor->WaitFor(until - backend_.Now());
    }
  }
  // A recorded placement is replayed as it was, slot for slot.
  const Placement next = scenario_.eplb.preserve_slots && !recorded_.replays
                             ? PreserveSlots(current, *target, topology_)
                             : *target;

  RearrangementRecord r;
  r.step = step;
  r.reason = reason;
  r.start_s = backend_.Now();
  r.policy_ms = policy_ms;
  // Over the GPUs that serve, with the live replicas only (lost and idle GPUs take no part).
  r.window_balancedness_before =
      Balancedness(GpuLoads(window, current, topology_, lost_list_), excluded_);
  r.window_balancedness_after =
      Balancedness(GpuLoads(window, next, topology_, lost_list_), excluded_);
  if (excluded_.empty()) {
    r.window_balancedness_bound = BalancednessUpperBound(window, topology_);
  } else {
    // The best any placement on the serving GPUs alone could do (one flat node of them: the
    // bound does not depend on nodes).
    TopologyConfig serving = topology_.config();
    serving.nodes = 1;
    serving.gpus_per_node = topology_.num_ranks() - static_cast<int>(excluded_.size());
    r.window_balancedness_bound = BalancednessUpperBound(window, *Topology::Create(serving));
  }
  r.window_load.reserve(static_cast<size_t>(window.size()));
  for (int l = 0; l < window.rows(); ++l) {
    for (int e = 0; e < window.cols(); ++e)
      r.window_load.push_back(static_cast<float>(window(l, e)));
  }
  // The one before is over (finished or cancelled): what it staged is its own.
  if (!rearrangements_.empty()) {
    rearrangements_.back().staging_peak_bytes = rearranger_->TakeStagingPeaks();
  }
  rearrangements_.push_back(r);
  if (decayed) {  // TensorRT-LLM clears its statistics once they have been used
    window_sum_.setZero();
    decayed_weight_ = 0;
  }
  const int layers = scenario_.model.layers, per = scenario_.eplb.layers_per_chunk;
  if (reason == RearrangeReason::kInterval && !scenario_.eplb.use_async && per > 0 &&
      per < layers) {
    // The chunks move from the next step boundary on (Run).
    chunk_base_ = current;
    chunk_target_ = next;
    chunk_next_layer_ = 0;
    return Status::Ok();
  }
  EPLB_RETURN_IF_ERROR(rearranger_->Start(current, next, lost_list_));
  rearranger_started_ = true;
  RearrangementRecord& rec = rearrangements_.back();
  AccountPlans(rec);
  if (rec.layers == 0) rec.end_s = rec.start_s;
  return Status::Ok();
}

Status EplbLoop::Run() {
  auto policy = MakePolicy(scenario_.eplb.policy);
  if (!policy.ok()) return policy.status();
  policy_ = std::move(policy).value();
  if (Status s = policy_->Prepare(); !s.ok()) {
    return s.WithContext(fmt::format("policy {}: ", scenario_.eplb.policy));
  }
  if (auto* scheduling = dynamic_cast<SchedulingPolicy*>(policy_.get())) {
    auto recorded = scheduling->Schedule(topology_, scenario_.model.layers, scenario_.model.experts,
                                         scenario_.run.steps, excluded_);
    if (!recorded.ok()) {
      return recorded.status().WithContext(fmt::format("policy {}: ", scenario_.eplb.policy));
    }
    recorded_ = std::move(recorded).value();
    if (recorded_.initial) initial_ = *recorded_.initial;
  }
  const int interval = scenario_.eplb.step_interval;
  int counter = interval - interval / 4;
  LoadMatrix load;
  StepCost cost;
  steps_.reserve(static_cast<size_t>(scenario_.run.steps));
  const int layers = scenario_.model.layers;
  span_steps_ =
      std::max(1, (scenario_.run.steps + kLayerBalanceBuckets - 1) / kLayerBalanceBuckets);
  const size_t spans = static_cast<size_t>((scenario_.run.steps + span_steps_ - 1) / span_steps_);
  span_mean_.assign(spans * static_cast<size_t>(layers), 0.0);
  span_max_.assign(spans * static_cast<size_t>(layers), 0.0);
  for (int step = 0; step < scenario_.run.steps; ++step) {
    if (Status s = CheckInterrupt(); !s.ok()) {
      rearranger_->Cancel();
      return s.WithContext(fmt::format("step {}: ", step));
    }
    current_step_ = step;
    double fault_stall_s = 0;
    if (!scenario_.faults.empty()) {
      if (Status s = ApplyFaults(step, fault_stall_s); !s.ok())
        return s.WithContext(fmt::format("step {}: ", step));
    }
    workload_.Next(load);
    AddToWindow(load);
    const bool contended = rearranger_->in_progress();
    model_->Cost(load, placement(), cost);
    if (!step_gate_.empty()) {
      double sum = 0;
      for (size_t l = 0; l < cost.layer_mean.size(); ++l)
        sum += (cost.layer_mean[l] + 1e-5) / (cost.layer_max[l] + 1e-5);
      const double b = cost.layer_mean.empty() ? 1.0 : sum / double(cost.layer_mean.size());
      double& oldest = step_gate_[static_cast<size_t>(step_gate_next_)];
      step_gate_sum_ += b - (step_gate_filled_ == static_cast<int>(step_gate_.size()) ? oldest : 0);
      oldest = b;
      step_gate_next_ = (step_gate_next_ + 1) % static_cast<int>(step_gate_.size());
      step_gate_filled_ = std::min(step_gate_filled_ + 1, static_cast<int>(step_gate_.size()));
    }
    {
      const size_t first = static_cast<size_t>(step / span_steps_) * static_cast<size_t>(layers);
      for (size_t l = 0; l < cost.layer_mean.size(); ++l) {
        span_mean_[first + l] += cost.layer_mean[l];
        span_max_[first + l] += cost.layer_max[l];
      }
    }
    StepRecord rec{.step = step,
                   .start_s = backend_.Now(),
                   .step_s = 0,  // once the backend has run it
                   .idle_s = cost.total_s(),
                   .balancedness = cost.balancedness,
                   .imbalance_ratio = cost.imbalance_ratio,
                   .bytes_in_flight = bytes_pending_,
                   .stalled_s = fault_stall_s,
                   .tokens_lost = cost.tokens_lost,
                   .serving_gpus = serving_live_};
    // An SM-driven transport's kernels hold migration.sms of every GPU's SMs while a
    // rearrangement is in flight: compute runs on the rest (the idle step above does not).
    if (contended && migration_sm_slowdown_ > 1) {
      cost.compute_s *= migration_sm_slowdown_;
      cost.attention_s *= migration_sm_slowdown_;
    }
    if (const Status s = runner_.RunStep(cost, contended); !s.ok()) {
      return s.WithContext(fmt::format("step {}: ", step));
    }
    const double boundary = backend_.Now();
    rec.step_s = boundary - rec.start_s;
    // The rearrangement in flight during the step, or moving in chunks at its boundary, is the
    // latest: only one runs at a time.
    RearrangementRecord* in_flight = (contended || chunk_target_) && !rearrangements_.empty()
                                         ? &rearrangements_.back()
                                         : nullptr;
    if (in_flight != nullptr && contended) {
      in_flight->slowed_s += std::max(0.0, rec.step_s - rec.idle_s);
    }
    rec.latency_s = rec.step_s +
                    (steps_.empty() ? fault_stall_s
                                    : rec.start_s - (steps_.back().start_s + steps_.back().step_s));
    const double stalled_before = rec.stalled_s;
    auto committed = rearranger_->OnStepBoundary();
    if (!committed.ok()) return committed.status().WithContext(fmt::format("step {}: ", step));
    rec.stalled_s += backend_.Now() - boundary;
    if (chunk_target_) EPLB_RETURN_IF_ERROR(MoveNextChunk(rec.stalled_s));
    if (in_flight != nullptr) in_flight->stalled_s += rec.stalled_s - stalled_before;
    // A recording rearranges at its steps and no other; otherwise the interval does.
    bool due = false;
    if (recorded_.replays) {
      const std::vector<int>& at = recorded_.steps;
      due = next_recorded_ < at.size() && at[next_recorded_] == step;
      if (due) ++next_recorded_;
    } else if (++counter >= interval) {
      counter = 0;
      due = true;
    }
    if (due) {
      const size_t started = rearrangements_.size();
      // Everything the boundary waits for from here is the stall: the policy (priced on a
      // simulated clock), the engine's once-per-rearrangement host work as it starts, and a
      // stop-the-world wait for every layer.
      const double t = backend_.Now();
      EPLB_RETURN_IF_ERROR(Rearrange(step));
      if (!scenario_.eplb.use_async && rearranger_->in_progress()) {
        auto all = rearranger_->OnStepBoundary();
        if (!all.ok()) return all.status().WithContext(fmt::format("step {}: ", step));
      }
      const double waited = backend_.Now() - t;
      rec.stalled_s += waited;
      if (rearrangements_.size() > started) rearrangements_.back().stalled_s += waited;
    }
    steps_.push_back(rec);
    if (on_step) on_step(rec);
  }
  rearranger_->Cancel();
  if (!rearrangements_.empty()) {
    rearrangements_.back().staging_peak_bytes = rearranger_->TakeStagingPeaks();
  }
  return Status::Ok();
}

// The slowdowns in force change only at a fault's first and last step: the step model prices
// with them, and the backend slows the links they hit (or cannot, on real hardware).
void EplbLoop::ApplySlowdowns(int step) {
  Slowdowns now = SlowdownsAt(scenario_.faults, step, topology_);
  if (now == *slowdowns_) return;
  for (LinkClass link : kLinkClasses) {
    for (size_t r = 0; r < now.link[link].size(); ++r) {
      if (now.link[link][r] != slowdowns_->link[link][r]) {
        backend_.SetLinkSlowdown(static_cast<int>(r), link, now.link[link][r]);
      }
    }
  }
  model_->SetSlowdowns(now);
  *slowdowns_ = std::move(now);
}

Status EplbLoop::ApplyFaults(int step, double& stalled_s) {
  ApplySlowdowns(step);
  int fault = -1;
  bool loss = false;
  const int gpn = topology_.gpus_per_node();
  for (size_t i = 0; i < scenario_.faults.size(); ++i) {
    const FaultSpec& f = scenario_.faults[i];
    if (!f.changes_ranks() || f.step != step) continue;
    fault = static_cast<int>(i);
    if (f.kind == FaultKind::kScale) {
      serving_gpus_ = f.gpus;
      continue;
    }
    loss = true;
    for (int r = f.first_rank(gpn); r <= f.last_rank(gpn); ++r) {
      if (lost_[static_cast<size_t>(r)]) continue;
      lost_[static_cast<size_t>(r)] = 1;
      backend_.LoseRank(r);
    }
  }
  if (fault < 0) return Status::Ok();
  excluded_.clear();
  lost_list_.clear();
  serving_live_ = 0;
  for (int g = 0; g < topology_.num_ranks(); ++g) {
    const size_t i = static_cast<size_t>(g);
    serving_[i] = g < serving_gpus_ && !lost_[i];
    serving_live_ += serving_[i];
    if (!serving_[i]) excluded_.push_back(g);
    if (lost_[i]) lost_list_.push_back(g);
  }
  model_->SetRanks(lost_, serving_);

  if (rearranger_->in_progress() || chunk_target_) {
    // Its transfers with the lost ranks fail (or, for a scale, it is superseded): cancelled,
    // its committed layers stay new and the others old.
    rearranger_->Cancel();
    chunk_target_.reset();
    chunk_base_.reset();
    rearrangements_.back().cancelled = true;
    bytes_pending_ = 0;
  }
  // What the step waits for from here is its stall: the policy, the engine's host work as the
  // recovery starts and, when serving waits, the recovery itself.
  const double t = backend_.Now();
  if (loss && scenario_.eplb.recovery == EplbSpec::Recovery::kRepair) {
    // Only what the loss forces: the lost experts in place of redundant replicas.
    EPLB_ASSIGN_OR_RETURN(
        Placement repaired,
        RepairAroundLostRanks(placement(), window_sum_.cwiseMax(0.0), topology_, excluded_));
    EPLB_RETURN_IF_ERROR(Rearrange(step, RearrangeReason::kRecovery, &repaired));
  } else {
    EPLB_RETURN_IF_ERROR(
        Rearrange(step, loss ? RearrangeReason::kRecovery : RearrangeReason::kScale));
  }
  const RearrangementRecord& r = rearrangements_.back();
  // Serving waits for the recovery when it must: stop-the-world, or lost experts and `wait`.
  const bool wait = !scenario_.eplb.use_async ||
                    (r.reloads > 0 && scenario_.eplb.lost_tokens == EplbSpec::LostTokens::kWait);
  if (wait && rearranger_->in_progress()) {
    EPLB_RETURN_IF_ERROR(rearranger_->CommitAll().status());
  }
  stalled_s = backend_.Now() - t;
  return Status::Ok();
}

std::vector<LayerBalanceSpan> EplbLoop::layer_balance() const {
  std::vector<LayerBalanceSpan> out;
  const int layers = scenario_.model.layers;
  const int done = static_cast<int>(steps_.size());
  for (int first = 0; first < done; first += span_steps_) {
    LayerBalanceSpan span{first, std::min(done, first + span_steps_) - 1, {}};
    const size_t base = static_cast<size_t>(first / span_steps_) * static_cast<size_t>(layers);
    for (int l = 0; l < layers; ++l) {
      const double max = span_max_[base + static_cast<size_t>(l)];
      span.balancedness.push_back(
          max > 0 ? static_cast<float>(span_mean_[base + static_cast<size_t>(l)] / max) : 1.0f);
    }
    out.push_back(std::move(span));
  }
  return out;
}

}  // namespace eplb
