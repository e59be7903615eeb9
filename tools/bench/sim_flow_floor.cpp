// What one flow costs SimGrid on our platform, the floor under every simulated migration and
// contended step: GPUs × rounds flows of 44 MB, each round a permutation (every GPU sends one
// flow and receives one, like a round of the `best` schedule), on the same Platform the
// simulator builds. SimGrid allows one engine per process, so this is a program, not a Google
// Benchmark; tools/bench/sim_scaling.sh's note explains how its numbers bound the simulator's.
//
//   eplb_bench_sim_flow [GPUs, default 1024] [rounds, default 50] [pair|courier]
//
// pair: a sending actor on the source host puts, a receiving actor on the destination host gets
//       (both wait): the cheapest way SimGrid offers to run a flow between two hosts.
// courier: the receiver brings its flow with a Courier (flows.h), as SimBackend's workers do.
// Prints the flows run and the process CPU time per flow (µs), which is the number to compare.
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include <xbt/log.h>
#include <simgrid/s4u.hpp>

#include "flows.h"
#include "platform.h"

namespace sg4 = simgrid::s4u;

int main(int argc, char** argv) {
  const int gpus = argc > 1 ? std::atoi(argv[1]) : 1024;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 50;
  const std::string mode = argc > 3 ? argv[3] : "pair";
  if (gpus < 16 || gpus % 8 != 0 || rounds < 1 || (mode != "pair" && mode != "courier")) {
    std::fprintf(stderr,
                 "usage: %s [GPUs: a multiple of 8, at least 16] [rounds >= 1] "
                 "[pair|courier]\n",
                 argv[0]);
    return 2;
  }
  int engine_argc = 1;
  char name[] = "eplb_bench_sim_flow";
  char* engine_argv[] = {name, nullptr};
  xbt_log_control_set("root.thresh:critical");
  sg4::Engine engine(&engine_argc, engine_argv);
  eplb::sim::ConfigureEngine(engine);
  eplb::TopologyConfig config;
  config.nodes = gpus / 8;
  config.gpus_per_node = 8;
  config.slots_per_gpu = 9;
  const eplb::Topology topology = *eplb::Topology::Create(config);
  const eplb::sim::Platform platform(topology, 64e9);
  constexpr uint64_t kBytes = 44040192;  // one DeepSeek-V3 expert
  // Round r sends g -> (g + 1 + r) mod G: a permutation without fixed points.
  auto source_of = [&](int dst, int r) { return ((dst - 1 - r) % gpus + gpus) % gpus; };
  std::vector<sg4::Mailbox*> mailboxes;
  for (int g = 0; g < gpus; ++g)
    mailboxes.push_back(sg4::Mailbox::by_name("gpu" + std::to_string(g)));
  static char payload;
  for (int g = 0; g < gpus; ++g) {
    if (mode == "pair") {
      sg4::Actor::create("send", platform.host(g), [&, g] {
        for (int r = 0; r < rounds; ++r)
          mailboxes[static_cast<size_t>((g + 1 + r) % gpus)]->put(&payload, kBytes);
      });
      sg4::Actor::create("recv", platform.host(g), [&, g] {
        for (int r = 0; r < rounds; ++r) mailboxes[static_cast<size_t>(g)]->get<char>();
      });
    } else {
      sg4::Actor::create("recv", platform.host(g), [&, g] {
        eplb::sim::Courier courier;
        for (int r = 0; r < rounds; ++r) {
          const eplb::sim::HostFlow flow{platform.host(source_of(g, r)), platform.host(g), kBytes};
          courier.Receive({&flow, 1});
        }
      });
    }
  }
  const std::clock_t start = std::clock();
  engine.run();
  const double cpu_s = static_cast<double>(std::clock() - start) / CLOCKS_PER_SEC;
  const double flows = static_cast<double>(gpus) * rounds;
  std::printf(
      "%s: %d GPUs x %d rounds = %.0f flows, %.2f s CPU, %.1f us per flow, simulated %.4f s\n",
      mode.c_str(), gpus, rounds, flows, cpu_s, cpu_s / flows * 1e6, sg4::Engine::get_clock());
  return 0;
}
