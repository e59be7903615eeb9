// A small SVG chart writer for self-contained reports: line charts (one series per name, drawn
// in a fixed palette) and grouped bar charts, with axes, ticks and a legend. No dependency: the
// output is text that opens offline and diffs cleanly.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace eplb::svg {

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y)
};

struct Chart {
  std::string title;
  std::string x_label;
  std::string y_label;
  int width = 760;
  int height = 300;
};

std::string LineChart(const Chart& chart, const std::vector<Series>& series);
// Groups along x (labels), one bar per series in each group; series[i].points[g].second is the
// value of group g.
std::string BarChart(const Chart& chart, const std::vector<std::string>& groups,
                     const std::vector<Series>& series);
// Escapes text for HTML and SVG.
std::string Escape(const std::string& text);
// The palette colour of series i.
const char* Colour(size_t i);

}  // namespace eplb::svg
