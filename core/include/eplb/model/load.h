// Load matrices: tokens routed to each logical expert, `layers × experts`, one row per MoE layer.
#pragma once

#include <Eigen/Core>

#include "eplb/base/status.h"

namespace eplb {

using LoadMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// OK when `load` has at least one layer and one expert and every entry is finite and >= 0;
// otherwise the error names the first bad (layer, expert) and its value.
Status ValidateLoad(const LoadMatrix& load);

}  // namespace eplb
