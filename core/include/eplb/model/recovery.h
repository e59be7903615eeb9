// The smallest recovery from lost GPUs: the placement in force with the lost GPUs' slots emptied
// and each expert that has no live replica left put in place of one redundant replica, so that
// recovery reloads only what was lost and copies nothing (`eplb.recovery: repair`; the next
// rearrangement rebalances). The replica given up is, for each lost expert, heaviest first, one
// of the expert whose load per replica stays lowest without it, on the least loaded GPU among
// that expert's replicas; empty live slots are used before any replica is given up.
//
// Thread-safety: a pure function.
#pragma once

#include <span>

#include "eplb/base/status.h"
#include "eplb/model/load.h"
#include "eplb/model/placement.h"
#include "eplb/model/topology.h"

namespace eplb {

// `excluded` (ascending): the GPUs lost or not serving; their slots come back empty. Fails when
// the other GPUs' slots cannot hold every expert.
Result<Placement> RepairAroundLostRanks(const Placement& current, const LoadMatrix& load,
                                        const Topology& topology, std::span<const int> excluded);

}  // namespace eplb
