// The scenario schema's builders: one function per field type, each making a Field (its
// reader, writer and README columns) from the field's place in a Scenario, its range and its
// Doc. Private to scenario_schema.cpp and scenario_schema_fields.cpp, the table's two halves.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "eplb/base/name_table.h"
#include "eplb/engine/scenario.h"
#include "io/scenario_fields.h"
#include "io/scenario_schema.h"

namespace eplb::scenario_schema {

using scenario_fields::MapReader;
using scenario_fields::Reader;

// An int field without a maximum.
inline constexpr int64_t kNoMax = std::numeric_limits<int>::max();

// A real as its shortest text that reads back to the same double ("0.8", not yaml-cpp's
// "0.80000000000000004"), so a resolved scenario reads as it was written.
inline std::string Shortest(double value) {
  // fmt writes 1.56e10 as "15600000000"; large counts read better with their exponent.
  if (std::fabs(value) >= 1e9) {
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
    return std::string(buf, r.ptr);
  }
  return fmt::format("{}", value);
}

// The README's text of a field: its unit, its meaning, and its valid and default columns where
// they say more than the range and the default. The meaning is one sentence, so that the table
// stays a table: a field's sources, rules and caveats live on the docs page it points to.
struct Doc {
  const char* unit;
  const char* text;
  const char* valid = "";
  const char* shown_default = "";
};

inline Field Base(std::string path, FieldType type, const Doc& doc) {
  Field f;
  f.path = std::move(path);
  f.type = type;
  f.unit = doc.unit;
  f.doc = doc.text;
  f.valid_text = doc.valid;
  f.default_text = doc.shown_default;
  return f;
}

// The type of the member `ref` names (scenario_schema_fields.cpp's FIELD: `ref(s)` is a
// reference to it, const in a const Scenario).
template <typename Ref>
using Member = std::remove_reference_t<decltype(std::declval<Ref>()(std::declval<Scenario&>()))>;

// One builder per type; `ref` is the field's place in a Scenario (the FIELD macro).
template <typename Ref>
Field Int(std::string path, Ref ref, int64_t min, int64_t max, const Doc& doc) {
  static_assert(std::is_same_v<std::remove_const_t<Member<Ref>>, int>);
  Field f = Base(std::move(path), FieldType::kInt, doc);
  f.int_min = min;
  f.int_max = max;
  f.read = [ref, min, max](MapReader& m, const char* key, Scenario& s, Reader&) {
    m.Int(key, ref(s), static_cast<int>(min), static_cast<int>(max));
  };
  f.write = [ref](YAML::Emitter& out, const Scenario& s) { out << ref(s); };
  f.number = [ref](const Scenario& s) { return double(ref(s)); };
  f.show = [ref](const Scenario& s) { return fmt::format("{}", ref(s)); };
  return f;
}
template <typename Ref>
Field Int64(std::string path, Ref ref, int64_t min, int64_t max, const Doc& doc) {
  static_assert(std::is_same_v<std::remove_const_t<Member<Ref>>, int64_t>);
  Field f = Base(std::move(path), FieldType::kInt, doc);
  f.int_min = min;
  f.int_max = max;
  f.read = [ref, min, max](MapReader& m, const char* key, Scenario& s, Reader&) {
    m.Int64(key, ref(s), min, max);
  };
  f.write = [ref](YAML::Emitter& out, const Scenario& s) { out << static_cast<long long>(ref(s)); };
  f.number = [ref](const Scenario& s) { return double(ref(s)); };
  f.show = [ref](const Scenario& s) { return fmt::format("{}", ref(s)); };
  return f;
}
// 0..2^63−1 (a seed).
template <typename Ref>
Field Uint64(std::string path, Ref ref, const Doc& doc) {
  static_assert(std::is_same_v<std::remove_const_t<Member<Ref>>, uint64_t>);
  Field f = Base(std::move(path), FieldType::kInt, doc);
  f.int_min = 0;
  f.int_max = std::numeric_limits<int64_t>::max();
  f.read = [ref](MapReader& m, const char* key, Scenario& s, Reader&) { m.Uint64(key, ref(s)); };
  f.write = [ref](YAML::Emitter& out, const Scenario& s) {
    out << static_cast<unsigned long long>(ref(s));
  };
  f.show = [ref](const Scenario& s) { return fmt::format("{}", ref(s)); };
  return f;
}
template <typename Ref>
Field Real(std::string path, Ref ref, double min, double max, bool positive, const Doc& doc) {
  static_assert(std::is_same_v<std::remove_const_t<Member<Ref>>, double>);
  Field f = Base(std::move(path), FieldType::kReal, doc);
  f.min = min;
  f.max = max;
  f.positive = positive;
  f.read = [ref, min, max, positive](MapReader& m, const char* key, Scenario& s, Reader&) {
    m.Double(key, ref(s), min, max, positive);
  };
  f.write = [ref](YAML::Emitter& out, const Scenario& s) { out << Shortest(ref(s)); };
  f.number = [ref](const Scenario& s) { return ref(s); };
  f.show = [ref](const Scenario& s) { return fmt::format("{}", ref(s)); };
  return f;
}
// [min, max]
template <typename Ref>
Field Real(std::string path, Ref ref, double min, double max, const Doc& doc) {
  return Real(std::move(path), ref, min, max, false, doc);
}
// (min, max]
template <typename Ref>
Field Positive(std::string path, Ref ref, double min, double max, const Doc& doc) {
  return Real(std::move(path), ref, min, max, true, doc);
}
template <typename Ref>
Field Bool(std::string path, Ref ref, const Doc& doc) {
  static_assert(std::is_same_v<std::remove_const_t<Member<Ref>>, bool>);
  Field f = Base(std::move(path), FieldType::kBool, doc);
  f.read = [ref](MapReader& m, const char* key, Scenario& s, Reader&) { m.Bool(key, ref(s)); };
  f.write = [ref](YAML::Emitter& out, const Scenario& s) { out << ref(s); };
  f.show = [ref](const Scenario& s) { return ref(s) ? "true" : "false"; };
  return f;
}
// A string, one of `names` unless they are empty.
template <typename Ref>
Field Text(std::string path, Ref ref, const std::vector<std::string>& names, const Doc& doc) {
  static_assert(std::is_same_v<std::remove_const_t<Member<Ref>>, std::string>);
  Field f = Base(std::move(path), FieldType::kText, doc);
  f.names = names;
  f.read = [ref, names](MapReader& m, const char* key, Scenario& s, Reader&) {
    m.String(key, ref(s), names);
  };
  f.write = [ref](YAML::Emitter& out, const Scenario& s) { out << ref(s); };
  f.show = [ref](const Scenario& s) {
    const std::string& v = ref(s);
    return fmt::format("`{}`", v.empty() ? "\"\"" : v);
  };
  return f;
}
// One of an enum's names (its table's).
template <typename Ref, typename E, size_t N>
Field Enum(std::string path, Ref ref, const NameTable<E, N>& table, const Doc& doc) {
  static_assert(std::is_same_v<std::remove_const_t<Member<Ref>>, E>);
  Field f = Base(std::move(path), FieldType::kEnum, doc);
  f.names = table.List();
  f.read = [ref, &table](MapReader& m, const char* key, Scenario& s, Reader&) {
    std::string name = table.Name(ref(s));
    m.String(key, name, table.List());
    if (const auto value = table.Find(name)) ref(s) = *value;
  };
  f.write = [ref, &table](YAML::Emitter& out, const Scenario& s) { out << table.Name(ref(s)); };
  f.show = [ref, &table](const Scenario& s) { return fmt::format("`{}`", table.Name(ref(s))); };
  return f;
}
// A field read and written by its own functions.
inline Field Custom(std::string path, decltype(Field::read) read, decltype(Field::write) write,
                    const Doc& doc) {
  Field f = Base(std::move(path), FieldType::kCustom, doc);
  f.read = std::move(read);
  f.write = std::move(write);
  return f;
}
// `f`, read after the field `path` of its section (Field::read_after).
inline Field ReadAfter(Field f, std::string path) {
  f.read_after = std::move(path);
  return f;
}
// A field of a list's entries, documented here and read with its entry.
inline Field Note(std::string path, std::vector<std::string> names, const Doc& doc) {
  Field f = Base(std::move(path), FieldType::kNote, doc);
  f.names = std::move(names);
  return f;
}
// A number of a list's entries in [min, max], documented here and read with its entry.
inline Field NoteRange(std::string path, double min, double max, const Doc& doc) {
  Field f = Base(std::move(path), FieldType::kNote, doc);
  f.min = min;
  f.max = max;
  return f;
}
// Runs `check` after the field is read: a rule of that field alone.
inline Field Checked(Field f, void (*check)(const Scenario&, Reader&)) {
  auto read = std::move(f.read);
  f.read = [read, check](MapReader& m, const char* key, Scenario& s, Reader& r) {
    read(m, key, s, r);
    check(s, r);
  };
  return f;
}

}  // namespace eplb::scenario_schema
