// Simulated against measured: how far the simulator's times are from a real run of the same
// scenario. `eplb validate` runs a scenario on a GPU, simulates the set-up that run really is
// (every rank a virtual one on that GPU: sim/one_gpu.h) with numbers the device run measured,
// and compares the two run results with this (docs/gpu_validation.md).
//
// Matching: a transfer belongs to the rearrangement whose start precedes it; within one, a
// transfer is identified by (layer, expert, source rank, destination rank), which the plan
// makes unique. Transfers only one side has are counted, not compared. Rearrangements are
// matched by their order.
//
// The intervals, the same on both sides (each backend's clock; the device's transfer times are
// GPU events of each round's copies, the simulator's a flow's start after its round's start-up
// to its end):
//   transfer      end − start of its flow (the round it was part of, on the device)
//   layer         last end − first start of the layer's matched transfers in one
//                 rearrangement: its rounds, and the start-up (launch, host wait) of every round
//                 after its first
//   rearrangement last end − first start of its matched transfers (all its layers' rounds)
//   wall          the rearrangement's record, start to last commit (RearrangementRecord start_s
//                 to end_s): also its start on the caller (planning, stream syncs, waking the
//                 workers), the first round's start-up, the waits for step boundaries and the
//                 commits; only rearrangements that finished on both sides
// Every error is 100 × (simulated − measured) / measured; the summaries are the mean, median
// and largest |error| over the rows.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eplb/io/run_folder.h"

namespace eplb {

struct TransferTiming {
  int rearrangement;
  int layer;
  int expert;
  int src_rank;
  int dst_rank;
  LinkClass link;
  double measured_s;
  double simulated_s;
  double error_pct;
};

struct LayerTiming {
  int rearrangement;
  int layer;
  int transfers;
  double measured_s;
  double simulated_s;
  double error_pct;
};

struct ErrorStats {
  int count = 0;
  double mean_abs_pct = 0;
  double median_abs_pct = 0;
  double max_abs_pct = 0;
};

struct Validation {
  std::vector<TransferTiming> transfers;
  std::vector<LayerTiming> layers;
  std::vector<LayerTiming> rearrangements;  // layer = −1, transfers = all of it
  std::vector<LayerTiming> walls;           // layer = −1, transfers = all of it
  ErrorStats transfer_error, layer_error, rearrangement_error, wall_error;
  int unmatched_measured = 0;
  int unmatched_simulated = 0;
};

Validation CompareTimings(const RunResult& measured, const RunResult& simulated);

// {"summary": {...}, "rearrangements": [...], "walls": [...], "layers": [...],
//  "transfers": [...]}
nlohmann::ordered_json ValidationJson(const Validation& v);
// A per-layer table with the summary lines under it (the transfers stay in the JSON).
std::string ValidationTable(const Validation& v);

}  // namespace eplb
