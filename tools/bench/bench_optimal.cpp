// The exact balance optimum (policy/optimal.h): its cost per layer, and what it says about the
// bound reports print and the policies they compare. Per shape, over 20 layers of lognormal load
// (σ = 1, as bench_policy):
//   time          per layer searched, the node budget included
//   proven        fraction of layers whose search finished (the optimum is then exact)
//   bound/best    mean of MaxGpuLoadLowerBound / the best placement found: 1 is a tight bound;
//                 where proven, the best found is the optimum
//   worst_bound   the smallest such ratio over the layers
//   deepseek/best mean of DeepSeek's busiest GPU / the best found: what the optimum would gain
//   lpt/best      the same for replicate-lpt
#include <random>

#include <benchmark/benchmark.h>

#include "eplb/policy/balance_bound.h"
#include "eplb/policy/deepseek.h"
#include "eplb/policy/optimal.h"
#include "eplb/policy/policy.h"

namespace {

constexpr int kLayers = 20;

double MaxGpuLoad(const eplb::LoadMatrix& load, int layer, std::span<const int32_t> row,
                  int per_gpu) {
  std::vector<int> count(static_cast<size_t>(load.cols()), 0);
  for (int32_t e : row) ++count[static_cast<size_t>(e)];
  double max = 0, gpu = 0;
  for (size_t s = 0; s < row.size(); ++s) {
    gpu += load(layer, row[s]) / count[static_cast<size_t>(row[s])];
    if ((s + 1) % static_cast<size_t>(per_gpu) == 0) {
      max = std::max(max, gpu);
      gpu = 0;
    }
  }
  return max;
}

// Args: experts, GPUs, slots per GPU, node budget (thousands).
void BM_OptimalLayer(benchmark::State& state) {
  const int experts = static_cast<int>(state.range(0)), gpus = static_cast<int>(state.range(1));
  const int per_gpu = static_cast<int>(state.range(2));
  const eplb::OptimumOptions options{.node_budget = state.range(3) * 1000};
  const auto topology = *eplb::Topology::FromReplicas(int64_t{gpus} * per_gpu, 1, gpus);
  std::mt19937_64 rng(42);
  std::lognormal_distribution<double> dist(0.0, 1.0);
  eplb::LoadMatrix load(kLayers, experts);
  for (int l = 0; l < kLayers; ++l) {
    for (int e = 0; e < experts; ++e) load(l, e) = std::round(dist(rng) * 4096);
  }
  std::vector<eplb::LayerOptimum> found(kLayers);
  int next = 0;
  for (auto _ : state) {
    const int l = next++ % kLayers;
    found[static_cast<size_t>(l)] = eplb::OptimalLayer(
        {load.data() + static_cast<size_t>(l) * experts, static_cast<size_t>(experts)}, topology,
        options);
    benchmark::DoNotOptimize(found[static_cast<size_t>(l)]);
  }
  // Quality, outside the timing, over every layer.
  const auto bound = eplb::MaxGpuLoadLowerBound(load, topology);
  auto deepseek = eplb::RebalanceDeepSeek(load, gpus * per_gpu, 1, 1, gpus);
  auto lpt = eplb::MakePolicy("replicate-lpt").value()->Rebalance({load, topology});
  double proven = 0, bound_ratio = 0, worst = 1, deepseek_ratio = 0, lpt_ratio = 0;
  for (int l = 0; l < kLayers; ++l) {
    auto& f = found[static_cast<size_t>(l)];
    if (f.phy2log.empty()) {
      f = eplb::OptimalLayer(
          {load.data() + static_cast<size_t>(l) * experts, static_cast<size_t>(experts)}, topology,
          options);
    }
    proven += f.proven;
    const double r = bound[static_cast<size_t>(l)] / f.max_gpu_load;
    bound_ratio += r;
    worst = std::min(worst, r);
    deepseek_ratio += MaxGpuLoad(load, l, deepseek->phy2log(l), per_gpu) / f.max_gpu_load;
    lpt_ratio += MaxGpuLoad(load, l, lpt->phy2log(l), per_gpu) / f.max_gpu_load;
  }
  state.counters["proven"] = proven / kLayers;
  state.counters["bound/best"] = bound_ratio / kLayers;
  state.counters["worst_bound"] = worst;
  state.counters["deepseek/best"] = deepseek_ratio / kLayers;
  state.counters["lpt/best"] = lpt_ratio / kLayers;
}

BENCHMARK(BM_OptimalLayer)
    ->ArgNames({"experts", "gpus", "per_gpu", "kilonodes"})
    ->Args({8, 2, 5, 20000})
    ->Args({12, 4, 4, 20000})
    ->Args({16, 4, 5, 20000})
    ->Args({24, 6, 5, 20000})
    ->Args({32, 8, 5, 20000})
    ->Args({256, 32, 9, 2000})  // a DeepSeek-V3 EP32 layer: the search within 2M nodes
    ->Unit(benchmark::kMillisecond);

}  // namespace

// The reports' bound as eplb_loop computes it at every rearrangement: BalancednessUpperBound
// of a 58-layer window (DeepSeek-V3's MoE layers) of lognormal load, σ = 1.07 as the shipped
// DeepSeek scenarios, summed over 1,000 steps of 16k tokens. Counter: the bound it returns.
// Args: experts, GPUs, slots per GPU.
void BM_BalanceBound(benchmark::State& state) {
  const int experts = static_cast<int>(state.range(0)), gpus = static_cast<int>(state.range(1));
  const int per_gpu = static_cast<int>(state.range(2));
  const auto topology = *eplb::Topology::FromReplicas(int64_t{gpus} * per_gpu, 1, gpus);
  constexpr int kWindowLayers = 58;
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> dist(0.0, 1.07);
  eplb::LoadMatrix load(kWindowLayers, experts);
  for (int l = 0; l < kWindowLayers; ++l) {
    double sum = 0;
    for (int e = 0; e < experts; ++e) sum += load(l, e) = dist(rng);
    for (int e = 0; e < experts; ++e) load(l, e) = std::round(load(l, e) / sum * 16384 * 8000);
  }
  double bound = 0;
  for (auto _ : state) {
    bound = eplb::BalancednessUpperBound(load, topology);
    benchmark::DoNotOptimize(bound);
  }
  state.counters["bound"] = bound;
}

BENCHMARK(BM_BalanceBound)
    ->ArgNames({"experts", "gpus", "per_gpu"})
    ->Args({256, 32, 9})   // DeepSeek-V3 prefill EP32
    ->Args({256, 144, 2})  // DeepSeek-V3 decode EP144
    ->Args({128, 16, 9})   // Qwen3-235B EP16
    ->Args({128, 8, 17})   // Qwen3-30B EP8
    ->Args({8, 8, 2})      // Mixtral 8x22B EP8 (small: the exact optimum)
    ->Args({16, 4, 5})     // tiny (small: the exact optimum)
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
