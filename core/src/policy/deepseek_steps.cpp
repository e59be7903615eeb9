#include "policy/deepseek_steps.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "policy/torch_sort.h"

namespace eplb::deepseek_steps {

// The two classes below are not in an anonymous namespace: StepScratch::Impl, which has
// external linkage, holds them.

// A loser tree over n uint64 keys: Winner() is the smallest. Callers pack a non-negative float
// and its index into one key, (ordered float bits << 32) | index, so that one integer compare
// orders by value and then by index, as a first-index argmin/argmax does; the losers hold
// whole keys, so a replay walks a path fixed by the leaf with no indirect load, one compare and
// two selects per level.
class LoserTree {
 public:
  static constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();  // never wins

  // Makes room for n leaves, all kNever until set.
  void Reset(int n) {
    size_ = 1;
    while (size_ < n) size_ *= 2;
    // Nodes 1..size_-1 hold the tree; the leaves follow at size_..2*size_-1, where Build
    // reads them.
    nodes_.resize(2 * static_cast<size_t>(size_));
    std::fill(nodes_.begin() + size_, nodes_.end(), kNever);
  }
  uint64_t& leaf(int i) { return nodes_[static_cast<size_t>(size_) + i]; }
  void Build() {
    // Bottom-up, each node's winner goes up to its parent's place in `winners` while the loser
    // stays in the node.
    winners_.resize(2 * static_cast<size_t>(size_));
    std::copy(nodes_.begin() + size_, nodes_.end(), winners_.begin() + size_);
    for (int node = size_ - 1; node >= 1; --node) {
      const uint64_t a = winners_[2 * static_cast<size_t>(node)],
                     b = winners_[2 * static_cast<size_t>(node) + 1];
      const auto [smaller, larger] = MinMax(a, b);
      winners_[node] = smaller;
      nodes_[node] = larger;
    }
    winner_ = winners_[1];
  }
  uint64_t Winner() const { return winner_; }
  // Replaces the winner, whose leaf is `leaf`, by `key`. (leaf(i) is left as it was.)
  void ReplaceWinner(int leaf, uint64_t key) {
    uint64_t cand = key;
    for (int node = (leaf + size_) / 2; node >= 1; node /= 2) {
      const auto [smaller, larger] = MinMax(nodes_[node], cand);
      nodes_[node] = larger;
      cand = smaller;
    }
    winner_ = cand;
  }

 private:
  // (min, max) by masks, not std::min/max: compilers turn those into a branch, and the outcome
  // is a coin toss that the branch predictor loses half the time.
  static std::pair<uint64_t, uint64_t> MinMax(uint64_t a, uint64_t b) {
    const uint64_t b_smaller = uint64_t{0} - static_cast<uint64_t>(b < a);
    const uint64_t diff = (a ^ b) & b_smaller;
    return {a ^ diff, b ^ diff};
  }

  int size_ = 1;
  uint64_t winner_ = kNever;
  std::vector<uint64_t> nodes_;    // losers at 1..size_-1, leaves at size_..2*size_-1
  std::vector<uint64_t> winners_;  // Build's scratch
};

// One row of a balanced packing between its set-up and its contest.
struct PackingRow {
  std::vector<uint64_t> order;  // the row's items, heaviest first, as keys
  std::vector<int32_t> items;   // per pack
  LoserTree lightest;           // the packs with room, by weight
  int start = 0;                // the first item of `order` that the contest places
};

namespace {

// Keys for the tree: non-negative floats (and +inf) order like their IEEE bits.
uint64_t AscendingKey(float value, int index) {
  return (static_cast<uint64_t>(std::bit_cast<uint32_t>(value)) << 32) |
         static_cast<uint32_t>(index);
}
uint64_t DescendingKey(float value, int index) {
  return (static_cast<uint64_t>(~std::bit_cast<uint32_t>(value)) << 32) |
         static_cast<uint32_t>(index);
}
float WeightOf(uint64_t ascending_key) {
  return std::bit_cast<float>(static_cast<uint32_t>(ascending_key >> 32));
}
int IndexOf(uint64_t key) {
  return static_cast<int>(key & 0xffffffffu);
}

}  // namespace

struct StepScratch::Impl {
  std::array<PackingRow, kRowsTogether> rows;
  std::vector<int32_t> sort_scratch;
  std::array<LoserTree, kRowsTogether> heaviest;  // experts by weight per replica
};

StepScratch::StepScratch() : impl_(std::make_unique<Impl>()) {}
StepScratch::~StepScratch() = default;

void BalancedPacking(std::span<const float> weight, int rows, int num_packs,
                     std::span<int32_t> pack_index, std::span<int32_t> rank_in_pack,
                     StepScratch& scratch) {
  StepScratch::Impl& s = *scratch.impl_;
  const int n = static_cast<int>(weight.size() / static_cast<size_t>(rows));
  const int per_pack = n / num_packs;
  if (per_pack == 1) {
    for (int r = 0; r < rows; ++r) {
      std::iota(pack_index.begin() + static_cast<ptrdiff_t>(r) * n,
                pack_index.begin() + static_cast<ptrdiff_t>(r + 1) * n, 0);
    }
    std::fill(rank_in_pack.begin(), rank_in_pack.end(), 0);
    return;
  }
  for (int first_row = 0; first_row < rows; first_row += kRowsTogether) {
    const int together = std::min(kRowsTogether, rows - first_row);
    for (int r = 0; r < together; ++r) {
      PackingRow& row = s.rows[r];
      const size_t base = static_cast<size_t>(first_row + r) * n;
      const float* w = weight.data() + base;
      // Descending by weight, in torch's order on ties. Weights are finite and >= 0, so their
      // IEEE bits order like the values; (~bits, index) keys sort without an indirect load.
      row.order.resize(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) row.order[i] = DescendingKey(w[i], i);
      SortLikeStdSort(row.order, s.sort_scratch);
      // While every pack is empty and the items weigh something, item k of the order goes to
      // pack k: the lightest packs are the empty ones, and ties go to the first.
      row.start = w[IndexOf(row.order[static_cast<size_t>(num_packs - 1)])] > 0.0f ? num_packs : 0;
      row.items.assign(static_cast<size_t>(num_packs), row.start > 0 ? 1 : 0);
      row.lightest.Reset(num_packs);
      for (int k = 0; k < num_packs; ++k) {
        const int item = IndexOf(row.order[static_cast<size_t>(k)]);
        const bool placed = k < row.start;
        if (placed) {
          pack_index[base + item] = k;
          rank_in_pack[base + item] = 0;
        }
        row.lightest.leaf(k) = AscendingKey(placed ? w[item] : 0.0f, k);
      }
      row.lightest.Build();
    }
    // Then the contests, the rows' steps in turn.
    for (int k = 0; k < n; ++k) {
      for (int r = 0; r < together; ++r) {
        PackingRow& row = s.rows[r];
        if (k < row.start) continue;
        const size_t base = static_cast<size_t>(first_row + r) * n;
        const int item = IndexOf(row.order[static_cast<size_t>(k)]);
        const uint64_t lightest = row.lightest.Winner();
        const int pack = IndexOf(lightest);
        pack_index[base + item] = pack;
        rank_in_pack[base + item] = row.items[pack]++;
        // The winner's key holds its pack's weight: no trip through memory on the chain.
        const float pack_weight = WeightOf(lightest) + weight[base + item];
        // A full pack leaves the contest.
        row.lightest.ReplaceWinner(pack, row.items[pack] == per_pack
                                             ? LoserTree::kNever
                                             : AscendingKey(pack_weight, pack));
      }
    }
  }
}

void ReplicateExperts(std::span<const float> weight, int rows, std::span<int32_t> phy2log,
                      std::span<int32_t> rank, std::span<int32_t> logcnt, StepScratch& scratch) {
  StepScratch::Impl& s = *scratch.impl_;
  const int num_log = static_cast<int>(weight.size() / static_cast<size_t>(rows));
  const int num_phy = static_cast<int>(phy2log.size() / static_cast<size_t>(rows));
  for (int first_row = 0; first_row < rows; first_row += kRowsTogether) {
    const int together = std::min(kRowsTogether, rows - first_row);
    for (int r = 0; r < together; ++r) {
      const size_t log = static_cast<size_t>(first_row + r) * num_log;
      const size_t phy = static_cast<size_t>(first_row + r) * num_phy;
      LoserTree& experts = s.heaviest[r];
      experts.Reset(num_log);
      for (int e = 0; e < num_log; ++e) {
        phy2log[phy + e] = e;
        rank[phy + e] = 0;
        logcnt[log + e] = 1;
        experts.leaf(e) = DescendingKey(weight[log + e], e);
      }
      experts.Build();
    }
    for (int i = num_log; i < num_phy; ++i) {
      for (int r = 0; r < together; ++r) {
        const size_t log = static_cast<size_t>(first_row + r) * num_log;
        const size_t phy = static_cast<size_t>(first_row + r) * num_phy;
        LoserTree& experts = s.heaviest[r];
        const int e = IndexOf(experts.Winner());
        phy2log[phy + i] = e;
        rank[phy + i] = logcnt[log + e]++;
        experts.ReplaceWinner(
            e, DescendingKey(weight[log + e] / static_cast<float>(logcnt[log + e]), e));
      }
    }
  }
}

}  // namespace eplb::deepseek_steps
