// SGLang's topology-aware placement: topology_aware.h says what it does, this file how.
#include "eplb/policy/topology_aware.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "policy/util.h"

namespace eplb {
namespace {

// SGLang's tolerance on every comparison of loads and costs.
constexpr double kTolerance = 1e-12;
// Share of the swaps phase 1 may use when phase 2 has a budget, so that the communication
// search cannot leave nothing for a straggling rank.
constexpr double kCommunicationPhaseFraction = 0.5;

// The search over `assignment` (item → rank) of items with `weight` and `comm` ([items, ranks]).
class SwapSearch {
 public:
  SwapSearch(std::vector<int>& assignment, std::span<const double> weight,
             std::span<const double> comm, int ranks, double ceiling)
      : a_(assignment),
        w_(weight),
        c_(comm),
        ranks_(ranks),
        ceiling_(ceiling + kTolerance),
        load_(RankLoads(assignment, weight, ranks)) {}

  // Phase 1: up to `swaps` swaps, each the feasible one that cuts communication most; returns
  // how many it made.
  int Communication(int swaps) {
    const int n = static_cast<int>(a_.size());
    int used = 0;
    for (; used < swaps; ++used) {
      double best = -kTolerance;
      int bi = -1, bj = -1;
      for (int i = 0; i < n; ++i) {
        for (int j = i + 1; j < n; ++j) {
          if (!Feasible(i, j)) continue;
          const double delta = Delta(i, j);
          if (delta < best) best = delta, bi = i, bj = j;
        }
      }
      if (bi < 0) break;
      Swap(bi, bj);
    }
    return used;
  }

  // Phase 2: up to `swaps` swaps that lower the busiest rank (or keep it and lower the sum of
  // squared loads), none taking communication above `limit`.
  void Load(int swaps, double limit) {
    const int n = static_cast<int>(a_.size());
    struct Candidate {
      int i, j;
      double max, sumsq_change;
    };
    std::vector<Candidate> accepted;
    for (int round = 0; round < swaps; ++round) {
      double comm_now = 0;
      for (int i = 0; i < n; ++i) comm_now += C(i, a_[i]);
      const double old_max = *std::max_element(load_.begin(), load_.end());
      // The three busiest ranks: the busiest outside any two is among them.
      std::vector<int> top(static_cast<size_t>(ranks_));
      std::iota(top.begin(), top.end(), 0);
      const size_t keep = std::min<size_t>(3, top.size());
      std::partial_sort(top.begin(), top.begin() + static_cast<std::ptrdiff_t>(keep), top.end(),
                        [&](int x, int y) { return load_[x] > load_[y]; });
      accepted.clear();
      for (int i = 0; i < n; ++i) {
        for (int j = i + 1; j < n; ++j) {
          if (!Feasible(i, j) || comm_now + Delta(i, j) > limit + kTolerance) continue;
          const int ri = a_[i], rj = a_[j];
          double other = -std::numeric_limits<double>::infinity();
          for (size_t k = 0; k < keep; ++k) {
            if (top[k] != ri && top[k] != rj) {
              other = load_[top[k]];
              break;
            }
          }
          const double fi = First(i, j), fj = Second(i, j);
          const double new_max = std::max({fi, fj, other});
          // The change in the sum of squared loads, from the two ranks alone: SGLang subtracts
          // the whole sums, whose rounding (1e-11 at loads of hundreds) passes its 1e-12
          // tolerance and makes swaps that change nothing (two lone experts exchanging ranks).
          const double sumsq_change =
              (fi * fi + fj * fj) - (load_[ri] * load_[ri] + load_[rj] * load_[rj]);
          const bool lower = new_max < old_max - kTolerance;
          const bool tied = std::abs(new_max - old_max) <= kTolerance;
          if (lower || (tied && sumsq_change < -kTolerance))
            accepted.push_back({i, j, new_max, sumsq_change});
        }
      }
      if (accepted.empty()) break;
      double best_max = std::numeric_limits<double>::infinity();
      for (const Candidate& c : accepted) best_max = std::min(best_max, c.max);
      const Candidate* best = nullptr;
      for (const Candidate& c : accepted) {
        if (std::abs(c.max - best_max) <= kTolerance &&
            (best == nullptr || c.sumsq_change < best->sumsq_change))
          best = &c;
      }
      Swap(best->i, best->j);
    }
  }

 private:
  double C(int item, int rank) const {
    return c_[static_cast<size_t>(item) * static_cast<size_t>(ranks_) + rank];
  }
  // The loads of i's and j's ranks after swapping them.
  double First(int i, int j) const { return load_[a_[i]] - w_[i] + w_[j]; }
  double Second(int i, int j) const { return load_[a_[j]] - w_[j] + w_[i]; }
  // A swap only changes its two ranks' loads, and keeps every rank's count.
  bool Feasible(int i, int j) const {
    return a_[i] != a_[j] && First(i, j) <= ceiling_ && Second(i, j) <= ceiling_;
  }
  // Each item's change apart, so that ranks equally far from every source (the simulator's
  // even dispatch) give exactly 0 rather than rounding noise that would pass for a gain.
  double Delta(int i, int j) const {
    const int ri = a_[i], rj = a_[j];
    return (C(i, rj) - C(i, ri)) + (C(j, ri) - C(j, rj));
  }
  void Swap(int i, int j) {
    const double fi = First(i, j), fj = Second(i, j);
    const int ri = a_[i], rj = a_[j];
    a_[i] = rj;
    a_[j] = ri;
    load_[ri] = fi;
    load_[rj] = fj;
  }

  std::vector<int>& a_;
  std::span<const double> w_, c_;
  int ranks_;
  double ceiling_;
  std::vector<double> load_;
};

double CommunicationOf(std::span<const int> assignment, std::span<const double> comm, int ranks) {
  double sum = 0;
  for (size_t i = 0; i < assignment.size(); ++i) sum += comm[i * ranks + assignment[i]];
  return sum;
}

// rebalance_experts_topology_aware's per-layer step over any items: improve the seed within
// its busiest rank's load, with the production budget, and keep the seed if that communicates
// more.
std::vector<int> PlaceLayer(const std::vector<int>& seed, std::span<const double> weight,
                            std::span<const double> comm, int ranks) {
  const std::vector<double> seed_load = RankLoads(seed, weight, ranks);
  TopologySearch search;
  search.max_allowed_load = *std::max_element(seed_load.begin(), seed_load.end());
  search.max_comm_regression_ratio = kTopologyCommRegressionRatio;
  std::vector<int> placed = *ImproveTopology(seed, weight, comm, ranks, search);
  if (CommunicationOf(placed, comm, ranks) > CommunicationOf(seed, comm, ranks)) return seed;
  return placed;
}

}  // namespace

Status ValidateRankCostMatrix(const RankCostMatrix& matrix, int expected_ranks) {
  const int64_t n = matrix.ranks;
  if (n < 0 || static_cast<int64_t>(matrix.cost.size()) != n * n) {
    return Status::InvalidArgument(
        fmt::format("rank_cost_matrix must be square: {} values for {} ranks (expected {})",
                    matrix.cost.size(), n, n * n));
  }
  if (n == 0) return Status::InvalidArgument("rank_cost_matrix must contain at least one rank");
  if (expected_ranks > 0 && n != expected_ranks) {
    return Status::InvalidArgument(
        fmt::format("rank_cost_matrix size does not match the EP group: matrix={} expected={}", n,
                    expected_ranks));
  }
  for (int s = 0; s < n; ++s) {
    for (int d = 0; d < n; ++d) {
      const double v = matrix.at(s, d);
      if (!std::isfinite(v) || v < 0) {
        return Status::InvalidArgument(fmt::format(
            "rank_cost_matrix must be finite and non-negative: [{}][{}] is {}", s, d, v));
      }
      if (s == d && v != 0) {
        return Status::InvalidArgument(
            fmt::format("rank_cost_matrix diagonal must be zero: [{}][{}] is {}", s, d, v));
      }
    }
  }
  return Status::Ok();
}

std::vector<int> NodeUniformSeed(int experts, int ranks) {
  const int per_rank = std::max(1, experts / std::max(1, ranks));
  std::vector<int> seed(static_cast<size_t>(std::max(0, experts)));
  for (int e = 0; e < experts; ++e) seed[e] = e / per_rank;
  return seed;
}

std::vector<double> RankLoads(std::span<const int> assignment, std::span<const double> total_load,
                              int ranks) {
  std::vector<double> loads(static_cast<size_t>(std::max(0, ranks)), 0.0);
  for (size_t e = 0; e < assignment.size(); ++e) loads[assignment[e]] += total_load[e];
  return loads;
}

Result<std::vector<int>> ImproveTopology(std::vector<int> assignment,
                                         std::span<const double> total_load,
                                         std::span<const double> communication, int ranks,
                                         const TopologySearch& search) {
  if (!(search.max_comm_regression_ratio >= 0)) {
    return Status::InvalidArgument(fmt::format("max_comm_regression_ratio must be non-negative: {}",
                                               search.max_comm_regression_ratio));
  }
  const size_t n = assignment.size();
  if (ranks < 1 || total_load.size() != n || communication.size() != n * ranks) {
    return Status::InvalidArgument(
        fmt::format("{} assignments, {} loads and {} communication costs do not fit {} ranks", n,
                    total_load.size(), communication.size(), ranks));
  }
  for (size_t e = 0; e < n; ++e) {
    if (assignment[e] < 0 || assignment[e] >= ranks) {
      return Status::InvalidArgument(
          fmt::format("assignment[{}] is rank {}; ranks are 0..{}", e, assignment[e], ranks - 1));
    }
  }
  if (search.max_swaps && *search.max_swaps < 0) {
    return Status::InvalidArgument(
        fmt::format("max_swaps is {}; it must be at least 0", *search.max_swaps));
  }
  const std::vector<double> seed_load = RankLoads(assignment, total_load, ranks);
  const double ceiling =
      search.max_allowed_load.value_or(*std::max_element(seed_load.begin(), seed_load.end()));
  const int max_swaps =
      search.max_swaps.value_or(std::max(1, 5 * static_cast<int>(n / static_cast<size_t>(ranks))));
  int communication_swaps = max_swaps;
  if (search.max_comm_regression_ratio > 0) {
    communication_swaps = std::max(1, static_cast<int>(max_swaps * kCommunicationPhaseFraction));
  }
  SwapSearch swaps(assignment, total_load, communication, ranks, ceiling);
  const int used = swaps.Communication(communication_swaps);
  if (search.max_comm_regression_ratio != 0 && used < max_swaps) {
    const double limit =
        CommunicationOf(assignment, communication, ranks) * (1 + search.max_comm_regression_ratio);
    swaps.Load(max_swaps - used, limit);
  }
  return assignment;
}

// The search weighs every pair of items once per swap, up to 5 × items / ranks swaps a layer:
// its work grows with the cube of the items (4 ranks: 1,024 experts 0.3 s, 4,096 22 s). Past
// this many pair evaluations (about 10 s here) a call is refused before it starts, rather than
// running for minutes where Ctrl-C cannot reach it (from Python).
constexpr double kMaxTopologyPairEvaluations = 2e10;

Status CheckTopologyAwareSize(int layers, int items, int ranks) {
  const double n = items, swaps = std::max(1.0, 5.0 * std::floor(n / std::max(1, ranks)));
  const double pairs = double(layers) * swaps * n * (n - 1) / 2;
  if (pairs <= kMaxTopologyPairEvaluations) return Status::Ok();
  return Status::InvalidArgument(fmt::format(
      "topology-aware placement of {} layers × {} items over {} ranks would weigh {:.1e} pairs of "
      "items (a swap search of up to {:.0f} swaps a layer, each over every pair), more than the "
      "{:.0e} it takes at most (about 10 s); its work grows with the cube of the items a layer: "
      "give fewer experts or more ranks, or another policy",
      layers, items, ranks, pairs, swaps, kMaxTopologyPairEvaluations));
}

Result<TopologyAwareMaps> RebalanceTopologyAware(std::span<const double> tokens, int layers,
                                                 int ranks, int experts,
                                                 const RankCostMatrix& rank_cost,
                                                 std::optional<int> num_physical_experts,
                                                 std::optional<int> num_local_physical_experts) {
  if (layers <= 0 || ranks <= 0 || experts <= 0) {
    return Status::InvalidArgument(fmt::format(
        "tokens_per_source_expert dimensions must be positive: [{}, {}, {}] (layers, source "
        "ranks, experts)",
        layers, ranks, experts));
  }
  const size_t cells = static_cast<size_t>(layers) * ranks * experts;
  if (tokens.size() != cells) {
    return Status::InvalidArgument(
        fmt::format("tokens_per_source_expert has {} values; [{}, {}, {}] needs {}", tokens.size(),
                    layers, ranks, experts, cells));
  }
  for (size_t i = 0; i < cells; ++i) {
    if (!std::isfinite(tokens[i]) || tokens[i] < 0) {
      const size_t per_layer = static_cast<size_t>(ranks) * experts;
      return Status::InvalidArgument(fmt::format(
          "tokens_per_source_expert must be finite and non-negative: [{}, {}, {}] is {}",
          i / per_layer, i % per_layer / experts, i % experts, tokens[i]));
    }
  }
  EPLB_RETURN_IF_ERROR(ValidateRankCostMatrix(rank_cost, ranks));
  const int physical = num_physical_experts.value_or(experts);
  if (physical > experts) {
    return Status::InvalidArgument(
        fmt::format("topology-aware placement currently requires no redundant experts: "
                    "num_physical_experts is {} for {} logical experts",
                    physical, experts));
  }
  if (physical != experts) {
    return Status::InvalidArgument(
        fmt::format("num_physical_experts must match the source-count expert dimension: {} "
                    "physical, {} in tokens_per_source_expert",
                    physical, experts));
  }
  if (physical % ranks != 0) {
    return Status::InvalidArgument(fmt::format(
        "num_physical_experts must be positive and divisible by ranks: {} over {} ranks", physical,
        ranks));
  }
  const int per_rank = physical / ranks;
  if (num_local_physical_experts && *num_local_physical_experts != per_rank) {
    return Status::InvalidArgument(fmt::format(
        "num_local_physical_experts must equal num_physical_experts // num_source_ranks: {} "
        "given, {} // {} = {}",
        *num_local_physical_experts, physical, ranks, per_rank));
  }

  EPLB_RETURN_IF_ERROR(CheckTopologyAwareSize(layers, experts, ranks));
  TopologyAwareMaps maps;
  maps.layers = layers;
  maps.experts = experts;
  const size_t total = static_cast<size_t>(layers) * experts;
  maps.phy2log.resize(total);
  maps.log2phy.resize(total);
  maps.logcnt.assign(total, 1);
  const std::vector<int> seed = NodeUniformSeed(experts, ranks);
  std::vector<double> load(static_cast<size_t>(experts)),
      comm(static_cast<size_t>(experts) * ranks);
  for (int l = 0; l < layers; ++l) {
    const double* layer = tokens.data() + static_cast<size_t>(l) * ranks * experts;
    std::fill(load.begin(), load.end(), 0.0);
    std::fill(comm.begin(), comm.end(), 0.0);
    for (int s = 0; s < ranks; ++s) {
      for (int e = 0; e < experts; ++e) {
        const double t = layer[static_cast<size_t>(s) * experts + e];
        load[e] += t;
        for (int r = 0; r < ranks; ++r)
          comm[static_cast<size_t>(e) * ranks + r] += t * rank_cost.at(s, r);
      }
    }
    const std::vector<int> placed = PlaceLayer(seed, load, comm, ranks);
    // Each rank's experts in ascending order fill its slots.
    std::vector<int> next(static_cast<size_t>(ranks), 0);
    for (int e = 0; e < experts; ++e) {
      const int slot = placed[e] * per_rank + next[placed[e]]++;
      maps.phy2log[static_cast<size_t>(l) * experts + slot] = e;
      maps.log2phy[static_cast<size_t>(l) * experts + e] = slot;
    }
  }
  return maps;
}

Result<Placement> TopologyAwarePolicy::Rebalance(const PolicyInput& input) {
  EPLB_RETURN_IF_ERROR(ValidatePolicyInput(input));
  const Topology& topology = input.topology;
  const int ranks = topology.num_ranks(), per = topology.slots_per_gpu();
  const int slots = topology.num_slots(), experts = static_cast<int>(input.load.cols());
  // Every GPU sends an equal share of each expert's tokens (the step model's dispatch), so a
  // rank's cost per token is the sum of its column of rank costs: seconds per GB over the link
  // from each source. Counted per link class, every rank has the same peers, so every rank gets
  // bitwise the same cost and only the load phase can move experts.
  const double in_node = topology.gpus_per_node() - 1, across = ranks - 1 - in_node;
  const double column = in_node * (1e9 / topology.link(LinkClass::kNvlink).bandwidth_bytes_per_s) +
                        across * (1e9 / topology.link(LinkClass::kNic).bandwidth_bytes_per_s);
  EPLB_RETURN_IF_ERROR(CheckTopologyAwareSize(static_cast<int>(input.load.rows()), slots, ranks));
  std::vector<std::vector<int32_t>> rows;
  std::vector<int> seed(static_cast<size_t>(slots));
  for (int k = 0; k < slots; ++k) seed[k] = k / per;
  std::vector<int32_t> item_expert;
  std::vector<double> weight, comm;
  for (int l = 0; l < input.load.rows(); ++l) {
    const auto load = policy_util::Row(input.load, l);
    const std::vector<int> counts = policy_util::ReplicaCounts(load, slots);
    // Experts 0..E-1 first (SGLang's node-uniform seed), then each expert's extra replicas.
    item_expert.clear();
    for (int e = 0; e < experts; ++e) item_expert.push_back(e);
    for (int e = 0; e < experts; ++e) item_expert.insert(item_expert.end(), counts[e] - 1, e);
    weight.assign(static_cast<size_t>(slots), 0.0);
    comm.assign(static_cast<size_t>(slots) * ranks, 0.0);
    for (int k = 0; k < slots; ++k) {
      const int e = item_expert[k];
      weight[k] = load[e] / counts[e];
      for (int r = 0; r < ranks; ++r)
        comm[static_cast<size_t>(k) * ranks + r] = weight[k] / ranks * column;
    }
    const std::vector<int> placed = PlaceLayer(seed, weight, comm, ranks);
    // Each rank's replicas by expert, ascending, fill its slots.
    std::vector<int> order(static_cast<size_t>(slots));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int x, int y) { return item_expert[x] < item_expert[y]; });
    std::vector<int32_t> row(static_cast<size_t>(slots));
    std::vector<int> next(static_cast<size_t>(ranks), 0);
    for (int k : order) row[placed[k] * per + next[placed[k]]++] = item_expert[k];
    rows.push_back(std::move(row));
  }
  return policy_util::FromRows(experts, slots, rows);
}

}  // namespace eplb
