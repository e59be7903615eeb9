#include "sim_backend.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

namespace sg4 = simgrid::s4u;

namespace eplb::sim {
namespace {

class SimMonitor final : public Monitor {
 public:
  SimMonitor() : mutex_(sg4::Mutex::create()), cv_(sg4::ConditionVariable::create()) {}
  void lock() override { mutex_->lock(); }
  void unlock() override { mutex_->unlock(); }
  void Wait() override {
    std::unique_lock<sg4::Mutex> lock(*mutex_, std::adopt_lock);
    cv_->wait(lock);
    lock.release();  // the caller still holds it
  }
  void WaitFor(double seconds) override {  // simulated seconds
    std::unique_lock<sg4::Mutex> lock(*mutex_, std::adopt_lock);
    cv_->wait_for(lock, seconds);
    lock.release();
  }
  void NotifyAll() override { cv_->notify_all(); }

 private:
  sg4::MutexPtr mutex_;
  sg4::ConditionVariablePtr cv_;
};

}  // namespace

SimBackend::SimBackend(const Platform& platform, int staging_buffers,
                       const MigrationPricing& pricing)
    : platform_(platform),
      staging_buffers_(staging_buffers),
      pricing_(pricing),
      lost_(platform.topology().num_ranks()) {}

double SimBackend::Now() {
  return sg4::Engine::get_clock();
}

std::unique_ptr<Monitor> SimBackend::NewMonitor() {
  return std::make_unique<SimMonitor>();
}

void SimBackend::StartWorker(int rank, std::function<void()> body) {
  workers_.push_back(sg4::Actor::create("worker" + std::to_string(rank), platform_.host(rank),
                                        [this, body = std::move(body)] {
                                          const aid_t me = sg4::this_actor::get_pid();
                                          struct Registration {
                                            std::unordered_map<aid_t, Courier*>& couriers;
                                            aid_t pid;
                                            ~Registration() { couriers.erase(pid); }
                                          } registration{couriers_, me};
                                          Courier courier;
                                          couriers_[me] = &courier;
                                          body();
                                        }));
}

Courier& SimBackend::CourierOfThisActor() {
  const aid_t me = sg4::this_actor::get_pid();
  if (auto it = couriers_.find(me); it != couriers_.end()) return *it->second;
  // An actor that the rearranger did not start through StartWorker: its courier lives until
  // the simulation ends.
  auto& own = own_couriers_[me];
  if (!own) own = std::make_unique<Courier>();
  couriers_[me] = own.get();
  return *own;
}

void SimBackend::JoinWorkers() {
  for (auto& w : workers_) w->join();
  workers_.clear();
}

// The engine's host work before a rearrangement's layers (the load window's reduction, the
// policy on the CPU, the maps' rebuild): on the caller, which a synchronous engine blocks.
Status SimBackend::BeginRearrangement() {
  boundary_s_ = -1;
  if (const double once = pricing_.OnceS(); once > 0) sg4::this_actor::sleep_for(once);
  return Status::Ok();
}

// The transport's per-layer cost, and the engine's per-layer planning and barrier (a wait, not
// a synchronisation of the ranks).
Status SimBackend::BeginLayer(const StagingTarget&) {
  if (const double seconds = pricing_.LayerStartS(); seconds > 0) {
    sg4::this_actor::sleep_for(seconds);
  }
  return Status::Ok();
}

Status SimBackend::ExecuteRound(const StagingTarget& target, const Round& round,
                                std::span<const Transfer> transfers) {
  // Receivers start their flows; senders' ports are shared through the network model.
  std::vector<const Flow*> mine;
  size_t sends = 0;
  for (const Flow& f : round.flows) {
    EPLB_RETURN_IF_ERROR(lost_.CheckLive(f));
    if (f.dst_rank == target.rank) mine.push_back(&f);
    if (f.src_rank == target.rank) sends += f.transfers.size();
  }
  const WorkerCosts& engine = pricing_.worker();
  // The engine's calls for what this rank sends (vLLM's isend per tensor, a wait each).
  if (const double issuing = pricing_.SendsS(sends); issuing > 0) {
    sg4::this_actor::sleep_for(issuing);
  }
  // Migration batching: the round is one execution, which ends in its own barrier (every rank
  // taking part waits there, senders included).
  if (mine.empty()) {
    if (engine.per_round_s > 0) sg4::this_actor::sleep_for(engine.per_round_s);
    return Status::Ok();
  }
  // The messages' CPU work comes one after another before the bytes move (a transport's
  // per-message cost), then the link's start-up.
  size_t messages = 0;
  for (const Flow* f : mine) messages += f->transfers.size();
  sg4::this_actor::sleep_for(platform_.topology().link(round.link).latency_s +
                             pricing_.ReceivesS(messages));
  const double posted = sg4::Engine::get_clock();
  // What happened meanwhile: a flow that never started cannot be aborted in flight.
  if (aborted_) {
    return Status::Cancelled(
        fmt::format("rank {}, layer {}: the transfers were aborted", target.rank, target.layer));
  }
  for (const Flow* f : mine) EPLB_RETURN_IF_ERROR(lost_.CheckLive(*f));
  std::vector<HostFlow> flows;
  flows.reserve(mine.size());
  const double cap = pricing_.FlowCapBytesPerS(mine.size());
  for (const Flow* f : mine)
    flows.push_back({platform_.host(f->src_rank), platform_.host(f->dst_rank),
                     static_cast<uint64_t>(f->bytes), cap});
  const std::vector<sg4::CommPtr> comms = CourierOfThisActor().Receive(flows);
  if (comms.size() != flows.size()) {
    return Status::Unavailable(
        fmt::format("rank {}, layer {}: the round's transfers were aborted (a rank was lost)",
                    target.rank, target.layer));
  }
  // A polling engine sees the reads complete at its next check: right after posting, then
  // every period.
  if (engine.poll_period_s > 0) {
    const double waited = sg4::Engine::get_clock() - posted;
    const double checks = std::max(1.0, std::ceil(waited / engine.poll_period_s));
    sg4::this_actor::sleep_until(posted + checks * engine.poll_period_s);
  }
  if (engine.per_round_s > 0) sg4::this_actor::sleep_for(engine.per_round_s);
  for (size_t i = 0; i < mine.size(); ++i) {
    for (int32_t t : mine[i]->transfers) {
      const Transfer& tr = transfers[t];
      on_transfer(TransferRecord{target.layer, tr.expert, tr.src_rank, tr.dst_rank, tr.bytes,
                                 tr.link, comms[i]->get_start_time(), comms[i]->get_finish_time()});
    }
  }
  return Status::Ok();
}

Status SimBackend::CopyLocal(const StagingTarget&, std::span<const LocalCopy> copies) {
  // The engine's copy_ calls per tensor, into the buffer and back (vLLM's move_from_buffer).
  sg4::this_actor::sleep_for(pricing_.LocalCopiesS(
      copies.size(), static_cast<double>(platform_.topology().expert_bytes())));
  return Status::Ok();
}

Status SimBackend::ReloadFromBackup(const StagingTarget& target, std::span<const Reload> reloads) {
  if (reloads.empty()) return Status::Ok();
  sg4::this_actor::sleep_for(platform_.backup().latency_s());
  if (aborted_ || lost_.lost(target.rank)) {
    return Status::Cancelled(
        fmt::format("rank {}, layer {}: the reloads were aborted", target.rank, target.layer));
  }
  std::vector<HostFlow> flows;
  for (const Reload& r : reloads) {
    flows.push_back({platform_.backup_host(target.rank), platform_.host(target.rank),
                     static_cast<uint64_t>(r.bytes)});
  }
  if (CourierOfThisActor().Receive(flows).size() != flows.size()) {
    return Status::Unavailable(
        fmt::format("rank {}, layer {}: the reloads were aborted", target.rank, target.layer));
  }
  return Status::Ok();
}

void SimBackend::LoseRank(int rank) {
  lost_.Lose(rank);
  for (auto& [pid, courier] : couriers_) courier->AbortIfInvolves(platform_.host(rank));
}

Status SimBackend::EndRearrangement() {
  aborted_ = false;
  return Status::Ok();
}

void SimBackend::AbortTransfers() {
  aborted_ = true;
  for (auto& [pid, courier] : couriers_) courier->Abort();
}

// Weights do not exist in the simulator; the routing-table swap is the rearranger's.
// vLLM's async mode: each rank's main thread applies the layer (move_to_workspace) at the step
// boundary that commits it. The rearranger commits rank after rank and layer after layer on the
// caller, so each call pays only what its rank's total at this boundary needs beyond the most
// paid so far. The clock stands still within a boundary but for these waits.
Status SimBackend::CommitLayer(const StagingTarget& target, std::span<const int32_t> slots) {
  if (!pricing_.set_up().mode.async) return Status::Ok();  // sync: the workers' costs hold it
  const WorkerCosts& w = pricing_.worker();
  const double apply = w.apply_per_layer_s + w.apply_per_row_s * static_cast<double>(slots.size());
  if (apply <= 0) return Status::Ok();
  if (Now() != boundary_s_) {
    rank_applied_s_.assign(static_cast<size_t>(platform_.topology().num_ranks()), 0.0);
    boundary_paid_s_ = 0;
  }
  double& mine = rank_applied_s_.at(static_cast<size_t>(target.rank));
  mine += apply;
  if (mine > boundary_paid_s_) {
    sg4::this_actor::sleep_for(mine - boundary_paid_s_);
    boundary_paid_s_ = mine;
  }
  boundary_s_ = Now();
  return Status::Ok();
}

Status SimStepRunner::RunStep(const StepCost& cost, bool contended) {
  if (contended && in_flight_overhead_s_ > 0) sg4::this_actor::sleep_for(in_flight_overhead_s_);

  if (!contended) {
    sg4::this_actor::sleep_for(cost.total_s());
    return Status::Ok();
  }
  if (cost.dispatch_hidden_s + cost.combine_hidden_s <= 0) {
    Phase(cost, false, cost.dispatch_s);
    sg4::this_actor::sleep_for(cost.compute_s);
    Phase(cost, true, cost.combine_s);
    return Status::Ok();
  }
  // Two micro-batches: the phases' flows run beside compute, on an actor of their own, and the
  // step lasts as long as the slower of its analytic time and the communication plus the
  // compute that no communication can overlap (the first layer's fill).
  const double start = sg4::Engine::get_clock();
  double comm_end = start;
  sg4::ActorPtr comm = sg4::Actor::create("a2a", sg4::this_actor::get_host(), [&] {
    Phase(cost, false, cost.dispatch_s + cost.dispatch_hidden_s);
    Phase(cost, true, cost.combine_s + cost.combine_hidden_s);
    comm_end = sg4::Engine::get_clock();
  });
  sg4::this_actor::sleep_for(cost.total_s());
  comm->join();
  sg4::this_actor::sleep_until(std::max(start + cost.total_s(), comm_end + cost.overlap_fill_s));
  return Status::Ok();
}

// A phase's flows start together, one per GPU port (StepModel::AllToAllFlows) between the GPU
// and its node's port host; each link class then takes its layers × latency plus the drain time
// of its flows, and the phase lasts as long as the slower class.
// The low-latency kernels' fixed cost comes on top of the flows, and the phase lasts at least
// its analytic time (`idle_time`).
void SimStepRunner::Phase(const StepCost& cost, bool combine, double idle_time) {
  const double start = sg4::Engine::get_clock();
  const std::vector<PhaseFlow> flows = model_.AllToAllFlows(cost, combine);
  if (flows.empty()) {
    sg4::this_actor::sleep_for(idle_time);
    return;
  }
  std::vector<HostFlow> host_flows;
  host_flows.reserve(flows.size());
  for (const PhaseFlow& f : flows) {
    sg4::Host* gpu = platform_.host(f.rank);
    sg4::Host* port = platform_.port_host(f.rank, f.link);
    const auto bytes = static_cast<uint64_t>(f.bytes);
    host_flows.push_back(f.outbound ? HostFlow{gpu, port, bytes} : HostFlow{port, gpu, bytes});
  }
  const std::vector<double> finish = ports_.Run(host_flows);
  double end = start;
  for (size_t i = 0; i < flows.size(); ++i) {
    end = std::max(end, finish[i] + model_.PhaseLatency(flows[i].link));
  }
  // The flows carry the step's bytes per port; each layer's phase waits for its own busiest
  // port (step_model.h), so the phase never ends before its time on idle links.
  end = std::max(start + idle_time, end + model_.PhaseOverhead());
  sg4::this_actor::sleep_until(end);
}

}  // namespace eplb::sim
