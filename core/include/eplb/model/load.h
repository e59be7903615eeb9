// Load matrices: tokens routed to each logical expert, `layers × experts`, one row per MoE layer.
#pragma once

#include <cstdint>
#include <span>

#include <Eigen/Core>

#include "eplb/base/status.h"

namespace eplb {

using LoadMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// The most tokens one (layer, expert) cell of a load may hold: 1e15, a million times a long
// window of the busiest expert in a large deployment, and small enough that windows (summed in
// float), step times and their sums stay finite.
inline constexpr double kMaxLoad = 1e15;

// OK when `load` has at least one layer and one expert and every entry is within
// [0, kMaxLoad]; otherwise the error names the first bad (layer, expert) and its value.
Status ValidateLoad(const LoadMatrix& load);
// The same for a row-major [layers, experts] float32 load, as engines hand theirs over.
Status ValidateLoad(std::span<const float> load, int64_t layers, int64_t experts);

}  // namespace eplb
