// Drawing counts fast, for the workload's per-step noise and the step model's micro-batch split
// (internal to engine/).
//
// NormalTable: standard normal variates from a table of 2^16 exact ones drawn once, indexed by a
// xorshift generator: the counts of a simulated second need millions of variates, and a table
// keeps their distribution while costing a few nanoseconds each. Not thread-safe.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace eplb {

class NormalTable {
 public:
  explicit NormalTable(uint64_t seed) : state_(seed | 1) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> n;
    for (double& v : table_) v = n(rng);
  }
  double Next() {
    state_ ^= state_ << 13;
    state_ ^= state_ >> 7;
    state_ ^= state_ << 17;
    return table_[state_ >> 48];
  }

 private:
  uint64_t state_;
  std::vector<double> table_ = std::vector<double>(1 << 16);
};

// max(0, std::round(x)), bit for bit, without the call into libm that took a twelfth of a
// simulation: below 2^52 in magnitude, truncating through an integer is exact, and so is the
// remainder it leaves; no branch on the remainder, whose sign is a coin toss.
inline double RoundedCount(double x) {
  if (!(std::fabs(x) < 0x1p52)) return std::max(0.0, std::round(x));
  const double t = static_cast<double>(static_cast<int64_t>(x));
  const double rest = x - t;
  return std::max(0.0, t + static_cast<double>(rest >= 0.5) - static_cast<double>(rest <= -0.5));
}

}  // namespace eplb
