// Per-layer building blocks shared by the policies.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "eplb/model/load.h"
#include "eplb/model/placement.h"
#include "eplb/model/topology.h"
#include "eplb/policy/policy.h"

namespace eplb::policy_util {

// Replica counts (each >= 1, summing to `slots`) that minimise max_e load[e] / count[e]:
// every extra replica goes to the expert with the largest load per replica (lowest index on
// ties). Greedy is optimal for this objective.
std::vector<int> ReplicaCounts(std::span<const double> load, int slots);

// Places replicas on GPUs, heaviest first, each on the least loaded GPU with a free slot
// (longest processing time first). `replicas` lists the expert of each replica; `weight` its
// load. Returns the layer's phy2log row.
std::vector<int32_t> PackLpt(const std::vector<int32_t>& replicas,
                             const std::vector<double>& weight, const Topology& topology,
                             std::span<const int> lost_ranks = {});

// Slots per layer on the GPUs not lost.
int LiveSlots(const PolicyInput& input);

// Replicas of a layer from counts: expert e appears counts[e] times, with load[e] / counts[e].
void ExpandReplicas(std::span<const double> load, const std::vector<int>& counts,
                    std::vector<int32_t>& replicas, std::vector<double>& weight);

// GPU loads of one layer's row.
std::vector<double> RowGpuLoads(std::span<const double> load, std::span<const int32_t> row,
                                const Topology& topology);

// Slots whose expert differs between two rows.
int MovedSlots(std::span<const int32_t> a, std::span<const int32_t> b);

// The current placement, or vLLM's initial one when there is none.
Placement CurrentOrInitial(const PolicyInput& input);

// A layer's load as a span.
inline std::span<const double> Row(const LoadMatrix& m, int layer) {
  return {m.data() + static_cast<size_t>(layer) * m.cols(), static_cast<size_t>(m.cols())};
}

// Runs `place` on the live GPUs alone, as if they were the whole cluster, and spreads its
// placement back over the real ranks, the lost ones' slots empty: how a policy that knows
// nothing of lost ranks honours them. Whole nodes lost keep the node structure (the remaining
// nodes); GPUs lost inside a node leave one flat node of the live GPUs. `place` is called with
// no current placement. Without lost ranks it is `place(input)`.
Result<Placement> OnLiveRanks(const PolicyInput& input,
                              const std::function<Result<Placement>(const PolicyInput&)>& place);

// Builds a placement from per-layer rows.
Result<Placement> FromRows(int experts, int slots, const std::vector<std::vector<int32_t>>& rows);

}  // namespace eplb::policy_util
