// Helpers shared by the test suites.
#pragma once

#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "eplb/load.h"

namespace eplb::testing {

inline std::string DataPath(const std::string& name) {
  return std::string(EPLB_TEST_DATA_DIR) + "/" + name;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Random load with a heavy tail (log-normal), as real routing counts have.
inline LoadMatrix RandomLoad(std::mt19937_64& rng, int layers, int experts) {
  std::lognormal_distribution<double> dist(0.0, 1.0);
  LoadMatrix m(layers, experts);
  for (int l = 0; l < layers; ++l) {
    for (int e = 0; e < experts; ++e) m(l, e) = std::round(dist(rng) * 1000.0);
  }
  return m;
}

}  // namespace eplb::testing
