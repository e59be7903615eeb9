// Placement files, read and written in both encodings, whoever wrote them. The one module for
// them: callers include this header alone.
//   JSON  `phy2log` (layers × slots, -1 for an empty slot), as `eplb rebalance` prints it, which
//         also records `num_gpus` and `num_nodes`; or `physical_to_logical_map` (the same map:
//         SGLang's --init-expert-location files, vLLM's EPLB state).
//   YAML  TensorRT-LLM's moe_load_balancer.yaml (`initial_global_assignments` keyed by the
//         model's layer number, `num_slots`); its layers are taken in ascending layer number.
// A file's encoding is told by its extension (.yaml, .yml: YAML; .json: JSON). The logical
// expert count is, in this order: the caller's `num_experts` when positive (e.g. the load's),
// the file's `num_experts` (JSON), or the largest expert id plus one.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "eplb/base/name_table.h"
#include "eplb/base/status.h"
#include "eplb/model/placement.h"

namespace eplb {

// The cluster a placement was made for, as its file records it (`num_gpus`, `num_nodes`); 0
// where the file does not say (the engines' files never do).
struct RecordedTopology {
  int gpus = 0;
  int nodes = 0;
};

// Reading. ReadAnyPlacementFile takes a file in either encoding (by its extension); the parsers
// take text already read, `name` naming it in errors.
Result<Placement> ReadAnyPlacementFile(const std::string& path, int num_experts = 0,
                                       RecordedTopology* topology = nullptr);
Result<Placement> ParsePlacementJson(std::string_view text, const std::string& name,
                                     int num_experts = 0, RecordedTopology* topology = nullptr);
Result<Placement> ParseTrtllmPlacement(std::string_view text, const std::string& name,
                                       int num_experts = 0);

// Writing eplb's own JSON: the members of a placement's object, appended to `out` as compact
// JSON text (the same bytes nlohmann's dump() writes): "phy2log":[[...]],"log2phy":[[[...]]],
// "logcnt":[[...]], then "num_gpus" and "num_nodes" when `topology` has them; log2phy rows list
// each expert's slots in ascending order, padded with -1 to the largest replica count. Written
// as text, not built as a document: on DeepSeek-V3's shape a document of ~150,000 values took
// most of `eplb rebalance`'s time to build and free.
void AppendPlacementJsonMembers(std::string& out, const Placement& placement,
                                const RecordedTopology& topology = {});

// Writing the engines' own files, as `eplb rebalance --format` writes them and
// ReadAnyPlacementFile reads them back:
//   kSglang  {"physical_to_logical_map": ...}, all SGLang's --init-expert-location reads (it
//            passes the object's keys to its expert-location constructor as arguments)
//   kVllm    vLLM's EPLB state: physical_to_logical_map, logical_to_physical_map padded with -1
//            to num_redundant_experts + 1, logical_replica_count
//   kTrtllm  TensorRT-LLM's moe_load_balancer.yaml: initial_global_assignments keyed by the
//            model's layer index (`first_layer` for MoE layer 0), num_slots,
//            layer_updates_per_iter 0
enum class EngineFormat { kSglang, kVllm, kTrtllm };
inline constexpr auto kEngineFormatNames =
    MakeNameTable<EngineFormat>("--format", {"sglang", "vllm", "trtllm"});
std::string EnginePlacementFile(EngineFormat format, const Placement& placement,
                                int first_layer = 0);

}  // namespace eplb
