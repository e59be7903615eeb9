// The step model's cost of one step (StepModel::Cost), which the simulator pays every step:
// DeepSeek-V3 (58 layers × 256 experts, 9 slots per GPU) on the H800 parameter set of
// scenarios/published/h800-deepseek-v3.yaml, in both all-to-all modes, on 32 and 128 GPUs; with
// workload noise, each step's load is split into its two micro-batches and each priced on its own
// (engine/step_model.h), without it one pass prices both exact halves.
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "eplb/engine/step_model.h"
#include "eplb/io/scenario_file.h"
#include "eplb/policy/deepseek.h"

namespace {

// Args: GPUs; 1 for DeepEP's normal kernels (prefill) or 0 for low-latency ones (decode); 1 for
// workload noise (split micro-batches) or 0.
void BM_StepCost(benchmark::State& state) {
  const int gpus = static_cast<int>(state.range(0));
  const bool normal = state.range(1) == 1;
  const bool noise = state.range(2) == 1;
  const std::vector<std::string> overrides = {
      "cluster.nodes=" + std::to_string(gpus / 8),
      "compute.model=roofline",
      "compute.gpu=H800",
      "compute.flops_efficiency=0.6",
      "compute.weight_hbm_efficiency=0.63",
      "compute.kv_length=2048",
      std::string("compute.stage=") + (normal ? "prefill" : "decode"),
      std::string("compute.all_to_all=") + (normal ? "normal" : "low-latency"),
      "compute.micro_batches=2",
      std::string("workload.noise=") + (noise ? "true" : "false"),
      "eplb.num_redundant_experts=" + std::to_string(9 * gpus - 256)};
  auto scenario = eplb::ParseScenario(eplb::DefaultScenarioText(), "bench", overrides);
  if (!scenario.ok()) {
    state.SkipWithError(scenario.status().message().c_str());
    return;
  }
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> popularity(0.0, 1.07);
  eplb::LoadMatrix load(58, 256);
  for (int l = 0; l < 58; ++l) {
    for (int e = 0; e < 256; ++e) load(l, e) = std::round(popularity(rng) * 512);
  }
  auto placement = eplb::RebalanceDeepSeek(load, 9 * gpus, 8, gpus / 8, gpus);
  if (!placement.ok()) {
    state.SkipWithError(placement.status().message().c_str());
    return;
  }
  eplb::StepModel model(*scenario);
  eplb::StepCost cost;
  for (auto _ : state) {
    model.Cost(load, *placement, cost);
    benchmark::DoNotOptimize(cost.total_s());
  }
}
BENCHMARK(BM_StepCost)
    ->ArgNames({"gpus", "normal", "noise"})
    ->Args({32, 1, 1})
    ->Args({32, 0, 1})
    ->Args({128, 1, 1})
    ->Args({128, 0, 1})
    ->Args({32, 1, 0})
    ->Args({32, 0, 0})
    ->Args({128, 1, 0})
    ->Args({128, 0, 0})
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
