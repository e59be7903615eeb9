// DeepSeek's expert-parallel load balancer (github.com/deepseek-ai/EPLB, eplb.py), reproduced
// exactly: the same float32 arithmetic, descending sort by load (equal loads in the order
// torch's unstable CPU sort leaves them where it is libstdc++'s std::sort, as in torch 1.13;
// builds that sort with x86-simd-sort may order ties otherwise), and the first index on ties
// when picking the most loaded expert and the lightest pack.
//
// Hierarchical when num_groups % num_nodes == 0: expert groups are packed onto nodes, experts
// are replicated inside each node, and replicas are packed onto the node's GPUs. Otherwise the
// global policy: the same with one group and one node.
#pragma once

#include <cstdint>
#include <vector>

#include "eplb/model/load.h"
#include "eplb/model/placement.h"
#include "eplb/policy/policy.h"

namespace eplb {

// DeepSeek's `rebalance_experts(weight, num_replicas, num_groups, num_nodes, num_gpus)`.
// Rejects what the reference would assert on, naming the values. Like the reference, the global
// fallback accepts GPUs that are not a multiple of nodes (nodes play no part in it); a Topology
// never does.
Result<Placement> RebalanceDeepSeek(const LoadMatrix& load, int num_replicas, int num_groups,
                                    int num_nodes, int num_gpus);

// The reference's placement with its third output, each slot's replica rank (`phyrank`): slot s
// of a layer holds replica number replica_rank[layer * num_replicas + s] of its expert, counted
// in the order the policy made them. The reference's log2phy lists an expert's slots by this
// rank, and engines that take it index replicas so.
struct RankedPlacement {
  Placement placement;
  std::vector<int32_t> replica_rank;  // [layers * num_replicas]
};
Result<RankedPlacement> RebalanceDeepSeekRanked(const LoadMatrix& load, int num_replicas,
                                                int num_groups, int num_nodes, int num_gpus);

class DeepSeekPolicy final : public Policy {
 public:
  std::string_view name() const override { return "deepseek"; }
  Result<Placement> Rebalance(const PolicyInput& input) override;
};

}  // namespace eplb
