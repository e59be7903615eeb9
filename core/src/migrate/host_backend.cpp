#include "eplb/migrate/host_backend.h"

#include <chrono>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "eplb/migrate/weight_pattern.h"

namespace eplb {
namespace {

class StdMonitor final : public Monitor {
 public:
  void lock() override { mu_.lock(); }
  void unlock() override { mu_.unlock(); }
  void Wait() override {
    std::unique_lock lock(mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // the caller still holds it
  }
  void WaitFor(double seconds) override {
    std::unique_lock lock(mu_, std::adopt_lock);
    cv_.wait_for(lock, std::chrono::duration<double>(seconds));
    lock.release();
  }
  void NotifyAll() override { cv_.notify_all(); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace

HostBackend::HostBackend(const Topology& topology, int num_layers, int staging_buffers,
                         size_t expert_bytes)
    : topology_(topology),
      layers_(num_layers),
      slots_(topology.num_slots()),
      staging_buffers_(staging_buffers),
      expert_bytes_(expert_bytes),
      live_(static_cast<size_t>(num_layers) * slots_, Buffer(expert_bytes)),
      staging_(static_cast<size_t>(staging_buffers) * slots_, Buffer(expert_bytes)),
      writes_(static_cast<size_t>(num_layers) * slots_, 0),
      lost_(topology.num_ranks()),
      epoch_(std::chrono::steady_clock::now()) {}

HostBackend::~HostBackend() {
  JoinWorkers();
}

uint8_t HostBackend::Pattern(int layer, int expert, size_t offset) {
  return PatternByte(layer, expert, offset);
}

void HostBackend::Fill(const Placement& placement) {
  for (int layer = 0; layer < layers_; ++layer) {
    for (int slot = 0; slot < slots_; ++slot) {
      const int expert = placement.expert_at(layer, slot);
      Buffer& b = live(layer, slot);
      if (expert == kEmptySlot) {
        std::fill(b.begin(), b.end(), uint8_t{0});
      } else {
        WritePattern(layer, expert, b.data(), b.size());
      }
    }
  }
}

Status HostBackend::Verify(const Placement& placement) const {
  for (int layer = 0; layer < layers_; ++layer) {
    for (int slot = 0; slot < slots_; ++slot) {
      const int expert = placement.expert_at(layer, slot);
      if (expert == kEmptySlot) continue;
      const Buffer& b = live(layer, slot);
      for (size_t i = 0; i < b.size(); ++i) {
        if (b[i] != Pattern(layer, expert, i)) {
          return Status::Internal(fmt::format(
              "layer {}, slot {} (rank {}): byte {} is {} but expert {}'s weights have {}", layer,
              slot, topology_.rank_of_slot(slot), i, b[i], expert, Pattern(layer, expert, i)));
        }
      }
    }
  }
  return Status::Ok();
}

const uint8_t* HostBackend::slot_data(int layer, int slot) const {
  return live(layer, slot).data();
}
int64_t HostBackend::writes(int layer, int slot) const {
  return writes_[static_cast<size_t>(layer) * slots_ + slot];
}

double HostBackend::Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_).count();
}

std::unique_ptr<Monitor> NewThreadMonitor() {
  return std::make_unique<StdMonitor>();
}

std::unique_ptr<Monitor> HostBackend::NewMonitor() {
  return NewThreadMonitor();
}

void HostBackend::StartWorker(int /*rank*/, std::function<void()> body) {
  workers_.Start(std::move(body));
}

void HostBackend::JoinWorkers() {
  workers_.JoinAll();
}

std::vector<std::vector<HostBackend::PeerOp>> HostBackend::peer_groups(int rank) const {
  std::lock_guard lock(ops_mu_);
  if (static_cast<size_t>(rank) >= peer_groups_.size()) return {};
  return peer_groups_[rank];
}

Status HostBackend::ExecuteRound(const StagingTarget& target, const Round& round,
                                 std::span<const Transfer> transfers) {
  if (record_peer_groups_) {
    std::lock_guard lock(ops_mu_);
    peer_groups_.resize(static_cast<size_t>(topology_.num_ranks()));
    std::vector<PeerOp> group;
    for (const Flow& flow : round.flows) {
      const bool send = flow.src_rank == target.rank;
      if (!send && flow.dst_rank != target.rank) continue;
      for (int32_t t : flow.transfers) {
        group.push_back(
            {send ? flow.dst_rank : flow.src_rank, target.layer, transfers[t].expert, send});
      }
    }
    peer_groups_[target.rank].push_back(std::move(group));
  }
  EPLB_RETURN_IF_ERROR(lost_.CheckLive(round));
  for (const Flow& flow : round.flows) {
    if (flow.dst_rank != target.rank) continue;  // senders have nothing to do: receivers pull
    for (int32_t t : flow.transfers) {
      const Transfer& tr = transfers[t];
      const Buffer& src = live(target.layer, tr.src_slot);
      const double start = Now();
      std::memcpy(staged(target.buffer, tr.dst_slot).data(), src.data(), expert_bytes_);
      on_transfer(TransferRecord{target.layer, tr.expert, tr.src_rank, tr.dst_rank, tr.bytes,
                                 tr.link, start, Now()});
    }
  }
  return Status::Ok();
}

Status HostBackend::CopyLocal(const StagingTarget& target, std::span<const LocalCopy> copies) {
  for (const LocalCopy& c : copies) {
    const Buffer& src =
        c.after_receive ? staged(target.buffer, c.src_slot) : live(target.layer, c.src_slot);
    std::memcpy(staged(target.buffer, c.dst_slot).data(), src.data(), expert_bytes_);
  }
  return Status::Ok();
}

Status HostBackend::ReloadFromBackup(const StagingTarget& target, std::span<const Reload> reloads) {
  for (const Reload& r : reloads) {
    WritePattern(target.layer, r.expert, staged(target.buffer, r.dst_slot).data(), expert_bytes_);
  }
  return Status::Ok();
}

void HostBackend::LoseRank(int rank) {
  lost_.Lose(rank);
}

Status HostBackend::CommitLayer(const StagingTarget& target, std::span<const int32_t> slots) {
  for (int32_t slot : slots) {
    live(target.layer, slot).swap(staged(target.buffer, slot));
    ++writes_[static_cast<size_t>(target.layer) * slots_ + slot];
  }
  return Status::Ok();
}

}  // namespace eplb
