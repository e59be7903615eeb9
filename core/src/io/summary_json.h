// summary.json: its fields defined once (summary_json.cpp), and the writer and the reader that
// both walk that definition. Internal to the io layer; RunSummary is in eplb/io/run_folder.h.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "eplb/base/status.h"
#include "eplb/io/run_folder.h"

namespace eplb::run_folder {

nlohmann::ordered_json SummaryJson(const RunSummary& summary);
// `file` (the path) prefixes errors, which name the field by its JSON path.
Result<RunSummary> ParseSummary(const std::string& text, const std::string& file);

}  // namespace eplb::run_folder
