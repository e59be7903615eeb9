// Balance metrics. Every number eplb prints about balance is defined here, once.
//
//   gpu load      load_g = Σ over slots s on GPU g of load[e(s)] / logcnt[e(s)]: a logical
//                 expert's tokens are split evenly over its replicas.
//   balancedness  vLLM's definition: Σ_layers mean_g(load_g) / Σ_layers max_g(load_g).
//                 1.0 is perfect; 1/G means one GPU does all the work. 1.0 when there is no load.
//   imbalance     TensorRT-LLM's definition: (max_g − mean_g) / mean_g per layer, averaged over
//   ratio         the layers that carry load. 0.0 is perfect; 0.0 when there is no load.
//   layer         mean_g(load_g) / max_g(load_g) of one layer; 1.0 when it has no load. ROCm
//   balancedness  ATOM's rebalance gate takes the least or the mean of them over the layers.
//   slot load     load_s = load[e(s)] / logcnt[e(s)] for a slot holding e, 0 for an empty one:
//                 what each replica takes under the even split (TensorRT-LLM's
//                 report_load_statistics.py reports its loads "by expert slot" so)
//   spread        the sample standard deviation of one layer's loads (of GPUs or slots), averaged
//                 over the layers: TensorRT-LLM's "Std. Dev." (torch's std, n − 1)
#pragma once

#include <span>
#include <vector>

#include "eplb/model/load.h"
#include "eplb/model/placement.h"
#include "eplb/model/topology.h"

namespace eplb {

// `layers × GPUs`. Requires load.rows() == placement.num_layers(), load.cols() ==
// placement.num_experts() and placement.CheckFits(topology).
LoadMatrix GpuLoads(const LoadMatrix& load, const Placement& placement, const Topology& topology);

// `layers × slots`, with the same requirements.
LoadMatrix SlotLoads(const LoadMatrix& load, const Placement& placement);

// Each takes per-layer loads of GPUs (GpuLoads) or of slots (SlotLoads).
double Balancedness(const LoadMatrix& gpu_loads);
double ImbalanceRatio(const LoadMatrix& gpu_loads);
double Spread(const LoadMatrix& loads);

// After GPUs are lost: replicas on the `lost` ranks (ascending) take no tokens, the live ones
// share their expert's, and an expert with no live replica adds nothing (its tokens are lost).
LoadMatrix GpuLoads(const LoadMatrix& load, const Placement& placement, const Topology& topology,
                    std::span<const int> lost);
// Over the GPUs not `excluded` (ascending: lost, or not serving), which take no part in the
// mean or the max.
double Balancedness(const LoadMatrix& gpu_loads, std::span<const int> excluded);
double ImbalanceRatio(const LoadMatrix& gpu_loads, std::span<const int> excluded);
std::vector<double> LayerBalancedness(const LoadMatrix& gpu_loads, std::span<const int> excluded);

}  // namespace eplb
