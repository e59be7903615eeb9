// The Chrome/Perfetto trace of a run (trace.json in a run folder): a process per GPU with its
// transfers as async slices on the receiving side, and a "cluster" process with the steps,
// balance counters, and rearrangement and commit marks. Timestamps in microseconds.
#pragma once

#include <string>

#include "eplb/engine/run_result.h"

namespace eplb {

std::string PerfettoTraceJson(const RunResult& run);

}  // namespace eplb
