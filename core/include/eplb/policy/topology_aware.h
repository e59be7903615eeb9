// SGLang's topology-aware placement (python/sglang/srt/eplb/eplb_algorithms/topology_aware.py,
// `rebalance_experts_topology_aware`), reimplemented: docs/policies_sglang_topology.md.
//
// Its input is richer than a load: tokens_per_source_expert[layer, source rank, expert], the
// tokens each rank sent to each expert, and rank_cost_matrix[source, destination], a relative
// cost per token (zero diagonal). Per layer, expert e placed on rank r costs
// comm[e][r] = Σ_s tokens[s][e] · cost[s][r]. Each expert gets one slot (no redundant experts);
// the search starts from the node-uniform layout (expert e on rank e / (E / R)) and
//   1. swaps pairs of experts on different ranks, the one that cuts the communication cost most
//      each time, while no rank's load exceeds the node-uniform layout's busiest rank;
//   2. then spends a small communication budget (a ratio over the cost phase 1 left) on swaps
//      that lower the busiest rank's load, or keep it and lower the sum of squared rank loads;
// with a bounded number of swaps (5 per slot of a rank), and falls back to the node-uniform
// layout if the result communicates more. Ties go to the lowest (first, second) expert pair.
//
// As the `topology-aware` policy (registry), eplb's simulator supplies what a load lacks: every
// serving GPU sends an equal share of each expert's tokens (as its step model dispatches), and
// rank costs are per-byte link times (NVLink inside a node, the NIC across). Where the cluster
// has more slots than experts, which SGLang's refuses, eplb's policy gives each extra slot to
// the expert with the largest load per replica, seeds the extra replicas after the node-uniform
// experts, and searches over replicas as over experts (each carrying its share of the load).
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "eplb/base/status.h"
#include "eplb/policy/policy.h"

namespace eplb {

// A row-major [ranks, ranks] cost of one token from a source rank to a destination rank.
struct RankCostMatrix {
  int ranks = 0;
  std::vector<double> cost;  // cost[source * ranks + destination]
  double at(int source, int destination) const {
    return cost[static_cast<size_t>(source) * ranks + destination];
  }
};

// SGLang's checks: square, at least one rank, `expected_ranks` of them (when > 0), finite,
// non-negative and zero on the diagonal. Messages keep SGLang's words ("must be square",
// "does not match the EP group", "diagonal must be zero").
Status ValidateRankCostMatrix(const RankCostMatrix& matrix, int expected_ranks = 0);

// Expert e on rank e / (experts / ranks): the default contiguous layout.
std::vector<int> NodeUniformSeed(int experts, int ranks);

// Σ of `total_load` over the experts each rank holds.
std::vector<double> RankLoads(std::span<const int> assignment, std::span<const double> total_load,
                              int ranks);

struct TopologySearch {
  // Ranks' load ceiling; the seed's busiest rank when unset.
  std::optional<double> max_allowed_load;
  // Swaps in all; max(1, 5 × experts per rank) when unset.
  std::optional<int> max_swaps;
  // Communication growth phase 2 may spend, as a fraction of the cost phase 1 left; 0 skips it.
  double max_comm_regression_ratio = 0;
};

// SGLang's `_improve_topology`: the two phases above from `assignment` (expert → rank, every
// rank holding as many as it will keep), over `communication` ([experts, ranks] row-major).
// Errors: a negative ratio ("must be non-negative"), shapes that disagree.
Result<std::vector<int>> ImproveTopology(std::vector<int> assignment,
                                         std::span<const double> total_load,
                                         std::span<const double> communication, int ranks,
                                         const TopologySearch& search = {});

// The communication budget `rebalance_experts_topology_aware` gives phase 2.
inline constexpr double kTopologyCommRegressionRatio = 5e-4;

// rebalance_experts_topology_aware's three outputs, row-major int64 as SGLang returns them.
struct TopologyAwareMaps {
  int layers = 0, experts = 0;
  std::vector<int64_t> phy2log;  // [layers, experts]: each rank's experts ascending
  std::vector<int64_t> log2phy;  // [layers, experts, 1]
  std::vector<int64_t> logcnt;   // [layers, experts]: all 1
};

// OK when a call on `layers` layers of `items` experts (or slots) over `ranks` ranks is within
// the work the search takes on (about 10 s); it grows with the cube of the items a layer, so a
// larger one is refused, naming its size and what to change, before it starts. Every entry point
// checks it, and so does a run before its first step (PolicyInfo::check_size).
Status CheckTopologyAwareSize(int layers, int items, int ranks);

// `tokens` is row-major [layers, ranks, experts] (finite, non-negative). `num_physical_experts`
// defaults to the experts; more than that is refused ("no redundant experts"), fewer is "must
// match"; it must divide over the ranks, and `num_local_physical_experts` (when given)
// be its share per rank.
Result<TopologyAwareMaps> RebalanceTopologyAware(
    std::span<const double> tokens, int layers, int ranks, int experts,
    const RankCostMatrix& rank_cost, std::optional<int> num_physical_experts = std::nullopt,
    std::optional<int> num_local_physical_experts = std::nullopt);

class TopologyAwarePolicy final : public Policy {
 public:
  std::string_view name() const override { return "topology-aware"; }
  Result<Placement> Rebalance(const PolicyInput& input) override;
};

}  // namespace eplb
