// The order in which the reference policy's sort leaves equal weights, computed faster.
//
// DeepSeek's eplb.py sorts with torch.sort(descending=True), which on the CPU is libstdc++'s
// std::sort over (value, index) pairs comparing values only (PyTorch's SortingKernel.cpp,
// KeyValueCompDesc). Equal values leave that unstable sort in an order set by its
// partitioning, and that order decides which of an expert's replicas lands on which GPU (the
// engines' log2phy, indexed by replica rank, follows it). So the policy must reproduce it.
//
// std::sort (GCC's introsort) is: median-of-three quicksort partitions down to ranges of at
// most 16 (heapsort for a range that recurses too deep, as here too), then one insertion sort
// over the whole array. Insertion sort is stable, and the
// ranges are ordered among themselves, so that last pass equals a stable sort of each range
// on its own, which a sorting network does without a branch. And a Hoare partition, for all
// its branches, swaps the k-th element that stops the left scan with the k-th that stops the
// right one until the two cross; which elements those are can be listed without a branch on
// the data. SortLikeStdSort does both. Where std::sort's branches are coin tosses (they are on
// weights), it takes under half the time (640 against 1,560 ns on 72 weights with 8 ties, the
// size of a node's replicas in DeepSeek-V3's EP32 placement), and the result is the same
// array, element for element: tests compare the two on random arrays thick with ties.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace eplb {

// Keys pack a 32-bit value above a 32-bit payload; order is by the value alone.
inline bool ValueLess(uint64_t a, uint64_t b) {
  return (a >> 32) < (b >> 32);
}

// Reorders `keys` exactly as std::sort(keys.begin(), keys.end(), ValueLess) does with
// libstdc++ (GCC 12's introsort; torch's CPU sort on the platform the golden outputs were
// made on), for fewer than 2^31 keys. `scratch` is working memory, reused across calls. Not
// thread-safe on one scratch.
void SortLikeStdSort(std::span<uint64_t> keys, std::vector<int32_t>& scratch);

}  // namespace eplb
