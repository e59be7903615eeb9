// Comparing two run folders of the same scenario, less what differs between any two runs of it:
// the tests that replay or re-implement a policy expect its folder file for file.
#pragma once

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace eplb::testing {

// Every column of a CSV but `drop`.
inline std::string DropColumn(const std::string& csv, const std::string& drop) {
  std::istringstream in(csv);
  std::string out;
  int column = -1;
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cells;
    std::stringstream cells_in(line);
    for (std::string cell; std::getline(cells_in, cell, ',');) cells.push_back(cell);
    if (column < 0) {
      column = static_cast<int>(std::find(cells.begin(), cells.end(), drop) - cells.begin());
    }
    if (column < static_cast<int>(cells.size())) cells.erase(cells.begin() + column);
    for (const auto& c : cells) out += c + ",";
    out += "\n";
  }
  return out;
}

// A summary without its wall-clock numbers (the policy's time, the run's, its peak memory).
inline nlohmann::json WithoutWallClock(nlohmann::json j) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end();) {
      const std::string& k = it.key();
      if (k == "policy_ms_mean" || k == "wall_s" || k == "peak_rss_bytes") {
        it = j.erase(it);
      } else {
        *it = WithoutWallClock(*it);
        ++it;
      }
    }
  }
  return j;
}

}  // namespace eplb::testing
