// Simulated against measured: how far the simulator's transfer times are from a real run of
// the same scenario. `eplb validate` runs a scenario on GPUs, simulates it with the measured
// bandwidths, and compares the two run results with this.
//
// Matching: a transfer belongs to the rearrangement whose start precedes it; within one, a
// transfer is identified by (layer, expert, source rank, destination rank), which the plan
// makes unique. Transfers only one side has are counted, not compared.
//
// The numbers (every time in seconds, every error 100 × (simulated − measured) / measured):
//   per transfer  duration = end − start of its flow (the round it was part of, on the device)
//   per layer     span = last end − first start of the layer's transfers in one rearrangement
//   summary       mean and median |error| over the layers and over the transfers, and the
//                 same for each rearrangement's span (first start to last end)
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
  ErrorStats transfer_error, layer_error, rearrangement_error;
  int unmatched_measured = 0;
  int unmatched_simulated = 0;
};

Validation CompareTimings(const RunResult& measured, const RunResult& simulated);

// {"summary": {...}, "rearrangements": [...], "layers": [...], "transfers": [...]}
nlohmann::ordered_json ValidationJson(const Validation& v);
// A per-layer table with the summary lines under it (the transfers stay in the JSON).
std::string ValidationTable(const Validation& v);

}  // namespace eplb
