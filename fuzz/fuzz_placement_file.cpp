// The placement reader (`rebalance --current`, `plan`): JSON phy2log with or without num_experts.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "eplb/formats/placement_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto placement = eplb::ParsePlacementJson(text, "fuzz.json", 0);
  if (placement.ok()) (void)eplb::PlacementToJson(*placement).dump();
  (void)eplb::ParsePlacementJson(text, "fuzz.json", 16);
  return 0;
}
