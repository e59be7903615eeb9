// The names of the migrate layer's enums that a scenario names (base/name_table.h): each spelled
// here once, in the order of the enum's values; TransportName, ParseTransport, EngineName, ...
// and the scenario schema read them.
#pragma once

#include "eplb/base/name_table.h"
#include "eplb/migrate/engine_profile.h"
#include "eplb/migrate/schedule.h"
#include "eplb/migrate/transfer_plan.h"
#include "eplb/migrate/transport.h"

namespace eplb {

inline constexpr auto kTransportNames =
    MakeNameTable<Transport>("migration.transport", {"nccl", "nixl", "gloo", "host_pool"});
inline constexpr auto kEngineNames =
    MakeNameTable<Engine>("migration.engine", {"eplb", "vllm", "sglang"});
inline constexpr auto kScheduleStrategyNames =
    MakeNameTable<ScheduleStrategy>("eplb.schedule", {"single-batch", "greedy-pairs", "best"});
inline constexpr auto kSenderRuleNames =
    MakeNameTable<SenderRule>("eplb.sender_rule", {"vllm", "local"});

}  // namespace eplb
