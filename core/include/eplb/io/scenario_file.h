// Scenario files: YAML in, the validated Scenario (engine/scenario.h) out, and back.
// scenarios/README.md documents every field. Errors name the file, the line and column, the
// field, the value and what would be valid.
#pragma once

#include <string>
#include <vector>

#include "eplb/base/status.h"
#include "eplb/engine/scenario.h"

namespace eplb {

// Parses `text` (named `source` in errors). `overrides` are "key.path=value" settings applied
// on top of the file, e.g. "cluster.nic.bandwidth_gbps=100".
Result<Scenario> ParseScenario(const std::string& text, const std::string& source,
                               const std::vector<std::string>& overrides = {});
Result<Scenario> LoadScenarioFile(const std::string& path,
                                  const std::vector<std::string>& overrides = {});
// The built-in default scenario (scenarios/deepseek-v3-prefill-ep32.yaml).
const std::string& DefaultScenarioText();

// The resolved scenario as YAML, every field written out.
std::string ScenarioToYaml(const Scenario& scenario);

}  // namespace eplb
