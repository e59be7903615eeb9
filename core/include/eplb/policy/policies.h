// The policy family beyond `deepseek` (deepseek.h). Each is registered by name
// (policy.h); see each class for what defines it.
//
//   static             never rearranges: the baseline every comparison needs
//   deepseek-preserve  deepseek, then slot preservation (vLLM's preserve_intragpu_slots)
//   replicate-lpt      TensorRT-LLM's host algorithm: greedy replication by load per replica,
//                      then replicas, heaviest first, on the least loaded GPU with a free slot
//   timeseries         SGLang's deepseek_vec idea: each extra replica goes where it most reduces
//                      the sum over the window's chunks of the chunk's largest load per replica
//   incremental        SwiftBalancer-like: keep the placement, re-point redundant slots to the
//                      hottest experts, then swap experts off the busiest GPU while that helps,
//                      moving at most max_moves_per_layer experts per layer
//   migration-aware    eplb's own: per layer, the candidate (keep, repair the current placement, or
//                      deepseek with preserved slots) with the least predicted cost over the
//                      next interval: straggler time plus the weighted time to move its bytes
//   fault-tolerant     survives any one node (or GPU) lost without reloading where slots allow:
//                      second replicas hottest first, an expert's replicas on different failure
//                      domains
#pragma once

#include "eplb/policy/policy.h"

namespace eplb {

class StaticPolicy final : public Policy {
 public:
  std::string_view name() const override { return "static"; }
  Result<Placement> Rebalance(const PolicyInput& input) override;
};

class DeepSeekPreservePolicy final : public Policy {
 public:
  std::string_view name() const override { return "deepseek-preserve"; }
  Result<Placement> Rebalance(const PolicyInput& input) override;
};

class ReplicateLptPolicy final : public Policy {
 public:
  std::string_view name() const override { return "replicate-lpt"; }
  Result<Placement> Rebalance(const PolicyInput& input) override;
};

// Every expert's replicas on two failure domains (nodes, or GPUs on one node) where slots allow;
// core/src/policy/fault_tolerant.cpp says how.
class FaultTolerantPolicy final : public Policy {
 public:
  std::string_view name() const override { return "fault-tolerant"; }
  Result<Placement> Rebalance(const PolicyInput& input) override;
};

class TimeSeriesPolicy final : public Policy {
 public:
  std::string_view name() const override { return "timeseries"; }
  Result<Placement> Rebalance(const PolicyInput& input) override;

 private:
  Result<Placement> OnAllRanks(const PolicyInput& input);
};

class IncrementalPolicy final : public Policy {
 public:
  std::string_view name() const override { return "incremental"; }
  Result<Placement> Rebalance(const PolicyInput& input) override;
};

class MigrationAwarePolicy final : public Policy {
 public:
  std::string_view name() const override { return "migration-aware"; }
  Result<Placement> Rebalance(const PolicyInput& input) override;
};

}  // namespace eplb
