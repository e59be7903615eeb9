// The kernels of the device backend, behind plain C++ declarations so that host code needs no
// CUDA compiler. Each enqueues on `stream` and returns the launch's error; none synchronises.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace eplb::device {

// One slot to fill or check: `words` 8-byte words at `data`, which must hold `expert`'s weights
// of `layer` (weight_pattern.h). Empty slots are not listed.
struct SlotRef {
  uint64_t* data;
  int32_t layer;
  int32_t expert;
};

// A check's finding: the first wrong word in list order as (slot index << 40) | word, or
// kNoMismatch when every word matched.
constexpr unsigned long long kNoMismatch = ~0ULL;
inline int64_t MismatchSlot(unsigned long long key) {
  return static_cast<int64_t>(key >> 40);
}
inline uint64_t MismatchWord(unsigned long long key) {
  return key & ((1ULL << 40) - 1);
}

// `slots` is device memory with `count` entries.
cudaError_t LaunchFill(const SlotRef* slots, int count, uint64_t words, cudaStream_t stream);
// Sets `*first_mismatch` (device memory) to the finding; the stream's earlier work is checked.
cudaError_t LaunchCheck(const SlotRef* slots, int count, uint64_t words,
                        unsigned long long* first_mismatch, cudaStream_t stream);

// Device scratch of an emulated step: when its first block started, and how many have finished.
struct StepScratch {
  unsigned long long start_ns;
  unsigned int finished;
};

// One emulated inference step: every word of every slot is read from HBM, as the expert GEMMs
// of a step read their weights (so a migration's copies and the step compete for memory
// bandwidth as they would), folded into `sink`; then the last block to finish waits on the
// GPU's global timer until `nanoseconds` after the first block started. A step lasts at least
// `nanoseconds`, longer when reading the weights takes longer. `scratch` is device memory.
cudaError_t LaunchEmulatedStep(uint64_t nanoseconds, const SlotRef* slots, int count,
                               uint64_t words, uint64_t* sink, StepScratch* scratch,
                               cudaStream_t stream);

}  // namespace eplb::device
