// The published-figures reader (`eplb validate --published --figures FILE`): any text gives a
// list of figures or an error, never a crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "eplb/usecases/published.h"
#include "fuzz_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto figures = eplb::ParsePublishedFigures(text, "dir/figures.yaml");
  eplb_fuzz::CheckQuoting(figures);
  if (figures.ok()) {
    for (const auto& f : *figures) {
      if (f.published <= 0 || f.measure.empty()) __builtin_trap();  // a read figure is whole
    }
  }
  return 0;
}
