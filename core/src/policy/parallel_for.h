// ParallelFor: split [0, n) into contiguous chunks and run them on threads.
#pragma once

#include <algorithm>
#include <thread>
#include <vector>

namespace eplb {

// Calls body(begin, end) on disjoint chunks covering [0, n), one chunk per thread, the first on
// the calling thread. `threads` 0 means one per hardware thread; the count never exceeds n.
// Returns when every chunk is done. `body` must be safe to run concurrently on disjoint chunks.
template <typename Body>
void ParallelFor(int n, int threads, Body&& body) {
  if (n <= 0) return;
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = std::min(threads, n);
  if (threads == 1) {
    body(0, n);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(threads - 1));
  const int chunk = (n + threads - 1) / threads;
  for (int t = 1; t < threads; ++t) {
    const int begin = t * chunk, end = std::min(n, begin + chunk);
    if (begin < end) pool.emplace_back([&body, begin, end] { body(begin, end); });
  }
  body(0, std::min(n, chunk));
  for (auto& th : pool) th.join();
}

}  // namespace eplb
