// The scenario schema's machinery: the README's columns of a field, and the reader and the
// writer that walk the fields' table (scenario_schema_fields.cpp) in order.
#include "io/scenario_schema.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "io/scenario_schema_builders.h"

namespace eplb::scenario_schema {

using namespace scenario_fields;  // NOLINT: the schema is the fields' reader

namespace {

// A bound as the README writes it: 1e6 for a large power of ten, else the shortest decimal.
std::string Bound(double v) {
  if (v >= 1e5) {
    const double exponent = std::round(std::log10(v));
    if (std::pow(10.0, exponent) == v) return fmt::format("1e{}", exponent);
  }
  return fmt::format("{}", v);
}

std::vector<std::string> Split(const std::string& path) {
  std::vector<std::string> parts;
  size_t from = 0;
  for (size_t dot; (dot = path.find('.', from)) != std::string::npos; from = dot + 1) {
    parts.push_back(path.substr(from, dot - from));
  }
  parts.push_back(path.substr(from));
  return parts;
}

// A bound of an integer field as the README writes it: 2^24 for a large power of two.
std::string IntBound(int64_t v) {
  if (v == std::numeric_limits<int64_t>::max()) return "2^63−1";
  if (v >= (int64_t{1} << 24) && (v & (v - 1)) == 0) {
    int k = 0;
    while ((int64_t{1} << k) < v) ++k;
    return fmt::format("2^{}", k);
  }
  return fmt::format("{}", v);
}

}  // namespace

std::string Field::Section() const {
  const size_t dot = path.rfind('.');
  return dot == std::string::npos ? "" : path.substr(0, dot);
}

std::string Field::Key() const {
  return path.substr(path.rfind('.') + 1);
}

std::string Field::ValidText() const {
  if (!valid_text.empty()) return valid_text;
  if (type == FieldType::kInt) {
    if (int_max - int_min == 1) return fmt::format("{}, {}", int_min, int_max);
    if (int_max == kNoMax) return fmt::format("≥ {}", int_min);
    return fmt::format("{}..{}", int_min, IntBound(int_max));
  }
  if (type == FieldType::kReal || (type == FieldType::kNote && max > min)) {
    return fmt::format("{}{}, {}]", positive ? "(" : "[", Bound(min), Bound(max));
  }
  if (type == FieldType::kBool) return "true, false";
  std::string out;  // the names: `a`, `b`, `c`
  for (const std::string& name : names) out += (out.empty() ? "`" : ", `") + name + "`";
  return out;
}

std::string Field::DefaultText() const {
  if (!default_text.empty() || !show) return default_text;
  return show(Scenario{});
}

std::string Field::ReadmeRow() const {
  return fmt::format("| `{}` | {} | {} |{} |", path, DefaultText(), ValidText(),
                     doc.empty() ? "" : " " + doc);
}

namespace {

// The fields in the order they are read: the table's, each read_after moved behind its field.
const std::vector<const Field*>& ReadOrder() {
  static const std::vector<const Field*> order = [] {
    std::vector<const Field*> fields;
    for (const Field& f : ScenarioFields()) {
      if (f.read && f.read_after.empty()) fields.push_back(&f);
    }
    for (const Field& f : ScenarioFields()) {
      if (!f.read || f.read_after.empty()) continue;
      const auto after = std::find_if(fields.begin(), fields.end(),
                                      [&](const Field* g) { return g->path == f.read_after; });
      fields.insert(after == fields.end() ? after : after + 1, &f);
    }
    return fields;
  }();
  return order;
}

}  // namespace

void ReadScenarioFields(const YAML::Node& root, Scenario& s, Reader& r) {
  // The maps open at the field being read: the top level, then its section's (and a link's).
  std::vector<MapReader> open;
  std::vector<std::string> open_names;
  open.reserve(4);
  open.emplace_back(root, "", r);
  for (const Field* field : ReadOrder()) {
    const Field& f = *field;
    std::vector<std::string> parts = Split(f.path);
    const std::string key = parts.back();
    parts.pop_back();
    size_t common = 0;
    while (common < open_names.size() && common < parts.size() &&
           open_names[common] == parts[common]) {
      ++common;
    }
    // A map is finished (its unknown fields reported) when the next field is outside it.
    for (; open_names.size() > common; open_names.pop_back()) {
      open.back().Finish();
      open.pop_back();
    }
    for (; open_names.size() < parts.size(); open_names.push_back(parts[open_names.size()])) {
      MapReader sub = open.back().Sub(parts[open_names.size()].c_str());
      open.push_back(std::move(sub));
    }
    f.read(open.back(), key.c_str(), s, r);
  }
  for (; !open.empty(); open.pop_back()) open.back().Finish();
}

void WriteScenarioFields(YAML::Emitter& out, const Scenario& s) {
  std::vector<std::string> open_names;
  out << YAML::BeginMap;
  for (const Field& f : ScenarioFields()) {
    if (!f.write) continue;
    std::vector<std::string> parts = Split(f.path);
    const std::string key = parts.back();
    parts.pop_back();
    size_t common = 0;
    while (common < open_names.size() && common < parts.size() &&
           open_names[common] == parts[common]) {
      ++common;
    }
    for (; open_names.size() > common; open_names.pop_back()) out << YAML::EndMap;
    for (; open_names.size() < parts.size(); open_names.push_back(parts[open_names.size()])) {
      out << YAML::Key << parts[open_names.size()] << YAML::Value << YAML::BeginMap;
    }
    out << YAML::Key << key << YAML::Value;
    f.write(out, s);
  }
  for (; !open_names.empty(); open_names.pop_back()) out << YAML::EndMap;
  out << YAML::EndMap;
}

}  // namespace eplb::scenario_schema
