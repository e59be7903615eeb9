// Published measurements, and the simulator's numbers for the same set-ups: what
// `eplb validate --published` prints. A figures file (scenarios/published/figures.yaml) lists
// each figure with its source, the scenario that describes its set-up (a shared scenario per GPU
// type, with `set:` settings for the figure's shape: nodes, tokens, stage) and what to measure,
// so that every figure is simulated with that GPU type's one parameter set.
//
// Measures (units as printed):
//   dispatch_gbps, combine_gbps   one MoE layer's phase, DeepEP's "bottleneck bandwidth"
//                                 (engine/all_to_all.h defines the counted bytes), GB/s
//   dispatch_us, combine_us       the same phase's time, µs
//   prefill_input_tokens_per_node_s   tokens a node takes in per second: the step's tokens per
//                                 node / step time / (1 − cache_hit), since prompt tokens found in
//                                 the KV cache cost no compute
//   decode_output_tokens_per_node_s   the step's sequences per node × the tokens each emits
//                                 (1, or 1 + acceptance × drafts with MTP) / step time
//   decode_output_tokens_per_user_s   the tokens a sequence emits per step / step time
//   speedup                       a ratio of two set-ups: the throughput of the figure's set-up
//                                 over that of the set-up with the `versus:` settings added
//                                 (× the other's step time / this one's), e.g. a policy over
//                                 `static`, or perfect balance over a policy; its error is on
//                                 the gain (FigureResult::error_pct), so published ≠ 1
//   imbalance_ratio               TensorRT-LLM's (max_g − mean_g) / mean_g of the tokens per GPU
//                                 under the set-up's placement, averaged over MoE layers and the
//                                 measured steps (StepCost::imbalance_ratio); `eplb.policy=static`
//                                 is the load before EPLB
//   gpu_load_std, slot_load_std   TensorRT-LLM's "Std. Dev." of the tokens (assignments) per GPU
//                                 and per expert slot, each replica taking an even share (its
//                                 report_load_statistics.py; model/metrics.h, Spread), averaged
//                                 over MoE layers and the measured steps
//   slot_imbalance_ratio          (max − mean) / mean of the tokens per slot, likewise: how hot
//                                 the hottest replica runs
//   rearrangement_stall_s         one stop-the-world rearrangement, s: the policy moves the
//                                 experts from vLLM's initial placement to its placement of the
//                                 first steps' load, each layer priced as the schedule predicts
//                                 it (the links as migration.transport uses them, or its reloads
//                                 from host memory; the busiest GPU's local copies; the
//                                 transport's per-layer and per-message costs), layer after
//                                 layer. The simulator, which overlaps layers, may be faster
// A serving figure's step time is the mean over 32 steps of the scenario's workload, after its
// policy placed the experts by the 32 steps before (the engines run EPLB).
//
// Thread-safety: plain functions.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eplb/base/status.h"
#include "eplb/engine/scenario.h"
#include "eplb/io/figures_file.h"

namespace eplb {

// The accuracy the model aims at: a figure is within the goal when |error %| is this or less,
// whatever its note says. A note may explain a gap; the counts never hide one.
inline constexpr double kAccuracyGoalPct = 15;

struct FigureResult {
  PublishedFigure figure;
  double simulated = 0;
  // 100 × (simulated − published) / published; for speedup, the error on the gain,
  // 100 × (simulated − published) / (published − 1), so that a ratio near 1 cannot hide a gain
  // several times too small (1.007 against 1.036 is −2.8% on the ratio, −81% on the gain).
  double error_pct = 0;
  // Serving measures: where the mean step goes (compute: attention and MoE; the dispatch and
  // combine that compute does not hide), in words; empty for the all-to-all measures.
  std::string breakdown;
  // |error_pct| ≤ kAccuracyGoalPct, whatever the figure's note or tolerance.
  bool within_goal() const;
  // |error_pct| > figure.tolerance_pct: the model moved away from this figure since the guard
  // was set (a regression to look at, not a count of accuracy).
  bool past_guard() const;
};

// The figures file is read by io/figures_file.h (LoadPublishedFigures).
// Simulates one figure. A simulated value (or a serving step's time, or the error %) that is not a
// finite number is an error naming the figure, its scenario and settings, and the part of the
// step that overflowed: settings within their ranges can still combine into one (a rate near 0).
Result<FigureResult> EvaluateFigure(const PublishedFigure& figure);
// The table: figure, source, published, simulated, error %; a summary counting the figures
// within the accuracy goal and listing each one outside it with its error (whatever its note
// says), any past its regression guard, and the notes below it.
std::string PublishedTable(const std::vector<FigureResult>& results);
// published.json: {"tool", "format_version", "figures": [{id, figure, source, scenario,
// measure, versus, unit, published, simulated, error_pct, within_goal, tolerance_pct,
// past_guard, breakdown, note}], "mean_abs_error_pct", "accuracy_goal_pct", "within_goal",
// "outside_goal" (counts; they add up to the figures), "outside_goal_ids", "past_guard_ids"}.
nlohmann::ordered_json PublishedJson(const std::vector<FigureResult>& results);

}  // namespace eplb
