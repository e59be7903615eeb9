// Scenario files: YAML in, the validated Scenario (engine/scenario.h) out, and back.
// scenarios/README.md documents every field. Errors name the file, the line and column, the
// field, the value and what would be valid.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "eplb/base/status.h"
#include "eplb/engine/scenario.h"

namespace eplb {

// Parses `text` (named `source` in errors). `overrides` are "key.path=value" settings applied
// on top of the file, e.g. "cluster.nic.bandwidth_gbps=100"; a map value sets only the fields
// it names ("model={layers: 2}"). Empty text is the defaults. Refused, with file, line and
// field: YAML errors, a second document, a key given twice, integers not in plain decimal
// ("010"), unknown fields, values outside their documented range.
// LoadScenarioFile also refuses an empty file (a wrong path more likely than a wish for the
// defaults) and files over 16 MiB.
// Every model constant's default is DeepSeek-V3's: a scenario whose model.name is another model
// (not DeepSeek-V3 or R1) and that leaves a model.* constant out, in the file and in
// `overrides`, gets a warning on stderr naming each such field, once a process.
Result<Scenario> ParseScenario(const std::string& text, const std::string& source,
                               const std::vector<std::string>& overrides = {});
Result<Scenario> LoadScenarioFile(const std::string& path,
                                  const std::vector<std::string>& overrides = {});
// The built-in default scenario (scenarios/deepseek-v3-prefill-ep32.yaml).
const std::string& DefaultScenarioText();
// The scenario file at `path`, or the built-in default when `path` is empty (what a command's
// SCENARIO argument means), with `overrides` applied.
Result<Scenario> LoadScenarioOrDefault(const std::string& path,
                                       const std::vector<std::string>& overrides = {});

// The resolved scenario as YAML, every field written out.
std::string ScenarioToYaml(const Scenario& scenario);

// One field of the scenario schema as scenarios/README.md's table documents it: the schema
// (io/scenario_schema.h) is the one definition of every field, and a test holds the README's
// table to these rows.
struct ScenarioFieldDoc {
  std::string path;                      // "cluster.nic.bandwidth_gbps", "faults[].kind"
  std::string unit;                      // "GB/s", "µs", "bytes", ... ("" when none)
  std::string default_text;              // the README's default column
  std::string valid_text;                // the README's valid column
  std::string doc;                       // the README's meaning column
  std::vector<std::string> names;        // an enum's (or a limited string's) valid values
  std::optional<double> default_number;  // a number field's default value
  std::string readme_row;                // | `path` | default | valid | meaning |
};
std::vector<ScenarioFieldDoc> ScenarioFieldDocs();

// `scenario` with `fault` added to its faults and validated again, as if its file listed it:
// a fault given on a command line (`eplb device-run --fail-rank R --at STEP`). The errors name
// the fault as faults[N] and say what would be valid.
Result<Scenario> WithFault(const Scenario& scenario, const FaultSpec& fault);

}  // namespace eplb
