// The names of the scenario's own enums (engine/scenario.h), each spelled here once, in the
// order of the enum's values (base/name_table.h): the XName and ParseX functions of
// engine/scenario.h and the scenario schema read them. migrate/names.h and model/names.h hold
// those of the lower layers' enums.
#pragma once

#include "eplb/base/name_table.h"
#include "eplb/engine/scenario.h"

namespace eplb {

inline constexpr auto kComputeModelNames =
    MakeNameTable<ComputeModel>("compute.model", {"simple", "roofline"});
inline constexpr auto kAllToAllModeNames =
    MakeNameTable<AllToAllMode>("compute.all_to_all", {"bulk", "normal", "low-latency"});
inline constexpr auto kInferenceStageNames =
    MakeNameTable<InferenceStage>("compute.stage", {"prefill", "decode"});
inline constexpr auto kDispatchNames =
    MakeNameTable<Dispatch>("eplb.dispatch", {"even", "random", "lp"});
inline constexpr auto kStatisticsNames =
    MakeNameTable<EplbSpec::Statistics>("eplb.statistics", {"window", "decayed"});
inline constexpr auto kBalancednessGateNames = MakeNameTable<EplbSpec::BalancednessGate>(
    "eplb.balancedness_gate", {"window_min", "window_mean", "step_mean"});
inline constexpr auto kLostTokensNames =
    MakeNameTable<EplbSpec::LostTokens>("eplb.lost_tokens", {"drop", "wait"});
inline constexpr auto kRecoveryNames =
    MakeNameTable<EplbSpec::Recovery>("eplb.recovery", {"rebalance", "repair"});
inline constexpr auto kBackupNames =
    MakeNameTable<ClusterSpec::Backup>("cluster.backup", {"host", "storage"});
inline constexpr auto kFaultKindNames = MakeNameTable<FaultKind>(
    "faults[].kind", {"straggler", "link_degraded", "gpu_lost", "node_lost", "scale"});

}  // namespace eplb
