#include "eplb/engine/hardware.h"

#include <array>

namespace eplb {

namespace {

// Sources, all dense figures (the datasheets print sparse FLOPs at twice these):
// - H100 SXM5: NVIDIA H100 Tensor Core GPU datasheet — FP8 3,958 TFLOPS sparse (1,979 dense),
//   BF16 1,979 sparse (989 dense), HBM3 3.35 TB/s, NVLink 900 GB/s; ConnectX-7 400 Gb/s per GPU
//   in DGX H100.
// - H800 SXM5: NVIDIA H800 product brief — the H100's SMs and HBM3 (same FLOPs, 3.35 TB/s) with
//   NVLink cut to 400 GB/s; DeepSeek-V3 technical report §3.1: 8 × H800 per node over NVLink and
//   NVSwitch, one 400 Gb/s InfiniBand CX7 NIC per GPU.
// - H200 SXM: NVIDIA H200 datasheet — FP8 3,958 sparse, BF16 1,979 sparse (the H100's SMs),
//   HBM3e 4.8 TB/s, NVLink 900 GB/s; 400 Gb/s per GPU in HGX H200 reference systems.
// - B200 (HGX B200, per GPU): NVIDIA DGX B200 datasheet — FP8 72 PFLOPS sparse for 8 GPUs
//   (4.5 dense per GPU), BF16 2.25 dense per GPU, HBM3e 8 TB/s, NVLink 5 1.8 TB/s; eight
//   ConnectX-7 400 Gb/s ports for compute traffic.
// - GB200 (the B200 of a GB200 NVL72, per GPU): NVIDIA GB200 NVL72 — FP8 720 PFLOPS sparse and
//   BF16 360 sparse for 72 GPUs (5.0 and 2.5 dense per GPU, run at 1,200 W where HGX B200 runs
//   at 1,000 W), HBM3e 13.4 TB at 576 TB/s (186 GB and 8 TB/s per GPU; MLCommons v6.1 GB200
//   systems list 186 GB), NVLink 5 at 900 GB/s each way to all 72 GPUs of the rack (TensorRT-LLM
//   tech blog 18: "The uni-directional NVLink Bandwidth of GB200 NVL72 is 900GB/s"); four
//   ConnectX-7 400 Gb/s NICs per tray of four GPUs (DGX GB200 user guide).
// SMs: the H100 SXM5 has 132 (NVIDIA H100 Tensor Core GPU Architecture whitepaper, "H100 SXM5
// ... 132 SMs"), which the H800 and H200 keep; the B200 148 (as CUDA reports it: DeepGEMM and
// DeepEP size their grids from this count). NVIDIA publishes no SM count for GB200: it keeps the
// B200's 148 here, which matters only where compute.normal_sms takes some.
// Memory: H100 SXM5 and H800 SXM5 80 GB HBM3; H200 141 GB HBM3e; B200 180 GB (DGX B200: 1,440 GB
// over 8 GPUs); GB200 186 GB. Read as 10^9 bytes, which understates the parts slightly (GB on the
// datasheets is close to GiB), so a plan that fits here fits there.
constexpr std::array<GpuSpec, 5> kPresets = {{
    {"H800", 1979, 989, 3350, 200, 50, 132, 80,
     "NVIDIA H800 product brief; DeepSeek-V3 report §3.1"},
    {"H100", 1979, 989, 3350, 450, 50, 132, 80, "NVIDIA H100 Tensor Core GPU datasheet (SXM5)"},
    {"H200", 1979, 989, 4800, 450, 50, 132, 141, "NVIDIA H200 Tensor Core GPU datasheet (SXM)"},
    {"B200", 4500, 2250, 8000, 900, 50, 148, 180, "NVIDIA DGX B200 datasheet (per GPU)"},
    {"GB200", 5000, 2500, 8000, 900, 50, 148, 186, "NVIDIA GB200 NVL72 (per GPU of the rack)"},
}};

}  // namespace

const GpuSpec* FindGpuPreset(std::string_view name) {
  for (const GpuSpec& g : kPresets) {
    if (g.name == name) return &g;
  }
  return nullptr;
}

std::vector<std::string> GpuPresetNames() {
  std::vector<std::string> names;
  for (const GpuSpec& g : kPresets) names.emplace_back(g.name);
  return names;
}

double PeakFlops(const GpuSpec& gpu, int bytes_per_element) {
  return (bytes_per_element <= 1 ? gpu.fp8_tflops : gpu.bf16_tflops) * 1e12;
}

}  // namespace eplb
