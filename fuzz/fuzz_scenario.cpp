// The scenario reader: YAML text and --set overrides, as a user or a script would give them.
// The input's first line, when it starts with "--set ", is one override; the rest is the file.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "eplb/engine/scenario.h"
#include "eplb/io/scenario_file.h"
#include "fuzz_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> overrides;
  if (text.rfind("--set ", 0) == 0) {
    const size_t nl = text.find('\n');
    overrides.push_back(text.substr(6, nl == std::string::npos ? std::string::npos : nl - 6));
    text = nl == std::string::npos ? "" : text.substr(nl + 1);
  }
  auto scenario = eplb::ParseScenario(text, "fuzz.yaml", overrides);
  eplb_fuzz::CheckQuoting(scenario);
  if (scenario.ok()) {
    // What every command does next with a valid scenario: size it, write it back, read that.
    (void)eplb::EstimateRunMemory(*scenario);
    (void)scenario->topology();
    auto again = eplb::ParseScenario(eplb::ScenarioToYaml(*scenario), "again.yaml");
    if (!again.ok()) __builtin_trap();  // a scenario eplb writes must read back
  }
  return 0;
}
