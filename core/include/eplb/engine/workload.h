// Workloads: where each step's expert load comes from.
//
// The generator draws, per layer, a popularity over experts (log-normal or Zipf, a random hot
// set per layer), lets it drift (a random walk of log-popularity per step), switches hot sets at
// phase changes (a fraction of experts swap popularity), and counts tokens × top-k assignments
// per step with sampling noise. Tokens that come in sequences (workload.sequence_tokens) route
// alike: a sequence's experts deviate from the layer's popularity together, so a step of few long
// prompts is further from the mean than as many independent tokens; the counts carry that
// variance (workload.cpp, Sample). Each step's popularity also moves around the layer's as a
// whole (workload.step_sigma): every expert's log-popularity deviates by a normal drawn afresh
// each step and shared by all the step's tokens, so a placement made from the average leaves
// every step's GPUs less even than sampling alone would; the counts carry that variance too.
// Both apply to the generator and to a single recorded matrix sampled per step; recorded steps
// replay as they were recorded.
//
// Replay reads recorded loads in any layout ReadLoadSeries accepts (formats/load_file.h: CSV
// wide or long, JSON, SGLang and vLLM `.pt` dumps, TensorRT-LLM statistics): a recording of
// several steps replays step by step, repeating from the start when the run is longer; a single
// matrix is a fixed distribution sampled per step.
//
// Thread-safety: a Workload is not thread-safe.
#pragma once

#include <memory>

#include "eplb/base/status.h"
#include "eplb/engine/scenario.h"
#include "eplb/model/load.h"

namespace eplb {

class Workload {
 public:
  virtual ~Workload() = default;
  // The next step's load, `layers × experts` tokens (token-expert assignments).
  virtual void Next(LoadMatrix& load) = 0;
};

// The variance factor of a step's counts from tokens that come in sequences (above): an expert
// whose step count has mean m carries m² × this beyond sampling's m, (e^{σ²} − 1) / N for a step
// of `tokens` in N = tokens / workload.sequence_tokens sequences (at least one); 0 when tokens
// route on their own.
double SequenceVariance(const WorkloadSpec& workload, double tokens);
// The variance factor of a step's counts beyond sampling: the sequences' (above) plus the step's
// own movement, e^{step_sigma²} − 1, which every token of the step shares.
double StepVariance(const WorkloadSpec& workload, double tokens);

// Builds the scenario's workload; trace files resolve against scenario.base_dir, and their
// shape must match the model's.
Result<std::unique_ptr<Workload>> MakeWorkload(const Scenario& scenario);

}  // namespace eplb
