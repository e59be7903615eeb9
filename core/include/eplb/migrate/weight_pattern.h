// The byte pattern that stands for an expert's weights in every backend that moves real bytes
// (host memory, GPU memory). Each 8-byte word of expert `expert`'s weights in `layer` is a hash
// of (layer, expert, word index), so a slot holding the wrong expert, the wrong layer or stale
// bytes differs within a few bytes, bar a 1 in 2^64 chance per word.
//
// Written once for the host and for CUDA kernels: under nvcc the functions are __host__
// __device__.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define EPLB_HOST_DEVICE __host__ __device__
#else
#define EPLB_HOST_DEVICE
#endif

namespace eplb {

// splitmix64's finaliser.
EPLB_HOST_DEVICE inline uint64_t MixBits(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Word `word` (bytes 8·word .. 8·word+7, little-endian) of `expert`'s weights in `layer`.
EPLB_HOST_DEVICE inline uint64_t PatternWord(int layer, int expert, uint64_t word) {
  return MixBits((static_cast<uint64_t>(layer) << 40) ^ (static_cast<uint64_t>(expert) << 20) ^
                 word ^ 0x5eedULL);
}

// Byte `offset` of the same.
EPLB_HOST_DEVICE inline uint8_t PatternByte(int layer, int expert, size_t offset) {
  return static_cast<uint8_t>(PatternWord(layer, expert, offset / 8) >> (8 * (offset % 8)));
}

// Host memory: the first `bytes` bytes of `expert`'s weights in `layer` into `out`, a word per
// hash (a host copy of an expert, as a backup holds it).
inline void WritePattern(int layer, int expert, uint8_t* out, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) {
    if (i % 8 == 0 && i + 8 <= bytes) {
      const uint64_t w = PatternWord(layer, expert, i / 8);
      for (int b = 0; b < 8; ++b) out[i + b] = static_cast<uint8_t>(w >> (8 * b));
      i += 7;
    } else {
      out[i] = PatternByte(layer, expert, i);
    }
  }
}

}  // namespace eplb
