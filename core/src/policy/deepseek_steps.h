// The reference policy's two building blocks, eplb.py's balanced_packing and
// replicate_experts, computed exactly as it computes them (float32 arithmetic, torch's order
// of equal weights, the first index on ties), over the rows of a row-major float32 weight
// matrix whose values are finite and >= 0, -0.0 made +0.0. deepseek.cpp composes them.
//
// Each row's greedy is one chain of dependent steps (the lightest pack or heaviest expert, its
// new weight, a tree's replay), which leaves a core waiting; the rows go kRowsTogether side by
// side so that their chains overlap (a fifth off a packing of 72 items into 8 packs).
#pragma once

#include <cstdint>
#include <memory>
#include <span>

namespace eplb::deepseek_steps {

inline constexpr int kRowsTogether = 4;

// Working memory the steps reuse from call to call, so that a caller allocates once. One per
// thread: the steps are not thread-safe on a shared scratch.
class StepScratch {
 public:
  StepScratch();
  ~StepScratch();
  StepScratch(const StepScratch&) = delete;
  StepScratch& operator=(const StepScratch&) = delete;

  struct Impl;

 private:
  friend void BalancedPacking(std::span<const float>, int, int, std::span<int32_t>,
                              std::span<int32_t>, StepScratch&);
  friend void ReplicateExperts(std::span<const float>, int, std::span<int32_t>, std::span<int32_t>,
                               std::span<int32_t>, StepScratch&);
  std::unique_ptr<Impl> impl_;
};

// balanced_packing(weight, num_packs) on each row of a [rows, n] weight, n a multiple of
// num_packs: items in descending weight order each go to the lightest pack (first on ties)
// that still has room, every pack taking n / num_packs of them; pack weights add in float32.
// Item i of row r goes to pack pack_index[r * n + i], at position rank_in_pack[r * n + i].
void BalancedPacking(std::span<const float> weight, int rows, int num_packs,
                     std::span<int32_t> pack_index, std::span<int32_t> rank_in_pack,
                     StepScratch& scratch);

// replicate_experts(weight, num_phy) on each row of a [rows, num_log] weight, num_phy >=
// num_log: each extra replica goes to the expert with the largest weight / count (float32
// division), the lowest index on ties. phy2log and rank are [rows, num_phy]: slot p of a row
// holds expert phy2log[p] as its replica number rank[p], counted in the order they were made;
// logcnt is [rows, num_log].
void ReplicateExperts(std::span<const float> weight, int rows, std::span<int32_t> phy2log,
                      std::span<int32_t> rank, std::span<int32_t> logcnt, StepScratch& scratch);

}  // namespace eplb::deepseek_steps
