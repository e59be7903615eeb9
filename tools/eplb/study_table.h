// The terminal tables of `eplb compare` and `eplb sweep`, laid out: their cells come from
// report.h's TerminalNumbers (a mean over seeds reads "mean ± half the range", as the report's
// table does, so that the terminal never shows a mean without its noise).
#pragma once

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace eplb::cli {

// Columns as wide as their widest cell (headings included); the first `left` columns aligned
// left (names), the rest right (numbers). "±" counts as one column on a terminal.
inline void PrintTable(std::FILE* out, const std::vector<std::string>& headings,
                       const std::vector<std::vector<std::string>>& rows, size_t left = 1) {
  const auto width = [](const std::string& s) {
    size_t n = 0;
    for (const unsigned char c : s) n += (c & 0xC0) != 0x80;  // UTF-8: count code points
    return n;
  };
  std::vector<size_t> widths(headings.size(), 0);
  for (size_t c = 0; c < headings.size(); ++c) {
    widths[c] = width(headings[c]);
    for (const auto& row : rows) widths[c] = std::max(widths[c], width(row[c]));
  }
  const auto print = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t c = 0; c < cells.size(); ++c) {
      const std::string pad(widths[c] - width(cells[c]), ' ');
      line += (c == 0 ? "" : "  ") + (c < left ? cells[c] + pad : pad + cells[c]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    fmt::print(out, "{}\n", line);
  };
  print(headings);
  for (const auto& row : rows) print(row);
}

}  // namespace eplb::cli
