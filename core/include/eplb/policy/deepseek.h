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
#include <memory>
#include <span>
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

// All three of the reference's outputs, as eplb.py returns them (int64, row-major), from a
// row-major [layers, experts] float32 weight, the type the reference reads. For callers that
// hand the arrays on, as the Python module does: no Placement is built. Errors as
// RebalanceDeepSeek's, and ValidateLoad's for the weights.
struct DeepSeekMaps {
  int layers = 0, experts = 0, replicas = 0;
  int width = 0;                       // the most replicas any expert has
  std::unique_ptr<int64_t[]> phy2log;  // [layers, replicas]: the expert in each slot
  std::unique_ptr<int64_t[]> log2phy;  // [layers, experts, width]: slots by replica rank, then -1
  std::unique_ptr<int64_t[]> logcnt;   // [layers, experts]: each expert's replica count
};
Result<DeepSeekMaps> RebalanceDeepSeekMaps(std::span<const float> weight, int layers,
                                           int64_t experts, int num_replicas, int num_groups,
                                           int num_nodes, int num_gpus);

// The reference's two building blocks, row by row over a row-major [rows, n] float32 matrix
// of finite, non-negative weights, for callers that compose them as vLLM's DefaultEplbPolicy
// lets its callers do.
//
// balanced_packing(weight, num_packs): n must be a multiple of num_packs; each pack takes
// n / num_packs items. Item i of a row goes to pack pack_index[i], position rank_in_pack[i].
struct DeepSeekPacking {
  std::vector<int32_t> pack_index;    // [rows * n]
  std::vector<int32_t> rank_in_pack;  // [rows * n]
};
Result<DeepSeekPacking> DeepSeekBalancedPacking(std::span<const float> weight, int rows,
                                                int num_packs);

// replicate_experts(weight, num_phy): num_phy >= n; slot p of a row holds expert phy2log[p] as
// its replica number rank[p]; logcnt[e] counts expert e's replicas.
struct DeepSeekReplication {
  std::vector<int32_t> phy2log;  // [rows * num_phy]
  std::vector<int32_t> rank;     // [rows * num_phy]
  std::vector<int32_t> logcnt;   // [rows * n]
};
Result<DeepSeekReplication> DeepSeekReplicateExperts(std::span<const float> weight, int rows,
                                                     int num_phy);

class DeepSeekPolicy final : public Policy {
 public:
  std::string_view name() const override { return "deepseek"; }
  Result<Placement> Rebalance(const PolicyInput& input) override;
};

}  // namespace eplb
