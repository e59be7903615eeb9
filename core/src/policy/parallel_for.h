// ParallelFor: split [0, n) into contiguous chunks and run them on a pool of threads started
// once per process.
//
// Starting threads per call cost more than the work on the DeepSeek-V3 shapes (a call of the
// deepseek policy takes under a millisecond), so the workers live as long as the process. One
// call uses the pool at a time; a call that finds it busy (another thread's call, or a
// ParallelFor inside a chunk) runs its chunks on the calling thread, as does a call in a child
// forked after the pool started (its workers stayed in the parent). Thread-safe.
#pragma once

#include <functional>

namespace eplb {

// Calls body(begin, end) on disjoint chunks covering [0, n), at most `threads` at once (0: one
// per hardware thread), the calling thread among them. Returns when every chunk is done.
// `body` must be safe to run concurrently on disjoint chunks.
void ParallelFor(int n, int threads, const std::function<void(int, int)>& body);

}  // namespace eplb
