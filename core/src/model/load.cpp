#include "eplb/model/load.h"

#include <cmath>

#include <fmt/format.h>

namespace eplb {

Status ValidateLoad(const LoadMatrix& load) {
  if (load.rows() == 0) return Status::InvalidArgument("load has no layers");
  if (load.cols() == 0) return Status::InvalidArgument("load has no experts");
  for (Eigen::Index layer = 0; layer < load.rows(); ++layer) {
    for (Eigen::Index expert = 0; expert < load.cols(); ++expert) {
      const double v = load(layer, expert);
      if (!std::isfinite(v) || v < 0) {
        return Status::InvalidArgument(
            fmt::format("load of layer {}, expert {} is {}; loads must be finite and non-negative",
                        layer, expert, v));
      }
      if (v > kMaxLoad) {
        return Status::InvalidArgument(
            fmt::format("load of layer {}, expert {} is {}; loads are at most {:g} tokens", layer,
                        expert, v, kMaxLoad));
      }
    }
  }
  return Status::Ok();
}

}  // namespace eplb
