// Slot preservation (vLLM's preserve_intragpu_slots), applied after any policy: on each GPU,
// an expert that stays keeps its old slot, and incoming experts fill the freed slots in the
// order the policy listed them. It never changes which experts a GPU holds, only their slots,
// so it never adds a transfer and turns local copies into unchanged slots.
#pragma once

#include <cstdint>
#include <span>

#include "eplb/model/placement.h"
#include "eplb/model/topology.h"

namespace eplb {

// `old_placement` and `new_placement` must have the same shape and fit `topology`.
Placement PreserveSlots(const Placement& old_placement, const Placement& new_placement,
                        const Topology& topology);

// The same for one layer's row of any expert ids (they need not form a placement): writes into
// `source[s]` the position of `new_row` whose expert slot s takes, so that the preserved row is
// new_row[source[s]] and anything carried per slot (a replica rank) can follow its expert.
// Each GPU holds `slots_per_gpu` consecutive slots; all three spans have the same length, a
// multiple of `slots_per_gpu`.
void PreserveSlotsInRow(std::span<const int64_t> old_row, std::span<const int64_t> new_row,
                        int slots_per_gpu, std::span<int64_t> source);

}  // namespace eplb
