// The names of the scenario's own enums (engine/scenario.h), each spelled here once, in the
// order of the enum's values (base/name_table.h): the XName and ParseX functions of
// engine/scenario.h and the scenario schema read them. migrate/names.h and model/names.h hold
// those of the lower layers' enums.
#pragma once

#include "eplb/base/name_table.h"
#include "eplb/engine/scenario.h"

namespace eplb {

inline constexpr NameTable<ComputeModel, 2> kComputeModelNames{"compute.model",
                                                               {"simple", "roofline"}};
inline constexpr NameTable<AllToAllMode, 3> kAllToAllModeNames{"compute.all_to_all",
                                                               {"bulk", "normal", "low-latency"}};
inline constexpr NameTable<InferenceStage, 2> kInferenceStageNames{"compute.stage",
                                                                   {"prefill", "decode"}};
inline constexpr NameTable<Dispatch, 3> kDispatchNames{"eplb.dispatch", {"even", "random", "lp"}};
inline constexpr NameTable<EplbSpec::Statistics, 2> kStatisticsNames{"eplb.statistics",
                                                                     {"window", "decayed"}};
inline constexpr NameTable<EplbSpec::BalancednessGate, 3> kBalancednessGateNames{
    "eplb.balancedness_gate", {"window_min", "window_mean", "step_mean"}};
inline constexpr NameTable<EplbSpec::LostTokens, 2> kLostTokensNames{"eplb.lost_tokens",
                                                                     {"drop", "wait"}};
inline constexpr NameTable<EplbSpec::Recovery, 2> kRecoveryNames{"eplb.recovery",
                                                                 {"rebalance", "repair"}};
inline constexpr NameTable<ClusterSpec::Backup, 2> kBackupNames{"cluster.backup",
                                                                {"host", "storage"}};
inline constexpr NameTable<FaultKind, 5> kFaultKindNames{
    "faults[].kind", {"straggler", "link_degraded", "gpu_lost", "node_lost", "scale"}};

}  // namespace eplb
