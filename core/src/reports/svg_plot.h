// A small SVG chart writer for self-contained reports: line charts (one series per name, drawn
// in a fixed palette) and grouped bar charts, with axes, ticks and a legend. No dependency: the
// output is text that opens offline and diffs cleanly.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace eplb::svg {

struct Band {
  double x, low, high;
};

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y)
  std::vector<Band> band = {};  // drawn as a shaded envelope behind the line (e.g. min..max)
  bool line = true;             // false: points only (a scatter)
  bool markers = false;         // a dot at each point, carrying its values as data-x/data-y
  // Each point's own name (a sweep point's values), written beside its dot; empty: none.
  std::vector<std::string> point_labels = {};
};

struct Chart {
  std::string title;
  std::string x_label;
  std::string y_label;
  int width = 760;  // of the plot and legend
  int height = 300;
  int legend_width = 170;                // at least; long names widen the chart
  std::vector<double> x_marks = {};      // vertical dashed lines (e.g. rearrangement starts)
  std::vector<double> phase_marks = {};  // vertical dotted lines (e.g. workload phase changes)
  std::vector<std::pair<double, double>> spans = {};  // shaded x ranges (e.g. faults in force)
  // An x range hatched grey and labelled "warm-up": the steps before a run's measured window.
  std::pair<double, double> warm_up = {0, 0};
  // The x axis's ticks, each at x with its label (a sweep's values: 25, 100; true, false), in
  // place of evenly spaced numbers; a label too close to the one before it is left out.
  std::vector<std::pair<double, std::string>> x_ticks = {};
};

std::string LineChart(const Chart& chart, const std::vector<Series>& series);
// How a heat map's axes and colour bar read.
struct HeatMapScale {
  double max = 0;     // > 0 fixes the top of the scale (maps drawn to be compared share one)
  std::string label;  // the colour bar's: what a shade stands for
  // What the columns' outer edges stand for on the x axis (e.g. steps 0 to 1,200 for 200 columns
  // of 6 steps); equal: the columns are categories numbered from 0, ticked at their centres.
  std::pair<double, double> x_range = {0, 0};
};
// A heat map: values[row][column] >= 0 as cells shaded from white (0) to dark (max), row 0 at
// the top; cells of 0 are left blank. A sparse map (a GPU holds few experts) is drawn as a rect
// per cell, each carrying its values as data-row/data-column/data-value; a dense one (more than
// kMaxVectorCells non-blank cells, e.g. every layer over a run) as one embedded PNG of a pixel per
// cell, so that the file stays the size of a paper's figure (a rect per cell made 2.3 MB).
inline constexpr size_t kMaxVectorCells = 512;
std::string HeatMap(const Chart& chart, const std::vector<std::vector<double>>& values,
                    const HeatMapScale& scale = {});
// An indexed-colour PNG of width × height pixels, pixels[row * width + column] indexing
// `palette` (RGB); index 0 is transparent. Stored (uncompressed) deflate blocks: no dependency,
// and a heat map's pixel per cell is small enough without compression.
std::string IndexedPng(int width, int height, const std::vector<unsigned char>& pixels,
                       const std::vector<std::array<unsigned char, 3>>& palette);
std::string Base64(const std::string& bytes);
// A chart as a file of its own: the same SVG with the report's chart style inside it, so that
// it renders alike in a paper's figure, a browser or an SVG editor.
std::string StandaloneSvg(const std::string& chart_svg);
// The CSS the charts' classes need, for the page that embeds them.
const char* ChartStyle();
// Groups along x (labels), one bar per series in each group; series[i].points[g].second is the
// value of group g.
std::string BarChart(const Chart& chart, const std::vector<std::string>& groups,
                     const std::vector<Series>& series);
// Groups along x (labels), one bar per group whose parts (series[i].points[g].second) stack
// from the bottom in series order.
std::string StackedBarChart(const Chart& chart, const std::vector<std::string>& groups,
                            const std::vector<Series>& series);
// Escapes text for HTML and SVG.
std::string Escape(const std::string& text);
// The palette colour of series i.
const char* Colour(size_t i);

}  // namespace eplb::svg
