// A RearrangementBackend that forwards every call to another (LevelDB's EnvWrapper): a backend
// that adds to another (the one-GPU model's costs on the simulator's, tests' fault injectors)
// overrides only the calls it changes. The inner backend's transfers reach this one's
// on_transfer only after ReportInnerTransfers(), which needs the inner backend to emit none
// after this one is gone (signals keep their callbacks): several wrappers of one backend with
// different lifetimes (the processes' backends) leave it uncalled.
#pragma once

#include "eplb/migrate/backend.h"

namespace eplb {

class ForwardingBackend : public RearrangementBackend {
 public:
  explicit ForwardingBackend(RearrangementBackend& inner) : inner_(inner) {}

  void ReportInnerTransfers() {
    inner_.on_transfer.Connect([this](const TransferRecord& t) { on_transfer(t); });
  }

  double Now() override { return inner_.Now(); }
  std::unique_ptr<Monitor> NewMonitor() override { return inner_.NewMonitor(); }
  bool MergesLanes() const override { return inner_.MergesLanes(); }
  Status BeginRearrangement() override { return inner_.BeginRearrangement(); }
  void StartWorker(int rank, std::function<void()> body) override {
    inner_.StartWorker(rank, std::move(body));
  }
  void JoinWorkers() override { inner_.JoinWorkers(); }
  Status EndRearrangement() override { return inner_.EndRearrangement(); }
  void AbortTransfers() override { inner_.AbortTransfers(); }
  int staging_buffers() const override { return inner_.staging_buffers(); }
  void SetLinkSlowdown(int rank, LinkClass link, double factor) override {
    inner_.SetLinkSlowdown(rank, link, factor);
  }
  void LoseRank(int rank) override { inner_.LoseRank(rank); }
  bool IsLocal(int rank) const override { return inner_.IsLocal(rank); }
  int AgreeOnStagedLayers(int staged_here) override {
    return inner_.AgreeOnStagedLayers(staged_here);
  }
  Status BeginLayer(const StagingTarget& target) override { return inner_.BeginLayer(target); }
  Status ExecuteRound(const StagingTarget& target, const Round& round,
                      std::span<const Transfer> transfers) override {
    return inner_.ExecuteRound(target, round, transfers);
  }
  Status CopyLocal(const StagingTarget& target, std::span<const LocalCopy> copies) override {
    return inner_.CopyLocal(target, copies);
  }
  Status ReloadFromBackup(const StagingTarget& target, std::span<const Reload> reloads) override {
    return inner_.ReloadFromBackup(target, reloads);
  }
  Status CommitLayer(const StagingTarget& target, std::span<const int32_t> slots) override {
    return inner_.CommitLayer(target, slots);
  }

 protected:
  RearrangementBackend& inner() { return inner_; }

 private:
  RearrangementBackend& inner_;
};

}  // namespace eplb
