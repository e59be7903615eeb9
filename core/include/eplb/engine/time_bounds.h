// The durations a scenario's rates imply, checked before any of them reaches a simulator: a
// rate inside its field's range can still make a time overflow (4.9e-324 GB/s) or grow past
// what a simulated clock can add to (1e-300 GB/s), and SimGrid aborts or stops on such a time.
//
// Thread-safety: a pure function of the scenario.
#pragma once

#include <optional>
#include <string>

#include "eplb/engine/scenario.h"

namespace eplb {

// The longest time one derived duration may take: a step, or one expert over any link.
// 10^7 s (116 days) is far beyond any real step or copy, and far inside the range in which a
// simulated clock still advances by a microsecond.
inline constexpr double kMaxDerivedSeconds = 1e7;

struct UnboundedTime {
  std::string field;    // the scenario field that makes it so ("cluster.nvlink.bandwidth_gbps")
  std::string message;  // what it makes too long, and by how much
};

// The first duration of `s` that is not finite or exceeds kMaxDerivedSeconds, naming the
// field responsible: one expert's bytes over each link and copy path, and one step of the
// scenario's tokens spread evenly over its experts, priced by its step model. A step that is
// too long is blamed on the one field whose default value would make it fit. Expects a
// scenario that passed its field and cross-field checks.
std::optional<UnboundedTime> FindUnboundedTime(const Scenario& s);

}  // namespace eplb
