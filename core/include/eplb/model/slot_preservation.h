// Slot preservation (vLLM's preserve_intragpu_slots), applied after any policy: on each GPU,
// an expert that stays keeps its old slot, and incoming experts fill the freed slots in the
// order the policy listed them. It never changes which experts a GPU holds, only their slots,
// so it never adds a transfer and turns local copies into unchanged slots.
#pragma once

#include "eplb/model/placement.h"
#include "eplb/model/topology.h"

namespace eplb {

// `old_placement` and `new_placement` must have the same shape and fit `topology`.
Placement PreserveSlots(const Placement& old_placement, const Placement& new_placement,
                        const Topology& topology);

}  // namespace eplb
