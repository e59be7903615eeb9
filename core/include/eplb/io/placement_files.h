// Every placement file eplb reads, whoever wrote it: JSON with `phy2log` (eplb's, which also
// records `num_gpus` and `num_nodes`) or `physical_to_logical_map` (SGLang's
// --init-expert-location files, vLLM's EPLB state), and TensorRT-LLM's moe_load_balancer.yaml
// (`initial_global_assignments` keyed by the model's layer number, `num_slots`). A YAML file is
// told by its extension (.yaml, .yml); its layers are taken in ascending layer number.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "eplb/base/status.h"
#include "eplb/formats/placement_file.h"

namespace eplb {

Result<Placement> ReadAnyPlacementFile(const std::string& path, int num_experts = 0,
                                       RecordedTopology* topology = nullptr);
Result<Placement> ParseTrtllmPlacement(std::string_view text, const std::string& name,
                                       int num_experts = 0);

// The engines' own files for a placement, as `eplb rebalance --format` writes them and
// ReadAnyPlacementFile reads them back:
//   kSglang  {"physical_to_logical_map": ...}, all SGLang's --init-expert-location reads (it
//            passes the object's keys to its expert-location constructor as arguments)
//   kVllm    vLLM's EPLB state: physical_to_logical_map, logical_to_physical_map padded with -1
//            to num_redundant_experts + 1, logical_replica_count
//   kTrtllm  TensorRT-LLM's moe_load_balancer.yaml: initial_global_assignments keyed by the
//            model's layer index (`first_layer` for MoE layer 0), num_slots,
//            layer_updates_per_iter 0
enum class EngineFormat { kSglang, kVllm, kTrtllm };
std::string EnginePlacementFile(EngineFormat format, const Placement& placement,
                                int first_layer = 0);

}  // namespace eplb
