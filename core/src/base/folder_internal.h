// What file_io.cpp (manifests) and output_folder.cpp (writing folders whole) share; internal to
// base/.
#pragma once

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "eplb/base/file_io.h"

namespace eplb::internal {

// The last system call's error, as messages quote it.
inline std::string Errno() {
  return std::strerror(errno);
}

// The file that marks a folder named DIR.partial-HOST-PID as eplb's: written first into a new
// partial folder (removed once its manifest is written), and into an old folder the moment an
// exchange has moved it aside to be removed. It names its state, kind, host and PID.
inline constexpr const char* kPartialMarkerName = ".eplb-partial";

// What is under a folder, relative and sorted. Symbolic links are files here (never followed),
// so a link the user put in an output folder is seen as theirs like any other file.
struct FolderEntries {
  std::vector<std::string> files;
  std::vector<std::string> folders;
};

Result<FolderEntries> ListEntries(const std::filesystem::path& dir);

// DIR's manifest as it says, its files not yet looked at.
Result<FolderManifest> ParseFolderManifest(const std::string& dir);

}  // namespace eplb::internal
