// The cost of asking a user's program for a placement (policy/external_policy.h): one call on
// DeepSeek-V3's default scenario shape (58 layers × 256 experts, 288 slots on 4 × 8 GPUs), the
// request (118 KiB of float64 load, 65 KiB of old phy2log) out and the placement back, by
//   RawEcho      a Python program that returns the old placement without parsing it: the
//                socket, the copies and Python's reads and writes, the floor of any program;
//   NumpyClient  tools/policy/policy_client.py with the identity policy: numpy arrays built
//                and checked, what a user's Python policy pays before its own work;
//   InProcess    the built-in `static` policy, for scale (no process at all).
#include <random>
#include <string>

#include <benchmark/benchmark.h>

#include "eplb/policy/external_policy.h"
#include "eplb/policy/policy.h"

namespace {

constexpr const char* kRawEcho =
    "import sys, struct\n"
    "rd, wr = sys.stdin.buffer, sys.stdout.buffer\n"
    "wr.write(b'EPLH' + struct.pack('<i', 1)); wr.flush()\n"
    "while (h := rd.read(44)):\n"
    "    _, _, L, E, S, G, *_ = struct.unpack('<4s10i', h)\n"
    "    rd.read(G + 8 * L * E)\n"
    "    wr.write(b'EPLR' + struct.pack('<3i', 0, L, S) + rd.read(4 * L * S)); wr.flush()\n";

struct Shape {
  eplb::LoadMatrix load;
  eplb::Topology topology;
  eplb::Placement current;
};

Shape DefaultShape() {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> dist(0.0, 1.0);
  eplb::LoadMatrix load(58, 256);
  for (Eigen::Index i = 0; i < load.size(); ++i) load.data()[i] = std::round(dist(rng) * 4096);
  eplb::TopologyConfig c;
  c.nodes = 4;
  c.gpus_per_node = 8;
  c.slots_per_gpu = 9;
  return {load, *eplb::Topology::Create(c), *eplb::Placement::Initial(58, 256, 288)};
}

void Call(benchmark::State& state, const std::string& name, const std::string& command) {
  if (!command.empty() &&
      !eplb::RegisterExternalPolicy({name, command, eplb::kDefaultPolicyTimeoutS}).ok()) {
    state.SkipWithError("cannot register the program");
    return;
  }
  const Shape s = DefaultShape();
  auto policy = eplb::MakePolicy(name);
  const eplb::PolicyInput input{s.load, s.topology, &s.current, 8};
  if (!(*policy)->Rebalance(input).ok()) {  // the program's start is not the call's cost
    state.SkipWithError("the program failed");
    return;
  }
  for (auto _ : state) {
    auto placement = (*policy)->Rebalance(input);
    benchmark::DoNotOptimize(placement);
  }
}

void BM_RawEcho(benchmark::State& state) {
  Call(state, "raw-echo", std::string("/usr/bin/python3 -c \"") + kRawEcho + "\"");
}
void BM_NumpyClient(benchmark::State& state) {
  Call(state, "numpy-client",
       std::string("/usr/bin/python3 ") + EPLB_SOURCE_DIR + "/tools/policy/policy_client.py");
}
void BM_InProcess(benchmark::State& state) {
  Call(state, "static", "");
}

BENCHMARK(BM_RawEcho)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_NumpyClient)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_InProcess)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
