#include "cli_util.h"

#include <cstdio>

#include <fmt/format.h>

namespace eplb::cli {

int ReportError(const std::string& command, const Status& status) {
  fmt::print(stderr, "eplb {}: error: {}\n", command, status.message());
  const bool bad_input = status.code() == Status::Code::kInvalidArgument ||
                         status.code() == Status::Code::kNotFound ||
                         status.code() == Status::Code::kIoError;
  return bad_input ? kExitBadInput : kExitFailed;
}

Status WriteTextFile(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return Status::IoError(path + ": cannot write");
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  return std::fclose(f) == 0 && written ? Status::Ok() : Status::IoError(path + ": write failed");
}

}  // namespace eplb::cli
