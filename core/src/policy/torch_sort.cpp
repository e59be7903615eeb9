#include "policy/torch_sort.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <utility>

namespace eplb {
namespace {

// libstdc++'s _S_threshold: ranges this small are left to the final insertion sort.
constexpr ptrdiff_t kSmallRange = 16;

uint32_t ValueOf(uint64_t key) {
  return static_cast<uint32_t>(key >> 32);
}

// libstdc++'s __move_median_to_first, branch for branch.
void MoveMedianToFirst(uint64_t* result, uint64_t* a, uint64_t* b, uint64_t* c) {
  if (ValueLess(*a, *b)) {
    if (ValueLess(*b, *c)) {
      std::swap(*result, *b);
    } else if (ValueLess(*a, *c)) {
      std::swap(*result, *c);
    } else {
      std::swap(*result, *a);
    }
  } else if (ValueLess(*a, *c)) {
    std::swap(*result, *a);
  } else if (ValueLess(*b, *c)) {
    std::swap(*result, *c);
  } else {
    std::swap(*result, *b);
  }
}

// The array libstdc++'s __unguarded_partition(lo, hi, pivot = lo - 1) leaves, and its cut.
// That loop stops the left scan at each value >= the pivot and the right scan at each value
// <= it, swaps the two while the left stop is before the right one, and returns the left
// scan's last stop. Its k-th swap pairs the k-th left stop with the k-th right stop of the
// array as it was (the positions between the two scans are untouched), so both lists are
// made first, in one pass with no branch on the data, and the swaps follow. Where the
// scans meet, the left one stops at its next stop or at the last right stop, now holding a
// swapped-in value >= the pivot, whichever comes first. The median of three put values on
// both sides of the pivot into the range, so both scans stop inside it.
uint64_t* UnguardedPartition(uint64_t* lo, uint64_t* hi, std::vector<int32_t>& scratch) {
  const uint32_t pivot = ValueOf(lo[-1]);
  const int n = static_cast<int>(hi - lo);
  // Grown, never shrunk: a resize back up would zero what the loop below overwrites.
  if (scratch.size() < 2 * static_cast<size_t>(n) + 3)
    scratch.resize(2 * static_cast<size_t>(n) + 3);
  int32_t* left = scratch.data();  // left stops, ascending; then n, past every right stop
  int32_t* right = left + n + 2;   // right stops, ascending from -1, the pivot's place
  right[0] = -1;
  int lefts = 0, rights = 1;
  for (int p = 0; p < n; ++p) {
    const uint32_t value = ValueOf(lo[p]);
    left[lefts] = p;
    lefts += static_cast<int>(value >= pivot);
    right[rights] = p;
    rights += static_cast<int>(value <= pivot);
  }
  left[lefts] = n;
  // The k-th right stop, counted from the end as the right scan meets them.
  const int32_t* right_scan = right + rights - 1;
  int swaps = 0;
  for (; left[swaps] < right_scan[-swaps]; ++swaps) {
    std::swap(lo[left[swaps]], lo[right_scan[-swaps]]);
  }
  const int cut = swaps == 0 ? left[0] : std::min(left[swaps], right_scan[1 - swaps]);
  return lo + cut;
}

// The comparators of Batcher's odd-even merge sort for N inputs, N a power of two, that touch
// only the first M (M <= N): a sorting network for M inputs, the same compares whatever the
// data, so no branch to mispredict. (A network on N inputs sorts M of them with the rest
// padded with maxima, which never move, so the compares that touch the padding drop out:
// 32 of the 63 stay for 10 inputs.)
template <int M, int N = static_cast<int>(std::bit_ceil(static_cast<unsigned>(M)))>
constexpr auto OddEvenMergeNetwork() {
  auto visit = [](auto&& compare) {
    for (int p = 1; p < N; p <<= 1) {
      for (int k = p; k >= 1; k >>= 1) {
        for (int j = k % p; j + k < N; j += 2 * k) {
          for (int i = 0; i < std::min(k, N - j - k); ++i) {
            const int a = i + j, b = i + j + k;
            if (a / (2 * p) == b / (2 * p) && b < M) compare(a, b);
          }
        }
      }
    }
  };
  constexpr int kCount = [&] {
    int count = 0;
    visit([&](int, int) { ++count; });
    return count;
  }();
  std::array<std::pair<uint8_t, uint8_t>, kCount> pairs{};
  int next = 0;
  visit([&](int a, int b) { pairs[next++] = {static_cast<uint8_t>(a), static_cast<uint8_t>(b)}; });
  return pairs;
}

// A stable sort of M keys, as insertion sort leaves them. Each key's value goes out with its
// position in place of its payload, so that equal values keep their order; the network sorts
// those in registers, and the keys follow their positions.
template <int M>
void StableSortByNetwork(uint64_t* first) {
  static constexpr auto kNetwork = OddEvenMergeNetwork<M>();
  std::array<uint64_t, M> rank_key;  // every element set below
  std::array<uint64_t, M> kept;      // every element set below
  for (int i = 0; i < M; ++i) {
    kept[i] = first[i];
    rank_key[i] = (first[i] & ~uint64_t{0xffffffff}) | static_cast<uint64_t>(i);
  }
#pragma GCC unroll 128
  for (const auto& [a, b] : kNetwork) {
    // Selects, not std::min and std::max, which GCC turns into a mispredicted branch here.
    const uint64_t x = rank_key[a], y = rank_key[b];
    const bool in_order = x < y;
    rank_key[a] = in_order ? x : y;
    rank_key[b] = in_order ? y : x;
  }
  for (int i = 0; i < M; ++i) first[i] = kept[rank_key[i] & 0xff];
}

// A stable sort of a range of at most kSmallRange keys, as insertion sort leaves it.
void StableSortSmall(uint64_t* first, uint64_t* last) {
  static_assert(kSmallRange == 16);
  switch (last - first) {
    case 2:
      return StableSortByNetwork<2>(first);
    case 3:
      return StableSortByNetwork<3>(first);
    case 4:
      return StableSortByNetwork<4>(first);
    case 5:
      return StableSortByNetwork<5>(first);
    case 6:
      return StableSortByNetwork<6>(first);
    case 7:
      return StableSortByNetwork<7>(first);
    case 8:
      return StableSortByNetwork<8>(first);
    case 9:
      return StableSortByNetwork<9>(first);
    case 10:
      return StableSortByNetwork<10>(first);
    case 11:
      return StableSortByNetwork<11>(first);
    case 12:
      return StableSortByNetwork<12>(first);
    case 13:
      return StableSortByNetwork<13>(first);
    case 14:
      return StableSortByNetwork<14>(first);
    case 15:
      return StableSortByNetwork<15>(first);
    case 16:
      return StableSortByNetwork<16>(first);
    default:
      return;  // 0 or 1 keys
  }
}

// libstdc++'s __introsort_loop, each range of at most kSmallRange sorted as it is left.
void IntroSortLoop(uint64_t* first, uint64_t* last, ptrdiff_t depth_limit,
                   std::vector<int32_t>& scratch) {
  while (last - first > kSmallRange) {
    if (depth_limit == 0) {
      std::partial_sort(first, last, last, ValueLess);  // heapsort; sorted, so left as is
      return;
    }
    --depth_limit;
    uint64_t* mid = first + (last - first) / 2;
    MoveMedianToFirst(first, first + 1, mid, last - 1);
    uint64_t* cut = UnguardedPartition(first + 1, last, scratch);
    IntroSortLoop(cut, last, depth_limit, scratch);
    last = cut;
  }
  StableSortSmall(first, last);
}

}  // namespace

void SortLikeStdSort(std::span<uint64_t> keys, std::vector<int32_t>& scratch) {
  if (keys.size() < 2) return;
  const auto n = static_cast<ptrdiff_t>(keys.size());
  const ptrdiff_t depth_limit = 2 * (std::bit_width(static_cast<size_t>(n)) - 1);  // 2 lg n
  IntroSortLoop(keys.data(), keys.data() + n, depth_limit, scratch);
}

}  // namespace eplb
