// The placement readers (`rebalance --current`, `plan`): JSON phy2log with or without
// num_experts, and TensorRT-LLM's moe_load_balancer.yaml; and --policy-replay's recordings
// (sequences of placements), checked against a small cluster.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "eplb/io/placement_files.h"
#include "eplb/io/recorded_placements.h"
#include "fuzz_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto placement = eplb::ParsePlacementJson(text, "fuzz.json", 0);
  eplb_fuzz::CheckQuoting(placement);
  if (placement.ok()) {
    // What eplb writes of a placement it read reads back as the same placement.
    std::string written = "{";
    eplb::AppendPlacementJsonMembers(written, *placement);
    written += "}";
    auto again = eplb::ParsePlacementJson(written, "written.json", placement->num_experts());
    if (!again.ok() || !(*again == *placement)) __builtin_trap();
  }
  eplb_fuzz::CheckQuoting(eplb::ParsePlacementJson(text, "fuzz.json", 16));
  // yaml-cpp under ASan takes ~50 ms for the 64 KiB JSON seeds; the YAML reader's own checks
  // are exercised as well by small inputs, which keeps the suite's time bounded.
  if (size <= 8192) eplb_fuzz::CheckQuoting(eplb::ParseTrtllmPlacement(text, "fuzz.yaml", 0));
  auto recording = eplb::ParseRecording(text, "fuzz.jsonl", "recorded");
  eplb_fuzz::CheckQuoting(recording);
  if (recording.ok()) {
    const eplb::Topology topology = *eplb::Topology::Create({2, 2, 5});
    eplb_fuzz::CheckQuoting(eplb::CheckRecording(*recording, topology, 4, 16, 400));
  }
  return 0;
}
