// GPU benchmarks of the device backend (device/check.sh runs them on an H200).
//
//   BM_PlainCopy        one cudaMemcpyAsync device to device of a layer's migration bytes:
//                       the GPU's copy bandwidth (bytes_per_second = bytes / time)
//   BM_LayerMigration   one layer of a DeepSeek-V3-shaped migration (32 virtual ranks on one GPU,
//                       9 slots each, old placement drifted to a new one) through the core's
//                       rearranger: bytes_per_second counts the bytes of the plan's transfers and
//                       local copies; vs_plain_copy = that / a plain copy of as many bytes
//                       measured in the same run (goal ≥ 0.9); and where its time goes
//   BM_MigrationCopies  the same layer's copies with nothing between them: its reference
//   BM_StepSlowdown     emulated 1 ms inference steps while a 4-layer migration runs, against
//                       the same steps on an idle GPU: slowdown = mean step time with / without;
//                       idle_read_GBps and busy_read_GBps = the weights a step reads (every slot
//                       of every layer) / its mean time, the HBM bandwidth the step reached: the
//                       slowdown means something only when the idle steps are bound by it
//
// Without a GPU every benchmark stops with the reason.
#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <random>

#include <benchmark/benchmark.h>

#include "device_backend.h"
#include "device_run.h"
#include "eplb/migrate/rearranger.h"
#include "eplb/migrate/transfer_plan.h"

namespace eplb::device {
namespace {

constexpr int64_t kExpertBytes = 44040192;  // DeepSeek-V3 FP8: 3 × 7168 × 2048

Topology MakeTopology(int64_t expert_bytes) {
  TopologyConfig c;
  c.nodes = 4;
  c.gpus_per_node = 8;
  c.slots_per_gpu = 9;
  c.expert_bytes = expert_bytes;
  return *Topology::Create(c);
}

// vLLM's initial placement and, from it, one where about `moved` of the slots changed.
std::pair<Placement, Placement> Migration(int layers, int slots, int experts, double moved,
                                          uint64_t seed) {
  const Placement old_p = *Placement::Initial(layers, experts, slots);
  std::mt19937_64 rng(seed);
  std::vector<int32_t> flat;
  for (int l = 0; l < layers; ++l) {
    std::vector<int32_t> row(old_p.phy2log(l).begin(), old_p.phy2log(l).end());
    // Swap slot pairs: every expert keeps a replica count, the placement stays valid.
    for (int k = 0; k < static_cast<int>(moved * slots / 2); ++k) {
      std::swap(row[rng() % row.size()], row[rng() % row.size()]);
    }
    flat.insert(flat.end(), row.begin(), row.end());
  }
  return {old_p, *Placement::Create(experts, slots, std::move(flat))};
}

bool HaveGpu(benchmark::State& state) {
  auto n = CountDevices();
  if (!n.ok()) state.SkipWithError(n.status().message().c_str());
  return n.ok();
}

void BM_PlainCopy(benchmark::State& state) {
  if (!HaveGpu(state)) return;
  const auto bytes = static_cast<size_t>(state.range(0)) << 20;
  for (auto _ : state) {
    const auto t = TimePlainCopy(0, bytes, 1);
    if (!t.ok()) return state.SkipWithError(t.status().message().c_str());
    state.SetIterationTime(*t);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}
BENCHMARK(BM_PlainCopy)->Arg(1024)->Arg(8192)->UseManualTime()->Unit(benchmark::kMillisecond);

// One layer's migration through the rearranger, and where its time goes (host clock, ms, means
// over the iterations):
//   start_ms     Rearranger::Start: planning, the backend's BeginRearrangement (a stream sync
//                per rank, one anchor event per GPU), the workers' start
//   begin_ms     of which BeginRearrangement, timed in a Begin and End of its own just before
//                Start
//   staged_ms    from Start's return to the layer staged on every rank (the rounds)
//   commit_ms    from staged to the commit done and every stream drained
//   committed_ms of which the host's part: from staged to the layer committed (the foreground's
//                wake-up and every rank's CommitLayer), before the drain of the streams (the
//                local copies still running); the one-GPU model's commit_us (sim/one_gpu.h)
//   gpu_span_ms  from the first transfer's start to the last one's end on the GPU (events):
//                the rounds without the host's issue before the first and wait after the last
//   rounds       the most rounds any rank's worker ran (each ends with a host wait)
void BM_LayerMigration(benchmark::State& state) {
  if (!HaveGpu(state)) return;
  const Topology topo = MakeTopology(kExpertBytes);
  const auto [old_p, new_p] = Migration(1, topo.num_slots(), 256, 0.5, 1);
  DeviceConfig config;
  config.num_layers = 1;
  auto backend = DeviceBackend::Create(topo, config);
  if (!backend.ok()) return state.SkipWithError(backend.status().message().c_str());
  DeviceBackend& device = **backend;
  std::mutex mu;
  double first_begin = 1e30, last_end = 0;
  device.on_transfer.Connect([&](const TransferRecord& t) {
    std::lock_guard lock(mu);
    first_begin = std::min(first_begin, t.start_s);
    last_end = std::max(last_end, t.end_s);
  });
  int64_t bytes = 0;
  double seconds = 0, start_s = 0, begin_s = 0, staged_s = 0, commit_s = 0, committed_s = 0,
         gpu_s = 0;
  int rounds = 0;
  for (auto _ : state) {
    state.PauseTiming();
    if (!device.Fill(old_p).ok()) return state.SkipWithError("fill failed");
    // Declared before the rearranger, whose destructor cancels and waits for the workers that
    // write them, so that they outlive it on an early return.
    double staged_at = 0, committed_at = 0;
    std::map<std::pair<int, int>, int> rounds_of;  // (rank, lane) -> rounds run
    Rearranger rearranger(device, topo, RearrangerOptions{});
    rearranger.on_layer_staged.Connect([&](const LayerEvent& e) { staged_at = e.time_s; });
    rearranger.on_layer_committed.Connect([&](const LayerEvent& e) { committed_at = e.time_s; });
    rearranger.on_round.Connect([&](const RoundEvent& e) {
      std::lock_guard lock(mu);
      rounds = std::max(rounds, ++rounds_of[{e.rank, static_cast<int>(e.link)}]);
    });
    first_begin = 1e30;
    last_end = 0;
    const double b0 = device.Now();
    if (!device.BeginRearrangement().ok()) return state.SkipWithError("begin failed");
    begin_s += device.Now() - b0;
    // Every Begin has its End (migrate/backend.h); Start begins the rearrangement again.
    if (!device.EndRearrangement().ok()) return state.SkipWithError("end failed");
    state.ResumeTiming();
    const double t0 = device.Now();
    if (!rearranger.Start(old_p, new_p).ok()) return state.SkipWithError("start failed");
    const double started = device.Now();
    // A blocking wait, as a stop-the-world commit waits: a foreground polling OnStepBoundary in
    // a loop would take the rearranger's lock from the workers that report to it.
    if (!rearranger.CommitAll().ok()) return state.SkipWithError("rearrangement failed");
    if (!device.Synchronize().ok()) return state.SkipWithError("synchronize failed");
    const double t1 = device.Now();
    state.SetIterationTime(t1 - t0);
    seconds += t1 - t0;
    start_s += started - t0;
    staged_s += staged_at - started;
    commit_s += t1 - staged_at;
    committed_s += committed_at - staged_at;
    gpu_s += last_end - first_begin;
    const LayerPlan& plan = rearranger.plans().front();
    bytes = (static_cast<int64_t>(plan.transfers.size()) +
             static_cast<int64_t>(plan.local_copies.size())) *
            kExpertBytes;
  }
  backend->reset();  // free its memory before the reference copy
  const auto plain_copy = TimePlainCopy(0, static_cast<size_t>(bytes), 3);
  if (!plain_copy.ok()) return state.SkipWithError(plain_copy.status().message().c_str());
  const double plain = *plain_copy;
  const auto n = static_cast<double>(state.iterations());
  state.SetBytesProcessed(bytes * state.iterations());
  state.counters["moved_GB"] = static_cast<double>(bytes) / 1e9;
  state.counters["plain_copy_GBps"] = static_cast<double>(bytes) / plain / 1e9;
  state.counters["vs_plain_copy"] = plain / (seconds / n);
  state.counters["start_ms"] = start_s / n * 1e3;
  state.counters["begin_ms"] = begin_s / n * 1e3;
  state.counters["staged_ms"] = staged_s / n * 1e3;
  state.counters["commit_ms"] = commit_s / n * 1e3;
  state.counters["committed_ms"] = committed_s / n * 1e3;
  state.counters["gpu_span_ms"] = gpu_s / n * 1e3;
  state.counters["rounds"] = rounds;
}
BENCHMARK(BM_LayerMigration)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);

// The same layer's copies with nothing between them: each rank's receives and local copies on
// a stream of its own, all issued before the first wait (TimeConcurrentCopies): what the copies
// reach without rounds or host waits, the reference for BM_LayerMigration (not a strict bound:
// the rearranger spreads a rank's copies over three streams); vs_plain_copy as there.
void BM_MigrationCopies(benchmark::State& state) {
  if (!HaveGpu(state)) return;
  const Topology topo = MakeTopology(kExpertBytes);
  const auto [old_p, new_p] = Migration(1, topo.num_slots(), 256, 0.5, 1);
  auto plan =
      PlanLayer(0, old_p.phy2log(0), new_p.phy2log(0), topo, RearrangerOptions{}.sender_rule);
  if (!plan.ok()) return state.SkipWithError(plan.status().message().c_str());
  std::vector<int> per_rank(static_cast<size_t>(topo.num_ranks()), 0);
  for (const Transfer& t : plan->transfers) ++per_rank[static_cast<size_t>(t.dst_rank)];
  for (const LocalCopy& c : plan->local_copies) ++per_rank[static_cast<size_t>(c.rank)];
  int copies = 0;
  for (int c : per_rank) copies += c;
  const size_t bytes = static_cast<size_t>(copies) * kExpertBytes;
  double seconds = 0;
  for (auto _ : state) {
    const auto t = TimeConcurrentCopies(0, kExpertBytes, per_rank, 1);
    if (!t.ok()) return state.SkipWithError(t.status().message().c_str());
    state.SetIterationTime(*t);
    seconds += *t;
  }
  const auto plain = TimePlainCopy(0, bytes, 3);
  if (!plain.ok()) return state.SkipWithError(plain.status().message().c_str());
  state.SetBytesProcessed(static_cast<int64_t>(bytes) * state.iterations());
  state.counters["plain_copy_GBps"] = static_cast<double>(bytes) / *plain / 1e9;
  state.counters["vs_plain_copy"] = *plain / (seconds / static_cast<double>(state.iterations()));
}
BENCHMARK(BM_MigrationCopies)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);

void BM_StepSlowdown(benchmark::State& state) {
  if (!HaveGpu(state)) return;
  const Topology topo = MakeTopology(8 << 20);
  const int layers = 4;
  const auto [old_p, new_p] = Migration(layers, topo.num_slots(), 256, 0.5, 2);
  DeviceConfig config;
  config.num_layers = layers;
  auto backend = DeviceBackend::Create(topo, config);
  if (!backend.ok()) return state.SkipWithError(backend.status().message().c_str());
  DeviceBackend& device = **backend;
  constexpr double kStep = 1e-3;
  const auto timed_step = [&] {
    const double t0 = device.Now();
    if (!device.RunEmulatedStep(kStep).ok()) return -1.0;
    return device.Now() - t0;
  };
  double idle = 0, busy = 0;
  int idle_n = 0, busy_n = 0;
  for (auto _ : state) {
    if (!device.Fill(old_p).ok()) return state.SkipWithError("fill failed");
    for (int i = 0; i < 20; ++i, ++idle_n) idle += timed_step();
    Rearranger rearranger(device, topo, RearrangerOptions{});
    if (!rearranger.Start(old_p, new_p).ok()) return state.SkipWithError("start failed");
    while (rearranger.in_progress()) {
      busy += timed_step();
      ++busy_n;
      if (!rearranger.OnStepBoundary().ok()) return state.SkipWithError("rearrangement failed");
    }
  }
  state.counters["idle_step_ms"] = idle / idle_n * 1e3;
  state.counters["busy_step_ms"] = busy / std::max(1, busy_n) * 1e3;
  state.counters["slowdown"] = (busy / std::max(1, busy_n)) / (idle / idle_n);
  const double step_bytes =
      static_cast<double>(topo.num_slots()) * layers * static_cast<double>(topo.expert_bytes());
  state.counters["idle_read_GBps"] = step_bytes / (idle / idle_n) / 1e9;
  state.counters["busy_read_GBps"] = step_bytes / (busy / std::max(1, busy_n)) / 1e9;
}
BENCHMARK(BM_StepSlowdown)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace
}  // namespace eplb::device

BENCHMARK_MAIN();
