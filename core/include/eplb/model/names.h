// The names of the model layer's enums that a scenario names (base/name_table.h), each spelled
// here once, in the order of the enum's values.
#pragma once

#include "eplb/base/name_table.h"
#include "eplb/model/topology.h"

namespace eplb {

inline constexpr auto kLinkClassNames =
    MakeNameTable<LinkClass>("faults[].link", {"nvlink", "nic"});

}  // namespace eplb
