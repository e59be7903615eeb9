// The policy family beyond `deepseek` (deepseek.h). Each is registered by name (policy.h), and
// what each does is said once, in the registry (core/src/policy/registry.cpp, which `eplb
// policies` and docs/policies.md print); see each class's source for how.
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
