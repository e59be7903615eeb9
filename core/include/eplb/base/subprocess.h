// Running a helper program and collecting what it prints.
//
// eplb runs one helper: Debian's python3, to read PyTorch `.pt` dumps (formats/load_file.h).
// The program is started directly (no shell), its standard input is /dev/null, and both of its
// outputs are read to the end, each up to a cap: a helper that prints more is stopped and the
// call fails, so a runaway child cannot exhaust memory.
//
// Thread-safety: safe from any thread; each call owns its child.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "eplb/base/status.h"

namespace eplb {

struct CommandOutput {
  int exit_code = 0;  // the child's exit status; 128 + N when signal N ended it
  std::string out;    // what it wrote to stdout
  std::string err;    // what it wrote to stderr (the last 64 KiB)
};

// Runs argv[0] (looked up on PATH when it has no '/') with `argv`. NotFound when the program
// cannot be started; InvalidArgument when stdout exceeds `max_out_bytes`.
Result<CommandOutput> RunCommand(const std::vector<std::string>& argv, int64_t max_out_bytes);

}  // namespace eplb
