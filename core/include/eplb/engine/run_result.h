// Everything one run produced, on any backend: the resolved scenario, every step, every
// rearrangement, commit and transfer. io/run_folder.h writes it as a run folder and reads it
// back.
//
// Thread-safety: a plain value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "eplb/engine/eplb_loop.h"
#include "eplb/engine/scenario.h"
#include "eplb/migrate/transfer_record.h"

namespace eplb {

struct RunResult {
  Scenario scenario;
  std::string backend;  // "simgrid", "host", "device"
  std::vector<StepRecord> steps;
  std::vector<RearrangementRecord> rearrangements;
  std::vector<CommitRecord> commits;
  // The placement the run started from when a recording gave it (recorded_policy.h); none:
  // vLLM's initial placement.
  std::optional<Placement> initial;
  std::vector<TransferRecord> transfers;
  std::vector<LayerBalanceSpan> layer_balance;  // empty when not recorded (older run folders)
  int skipped_rearrangements = 0;
  int held_rearrangements = 0;  // by the balance gate (eplb.min_balancedness)
  double wall_s = 0;
  int64_t peak_rss_bytes = 0;
};

}  // namespace eplb
