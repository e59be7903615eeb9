// A small SVG chart writer for self-contained reports: line charts (one series per name, drawn
// in a fixed palette) and grouped bar charts, with axes, ticks and a legend. No dependency: the
// output is text that opens offline and diffs cleanly.
#pragma once

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
};

std::string LineChart(const Chart& chart, const std::vector<Series>& series);
// A heat map: values[row][column] >= 0 as cells shaded from white (0) to dark (max); cells of 0
// are left blank, so a sparse map (a GPU holds few experts) stays small. `max` > 0 fixes the
// top of the scale (maps drawn to be compared share one); otherwise the largest value.
std::string HeatMap(const Chart& chart, const std::vector<std::vector<double>>& values,
                    double max = 0);
// A chart as a file of its own: the same SVG with the report's chart style inside it, so that
// it renders alike in a paper's figure, a browser or an SVG editor.
std::string StandaloneSvg(const std::string& chart_svg);
// The CSS the charts' classes need, for the page that embeds them.
const char* ChartStyle();
// Groups along x (labels), one bar per series in each group; series[i].points[g].second is the
// value of group g.
std::string BarChart(const Chart& chart, const std::vector<std::string>& groups,
                     const std::vector<Series>& series);
// Escapes text for HTML and SVG.
std::string Escape(const std::string& text);
// The palette colour of series i.
const char* Colour(size_t i);

}  // namespace eplb::svg
