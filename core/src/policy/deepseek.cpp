#include "eplb/policy/deepseek.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <vector>

#include <fmt/format.h>

#include "policy/deepseek_steps.h"
#include "policy/parallel_for.h"
#include "policy/util.h"

namespace eplb {
namespace {

using deepseek_steps::BalancedPacking;
using deepseek_steps::kRowsTogether;
using deepseek_steps::ReplicateExperts;
using deepseek_steps::StepScratch;

// The reference's asserts on a shape, as errors naming the values.
Status CheckShape(int64_t experts, int num_replicas, int num_groups, int num_nodes, int num_gpus) {
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

// How many layers a balancer takes at once: enough for their nodes' packings to go
// kRowsTogether side by side, and no more, so that the cores share out small pieces of work.
int LayersTogether(int nodes) {
  return std::max(1, kRowsTogether / nodes);
}

// The three steps of the hierarchical policy for up to LayersTogether(nodes) layers at a time,
// with buffers sized once. Buffers hold the batch's layers one after another, and within a
// layer its nodes one after another.
class LayerBalancer {
 public:
  LayerBalancer(int experts, int replicas, int groups, int nodes, int gpus)
      : experts_(experts),
        replicas_(replicas),
        groups_(groups),
        nodes_(nodes),
        group_size_(experts / groups),
        groups_per_node_(groups / nodes),
        experts_per_node_(experts / nodes),
        phy_per_node_(replicas / nodes),
        gpus_per_node_(gpus / nodes),
        phy_per_gpu_(replicas / gpus),
        weight_(static_cast<size_t>(LayersTogether(nodes)) * experts),
        group_weight_(static_cast<size_t>(LayersTogether(nodes)) * groups),
        node_weight_(weight_.size()),
        replica_weight_(experts_per_node_),
        phy_weight_(static_cast<size_t>(LayersTogether(nodes)) * replicas),
        group_sum_(groups),
        group_pack_(group_weight_.size()),
        group_rank_(group_weight_.size()),
        mlog2log_(weight_.size()),
        phy2mlog_(phy_weight_.size()),
        phy_rank_(phy_weight_.size()),
        mlogcnt_(weight_.size()),
        gpu_pack_(phy_weight_.size()),
        gpu_rank_(phy_weight_.size()),
        slot_(phy_per_node_),
        phy2log_(phy_weight_.size()),
        replica_rank_(phy_weight_.size()),
        logcnt_(weight_.size()) {}

  bool Fits(int experts, int replicas, int groups, int nodes, int gpus) const {
    return experts == experts_ && groups == groups_ && nodes == nodes_ && replicas == replicas_ &&
           gpus == gpus_per_node_ * nodes;
  }

  // The weights of the batch's layer i (experts of them) go here before Run.
  std::span<float> weight(int i) { return Row(weight_, i, experts_); }

  // After Run, for the batch's layer i: the expert in each slot, each slot's replica rank, and
  // each expert's replica count.
  std::span<const int32_t> phy2log(int i) const { return Row(phy2log_, i, replicas_); }
  std::span<const int32_t> replica_rank(int i) const { return Row(replica_rank_, i, replicas_); }
  std::span<const int32_t> logcnt(int i) const { return Row(logcnt_, i, experts_); }

  // Balances the batch's first `layers` layers, whose weights weight(i) holds.
  void Run(int layers) {
    // Sizes in locals: the compiler cannot keep members in registers across stores to int32
    // arrays, which might alias them.
    const int experts = experts_, groups = groups_, group_size = group_size_,
              per_node = experts_per_node_, phy_per_node = phy_per_node_,
              phy_per_gpu = phy_per_gpu_, nodes = nodes_, groups_per_node = groups_per_node_,
              replicas = replicas_, gpus_per_node = gpus_per_node_;
    // + 0.0f turns a -0.0 load into +0.0, whose bits order below every positive weight's.
    for (float& w : std::span(weight_).first(static_cast<size_t>(layers) * experts)) w += 0.0f;

    // Step 1: pack groups onto nodes; "mlog" numbers the experts node by node. Each group's
    // sum adds its weights in order, as the reference does; the groups go side by side so that
    // their chains of additions overlap.
    for (int l = 0; l < layers; ++l) {
      const float* w = weight_.data() + static_cast<ptrdiff_t>(l) * experts;
      std::fill(group_sum_.begin(), group_sum_.end(), 0.0);
      for (int j = 0; j < group_size; ++j) {
        for (int g = 0; g < groups; ++g) group_sum_[g] += w[g * group_size + j];
      }
      for (int g = 0; g < groups; ++g) {
        group_weight_[static_cast<size_t>(l) * groups + g] = static_cast<float>(group_sum_[g]);
      }
    }
    const size_t group_cells = static_cast<size_t>(layers) * groups;
    BalancedPacking(std::span(group_weight_).first(group_cells), layers, nodes,
                    std::span(group_pack_).first(group_cells),
                    std::span(group_rank_).first(group_cells), scratch_);
    for (int l = 0; l < layers; ++l) {
      int32_t* mlog2log = mlog2log_.data() + static_cast<ptrdiff_t>(l) * experts;
      for (int g = 0; g < groups; ++g) {
        const size_t cell = static_cast<size_t>(l) * groups + g;
        const int first_mlog =
            (group_pack_[cell] * groups_per_node + group_rank_[cell]) * group_size;
        for (int j = 0; j < group_size; ++j) mlog2log[first_mlog + j] = g * group_size + j;
      }
    }

    // Step 2: replicate experts inside each node, every node of every layer side by side.
    // "Rows" are the (layer, node) pairs.
    const int rows = layers * nodes;
    for (int row = 0; row < rows; ++row) {
      const int32_t* mlog2log = mlog2log_.data() + static_cast<ptrdiff_t>(row) * per_node;
      const float* w = weight_.data() + static_cast<ptrdiff_t>(row / nodes) * experts;
      float* node_weight = node_weight_.data() + static_cast<ptrdiff_t>(row) * per_node;
      for (int i = 0; i < per_node; ++i) node_weight[i] = w[mlog2log[i]];
    }
    const size_t mlog_cells = static_cast<size_t>(rows) * per_node;
    const size_t slots = static_cast<size_t>(layers) * replicas;
    ReplicateExperts(std::span(node_weight_).first(mlog_cells), rows,
                     std::span(phy2mlog_).first(slots), std::span(phy_rank_).first(slots),
                     std::span(mlogcnt_).first(mlog_cells), scratch_);
    for (int row = 0; row < rows; ++row) {
      const int32_t* mlog2log = mlog2log_.data() + static_cast<ptrdiff_t>(row) * per_node;
      int32_t* logcnt = logcnt_.data() + static_cast<ptrdiff_t>(row / nodes) * experts;
      const auto mlog = static_cast<ptrdiff_t>(row) * per_node;
      const auto phy = static_cast<ptrdiff_t>(row) * phy_per_node;
      for (int i = 0; i < per_node; ++i) logcnt[mlog2log[i]] = mlogcnt_[mlog + i];
      // What each of the expert's replicas carries (the reference's float32 division), once
      // per expert rather than once per replica, in a loop of its own that vectorises.
      for (int i = 0; i < per_node; ++i) {
        replica_weight_[i] = node_weight_[mlog + i] / static_cast<float>(mlogcnt_[mlog + i]);
      }
      for (int p = 0; p < phy_per_node; ++p) {
        phy_weight_[phy + p] = replica_weight_[phy2mlog_[phy + p]];
      }
    }

    // Step 3: pack each node's replicas onto its GPUs, every node of every layer side by side;
    // within a GPU, heaviest first.
    BalancedPacking(std::span(phy_weight_).first(slots), layers * nodes, gpus_per_node,
                    std::span(gpu_pack_).first(slots), std::span(gpu_rank_).first(slots), scratch_);
    // Each replica to its slot: short loops, which the compiler keeps in registers where one
    // loop over all six arrays spilled.
    for (int row = 0; row < rows; ++row) {
      const auto phy = static_cast<ptrdiff_t>(row) * phy_per_node;
      const int32_t* pack = gpu_pack_.data() + phy;
      const int32_t* place = gpu_rank_.data() + phy;
      for (int p = 0; p < phy_per_node; ++p) slot_[p] = pack[p] * phy_per_gpu + place[p];
      const int32_t* mlog2log = mlog2log_.data() + static_cast<ptrdiff_t>(row) * per_node;
      const int32_t* replica_of = phy2mlog_.data() + phy;
      int32_t* phy2log = phy2log_.data() + phy;
      for (int p = 0; p < phy_per_node; ++p) phy2log[slot_[p]] = mlog2log[replica_of[p]];
      const int32_t* rank = phy_rank_.data() + phy;
      int32_t* replica_rank = replica_rank_.data() + phy;
      for (int p = 0; p < phy_per_node; ++p) replica_rank[slot_[p]] = rank[p];
    }
  }

 private:
  template <typename T>
  static std::span<T> Row(std::vector<T>& v, int i, int width) {
    return std::span(v).subspan(static_cast<size_t>(i) * width, width);
  }
  template <typename T>
  static std::span<const T> Row(const std::vector<T>& v, int i, int width) {
    return std::span(v).subspan(static_cast<size_t>(i) * width, width);
  }

  const int experts_, replicas_, groups_, nodes_, group_size_, groups_per_node_, experts_per_node_,
      phy_per_node_, gpus_per_node_, phy_per_gpu_;
  std::vector<float> weight_, group_weight_, node_weight_, replica_weight_, phy_weight_;
  std::vector<double> group_sum_;
  std::vector<int32_t> group_pack_, group_rank_, mlog2log_, phy2mlog_, phy_rank_, mlogcnt_,
      gpu_pack_, gpu_rank_, slot_, phy2log_, replica_rank_, logcnt_;
  StepScratch scratch_;
};

// The policy on each of `layers` layers, spread over the cores when the call is big enough.
// fill(layer, weight) writes the layer's weights; then emit(layer, balancer, i) reads its
// result, the balancer's layer i (phy2log(i), replica_rank(i), logcnt(i)). Both run on worker
// threads, once per layer, and must be safe to run for different layers at once. The shape
// must have passed CheckShape.
using FillWeights = std::function<void(int layer, std::span<float> weight)>;
using EmitLayer = std::function<void(int layer, const LayerBalancer& balancer, int i)>;
void BalanceLayers(int layers, int experts, int replicas, int groups, int nodes, int gpus,
                   const FillWeights& fill, const EmitLayer& emit) {
  if (groups % nodes != 0) groups = nodes = 1;  // the global policy
  // Batches of layers are independent; big calls spread them over the cores.
  const int together = LayersTogether(nodes);
  const int batches = (layers + together - 1) / together;
  const int64_t work = static_cast<int64_t>(layers) * replicas;
  ParallelFor(batches, work >= kParallelMinWork ? 0 : 1, [&](int begin, int end) {
    // Kept per thread for the next call of the same shape: a balancer's buffers made and
    // freed at every call cost more than the balancing, in page faults and in the TLB
    // shootdowns of the memory returned to the system (the pool's threads live on).
    thread_local std::unique_ptr<LayerBalancer> kept;
    if (kept == nullptr || !kept->Fits(experts, replicas, groups, nodes, gpus)) {
      kept = std::make_unique<LayerBalancer>(experts, replicas, groups, nodes, gpus);
    }
    LayerBalancer& balancer = *kept;
    for (int batch = begin; batch < end; ++batch) {
      const int first = batch * together;
      const int count = std::min(together, layers - first);
      for (int i = 0; i < count; ++i) fill(first + i, balancer.weight(i));
      balancer.Run(count);
      for (int i = 0; i < count; ++i) emit(first + i, balancer, i);
    }
  });
}

}  // namespace

Result<RankedPlacement> RebalanceDeepSeekRanked(const LoadMatrix& load, int num_replicas,
                                                int num_groups, int num_nodes, int num_gpus) {
  EPLB_RETURN_IF_ERROR(ValidateLoad(load));
  EPLB_RETURN_IF_ERROR(CheckShape(load.cols(), num_replicas, num_groups, num_nodes, num_gpus));
  const int layers = static_cast<int>(load.rows());
  const int experts = static_cast<int>(load.cols());
  std::vector<int32_t> phy2log(static_cast<size_t>(layers) * num_replicas);
  std::vector<int32_t> rank(phy2log.size());
  BalanceLayers(
      layers, experts, num_replicas, num_groups, num_nodes, num_gpus,
      [&](int layer, std::span<float> weight) {
        for (int e = 0; e < experts; ++e) weight[e] = static_cast<float>(load(layer, e));
      },
      [&](int layer, const LayerBalancer& balancer, int i) {
        const auto first = static_cast<ptrdiff_t>(layer) * num_replicas;
        std::ranges::copy(balancer.phy2log(i), phy2log.begin() + first);
        std::ranges::copy(balancer.replica_rank(i), rank.begin() + first);
      });
  EPLB_ASSIGN_OR_RETURN(Placement placement,
                        Placement::Create(experts, num_replicas, std::move(phy2log)));
  return RankedPlacement{std::move(placement), std::move(rank)};
}

namespace {

// A layer's log2phy at `width`: each expert's slots by replica rank, then -1.
template <typename Expert>
void WriteLog2Phy(std::span<const Expert> phy2log, const int32_t* rank, int experts, int width,
                  int64_t* out) {
  std::fill_n(out, static_cast<size_t>(experts) * width, -1);
  for (size_t s = 0; s < phy2log.size(); ++s) {
    out[static_cast<size_t>(phy2log[s]) * width + rank[s]] = static_cast<int64_t>(s);
  }
}

// The width of the last call's log2phy, with its shape: (a hash of the shape << 32) | width.
// Engines rebalance one model again and again, and its widest expert's replica count moves
// slowly, so this is nearly always the next call's width: layers are then written into
// log2phy while their results are still in cache, with no pass over every layer once the
// widest is known. A wrong guess costs that pass, after the layers were written at the
// guessed width. A guess is taken only for the shape it was made on (or, on a collision of
// the 32-bit hashes, clamped to what that shape can need), so that it makes room for no more
// than a call of that shape once needed. A few guesses, one per shape whose hash picks its
// entry: a caller that alternates between two models' shapes keeps one guess for each, and
// only shapes that pick the same entry take each other's place (then miss, and pay what every
// call paid before the guess).
std::array<std::atomic<uint64_t>, 16> last_log2phy_widths{};

std::atomic<uint64_t>& LastLog2PhyWidth(uint64_t shape) {
  return last_log2phy_widths[(shape >> 32) % last_log2phy_widths.size()];
}

uint64_t ShapeKey(int layers, int64_t experts, int replicas, int groups, int nodes, int gpus) {
  uint64_t h = 0x9e3779b97f4a7c15u;
  for (const int64_t v : {int64_t{layers}, experts, int64_t{replicas}, int64_t{groups},
                          int64_t{nodes}, int64_t{gpus}}) {
    h = (h ^ static_cast<uint64_t>(v)) * 0xff51afd7ed558ccdu;
    h ^= h >> 29;
  }
  return h & 0xffffffff00000000u;
}

}  // namespace

Result<DeepSeekMaps> RebalanceDeepSeekMaps(std::span<const float> weight, int layers,
                                           int64_t experts, int num_replicas, int num_groups,
                                           int num_nodes, int num_gpus) {
  EPLB_RETURN_IF_ERROR(ValidateLoad(weight, layers, experts));
  EPLB_RETURN_IF_ERROR(CheckShape(experts, num_replicas, num_groups, num_nodes, num_gpus));
  DeepSeekMaps maps;
  maps.layers = layers;
  maps.experts = static_cast<int>(experts);
  maps.replicas = num_replicas;
  const uint64_t shape = ShapeKey(layers, experts, num_replicas, num_groups, num_nodes, num_gpus);
  std::atomic<uint64_t>& last_width = LastLog2PhyWidth(shape);
  const uint64_t last = last_width.load(std::memory_order_relaxed);
  // The width lies between an even spread's and every extra slot going to one expert.
  const int narrowest = static_cast<int>((num_replicas + experts - 1) / experts);
  const int guess = (last & 0xffffffff00000000u) == shape
                        ? std::clamp(static_cast<int>(last & 0xffffffffu), narrowest,
                                     static_cast<int>(num_replicas - experts + 1))
                        : narrowest;
  // Every element is written below: made without the zeroing that costs as much as the
  // writes on the arrays of a model's every layer.
  const size_t slots = static_cast<size_t>(layers) * num_replicas;
  const size_t cells = static_cast<size_t>(layers) * experts;
  maps.phy2log = std::make_unique_for_overwrite<int64_t[]>(slots);
  maps.logcnt = std::make_unique_for_overwrite<int64_t[]>(cells);
  maps.log2phy = std::make_unique_for_overwrite<int64_t[]>(cells * guess);
  // Replica ranks of the layers wider than the guess, which wait for the final width.
  const auto rank = std::make_unique_for_overwrite<int32_t[]>(slots);
  std::vector<int> widths(static_cast<size_t>(layers));
  BalanceLayers(
      layers, maps.experts, num_replicas, num_groups, num_nodes, num_gpus,
      [&](int layer, std::span<float> w) {
        std::copy_n(weight.begin() + static_cast<ptrdiff_t>(layer) * experts, experts, w.begin());
      },
      [&](int layer, const LayerBalancer& balancer, int i) {
        const auto first = static_cast<ptrdiff_t>(layer) * num_replicas;
        std::ranges::copy(balancer.phy2log(i), maps.phy2log.get() + first);
        std::ranges::copy(balancer.logcnt(i),
                          maps.logcnt.get() + static_cast<ptrdiff_t>(layer) * experts);
        widths[layer] = std::ranges::max(balancer.logcnt(i));
        if (widths[layer] <= guess) {
          WriteLog2Phy(balancer.phy2log(i), balancer.replica_rank(i).data(), maps.experts, guess,
                       maps.log2phy.get() + static_cast<size_t>(layer) * experts * guess);
        } else {
          std::ranges::copy(balancer.replica_rank(i), rank.get() + first);
        }
      });
  maps.width = *std::max_element(widths.begin(), widths.end());
  last_width.store(shape | static_cast<uint32_t>(maps.width), std::memory_order_relaxed);
  if (maps.width == guess) return maps;

  // The guess missed: every layer again at the true width, from its rows at the guessed width
  // (an expert's slots fill at most its layer's width) or from its ranks.
  auto log2phy = std::make_unique_for_overwrite<int64_t[]>(cells * maps.width);
  const int width = maps.width;
  const int kept = std::min(width, guess);
  ParallelFor(layers, slots >= kParallelMinWork ? 0 : 1, [&](int begin, int end) {
    for (int layer = begin; layer < end; ++layer) {
      int64_t* out = log2phy.get() + static_cast<size_t>(layer) * experts * width;
      if (widths[layer] > guess) {
        const auto first = static_cast<size_t>(layer) * num_replicas;
        WriteLog2Phy(std::span<const int64_t>(maps.phy2log.get() + first, num_replicas),
                     rank.get() + first, maps.experts, width, out);
        continue;
      }
      const int64_t* in = maps.log2phy.get() + static_cast<size_t>(layer) * experts * guess;
      for (int e = 0; e < maps.experts; ++e, in += guess, out += width) {
        std::copy_n(in, kept, out);
        std::fill(out + kept, out + width, -1);
      }
    }
  });
  maps.log2phy = std::move(log2phy);
  return maps;
}

namespace {

// A [rows, n] weight matrix as the building blocks take it: each row copied with -0.0 made
// +0.0 (whose bits order below every positive weight's), or the first bad value named.
Result<std::vector<float>> CheckedWeights(std::span<const float> weight, int rows) {
  if (rows < 1 || weight.size() % static_cast<size_t>(rows) != 0) {
    return Status::InvalidArgument(
        fmt::format("weight has {} values, which do not make {} rows", weight.size(), rows));
  }
  const size_t n = weight.size() / static_cast<size_t>(rows);
  if (n == 0 || n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return Status::InvalidArgument(fmt::format("weight has {} columns; expected at least 1", n));
  }
  std::vector<float> out(weight.size());
  for (size_t i = 0; i < weight.size(); ++i) {
    if (!(weight[i] >= 0.0f) || weight[i] == std::numeric_limits<float>::infinity()) {
      return Status::InvalidArgument(fmt::format(
          "weight[{}, {}] is {}; weights must be finite and >= 0", i / n, i % n, weight[i]));
    }
    out[i] = weight[i] + 0.0f;
  }
  return out;
}

}  // namespace

Result<DeepSeekPacking> DeepSeekBalancedPacking(std::span<const float> weight, int rows,
                                                int num_packs) {
  EPLB_ASSIGN_OR_RETURN(const std::vector<float> w, CheckedWeights(weight, rows));
  const int n = static_cast<int>(w.size() / static_cast<size_t>(rows));
  if (num_packs < 1 || n % num_packs != 0) {
    return Status::InvalidArgument(fmt::format(
        "num_packs is {}; it must be a positive divisor of the {} items per row", num_packs, n));
  }
  DeepSeekPacking out{std::vector<int32_t>(w.size()), std::vector<int32_t>(w.size())};
  StepScratch scratch;
  BalancedPacking(w, rows, num_packs, out.pack_index, out.rank_in_pack, scratch);
  return out;
}

Result<DeepSeekReplication> DeepSeekReplicateExperts(std::span<const float> weight, int rows,
                                                     int num_phy) {
  EPLB_ASSIGN_OR_RETURN(const std::vector<float> w, CheckedWeights(weight, rows));
  const int n = static_cast<int>(w.size() / static_cast<size_t>(rows));
  if (num_phy < n) {
    return Status::InvalidArgument(
        fmt::format("num_phy is {} but a row has {} experts; every expert needs at least one slot",
                    num_phy, n));
  }
  const size_t slots = static_cast<size_t>(rows) * num_phy;
  DeepSeekReplication out{std::vector<int32_t>(slots), std::vector<int32_t>(slots),
                          std::vector<int32_t>(w.size())};
  StepScratch scratch;
  ReplicateExperts(w, rows, out.phy2log, out.rank, out.logcnt, scratch);
  return out;
}

Result<Placement> RebalanceDeepSeek(const LoadMatrix& load, int num_replicas, int num_groups,
                                    int num_nodes, int num_gpus) {
  EPLB_ASSIGN_OR_RETURN(
      RankedPlacement ranked,
      RebalanceDeepSeekRanked(load, num_replicas, num_groups, num_nodes, num_gpus));
  return std::move(ranked.placement);
}

Result<Placement> DeepSeekPolicy::Rebalance(const PolicyInput& input) {
  EPLB_RETURN_IF_ERROR(ValidatePolicyInput(input, /*honour_lost_ranks=*/true));
  // Around lost GPUs: DeepSeek's policy on the live ones, as if they were the cluster.
  return policy_util::OnLiveRanks(input, [](const PolicyInput& in) {
    const Topology& t = in.topology;
    return RebalanceDeepSeek(in.load, t.num_slots(), in.num_groups, t.nodes(), t.num_ranks());
  });
}

}  // namespace eplb
