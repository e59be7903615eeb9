// Planning and scheduling a whole DeepSeek-V3-like migration: 58 layers, 256 experts, 9 slots
// per GPU on 32 GPUs (4 nodes × 8) or, for planning, 4,096 (512 nodes), old placement from one
// load window, new from a drifted one. Goal: plan + schedule all 58 layers on 32 GPUs in under
// 5 ms; both grow linearly with the GPUs.
#include <map>
#include <random>

#include <benchmark/benchmark.h>

#include "eplb/migrate/schedule.h"
#include "eplb/migrate/transfer_plan.h"
#include "eplb/policy/deepseek.h"

namespace {

struct Migration {
  eplb::Topology topology;
  eplb::Placement before, after;
};

Migration MakeDeepSeekMigration(int gpus) {
  std::mt19937_64 rng(42);
  std::lognormal_distribution<double> popularity(0.0, 1.0), drift(0.0, 0.5);
  eplb::LoadMatrix load(58, 256);
  for (int l = 0; l < 58; ++l) {
    for (int e = 0; e < 256; ++e) load(l, e) = std::round(popularity(rng) * 4096);
  }
  const int nodes = gpus / 8, slots = 9 * gpus;
  auto before = eplb::RebalanceDeepSeek(load, slots, 8, nodes, gpus);
  for (int l = 0; l < 58; ++l) {
    for (int e = 0; e < 256; ++e) load(l, e) = std::round(load(l, e) * drift(rng));
  }
  auto after = eplb::RebalanceDeepSeek(load, slots, 8, nodes, gpus);
  eplb::TopologyConfig c;
  c.nodes = nodes;
  c.gpus_per_node = 8;
  c.slots_per_gpu = 9;
  return Migration{*eplb::Topology::Create(c), *before, *after};
}

// Made once per size: the 4,096-GPU placements take a while to compute.
const Migration& DeepSeekMigration(int gpus) {
  static std::map<int, Migration> made;
  auto it = made.find(gpus);
  if (it == made.end()) it = made.emplace(gpus, MakeDeepSeekMigration(gpus)).first;
  return it->second;
}

void BM_PlanMigration(benchmark::State& state) {
  const Migration& m = DeepSeekMigration(static_cast<int>(state.range(1)));
  const auto rule = static_cast<eplb::SenderRule>(state.range(0));
  for (auto _ : state) {
    auto plans = eplb::PlanMigration(m.before, m.after, m.topology, rule);
    benchmark::DoNotOptimize(plans);
  }
}
BENCHMARK(BM_PlanMigration)
    ->ArgNames({"rule(0=vllm,1=local)", "gpus"})
    ->ArgsProduct({{0, 1}, {32, 4096}})
    ->Unit(benchmark::kMicrosecond);

// Plan and schedule every layer; reports the summed makespan against the summed lower bound.
void BM_PlanAndSchedule(benchmark::State& state) {
  const Migration& m = DeepSeekMigration(static_cast<int>(state.range(1)));
  const auto strategy = static_cast<eplb::ScheduleStrategy>(state.range(0));
  double makespan = 0, bound = 0;
  int64_t transfers = 0;
  for (auto _ : state) {
    auto plans = eplb::PlanMigration(m.before, m.after, m.topology, eplb::SenderRule::kLocal);
    makespan = bound = 0;
    transfers = 0;
    for (const auto& plan : *plans) {
      const auto s = eplb::ScheduleTransfers(plan.transfers, m.topology, strategy);
      makespan += s.makespan_s;
      bound += s.lower_bound_s;
      transfers += static_cast<int64_t>(plan.transfers.size());
    }
    benchmark::DoNotOptimize(makespan);
  }
  state.counters["makespan_ms"] = makespan * 1e3;
  state.counters["bound_ms"] = bound * 1e3;
  state.counters["x_bound"] = makespan / bound;
  state.counters["transfers"] = static_cast<double>(transfers);
}
BENCHMARK(BM_PlanAndSchedule)
    ->ArgNames({"schedule(0=single-batch,1=greedy-pairs,2=best)", "gpus"})
    ->ArgsProduct({{0, 1, 2}, {32}})
    ->Args({2, 4096})
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
