// The names of an enum's values, in the order of the values: the one place each enum's names are
// spelled. The name function, the parser, a scenario field's valid values and the error that
// lists them all read the table (io's scenario schema; engine/scenario_names.h and
// migrate/names.h hold the tables of the enums a scenario names).
//
// An enum with a table has values 0..N−1 in the order of its names.
//
// Thread-safety: immutable values.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "eplb/base/excerpt.h"
#include "eplb/base/status.h"

namespace eplb {

template <typename E, size_t N>
struct NameTable {
  // The scenario field (or what else) the names are values of, as an error names it.
  const char* field;
  std::array<const char*, N> names;

  static constexpr size_t size() { return N; }
  // "?" for a value outside the table (a cast from a wrong integer).
  constexpr const char* Name(E value) const {
    const auto i = static_cast<size_t>(value);
    return i < N ? names[i] : "?";
  }
  std::optional<E> Find(std::string_view name) const {
    for (size_t i = 0; i < N; ++i) {
      if (name == names[i]) return static_cast<E>(i);
    }
    return std::nullopt;
  }
  // "nccl, nixl, gloo, host_pool"
  std::string Joined(std::string_view separator = ", ") const {
    std::string out;
    for (size_t i = 0; i < N; ++i) {
      if (i > 0) out += separator;
      out += names[i];
    }
    return out;
  }
  std::vector<std::string> List() const { return {names.begin(), names.end()}; }
  // The value named `name`, or "FIELD is 'NAME'; valid values: a, b, c".
  Result<E> Parse(std::string_view name) const {
    if (const auto value = Find(name)) return *value;
    return Status::InvalidArgument(
        fmt::format("{} is {}; valid values: {}", field, QuoteInput(name), Joined()));
  }
};

// A table whose size is its names' count: MakeNameTable<Engine>("migration.engine", {"eplb",
// "vllm", "sglang"}); a name added needs no count changed.
template <typename E, size_t N>
constexpr NameTable<E, N> MakeNameTable(const char* field, const char* const (&names)[N]) {
  NameTable<E, N> table{field, {}};
  for (size_t i = 0; i < N; ++i) table.names[i] = names[i];
  return table;
}

}  // namespace eplb
