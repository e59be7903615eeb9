#include "eplb/engine/replica_dispatch.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "eplb/model/placement.h"

namespace eplb {

namespace {

// lp: at most this many passes of refilling every replicated expert; they settle in a few.
constexpr int kMaxLevelPasses = 64;

}  // namespace

ReplicaDispatcher::ReplicaDispatcher(Dispatch mode, uint64_t seed) : mode_(mode), random_(seed) {}

double ReplicaDispatcher::Split(std::span<const double> load, std::span<const int32_t> row,
                                int slots_per_gpu, const std::vector<char>& lost,
                                std::vector<double>& slot_tokens) {
  const int experts = static_cast<int>(load.size());
  slot_tokens.assign(row.size(), 0.0);
  const auto live = [&](size_t s) {
    return row[s] != kEmptySlot && (lost.empty() || !lost[s / static_cast<size_t>(slots_per_gpu)]);
  };
  // Each expert's live slots: counted first (first_slot_[e + 1]), then, for the modes that
  // split unevenly, listed ascending (so a GPU's slots of one expert lie together).
  first_slot_.assign(static_cast<size_t>(experts) + 1, 0);
  for (size_t s = 0; s < row.size(); ++s) {
    if (live(s)) ++first_slot_[static_cast<size_t>(row[s]) + 1];
  }
  double unserved = 0;
  for (int e = 0; e < experts; ++e) {
    if (first_slot_[e + 1] == 0) unserved += load[e];
  }
  if (mode_ == Dispatch::kEven) {
    // One division per expert, not per slot: the same quotients, so the same sums.
    share_.resize(static_cast<size_t>(experts));
    for (int e = 0; e < experts; ++e) {
      // Most experts have one replica, and x / 1 is x: no division for them.
      const int count = first_slot_[e + 1];
      share_[e] = count == 1 ? load[e] : count > 0 ? load[e] / count : 0.0;
    }
    for (size_t s = 0; s < row.size(); ++s) {
      if (live(s)) slot_tokens[s] = share_[row[s]];
    }
    return unserved;
  }
  for (int e = 0; e < experts; ++e) first_slot_[e + 1] += first_slot_[e];
  slots_.resize(static_cast<size_t>(first_slot_[experts]));
  cursor_.assign(first_slot_.begin(), first_slot_.end() - 1);  // each expert's next free entry
  for (size_t s = 0; s < row.size(); ++s) {
    if (live(s)) slots_[static_cast<size_t>(cursor_[row[s]]++)] = static_cast<int>(s);
  }
  odds_.resize(slots_.size());
  if (mode_ == Dispatch::kRandom) {
    for (int e = 0; e < experts; ++e) {
      const int count = first_slot_[e + 1] - first_slot_[e];
      for (int i = first_slot_[e]; i < first_slot_[e + 1]; ++i) odds_[i] = 1.0 / count;
    }
  } else {
    LevelOdds(load, slots_per_gpu, row.size() / static_cast<size_t>(slots_per_gpu));
  }
  Draw(load, slot_tokens);
  return unserved;
}

void ReplicaDispatcher::Draw(std::span<const double> load, std::vector<double>& slot_tokens) {
  for (size_t e = 0; e < load.size(); ++e) {
    const int first = first_slot_[e], last = first_slot_[e + 1];
    if (first == last) continue;
    const double whole = std::floor(load[e]), fraction = load[e] - whole;
    // A multinomial draw as sequential binomials: each replica takes its odds' part of what
    // the replicas before it left.
    auto remaining = static_cast<int64_t>(whole);
    for (int i = first; i < last; ++i) {
      int64_t taken = remaining;
      if (i + 1 < last && remaining > 0) {
        // Summed afresh, not by subtraction, so that rounding leaves a replica with no odds
        // nothing.
        double odds_left = 0;
        for (int j = i; j < last; ++j) odds_left += odds_[j];
        const double p = odds_left > 0 ? std::clamp(odds_[i] / odds_left, 0.0, 1.0) : 0.0;
        taken = std::binomial_distribution<int64_t>(remaining, p)(random_);
      }
      slot_tokens[slots_[i]] = static_cast<double>(taken) + fraction * odds_[i];
      remaining -= taken;
    }
  }
}

void ReplicaDispatcher::LevelOdds(std::span<const double> load, int slots_per_gpu, size_t gpus) {
  // First each live slot's assignments in the split, per entry of slots_; odds at the end.
  std::vector<double>& part = odds_;
  std::fill(part.begin(), part.end(), 0.0);
  std::vector<double>& level = gpu_level_;
  level.assign(gpus, 0.0);
  order_.clear();
  for (int e = 0; e < static_cast<int>(load.size()); ++e) {
    const int first = first_slot_[e], count = first_slot_[e + 1] - first;
    if (count == 1) {
      part[first] = load[e];
      level[slots_[first] / slots_per_gpu] += load[e];
    } else if (count > 1) {
      order_.push_back(e);
    }
  }
  std::stable_sort(order_.begin(), order_.end(), [&](int a, int b) { return load[a] > load[b]; });
  for (const int e : order_) Fill(e, load[e], slots_per_gpu, part);
  // The first pass filled each expert against the levels of those before it only. Filling one
  // again against every other expert's part minimises Σ level² over that expert's split, so
  // the passes converge to the split that minimises Σ level², which here also brings the
  // busiest GPU to its lowest (the LP's optimum). They stop when no part moves by more than a
  // millionth of the layer's load (a few assignments of millions).
  const double total = std::accumulate(load.begin(), load.end(), 0.0);
  for (int pass = 0; pass < kMaxLevelPasses; ++pass) {
    double moved = 0;
    for (const int e : order_) {
      const int first = first_slot_[e], last = first_slot_[e + 1];
      old_part_.assign(part.begin() + first, part.begin() + last);
      for (int i = first; i < last; ++i) {
        level[slots_[i] / slots_per_gpu] -= part[i];
        part[i] = 0;
      }
      Fill(e, load[e], slots_per_gpu, part);
      for (int i = first; i < last; ++i) {
        moved = std::max(moved, std::abs(part[i] - old_part_[i - first]));
      }
    }
    if (moved <= 1e-6 * total) break;
  }
  // Parts to odds.
  for (size_t e = 0; e < load.size(); ++e) {
    const int first = first_slot_[e], last = first_slot_[e + 1];
    for (int i = first; i < last; ++i) {
      part[i] = load[e] > 0 ? part[i] / load[e] : 1.0 / (last - first);
    }
  }
}

void ReplicaDispatcher::Fill(int e, double amount, int slots_per_gpu, std::vector<double>& part) {
  buckets_.clear();
  for (int i = first_slot_[e]; i < first_slot_[e + 1]; ++i) {
    const int gpu = slots_[i] / slots_per_gpu;
    if (!buckets_.empty() && buckets_.back().gpu == gpu) {
      ++buckets_.back().replicas;
    } else {
      buckets_.push_back({gpu_level_[gpu], gpu, 1});
    }
  }
  std::sort(buckets_.begin(), buckets_.end(), [](const Bucket& a, const Bucket& b) {
    return a.level != b.level ? a.level < b.level : a.gpu < b.gpu;
  });
  // The common level: with the k lowest GPUs filled, level = (amount + their levels) / k,
  // as soon as it does not reach the next GPU's.
  double below = 0, common = 0;
  size_t filled = 0;
  while (filled < buckets_.size()) {
    below += buckets_[filled].level;
    ++filled;
    common = (amount + below) / static_cast<double>(filled);
    if (filled == buckets_.size() || common <= buckets_[filled].level) break;
  }
  for (size_t k = 0; k < filled; ++k) {
    const Bucket& b = buckets_[k];
    const double gpu_part = std::max(0.0, common - b.level);
    gpu_level_[b.gpu] += gpu_part;
    for (int i = first_slot_[e]; i < first_slot_[e + 1]; ++i) {
      if (slots_[i] / slots_per_gpu == b.gpu) part[i] = gpu_part / b.replicas;
    }
  }
}

}  // namespace eplb
