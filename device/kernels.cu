#include "kernels.h"

#include "eplb/migrate/weight_pattern.h"

namespace eplb::device {
namespace {

constexpr int kThreads = 256;

// Grid: x over words of a slot, y over slots.
__global__ void FillKernel(const SlotRef* slots, int base, uint64_t words) {
  const SlotRef s = slots[base + blockIdx.y];
  for (uint64_t w = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; w < words;
       w += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    s.data[w] = PatternWord(s.layer, s.expert, w);
  }
}

// The lowest (slot, word) key that differs wins.
__global__ void CheckKernel(const SlotRef* slots, int base, uint64_t words,
                            unsigned long long* first_mismatch) {
  const unsigned long long index = base + blockIdx.y;
  const SlotRef s = slots[index];
  for (uint64_t w = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; w < words;
       w += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    if (s.data[w] != PatternWord(s.layer, s.expert, w)) {
      atomicMin(first_mismatch, (index << 40) | w);
    }
  }
}

__device__ uint64_t GlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void EmulatedStepKernel(uint64_t nanoseconds, const SlotRef* slots, int count,
                                   uint64_t words, uint64_t* sink, StepScratch* scratch) {
  if (threadIdx.x == 0) atomicMin(&scratch->start_ns, GlobalTimerNs());
  // Blocks stride over (slot, word) pairs: every byte of the live weights is read once.
  uint64_t acc = 0;
  const uint64_t total = static_cast<uint64_t>(count) * words;
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    acc ^= slots[i / words].data[i % words];
  }
  if (acc != 0) atomicXor(reinterpret_cast<unsigned long long*>(sink), acc);
  __syncthreads();
  if (threadIdx.x != 0) return;
  __threadfence();
  // The last block to finish holds the step open until its time is up.
  if (atomicAdd(&scratch->finished, 1u) + 1 == gridDim.x) {
    const unsigned long long start = atomicAdd(&scratch->start_ns, 0ULL);
    while (GlobalTimerNs() - start < nanoseconds) {
    }
  }
}

// Slots go along the grid's y dimension, at most 65,535 a launch.
constexpr int kMaxSlotsPerLaunch = 65535;

dim3 Grid(int count, uint64_t words) {
  const uint64_t blocks = (words + kThreads - 1) / kThreads;
  return dim3(static_cast<unsigned>(blocks < 64 ? (blocks == 0 ? 1 : blocks) : 64),
              static_cast<unsigned>(count));
}

}  // namespace

cudaError_t LaunchFill(const SlotRef* slots, int count, uint64_t words, cudaStream_t stream) {
  for (int base = 0; base < count; base += kMaxSlotsPerLaunch) {
    const int n = count - base < kMaxSlotsPerLaunch ? count - base : kMaxSlotsPerLaunch;
    FillKernel<<<Grid(n, words), kThreads, 0, stream>>>(slots, base, words);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

cudaError_t LaunchCheck(const SlotRef* slots, int count, uint64_t words,
                        unsigned long long* first_mismatch, cudaStream_t stream) {
  cudaError_t e = cudaMemsetAsync(first_mismatch, 0xff, sizeof(*first_mismatch), stream);
  if (e != cudaSuccess) return e;
  for (int base = 0; base < count; base += kMaxSlotsPerLaunch) {
    const int n = count - base < kMaxSlotsPerLaunch ? count - base : kMaxSlotsPerLaunch;
    CheckKernel<<<Grid(n, words), kThreads, 0, stream>>>(slots, base, words, first_mismatch);
    if (const cudaError_t e2 = cudaGetLastError(); e2 != cudaSuccess) return e2;
  }
  return cudaSuccess;
}

cudaError_t LaunchEmulatedStep(uint64_t nanoseconds, const SlotRef* slots, int count,
                               uint64_t words, uint64_t* sink, StepScratch* scratch,
                               cudaStream_t stream) {
  const StepScratch fresh{~0ULL, 0};
  cudaError_t e = cudaMemcpyAsync(scratch, &fresh, sizeof(fresh), cudaMemcpyHostToDevice, stream);
  if (e != cudaSuccess) return e;
  // Enough blocks to keep every SM's memory pipes busy on an H200 (132 SMs).
  constexpr unsigned kStepBlocks = 528;
  EmulatedStepKernel<<<kStepBlocks, kThreads, 0, stream>>>(nanoseconds, slots, count, words, sink,
                                                           scratch);
  return cudaGetLastError();
}

}  // namespace eplb::device
