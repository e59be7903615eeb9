// Whole-file reads and writes, and folders that appear whole or not at all.
//
// Thread-safety: the functions share no state; two calls on the same path race as the file
// system does.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "eplb/base/status.h"

namespace eplb {

// The whole file, or an IoError naming it.
Result<std::string> ReadTextFile(const std::string& path);
// Writes `text` to `path`, or an IoError naming it.
Status WriteTextFile(const std::string& path, const std::string& text);

// Writes a folder atomically: fill(partial) builds DIR.partial-PID, which then replaces DIR, but
// only when DIR does not exist or holds `marker` (an eplb `kind` folder written before).
// On any failure the partial folder is removed and DIR is left as it was.
Status WriteFolderAtomically(const std::string& dir, const std::string& kind,
                             const std::string& marker,
                             const std::function<Status(const std::string&)>& fill);

// The process's peak resident set so far (0 where unknown).
int64_t PeakRssBytes();

}  // namespace eplb
