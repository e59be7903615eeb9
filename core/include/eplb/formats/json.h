// JSON text into nlohmann::json, for every JSON file eplb reads: nesting deeper than
// kMaxJsonDepth is refused before parsing (nlohmann's recursive dump and destruction would
// overflow the stack on hostile input), and every parse failure, a number out of the range of a
// double included, becomes a Status naming the source, line and column.
//
// Thread-safety: a pure function.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "eplb/base/status.h"

namespace eplb {

// Deeper than any eplb format needs (a load file nests 4 levels: object, steps, layers, experts).
inline constexpr int kMaxJsonDepth = 64;

// `source` names the input in messages: "load.json" gives "load.json:3:14: not valid JSON: ...";
// `first_line` is the line number of the text's first line (a line of a JSON-lines file).
Result<nlohmann::json> ParseJson(std::string_view text, const std::string& source,
                                 int first_line = 1);

}  // namespace eplb
