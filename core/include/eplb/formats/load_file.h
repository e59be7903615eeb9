// Reading load matrices from files.
//
// CSV: one line per layer, comma-separated non-negative numbers; blank lines and lines starting
// with '#' are skipped.
// JSON: an array of arrays (`layers × experts`), an array of such arrays (`steps × layers ×
// experts`, summed over steps), or an object holding either under `load`, SGLang's
// `logical_count`, or `steps` (the layout of eplb's recorded real loads).
//
// Errors name the file, the line (CSV) or the JSON path, the value and what would be valid.
#pragma once

#include <string>
#include <string_view>

#include "eplb/base/file_io.h"
#include "eplb/base/status.h"
#include "eplb/model/load.h"

namespace eplb {

// Chooses the format by the first non-blank character: '[' or '{' is JSON, anything else CSV.
Result<LoadMatrix> ReadLoadFile(const std::string& path);
Result<LoadMatrix> ParseLoadCsv(std::string_view text, const std::string& name);
Result<LoadMatrix> ParseLoadJson(std::string_view text, const std::string& name);

}  // namespace eplb
