#include "eplb/model/metrics.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <vector>

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

LoadMatrix SlotLoads(const LoadMatrix& load, const Placement& placement) {
  assert(load.rows() == placement.num_layers() && load.cols() == placement.num_experts());
  LoadMatrix out = LoadMatrix::Zero(placement.num_layers(), placement.num_slots());
  for (int layer = 0; layer < placement.num_layers(); ++layer) {
    const auto row = placement.phy2log(layer);
    for (int slot = 0; slot < placement.num_slots(); ++slot) {
      const int e = row[slot];
      if (e != kEmptySlot) out(layer, slot) = load(layer, e) / placement.logcnt(layer, e);
    }
  }
  return out;
}

double Spread(const LoadMatrix& loads) {
  if (loads.rows() == 0 || loads.cols() < 2) return 0.0;
  double sum = 0;
  for (Eigen::Index layer = 0; layer < loads.rows(); ++layer) {
    const double mean = loads.row(layer).mean();
    const double squares = (loads.row(layer).array() - mean).square().sum();
    sum += std::sqrt(squares / static_cast<double>(loads.cols() - 1));
  }
  return sum / static_cast<double>(loads.rows());
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

LoadMatrix GpuLoads(const LoadMatrix& load, const Placement& placement, const Topology& topology,
                    std::span<const int> lost) {
  if (lost.empty()) return GpuLoads(load, placement, topology);
  std::vector<char> gone(static_cast<size_t>(topology.num_ranks()), 0);
  for (int r : lost) gone[static_cast<size_t>(r)] = 1;
  LoadMatrix out = LoadMatrix::Zero(placement.num_layers(), topology.num_ranks());
  std::vector<int> live(static_cast<size_t>(placement.num_experts()));
  for (int layer = 0; layer < placement.num_layers(); ++layer) {
    const auto row = placement.phy2log(layer);
    std::fill(live.begin(), live.end(), 0);
    for (int slot = 0; slot < placement.num_slots(); ++slot) {
      if (row[slot] != kEmptySlot && !gone[topology.rank_of_slot(slot)]) ++live[row[slot]];
    }
    for (int slot = 0; slot < placement.num_slots(); ++slot) {
      const int e = row[slot];
      if (e == kEmptySlot || gone[topology.rank_of_slot(slot)]) continue;
      out(layer, topology.rank_of_slot(slot)) += load(layer, e) / live[e];
    }
  }
  return out;
}

namespace {

// The columns of the GPUs not excluded.
LoadMatrix KeepColumns(const LoadMatrix& gpu_loads, std::span<const int> excluded) {
  std::vector<Eigen::Index> keep;
  for (Eigen::Index g = 0; g < gpu_loads.cols(); ++g) {
    if (!std::binary_search(excluded.begin(), excluded.end(), static_cast<int>(g)))
      keep.push_back(g);
  }
  LoadMatrix out(gpu_loads.rows(), static_cast<Eigen::Index>(keep.size()));
  for (size_t i = 0; i < keep.size(); ++i)
    out.col(static_cast<Eigen::Index>(i)) = gpu_loads.col(keep[i]);
  return out;
}

}  // namespace

double Balancedness(const LoadMatrix& gpu_loads, std::span<const int> excluded) {
  return excluded.empty() ? Balancedness(gpu_loads)
                          : Balancedness(KeepColumns(gpu_loads, excluded));
}

double ImbalanceRatio(const LoadMatrix& gpu_loads, std::span<const int> excluded) {
  return excluded.empty() ? ImbalanceRatio(gpu_loads)
                          : ImbalanceRatio(KeepColumns(gpu_loads, excluded));
}

std::vector<double> LayerBalancedness(const LoadMatrix& gpu_loads, std::span<const int> excluded) {
  const LoadMatrix kept = excluded.empty() ? gpu_loads : KeepColumns(gpu_loads, excluded);
  std::vector<double> out(static_cast<size_t>(kept.rows()));
  for (Eigen::Index layer = 0; layer < kept.rows(); ++layer) {
    const double max = kept.row(layer).maxCoeff();
    out[static_cast<size_t>(layer)] = max > 0 ? kept.row(layer).mean() / max : 1.0;
  }
  return out;
}

}  // namespace eplb
