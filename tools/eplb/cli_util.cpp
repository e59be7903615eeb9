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

}  // namespace eplb::cli
