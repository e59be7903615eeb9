// How a step's tokens for one expert split among the expert's replicas (eplb.dispatch).
//
// A placement says which slots hold an expert; the engine still picks, assignment by
// assignment, which replica serves it, and that choice decides how level the replicas' GPUs
// are in each step:
//
//   even    every live replica takes load / replicas: the split of EPLB's own model ("splits
//           each hot expert's tokens evenly"). TensorRT-LLM's router comes within rounding of it:
//           its route kernel (moeComputeRouteKernel) hands the k-th assignment of an expert in a
//           block of 1,024 to replica (block + k + EP rank) mod replicas, round robin, so a
//           replica's share differs from the even one by at most one assignment per block
//   random  each token-expert assignment goes to one of the expert's live replicas with equal
//           odds, so a replica's share is binomial around the even one. vLLM's router picks
//           replica = (token × top_k + k) mod replicas (PR #24573, 2025-09; torch.rand before
//           it): the positions of one expert's assignments are scattered over the batch, so
//           the pick is a hash, equal odds per replica. SGLang's `dynamic` draws per
//           assignment (torch.randint); its `static`, the default under EPLB, sends each
//           source GPU's assignments to one fixed replica, spread evenly over the sources,
//           which with independent sources gives the same binomial spread.
//   lp      the split that brings the busiest GPU lowest, per layer and step (SGLang's
//           `--ep-dispatch-algorithm lp`, DeepSeek's LPLB: a linear program over the batch's
//           counts, min M subject to each GPU's load ≤ M and each replicated expert's parts
//           summing to its load). eplb solves it by water-filling: each replicated expert's
//           assignments fill the GPUs of its replicas to one level over the load of the
//           unreplicated experts, hottest expert first; then, pass after pass, each is lifted
//           out and filled again against the others' levels until no part moves (a millionth
//           of the layer's load; 64 passes at most): each refill minimises Σ level² over one
//           expert's split, and the split minimising Σ level² also minimises the busiest GPU.
//           As in SGLang, each assignment then draws its replica with the split's fractions as
//           odds, so the parts are binomial around it. The solve's own cost (an all-reduce of
//           the counts and an LP per layer, ~100 µs in DeepSeek's LPLB README) is not priced.
//
// SGLang's Waterfill (LMSYS, 2026-06-26) levels GPUs by dispatching the shared expert, not a
// routed expert's replicas; eplb does not model it.
//
// Assignments are what the workload counts (a token routed to top_k experts counts top_k
// times). Draws take whole assignments: an expert's integer part is split by sequential
// binomials and any fraction (mean counts with workload.noise false, or a trace's) in
// proportion to the odds.
//
// Rearrangement records' window balancedness (before and after) stays the placement's with an
// even split: a property of the placement, where a step's balance follows eplb.dispatch.
//
// Thread-safety: a ReplicaDispatcher is not thread-safe (it keeps scratch buffers and a random
// engine seeded at construction, so a run's draws repeat with its seed and standard library).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "eplb/engine/scenario.h"

namespace eplb {

class ReplicaDispatcher {
 public:
  ReplicaDispatcher(Dispatch mode, uint64_t seed);

  // One layer: `load` holds each expert's assignments (finite, ≥ 0 and at most 1e15, as
  // ValidateLoad checks a load), `row` the layer's phy2log (kEmptySlot
  // for an empty slot), `slots_per_gpu` how many slots each GPU has, and `lost` (empty: none)
  // marks the GPUs that are gone, whose slots take nothing. Writes each slot's assignments to
  // `slot_tokens` (one per slot of `row`) and returns the assignments of experts with no live
  // replica, which no slot takes.
  double Split(std::span<const double> load, std::span<const int32_t> row, int slots_per_gpu,
               const std::vector<char>& lost, std::vector<double>& slot_tokens);

  Dispatch mode() const { return mode_; }

 private:
  // Sets odds_ to each live slot's fraction of its expert's assignments: the water-filled
  // split that levels the GPUs (lp).
  void LevelOdds(std::span<const double> load, int slots_per_gpu, size_t gpus);
  // Draws each expert's assignments over its live slots with odds_ as the odds.
  void Draw(std::span<const double> load, std::vector<double>& slot_tokens);
  // Pours `amount` onto the GPUs of expert e's live slots from their levels in gpu_level_,
  // lowest first, to one common level; adds each GPU's part to its level and to `part`, per
  // entry of e's slots.
  void Fill(int e, double amount, int slots_per_gpu, std::vector<double>& part);

  Dispatch mode_;
  std::mt19937_64 random_;
  // Per layer: each expert's live slots, as offsets into slots_ (CSR).
  std::vector<int> first_slot_, slots_;
  std::vector<double> share_;      // even: each expert's load / live replicas
  std::vector<double> odds_;       // per entry of slots_: its fraction of the expert's load
  std::vector<double> gpu_level_;  // lp: each GPU's assignments so far
  std::vector<int> order_;         // lp: replicated experts, hottest first
  std::vector<int> cursor_;        // Split: each expert's next entry of slots_
  std::vector<double> old_part_;   // lp: an expert's parts before it is filled again
  struct Bucket {
    double level;
    int gpu, replicas;  // the GPU and how many of the expert's live slots it holds
  };
  std::vector<Bucket> buckets_;
};

}  // namespace eplb
