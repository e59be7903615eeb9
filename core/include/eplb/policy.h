// Policy: decides how many replicas each logical expert gets and which slot holds each one.
//
// A policy sees the window's load (`layers × experts`), the placement in force (if any) and the
// topology, and returns a new placement with topology.num_slots() slots per layer. Policies are
// looked up by name in a registry; the built-in ones are registered there.
//
// Thread-safety: a Policy object is not thread-safe; use one object per thread. The registry
// functions are safe to call from any thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "eplb/load.h"
#include "eplb/placement.h"
#include "eplb/status.h"
#include "eplb/topology.h"

namespace eplb {

struct PolicyInput {
  const LoadMatrix& load;
  const Topology& topology;
  // The placement in force, or nullptr when there is none (the first rearrangement).
  const Placement* current = nullptr;
  // Expert groups of the model (DeepSeek's group-limited routing); 1 when the model has none.
  int num_groups = 1;
};

// Checks what every policy needs: a valid load, at least as many slots as experts, and a
// current placement (when given) of the same shape as the load and topology.
Status ValidatePolicyInput(const PolicyInput& input);

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string_view name() const = 0;
  virtual Result<Placement> Rebalance(const PolicyInput& input) = 0;
};

struct PolicyInfo {
  std::string name;
  std::string summary;
  std::function<std::unique_ptr<Policy>()> make;
};

// Adds a policy to the registry. Fails when the name is taken.
Status RegisterPolicy(PolicyInfo info);
// The policy called `name`; the error lists the valid names.
Result<std::unique_ptr<Policy>> MakePolicy(std::string_view name);
// Every registered policy, built-ins first, in registration order.
std::vector<PolicyInfo> RegisteredPolicies();

}  // namespace eplb
