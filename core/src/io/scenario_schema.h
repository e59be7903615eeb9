// The scenario schema: every field of a scenario file once, as run_folder_fields.cpp defines
// every column of a run folder once. Each field has its path (section.key), its type and range,
// its unit, its documentation (scenarios/README.md's table, which a test holds to these rows),
// and for an enum its one name table (base/name_table.h). The reader (ReadScenarioFields), the
// writer (WriteScenarioFields), the range checks and the errors that list valid values all come
// from it; the rules that tie several fields together stay in scenario_file.cpp's Validate.
// Internal to the io layer.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "eplb/engine/scenario.h"
#include "io/scenario_fields.h"

namespace eplb::scenario_schema {

enum class FieldType {
  kInt,     // an integer in [min, max]
  kReal,    // a number in [min, max], or (min, max] when `positive`
  kBool,    // true or false
  kText,    // a string; one of `names` when it has them
  kEnum,    // one of `names`, an enum's name table
  kCustom,  // a list or a value of several forms, read and written by its own functions
  kNote,    // documented only: a field of a list's entries (faults[].kind), read with its entry
};

struct Field {
  std::string path;  // "cluster.nvlink.bandwidth_gbps"; "" sections: "name", "faults"
  FieldType type = FieldType::kInt;
  int64_t int_min = 0, int_max = 0;  // kInt
  double min = 0, max = 0;           // kReal
  bool positive = false;             // kReal: strictly above min
  std::vector<std::string> names;    // kText (when limited) and kEnum: the valid values
  std::string unit;                  // "GB/s", "µs", "bytes", ... ("" when none)
  // scenarios/README.md's row: its meaning, and its valid and default columns where prose says
  // more than the range and the default do ("": written from them).
  std::string doc, valid_text, default_text;

  // A field of the same section this one is read after, though written before it: the reader's
  // order decides which of two wrong fields an error names (workload.phases after .trace).
  std::string read_after;
  // Reads the field from its section's map into `s`; nullptr for kNote.
  std::function<void(scenario_fields::MapReader&, const char* key, Scenario& s,
                     scenario_fields::Reader& r)>
      read;
  // Writes the field's value (its key is written); nullptr for kNote.
  std::function<void(YAML::Emitter& out, const Scenario& s)> write;
  // The value as the README's default column shows it (`host`, 0.9, true).
  std::function<std::string(const Scenario& s)> show;
  // A number field's value as a double (model constants' warning); nullptr otherwise.
  std::function<double(const Scenario& s)> number;

  std::string Section() const;  // "cluster.nvlink" of "cluster.nvlink.bandwidth_gbps"
  std::string Key() const;      // "bandwidth_gbps"
  // The README's valid and default columns: the override, or written from the range, the names
  // and the default scenario's value.
  std::string ValidText() const;
  std::string DefaultText() const;
  // The README's row: | `path` | default | valid | doc |
  std::string ReadmeRow() const;
};

// Every field, in the order a scenario file is read and written.
const std::vector<Field>& ScenarioFields();

// Reads every field of `root` (a map) into `s`, each field's range and names checked; reports
// the first error to `r`, and each map's unknown fields.
void ReadScenarioFields(const YAML::Node& root, Scenario& s, scenario_fields::Reader& r);

// Writes every field of `s` as one YAML map.
void WriteScenarioFields(YAML::Emitter& out, const Scenario& s);

}  // namespace eplb::scenario_schema
