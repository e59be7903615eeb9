// The host backend: ranks as threads, each rank's expert weights as real CPU buffers, transfers
// as memcpy between ranks' buffers. It is the rearrangement protocol's test double and a real
// executor on CPU memory.
//
// A receive pulls from the sender's live weights, which stay intact until the layer is
// committed (only after every rank has staged it), so a round needs no handshake with the
// sender. A commit swaps the staged slot buffers into place: unchanged slots are never touched.
//
// Thread-safety: the RearrangementBackend calls follow backend.h's contract; receives from two
// lanes of a rank write disjoint staging slots, so no lock is needed. on_transfer fires from the
// receiving rank's worker thread. The inspection calls (Fill, Verify, slot_data, writes) are for
// the foreground only, between rearrangements.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "eplb/migrate/backend.h"
#include "eplb/migrate/lost_ranks.h"
#include "eplb/migrate/thread_workers.h"
#include "eplb/model/placement.h"
#include "eplb/model/topology.h"

namespace eplb {

class HostBackend final : public RearrangementBackend {
 public:
  HostBackend(const Topology& topology, int num_layers, int staging_buffers, size_t expert_bytes);
  ~HostBackend() override;

  // The byte every replica of `expert` in `layer` holds at `offset` (weight_pattern.h).
  static uint8_t Pattern(int layer, int expert, size_t offset);
  // Fills every slot's live weights with its expert's pattern under `placement`.
  void Fill(const Placement& placement);
  // OK when every slot's live weights equal its expert's pattern under `placement` (empty slots
  // are not checked); otherwise names the first wrong slot.
  Status Verify(const Placement& placement) const;
  const uint8_t* slot_data(int layer, int slot) const;
  // Times a slot's live weights were replaced.
  int64_t writes(int layer, int slot) const;

  // One worker per rank with the lanes' rounds merged (RearrangementBackend::MergesLanes), as
  // the GPU backend does under NCCL; set before a rearrangement starts.
  void set_merge_lanes(bool merge) { merge_lanes_ = merge; }
  bool MergesLanes() const override { return merge_lanes_; }

  // With record_peer_groups(true) (before a rearrangement starts; off by default, as the record
  // grows with every round): the sends and receives of each ExecuteRound call on `rank`, call
  // by call, in the order its workers made them: what a communicator that runs each call as one
  // group and matches operations per peer in issue order (NCCL) would see.
  void record_peer_groups(bool record) { record_peer_groups_ = record; }
  struct PeerOp {
    int peer;
    int layer;
    int expert;
    bool send;
    bool operator==(const PeerOp&) const = default;
  };
  std::vector<std::vector<PeerOp>> peer_groups(int rank) const;

  double Now() override;
  std::unique_ptr<Monitor> NewMonitor() override;
  void StartWorker(int rank, std::function<void()> body) override;
  void JoinWorkers() override;
  int staging_buffers() const override { return staging_buffers_; }
  Status ExecuteRound(const StagingTarget& target, const Round& round,
                      std::span<const Transfer> transfers) override;
  Status CopyLocal(const StagingTarget& target, std::span<const LocalCopy> copies) override;
  // The backup is the weights' pattern itself (weight_pattern.h), as a host copy would hold it.
  Status ReloadFromBackup(const StagingTarget& target, std::span<const Reload> reloads) override;
  // A lost rank's transfers fail: a round that receives from it or sends to it returns
  // Unavailable naming the rank.
  void LoseRank(int rank) override;
  Status CommitLayer(const StagingTarget& target, std::span<const int32_t> slots) override;

 private:
  using Buffer = std::vector<uint8_t>;
  Buffer& live(int layer, int slot) { return live_[static_cast<size_t>(layer) * slots_ + slot]; }
  const Buffer& live(int layer, int slot) const {
    return live_[static_cast<size_t>(layer) * slots_ + slot];
  }
  // Staging buffers are indexed by the global slot: rank r's buffer b holds its own slots.
  Buffer& staged(int buffer, int slot) {
    return staging_[static_cast<size_t>(buffer) * slots_ + slot];
  }

  Topology topology_;
  int layers_;
  int slots_;
  int staging_buffers_;
  size_t expert_bytes_;
  std::vector<Buffer> live_;     // [layer][slot]
  std::vector<Buffer> staging_;  // [buffer][slot]
  std::vector<int64_t> writes_;  // [layer][slot]
  LostRanks lost_;               // LoseRank
  ThreadWorkers workers_;
  std::chrono::steady_clock::time_point epoch_;
  bool merge_lanes_ = false;
  bool record_peer_groups_ = false;
  mutable std::mutex ops_mu_;
  std::vector<std::vector<std::vector<PeerOp>>> peer_groups_;  // [rank][call]
};

}  // namespace eplb
