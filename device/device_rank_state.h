// The device backend's state per local rank, shared by its two source files
// (device_backend.cpp: set-up, teardown, weights and steps; device_backend_rearrangement.cpp:
// the rearrangement contract), and the prefix its errors name a rank by. Private to device/.
#pragma once

#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "device_backend.h"
#include "kernels.h"
#include "nccl_comm.h"

namespace eplb::device {

// "rank R: " and "rank R, layer L: ", the start of an error about that rank (and layer).
inline std::string At(int rank) {
  return fmt::format("rank {}: ", rank);
}
inline std::string At(int rank, int layer) {
  return fmt::format("rank {}, layer {}: ", rank, layer);
}

struct DeviceBackend::RankState {
  int device = 0;
  cudaStream_t main = nullptr;
  cudaStream_t local = nullptr;
  cudaStream_t lane[kNumLinkClasses] = {};
  std::vector<cudaEvent_t> staged, consumed;  // [staging buffer]
  // The GPU's clock on the run's: `clock` completed at Now() = anchor_s (BeginRearrangement),
  // so an event's time is anchor_s + cudaEventElapsedTime(clock, event). `clock` is the rank's
  // own `anchor`, or the first local rank's on the same GPU (one clock per GPU). Timing events.
  cudaEvent_t anchor = nullptr;
  cudaEvent_t clock = nullptr;
  double anchor_s = -1;                                                            // none yet
  cudaEvent_t round_begin[kNumLinkClasses] = {}, round_end[kNumLinkClasses] = {};  // [lane]
  void* pool = nullptr;
  // Foreground slot lists on the device: checks, and the slots an emulated step reads.
  SlotRef* check_slots = nullptr;
  SlotRef* step_slots = nullptr;
  int step_count = 0;
  bool step_slots_stale = true;
  unsigned long long* mismatch = nullptr;
  uint64_t* sink = nullptr;
  StepScratch* step_scratch = nullptr;
  // Pinned host memory holding one expert's weights at a time: the backup a reload reads over
  // PCIe (allocated on the first reload).
  uint8_t* backup = nullptr;
#ifdef EPLB_HAVE_NCCL
  ncclComm_t comm = nullptr;
  bool comm_aborted = false;  // written by the rank's one worker, read after JoinWorkers
#endif
};

}  // namespace eplb::device
