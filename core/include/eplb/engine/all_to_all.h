// The dispatch and combine of one MoE layer on a scenario's cluster, as DeepEP's benchmarks
// run them: every GPU holds `tokens_per_gpu` tokens routed uniformly at random (DeepEP's tests
// draw random gate scores), one replica per expert in the scenario's initial placement, priced
// by the step model (step_model.h) in the chosen all-to-all mode on idle links.
//
// Metric definitions (as DeepEP's test_internode.py, test_intranode.py and test_low_latency.py
// print them, so the figures compare one to one):
//   time          one phase of one layer, seconds
//   bandwidth     the phase's counted bytes / time, 10^9 B/s; counted bytes are, for the normal
//                 kernels, RDMA: tokens × nodes each reaches, the GPU's own node included (more
//                 than crosses the NIC, so this can exceed the NIC's rate), or NVL on one node:
//                 tokens received, the GPU's own included; for the low-latency kernels every
//                 token-expert message
//   bottleneck    which of those the bandwidth counts: "RDMA" or "NVL"
//
// Thread-safety: a pure function.
#pragma once

#include <string>

#include "eplb/base/status.h"
#include "eplb/engine/scenario.h"

namespace eplb {

struct AllToAllResult {
  AllToAllMode mode = AllToAllMode::kNormal;
  int ranks = 0, nodes = 0, tokens_per_gpu = 0;
  double dispatch_s = 0, combine_s = 0;
  double dispatch_bytes = 0, combine_bytes = 0;  // counted, per GPU
  double dispatch_gbps = 0, combine_gbps = 0;
  std::string bottleneck;
};

// InvalidArgument when tokens_per_gpu < 1 or the scenario's experts do not split evenly over
// its GPUs' slots.
Result<AllToAllResult> SimulateAllToAll(const Scenario& scenario, int tokens_per_gpu,
                                        AllToAllMode mode);

}  // namespace eplb
