// A figures file (scenarios/published/figures.yaml): published measurements, each with its
// source, the scenario that describes its set-up (`set:` settings on top) and what to measure
// (usecases/published.h defines each measure and evaluates them). Read like every eplb YAML
// file: one document, no duplicate keys, every field checked, errors naming file, line, figure
// and field.
//
// Thread-safety: plain functions.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "eplb/base/status.h"
#include "eplb/engine/all_to_all.h"

namespace eplb {

// What a figures file's numbers may be (each a normal number; anything else is refused at load
// with the file, the figure, the field, the value and this range), so that a figure's error % is
// always a finite number:
//   published       kMinPublished..kMaxPublished, in the figure's unit (the shipped figures lie
//                   between 0.1 and 63,000); a speedup's also kMinPublishedGain or more from 1
//   tokens          1..2^30, whole;  cache_hit 0..1 (below 1);  tolerance_pct 0..kMaxTolerancePct
inline constexpr double kMinPublished = 1e-6;
inline constexpr double kMaxPublished = 1e12;
inline constexpr double kMinPublishedGain = 1e-3;
inline constexpr double kMaxTolerancePct = 1000;

struct PublishedFigure {
  std::string id;
  std::string figure;                  // what was measured, in words
  std::string source;                  // where it was published
  std::string scenario;                // the set-up, resolved against the figures file's folder
  std::vector<std::string> overrides;  // key.path=value settings on top of it (`set:`)
  // speedup: the second set-up's settings, on top of `overrides` (`versus:`)
  std::vector<std::string> versus;
  std::string measure;
  std::string unit;
  double published = 0;
  int tokens = 0;                             // a2a measures: tokens per GPU
  AllToAllMode mode = AllToAllMode::kNormal;  // a2a measures
  double cache_hit = 0;                       // prefill: share of input tokens from the cache
  std::string note;  // what the model leaves out that this figure depends on, if anything
  // A regression guard (`tolerance_pct:`, 15 unless the file says more, with a note saying
  // why): the shipped table fails its test when a figure's error grows past it. It is not an
  // accuracy claim: a figure is counted within the goal only by kAccuracyGoalPct.
  double tolerance_pct = 15;
};

// Every measure a figure may name, as figures files spell them.
std::span<const char* const> PublishedMeasures();
// Whether `measure` is one MoE layer's dispatch or combine (dispatch_gbps, ... combine_us).
bool IsAllToAllMeasure(const std::string& measure);

// Reads a figures file; errors name the file, line, field and what is valid.
Result<std::vector<PublishedFigure>> LoadPublishedFigures(const std::string& path);
// The same for a figures file's `text`, named `path` in errors; scenarios resolve beside it.
Result<std::vector<PublishedFigure>> ParsePublishedFigures(const std::string& text,
                                                           const std::string& path);

}  // namespace eplb
