// The rearranger's backend on the SimGrid model: workers are actors on their GPU's host, a
// round's receives are flows from the senders' hosts (after the link's start-up latency, brought
// by the worker's Courier, flows.h),
// local copies take bytes / HBM bandwidth, and the clock is simulated time. No weights exist:
// the simulator moves time, not bytes. Each finished transfer is reported through on_transfer.
//
// Also the step runner: a step on idle links lasts its analytic time; on links shared with
// migrations its dispatch and combine phases run as one flow per GPU port
// (StepModel::AllToAllFlows, Platform::port_host) and last as long as the network model says.
//
// Thread-safety: SimGrid runs actors one at a time; use only from actors of one engine.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "eplb/engine/eplb_loop.h"
#include "eplb/engine/step_model.h"
#include "eplb/migrate/backend.h"
#include "eplb/migrate/lost_ranks.h"
#include "eplb/migrate/migration_pricing.h"
#include "flows.h"
#include "platform.h"

namespace eplb::sim {

class SimBackend final : public RearrangementBackend {
 public:
  // `pricing`: what moving the weights costs beyond the links (migrate/migration_pricing.h):
  // the engine's once-per-rearrangement host work (BeginRearrangement, on the caller: a stall),
  // and on each worker the transport's and the engine's per-layer work and barrier
  // (BeginLayer), per-expert calls and completion polling (ExecuteRound), copies (CopyLocal).
  // In an engine's async mode (eplb.use_async) its main thread applies each layer (CommitLayer,
  // on the caller: the step that applies it waits for the slowest rank's share).
  SimBackend(const Platform& platform, int staging_buffers, const MigrationPricing& pricing);

  double Now() override;
  std::unique_ptr<Monitor> NewMonitor() override;
  void StartWorker(int rank, std::function<void()> body) override;
  void JoinWorkers() override;
  int staging_buffers() const override { return staging_buffers_; }
  Status BeginRearrangement() override;
  // The transport's per-layer cost, on the worker.
  Status BeginLayer(const StagingTarget& target) override;
  Status ExecuteRound(const StagingTarget& target, const Round& round,
                      std::span<const Transfer> transfers) override;
  Status CopyLocal(const StagingTarget& target, std::span<const LocalCopy> copies) override;
  Status CommitLayer(const StagingTarget& target, std::span<const int32_t> slots) override;
  // A flow per reload from the node's backup host (Platform::backup_host), after its latency.
  Status ReloadFromBackup(const StagingTarget& target, std::span<const Reload> reloads) override;
  // The workers' flows in flight from or to the rank are cancelled (their rounds fail), and so
  // is every later flow that names it.
  void LoseRank(int rank) override;
  // Cancels every worker's flows in flight (a communicator abort), and any a worker would start
  // until the rearrangement ends (EndRearrangement).
  void AbortTransfers() override;
  Status EndRearrangement() override;
  void SetLinkSlowdown(int rank, LinkClass link, double factor) override {
    platform_.SetLinkSlowdown(rank, link, factor);
  }

 private:
  Courier& CourierOfThisActor();
  // Unavailable when the flow's sender or receiver is lost.

  const Platform& platform_;
  int staging_buffers_;
  const MigrationPricing pricing_;

  // vLLM's async apply (WorkerCosts::apply_*; zero otherwise). Each rank's main thread applies
  // the layers committed at one step boundary one after another, the ranks at once: the
  // boundary waits for the rank whose layers take longest, not for every rank's.
  double boundary_s_ = -1;              // the boundary being applied (its time when last paid)
  std::vector<double> rank_applied_s_;  // each rank's apply at that boundary
  double boundary_paid_s_ = 0;          // the most of them, paid so far

  std::vector<simgrid::s4u::ActorPtr> workers_;
  // The courier that brings each worker actor its flows (flows.h), by actor id.
  std::unordered_map<aid_t, Courier*> couriers_;
  std::unordered_map<aid_t, std::unique_ptr<Courier>> own_couriers_;
  LostRanks lost_;        // LoseRank
  bool aborted_ = false;  // since the last AbortTransfers, until EndRearrangement
};

class SimStepRunner final : public StepRunner {
 public:
  SimStepRunner(const Platform& platform, const StepModel& model)
      : platform_(platform), model_(model) {}
  Status RunStep(const StepCost& cost, bool contended) override;
  // Host time the engine adds to every step while a rearrangement is in flight (its async
  // mode's per-step check, migrate/engine_profile.h's AsyncStepOverheadS).
  void SetInFlightOverhead(double seconds) { in_flight_overhead_s_ = seconds; }

 private:
  double in_flight_overhead_s_ = 0;
  void Phase(const StepCost& cost, bool combine, double idle_time);
  const Platform& platform_;
  const StepModel& model_;
  PortActors ports_;
};

}  // namespace eplb::sim
