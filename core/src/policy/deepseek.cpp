#include "eplb/policy/deepseek.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <vector>

#include <fmt/format.h>

#include "policy/parallel_for.h"

namespace eplb {
namespace {

// A loser tree over n float keys: Winner() is the index of the smallest key (kMax: the
// largest), the lowest index on ties, as a first-index argmin/argmax returns. Both callers only
// ever change the winner's key, which a loser tree replays in log2(n) steps whose loads do not
// wait on the previous step's stores: the step chain is one compare and two selects.
template <bool kMax>
class LoserTree {
 public:
  void Reset(int n) {
    size_ = 1;
    while (size_ < n) size_ *= 2;
    keys_.assign(static_cast<size_t>(size_), kMax ? -kInf : kInf);  // padding never wins
    losers_.resize(static_cast<size_t>(size_));
    winners_.resize(2 * static_cast<size_t>(size_));
  }
  float& key(int i) { return keys_[i]; }
  void Build() {
    for (int i = 0; i < size_; ++i) winners_[size_ + i] = i;
    for (int node = size_ - 1; node >= 1; --node) {
      const int a = winners_[2 * node], b = winners_[2 * node + 1];
      const bool a_wins = Beats(keys_[a], a, keys_[b], b);
      winners_[node] = a_wins ? a : b;
      losers_[node] = a_wins ? b : a;
    }
    winner_ = winners_[1];
  }
  int Winner() const { return winner_; }
  // Call after changing key(Winner()).
  void ReplayWinner() {
    int cand = winner_;
    float cand_key = keys_[cand];
    for (int node = (cand + size_) / 2; node >= 1; node /= 2) {
      const int other = losers_[node];
      const float other_key = keys_[other];
      const bool other_wins = Beats(other_key, other, cand_key, cand);
      losers_[node] = other_wins ? cand : other;
      cand = other_wins ? other : cand;
      cand_key = other_wins ? other_key : cand_key;
    }
    winner_ = cand;
  }

 private:
  static constexpr float kInf = std::numeric_limits<float>::infinity();
  static bool Beats(float a_key, int a, float b_key, int b) {
    return (kMax ? a_key > b_key : a_key < b_key) | ((a_key == b_key) & (a < b));
  }
  int size_ = 1;
  int winner_ = 0;
  std::vector<float> keys_;
  std::vector<int32_t> losers_;
  std::vector<int32_t> winners_;  // scratch for Build
};

// Scratch reused across layers so that a call allocates once.
struct Scratch {
  std::vector<uint64_t> keys;
  std::vector<int32_t> pack_items;
  LoserTree<false> lightest_pack;
  LoserTree<true> heaviest_expert;
};

// eplb.py's balanced_packing for one row: items in descending weight order each go to the
// lightest pack (first on ties) that still has room; every pack takes n / num_packs items.
// Pack weights accumulate in float32, as the reference adds float32 tensor elements.
void BalancedPacking(std::span<const float> weight, int num_packs, std::span<int32_t> pack_index,
                     std::span<int32_t> rank_in_pack, Scratch& s) {
  const int n = static_cast<int>(weight.size());
  const int per_pack = n / num_packs;
  if (per_pack == 1) {
    std::iota(pack_index.begin(), pack_index.end(), 0);
    std::fill(rank_in_pack.begin(), rank_in_pack.end(), 0);
    return;
  }
  // Descending by weight, ascending index on ties: the order of a stable descending sort.
  // Weights are finite and >= 0, so their IEEE bits order like the values; sorting
  // (~bits, index) keys ascending gives that order without an indirect comparison.
  s.keys.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    s.keys[i] = (static_cast<uint64_t>(~std::bit_cast<uint32_t>(weight[i])) << 32) |
                static_cast<uint32_t>(i);
  }
  std::sort(s.keys.begin(), s.keys.end());
  s.pack_items.assign(static_cast<size_t>(num_packs), 0);
  LoserTree<false>& packs = s.lightest_pack;
  packs.Reset(num_packs);
  for (int p = 0; p < num_packs; ++p) packs.key(p) = 0.0f;
  packs.Build();
  for (const uint64_t key : s.keys) {
    const auto item = static_cast<int32_t>(key & 0xffffffffu);
    const int pack = packs.Winner();
    pack_index[item] = pack;
    rank_in_pack[item] = s.pack_items[pack]++;
    packs.key(pack) += weight[item];
    // A full pack leaves the contest.
    if (s.pack_items[pack] == per_pack) packs.key(pack) = std::numeric_limits<float>::infinity();
    packs.ReplayWinner();
  }
}

// eplb.py's replicate_experts for one row: each extra replica goes to the expert with the
// largest weight / count (float32 division), the lowest index on ties.
void ReplicateExperts(std::span<const float> weight, std::span<int32_t> phy2log,
                      std::span<int32_t> logcnt, Scratch& s) {
  const int num_log = static_cast<int>(weight.size());
  const int num_phy = static_cast<int>(phy2log.size());
  LoserTree<true>& experts = s.heaviest_expert;
  experts.Reset(num_log);
  for (int e = 0; e < num_log; ++e) {
    phy2log[e] = e;
    logcnt[e] = 1;
    experts.key(e) = weight[e];
  }
  experts.Build();
  for (int i = num_log; i < num_phy; ++i) {
    const int e = experts.Winner();
    phy2log[i] = e;
    ++logcnt[e];
    experts.key(e) = weight[e] / static_cast<float>(logcnt[e]);
    experts.ReplayWinner();
  }
}

Status CheckShape(const LoadMatrix& load, int num_replicas, int num_groups, int num_nodes,
                  int num_gpus) {
  EPLB_RETURN_IF_ERROR(ValidateLoad(load));
  const auto experts = load.cols();
  if (num_groups < 1) {
    return Status::InvalidArgument(fmt::format("groups is {}; it must be at least 1", num_groups));
  }
  if (num_nodes < 1) {
    return Status::InvalidArgument(fmt::format("nodes is {}; it must be at least 1", num_nodes));
  }
  // The reference checks GPUs against nodes only on its hierarchical path; the global policy
  // ignores nodes, and its golden cases include such shapes.
  const bool hierarchical = num_groups % num_nodes == 0;
  if (num_gpus < 1 || (hierarchical && num_gpus % num_nodes != 0)) {
    return Status::InvalidArgument(fmt::format(
        "GPUs is {}; it must be a positive multiple of nodes ({})", num_gpus, num_nodes));
  }
  if (num_replicas < 1 || num_replicas % num_gpus != 0) {
    return Status::InvalidArgument(fmt::format(
        "replicas is {}; it must be a positive multiple of GPUs ({})", num_replicas, num_gpus));
  }
  if (num_replicas < experts) {
    return Status::InvalidArgument(fmt::format(
        "replicas is {} but the load has {} experts; every expert needs at least one replica",
        num_replicas, experts));
  }
  if (hierarchical && experts % num_groups != 0) {
    return Status::InvalidArgument(fmt::format(
        "the load has {} experts, which do not divide into {} groups; experts must be a multiple "
        "of groups",
        experts, num_groups));
  }
  return Status::Ok();
}

// Below this many slot-layers a call runs on the calling thread: starting threads would cost
// more than they save.
constexpr int64_t kParallelMinWork = 4096;

// The three steps of the hierarchical policy for one layer, with buffers sized once.
class LayerBalancer {
 public:
  LayerBalancer(int experts, int replicas, int groups, int nodes, int gpus)
      : experts_(experts),
        groups_(groups),
        nodes_(nodes),
        group_size_(experts / groups),
        groups_per_node_(groups / nodes),
        experts_per_node_(experts / nodes),
        phy_per_node_(replicas / nodes),
        gpus_per_node_(gpus / nodes),
        phy_per_gpu_(replicas / gpus),
        weight_(experts),
        group_weight_(groups),
        node_weight_(experts_per_node_),
        phy_weight_(phy_per_node_),
        group_pack_(groups),
        group_rank_(groups),
        mlog2log_(experts),
        phy2mlog_(phy_per_node_),
        mlogcnt_(experts_per_node_),
        gpu_pack_(phy_per_node_),
        gpu_rank_(phy_per_node_) {}

  // Writes layer `layer`'s phy2log into `out` (replicas entries).
  void Run(const LoadMatrix& load, int layer, int32_t* out) {
    for (int e = 0; e < experts_; ++e) weight_[e] = static_cast<float>(load(layer, e));

    // Step 1: pack groups onto nodes; "mlog" numbers the experts node by node.
    for (int g = 0; g < groups_; ++g) {
      double sum = 0;
      for (int j = 0; j < group_size_; ++j) sum += weight_[g * group_size_ + j];
      group_weight_[g] = static_cast<float>(sum);
    }
    BalancedPacking(group_weight_, nodes_, group_pack_, group_rank_, scratch_);
    for (int g = 0; g < groups_; ++g) {
      const int first_mlog = (group_pack_[g] * groups_per_node_ + group_rank_[g]) * group_size_;
      for (int j = 0; j < group_size_; ++j) mlog2log_[first_mlog + j] = g * group_size_ + j;
    }

    for (int node = 0; node < nodes_; ++node) {
      // Step 2: replicate experts inside the node.
      const int mlog_base = node * experts_per_node_;
      for (int i = 0; i < experts_per_node_; ++i)
        node_weight_[i] = weight_[mlog2log_[mlog_base + i]];
      ReplicateExperts(node_weight_, phy2mlog_, mlogcnt_, scratch_);

      // Step 3: pack the node's replicas onto its GPUs; within a GPU, heaviest first.
      for (int p = 0; p < phy_per_node_; ++p) {
        phy_weight_[p] = node_weight_[phy2mlog_[p]] / static_cast<float>(mlogcnt_[phy2mlog_[p]]);
      }
      BalancedPacking(phy_weight_, gpus_per_node_, gpu_pack_, gpu_rank_, scratch_);
      for (int p = 0; p < phy_per_node_; ++p) {
        const int slot = node * phy_per_node_ + gpu_pack_[p] * phy_per_gpu_ + gpu_rank_[p];
        out[slot] = mlog2log_[mlog_base + phy2mlog_[p]];
      }
    }
  }

 private:
  const int experts_, groups_, nodes_, group_size_, groups_per_node_, experts_per_node_,
      phy_per_node_, gpus_per_node_, phy_per_gpu_;
  std::vector<float> weight_, group_weight_, node_weight_, phy_weight_;
  std::vector<int32_t> group_pack_, group_rank_, mlog2log_, phy2mlog_, mlogcnt_, gpu_pack_,
      gpu_rank_;
  Scratch scratch_;
};

}  // namespace

Result<Placement> RebalanceDeepSeek(const LoadMatrix& load, int num_replicas, int num_groups,
                                    int num_nodes, int num_gpus) {
  EPLB_RETURN_IF_ERROR(CheckShape(load, num_replicas, num_groups, num_nodes, num_gpus));
  if (num_groups % num_nodes != 0) num_groups = num_nodes = 1;  // the global policy

  const int layers = static_cast<int>(load.rows());
  const int experts = static_cast<int>(load.cols());
  std::vector<int32_t> phy2log(static_cast<size_t>(layers) * num_replicas);
  // Layers are independent; big calls spread them over the cores.
  const int64_t work = static_cast<int64_t>(layers) * num_replicas;
  ParallelFor(layers, work >= kParallelMinWork ? 0 : 1, [&](int begin, int end) {
    LayerBalancer balancer(experts, num_replicas, num_groups, num_nodes, num_gpus);
    for (int layer = begin; layer < end; ++layer) {
      balancer.Run(load, layer, phy2log.data() + static_cast<size_t>(layer) * num_replicas);
    }
  });
  return Placement::Create(experts, num_replicas, std::move(phy2log));
}

Result<Placement> DeepSeekPolicy::Rebalance(const PolicyInput& input) {
  EPLB_RETURN_IF_ERROR(ValidatePolicyInput(input));
  const Topology& t = input.topology;
  return RebalanceDeepSeek(input.load, t.num_slots(), input.num_groups, t.nodes(), t.num_ranks());
}

}  // namespace eplb
