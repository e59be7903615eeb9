// GPU presets: the published peak numbers the roofline step model (step_model.h) prices work
// with. Each number is the vendor's datasheet figure for the SXM part, dense (no sparsity);
// what a kernel achieves of it is the scenario's efficiency factor, never folded in here.
//
// Thread-safety: immutable tables; safe from any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace eplb {

struct GpuSpec {
  std::string_view name;
  double fp8_tflops = 0;   // dense FP8 tensor-core peak, 10^12 FLOP/s
  double bf16_tflops = 0;  // dense BF16 tensor-core peak
  double hbm_gbps = 0;     // HBM bandwidth, 10^9 B/s
  double nvlink_gbps = 0;  // NVLink per GPU per direction (half the "bidirectional" figure)
  double nic_gbps = 0;     // the rail NIC per GPU of the reference system, per direction
  int sms = 0;             // streaming multiprocessors: what compute shares with SM-driven copies
  double memory_gb = 0;    // HBM capacity, the datasheet's GB read as 10^9 bytes
  std::string_view source;
};

// The preset named `name` (case-sensitive, as listed by GpuPresetNames), or nullptr.
const GpuSpec* FindGpuPreset(std::string_view name);
std::vector<std::string> GpuPresetNames();

// Peak dense tensor-core FLOP/s of `gpu` for GEMMs whose inputs are `bytes_per_element` wide
// (1: FP8, 2: BF16; anything wider runs at the BF16 rate).
double PeakFlops(const GpuSpec& gpu, int bytes_per_element);

}  // namespace eplb
