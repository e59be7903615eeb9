// JSON text into nlohmann::json, for every JSON file eplb reads: nesting deeper than
// kMaxJsonDepth is refused before parsing (nlohmann's recursive dump and destruction would
// overflow the stack on hostile input), and every parse failure, a number out of the range of a
// double included, becomes a Status naming the source, line and column. A parse failure quotes
// nothing of the text (its structure not yet parsed, it is not yet known to be JSON of its kind:
// base/excerpt.h); a value of a recognised file is quoted with QuoteJson.
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

// `value` as an error quotes it: its JSON text (which quotes a string itself), ASCII, at most
// 32 bytes (base/excerpt.h): "abc", 1.5 or [1,2,3,4,5,6,7,8,9,10,11,12,13,1...
std::string QuoteJson(const nlohmann::json& value);

}  // namespace eplb
