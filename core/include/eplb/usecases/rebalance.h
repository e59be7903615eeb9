// A registered policy run on a recorded load: the use case behind `eplb rebalance` and the
// Python module's eplb.rebalance, defined once so that the two front ends cannot drift.
//
// The policy sees the load as the EPLB loop hands it a window: the series' sum
// (LoadSeries::Total) and, for a window of more than one step, the series cut into at most
// `max_chunks` chunks of consecutive steps (LoadSeries::Chunks) for the policies that look at
// time. The migration-aware policies' window_steps is the window's length
// (RebalanceOptions::window_steps, or the series' length), set before the options, which may
// override it.
//
// Thread-safety: a pure function; policies keep no state between calls.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "eplb/base/status.h"
#include "eplb/formats/load_file.h"
#include "eplb/model/load.h"
#include "eplb/model/placement.h"
#include "eplb/model/topology.h"

namespace eplb {

struct RebalanceOptions {
  const Placement* current = nullptr;  // the placement in force; nullptr when there is none
  int num_groups = 1;                  // the model's expert groups (1: none)
  int max_chunks = 16;                 // at least 1
  // The steps the window spans; 0: the series' length. A caller that summed the steps into at
  // most max_chunks chunks of consecutive steps itself, as LoadSeries::Chunks cuts them (the
  // Python module, which keeps no copy of every step), passes that series with this count.
  int64_t window_steps = 0;
  // Policy options as NAME, VALUE text (`eplb policies` lists each policy's), applied in order.
  std::vector<std::pair<std::string, std::string>> policy_options;
  std::vector<int> lost_ranks;  // GPUs to place around, in any order
};

struct Rebalanced {
  Placement placement;
  LoadMatrix window;     // the load the policy balanced: the series' sum
  double policy_ms = 0;  // wall time of the policy's own Rebalance call
};

// Errors: an unknown policy or option (naming the valid ones), an empty series, max_chunks
// below 1 or window_steps below 0, and whatever the policy refuses (its input checks,
// ValidatePolicyInput), the latter prefixed with "policy NAME: ".
Result<Rebalanced> RebalanceRecordedLoad(std::string_view policy, const LoadSeries& load,
                                         const Topology& topology,
                                         const RebalanceOptions& options = {});

}  // namespace eplb
