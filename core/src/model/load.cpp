#include "eplb/model/load.h"

#include <cmath>

#include <fmt/format.h>

namespace eplb {
namespace {

// Row-major [layers, experts] values of type T, checked as ValidateLoad states.
template <typename T>
Status ValidateRows(const T* values, int64_t layers, int64_t experts) {
  if (layers == 0) return Status::InvalidArgument("load has no layers");
  if (experts == 0) return Status::InvalidArgument("load has no experts");
  // One pass with no early exit, which vectorises (NaN fails both compares); the loop below
  // runs only to name the first bad value.
  const int64_t size = layers * experts;
  int all_valid = 1;
  for (int64_t i = 0; i < size; ++i) {
    const double v = values[i];
    all_valid &= static_cast<int>(v >= 0) & static_cast<int>(v <= kMaxLoad);
  }
  if (all_valid != 0) return Status::Ok();
  for (int64_t i = 0; i < size; ++i) {
    const double v = values[i];
    if (!std::isfinite(v) || v < 0) {
      return Status::InvalidArgument(
          fmt::format("load of layer {}, expert {} is {}; loads must be finite and non-negative",
                      i / experts, i % experts, v));
    }
    if (v > kMaxLoad) {
      return Status::InvalidArgument(
          fmt::format("load of layer {}, expert {} is {}; loads are at most {:g} tokens",
                      i / experts, i % experts, v, kMaxLoad));
    }
  }
  return Status::Ok();
}

}  // namespace

Status ValidateLoad(const LoadMatrix& load) {
  return ValidateRows(load.data(), load.rows(), load.cols());
}

Status ValidateLoad(std::span<const float> load, int64_t layers, int64_t experts) {
  // Divided rather than multiplied: the product of a caller's sizes could overflow.
  const auto values = static_cast<uint64_t>(load.size());
  const bool fits =
      layers >= 0 && experts >= 0 &&
      (experts == 0 ? values == 0
                    : values % static_cast<uint64_t>(experts) == 0 &&
                          values / static_cast<uint64_t>(experts) == static_cast<uint64_t>(layers));
  if (!fits) {
    return Status::InvalidArgument(
        fmt::format("load has {} values, which do not make {} layers of {} experts", load.size(),
                    layers, experts));
  }
  return ValidateRows(load.data(), layers, experts);
}

}  // namespace eplb
