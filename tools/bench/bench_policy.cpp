// Latency of the rebalancing policies on DeepSeek-V3-like and Qwen3-like shapes.
// DeepSeek's Python reference takes 330-1,700 ms per call on these shapes.
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "eplb/policy/deepseek.h"
#include "eplb/policy/policy.h"

namespace {

eplb::LoadMatrix SkewedLoad(int layers, int experts, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> dist(0.0, 1.0);
  eplb::LoadMatrix m(layers, experts);
  for (int l = 0; l < layers; ++l) {
    for (int e = 0; e < experts; ++e) m(l, e) = std::round(dist(rng) * 4096);
  }
  return m;
}

// SkewedLoad as the float32 weights RebalanceDeepSeekMaps takes, in the matrix's own order.
std::vector<float> SkewedWeights(int layers, int experts, uint64_t seed) {
  const eplb::LoadMatrix load = SkewedLoad(layers, experts, seed);
  std::vector<float> weights(static_cast<size_t>(load.size()));
  for (Eigen::Index i = 0; i < load.size(); ++i) weights[i] = static_cast<float>(load.data()[i]);
  return weights;
}

// A DeepSeek-shaped call, from a benchmark's Args: layers, experts, replicas, groups, nodes,
// gpus.
struct DeepSeekShape {
  int layers, experts, replicas, groups, nodes, gpus;
};
DeepSeekShape ShapeOf(const benchmark::State& state) {
  const auto arg = [&](int i) { return static_cast<int>(state.range(i)); };
  return {arg(0), arg(1), arg(2), arg(3), arg(4), arg(5)};
}

void CountLayers(benchmark::State& state, int layers) {
  state.counters["layers/s"] =
      benchmark::Counter(static_cast<double>(layers) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

void DeepSeekShapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"layers", "experts", "replicas", "groups", "nodes", "gpus"})
      ->Args({58, 256, 288, 8, 4, 32})   // DeepSeek-V3, EP32 prefill: hierarchical
      ->Args({58, 256, 320, 8, 8, 64})   // EP64: hierarchical
      ->Args({58, 256, 384, 8, 2, 128})  // 384 slots on 128 GPUs / 2 nodes
      ->Args({94, 128, 144, 1, 1, 16})   // Qwen3-235B-like: global
      ->Unit(benchmark::kMicrosecond);
}

void BM_DeepSeek(benchmark::State& state) {
  const DeepSeekShape s = ShapeOf(state);
  const eplb::LoadMatrix load = SkewedLoad(s.layers, s.experts, 42);
  for (auto _ : state) {
    auto p = eplb::RebalanceDeepSeek(load, s.replicas, s.groups, s.nodes, s.gpus);
    if (!p.ok()) state.SkipWithError(p.status().message().c_str());
    benchmark::DoNotOptimize(p);
  }
  CountLayers(state, s.layers);
}
BENCHMARK(BM_DeepSeek)->Apply(DeepSeekShapes);

// The same shapes through RebalanceDeepSeekMaps, which the Python module's DeepSeek convention
// calls: float32 weights in, the reference's three int64 arrays out, log2phy included. Calls
// repeat on one load, as an engine's calls repeat on one model, so that log2phy's width is
// the last call's (see RebalanceDeepSeekMaps).
void BM_DeepSeekMaps(benchmark::State& state) {
  const DeepSeekShape s = ShapeOf(state);
  const std::vector<float> weight = SkewedWeights(s.layers, s.experts, 42);
  for (auto _ : state) {
    auto maps = eplb::RebalanceDeepSeekMaps(weight, s.layers, s.experts, s.replicas, s.groups,
                                            s.nodes, s.gpus);
    if (!maps.ok()) state.SkipWithError(maps.status().message().c_str());
    benchmark::DoNotOptimize(maps);
  }
  CountLayers(state, s.layers);
}
BENCHMARK(BM_DeepSeekMaps)->Apply(DeepSeekShapes);

// Two models rebalanced in turn (DeepSeek-V3 at EP32 and the 94 × 128 → 144 global shape), a
// call of each per iteration: each shape keeps its own log2phy width guess, so a pair costs
// what the two shapes' BM_DeepSeekMaps cost apart. A shared guess would miss on every call.
void BM_DeepSeekMapsTwoModels(benchmark::State& state) {
  const DeepSeekShape shapes[] = {{58, 256, 288, 8, 4, 32}, {94, 128, 144, 1, 1, 16}};
  const std::vector<float> weights[2] = {SkewedWeights(shapes[0].layers, shapes[0].experts, 42),
                                         SkewedWeights(shapes[1].layers, shapes[1].experts, 42)};
  for (auto _ : state) {
    for (int m = 0; m < 2; ++m) {
      const DeepSeekShape& s = shapes[m];
      auto maps = eplb::RebalanceDeepSeekMaps(weights[m], s.layers, s.experts, s.replicas, s.groups,
                                              s.nodes, s.gpus);
      if (!maps.ok()) state.SkipWithError(maps.status().message().c_str());
      benchmark::DoNotOptimize(maps);
    }
  }
  CountLayers(state, shapes[0].layers + shapes[1].layers);
}
BENCHMARK(BM_DeepSeekMapsTwoModels);

// Every registered policy on DeepSeek-V3 EP32 (58 layers, 256 experts, 288 slots, 32 GPUs,
// 4 nodes, 8 groups), from the placement deepseek chose on the previous window.
void BM_Policy(benchmark::State& state, const std::string& name) {
  const eplb::LoadMatrix before = SkewedLoad(58, 256, 42);
  eplb::LoadMatrix load = before;
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> drift(0.0, 0.3);
  for (Eigen::Index i = 0; i < load.size(); ++i)
    load.data()[i] = std::round(load.data()[i] * drift(rng));
  auto topology = eplb::Topology::FromReplicas(288, 4, 32);
  auto current = eplb::RebalanceDeepSeek(before, 288, 8, 4, 32);
  auto policy = eplb::MakePolicy(name);
  eplb::PolicyInput input{load, *topology, &*current, 8};
  input.tuning.window_steps = 1000;  // SkewedLoad's scale: a window of ~1000 steps
  for (auto _ : state) {
    auto p = (*policy)->Rebalance(input);
    if (!p.ok()) state.SkipWithError(p.status().message().c_str());
    benchmark::DoNotOptimize(p);
  }
}

const bool kRegistered = [] {
  for (const auto& info : eplb::RegisteredPolicies()) {
    benchmark::RegisterBenchmark(("BM_Policy/" + info.name).c_str(), BM_Policy, info.name)
        ->Unit(benchmark::kMillisecond);
  }
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
