#include "eplb/model/metrics.h"

#include <cassert>

namespace eplb {

LoadMatrix GpuLoads(const LoadMatrix& load, const Placement& placement, const Topology& topology) {
  assert(load.rows() == placement.num_layers() && load.cols() == placement.num_experts());
  assert(placement.num_slots() == topology.num_slots());
  LoadMatrix out = LoadMatrix::Zero(placement.num_layers(), topology.num_ranks());
  for (int layer = 0; layer < placement.num_layers(); ++layer) {
    const auto row = placement.phy2log(layer);
    for (int slot = 0; slot < placement.num_slots(); ++slot) {
      const int e = row[slot];
      if (e == kEmptySlot) continue;
      out(layer, topology.rank_of_slot(slot)) += load(layer, e) / placement.logcnt(layer, e);
    }
  }
  return out;
}

double Balancedness(const LoadMatrix& gpu_loads) {
  double sum_mean = 0, sum_max = 0;
  for (Eigen::Index layer = 0; layer < gpu_loads.rows(); ++layer) {
    sum_mean += gpu_loads.row(layer).mean();
    sum_max += gpu_loads.row(layer).maxCoeff();
  }
  return sum_max > 0 ? sum_mean / sum_max : 1.0;
}

double ImbalanceRatio(const LoadMatrix& gpu_loads) {
  double sum = 0;
  int counted = 0;
  for (Eigen::Index layer = 0; layer < gpu_loads.rows(); ++layer) {
    const double mean = gpu_loads.row(layer).mean();
    if (!(mean > 0)) continue;
    sum += (gpu_loads.row(layer).maxCoeff() - mean) / mean;
    ++counted;
  }
  return counted > 0 ? sum / counted : 0.0;
}

}  // namespace eplb
