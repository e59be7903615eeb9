// The load-file readers (CSV and JSON, as `rebalance --load` and scenario traces take them).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "eplb/formats/load_file.h"
#include "fuzz_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  eplb_fuzz::CheckQuoting(eplb::ParseLoadCsv(text, "fuzz.csv"));
  eplb_fuzz::CheckQuoting(eplb::ParseLoadJson(text, "fuzz.json"));
  return 0;
}
