// The exact balance optimum of one layer: what bounds and policies are measured against on
// layers small enough to search, and the `optimal` policy.
//
// A placement gives every expert c_e >= 1 replicas (Σ c_e = slots), each carrying load_e / c_e,
// and every GPU exactly slots / GPUs of them (where on the cluster does not matter: nodes and
// groups are not constraints here); its cost is the busiest GPU's load. The search is a branch
// and bound in two levels:
//   1. replica counts, heaviest experts first, each count pruned when the expert's load per
//      replica alone reaches the best placement found;
//   2. for a count vector whose lower bound (LowerBoundForCounts) is below the best found, the
//      replicas packed onto GPUs exactly: heaviest first, a GPU tried only if no earlier GPU
//      has the same load and fill (identical GPUs), pruned when the replicas left cannot fit
//      under the best found.
// It starts from the better of DeepSeek's and replicate-lpt's placements, so it never returns a
// worse one; `proven` says the search finished within its node budget, which makes the result
// the optimum. A layer whose best found equals the mean load per GPU is proven at once.
//
// Why not a MIP solver: with CBC 2.10 (Debian's coinor-libcbc-dev) the natural model (a binary
// per expert and replica count, integer replicas per GPU) has the mean as its LP bound and GPUs
// as a symmetry the solver does not break; it proved no case of 12 experts on 4 GPUs optimal
// within 10 s, where this search takes tens of milliseconds.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "eplb/model/topology.h"

namespace eplb {

struct LayerOptimum {
  std::vector<int32_t> phy2log;  // the best placement found, slots GPU by GPU
  double max_gpu_load = 0;       // its busiest GPU's load
  bool proven = false;           // the search finished: max_gpu_load is the optimum
  int64_t nodes = 0;             // search nodes visited
};

struct OptimumOptions {
  int64_t node_budget = 20'000'000;  // nodes of both levels together; then the best found
};

LayerOptimum OptimalLayer(std::span<const double> load, const Topology& topology,
                          const OptimumOptions& options = {});

// A lower bound on the busiest GPU's load of any packing of `replica_weights` (sorted heaviest
// first) onto `gpus` GPUs of exactly `per_gpu` each: the largest of the mean, the heaviest
// replica with the per_gpu − 1 lightest beside it, and for j = 1 .. per_gpu − 1 the pigeonhole
// bound: of the j·gpus + 1 heaviest, some GPU holds j + 1, so it carries at least the j + 1
// lightest of them plus the per_gpu − j − 1 lightest of all.
double LowerBoundForCounts(std::span<const double> replica_weights, int gpus, int per_gpu);

}  // namespace eplb
