// Placement files: JSON objects with `phy2log` (layers × slots, -1 for an empty slot), as
// `eplb rebalance` prints them, or the engines' `physical_to_logical_map` (the same map). The
// logical expert count is, in this order: the caller's `num_experts` when positive (e.g. the
// load's), the file's `num_experts`, or the largest expert id plus one.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "eplb/base/status.h"
#include "eplb/model/placement.h"

namespace eplb {

// The cluster a placement was made for, as its file records it (`num_gpus`, `num_nodes`); 0
// where the file does not say (the engines' files never do).
struct RecordedTopology {
  int gpus = 0;
  int nodes = 0;
};

Result<Placement> ReadPlacementFile(const std::string& path, int num_experts = 0,
                                    RecordedTopology* topology = nullptr);
Result<Placement> ParsePlacementJson(std::string_view text, const std::string& name,
                                     int num_experts = 0, RecordedTopology* topology = nullptr);

// The members of a placement's JSON object, appended to `out` as compact JSON text (the same
// bytes nlohmann's dump() writes): "phy2log":[[...]],"log2phy":[[[...]]],"logcnt":[[...]], then
// "num_gpus" and "num_nodes" when `topology` has them; log2phy rows list each expert's slots in
// ascending order, padded with -1 to the largest replica count. Written as text, not built as a
// document: on DeepSeek-V3's shape a document of ~150,000 values took most of `eplb rebalance`'s
// time to build and free.
void AppendPlacementJsonMembers(std::string& out, const Placement& placement,
                                const RecordedTopology& topology = {});

}  // namespace eplb
