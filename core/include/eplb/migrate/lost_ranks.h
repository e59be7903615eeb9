// The ranks a fault took away (RearrangementBackend::LoseRank), as every backend keeps them, and
// the one check that fails a transfer touching one, with the same error on every backend.
//
// Thread-safety: Lose may be called from the foreground while workers call lost and
// CheckLive.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>

#include "eplb/base/status.h"
#include "eplb/migrate/schedule.h"

namespace eplb {

class LostRanks {
 public:
  explicit LostRanks(int ranks)
      : lost_(std::make_unique<std::atomic<bool>[]>(static_cast<size_t>(ranks))) {}

  void Lose(int rank) { lost_[static_cast<size_t>(rank)].store(true, std::memory_order_release); }
  bool lost(int rank) const {
    return lost_[static_cast<size_t>(rank)].load(std::memory_order_acquire);
  }
  // Unavailable naming the first lost rank of `flow` (its source, then its destination).
  Status CheckLive(const Flow& flow) const;
  // The same over `round`'s flows.
  Status CheckLive(const Round& round) const;

 private:
  std::unique_ptr<std::atomic<bool>[]> lost_;
};

}  // namespace eplb
