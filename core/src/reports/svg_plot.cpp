#include "reports/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <fmt/format.h>

namespace eplb::svg {
namespace {

constexpr int kLeft = 70, kTop = 30, kBottom = 45;

// "Nice" tick step covering [lo, hi] in about `n` steps.
double TickStep(double lo, double hi, int n) {
  const double raw = (hi - lo) / n;
  if (!(raw > 0)) return 1;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= m * mag) return m * mag;
  }
  return 10 * mag;
}

// The ticks from the first multiple of `step` at or above `lo` to `hi`, at most 64: past 2^53 a
// step can be smaller than the spacing of doubles, and x + step == x.
std::vector<double> Ticks(double lo, double hi, double step) {
  std::vector<double> ticks;
  const double first = std::ceil(lo / step);
  for (int i = 0; i < 64; ++i) {
    const double t = (first + i) * step;
    if (!(t <= hi + step * 1e-9) || (!ticks.empty() && t <= ticks.back())) break;
    ticks.push_back(t);
  }
  return ticks;
}

std::string Number(double v) {
  if (v == 0) return "0";
  const double a = std::abs(v);
  if (a >= 1e9) return fmt::format("{:.3g}G", v / 1e9);
  if (a >= 1e6) return fmt::format("{:.3g}M", v / 1e6);
  if (a >= 1e4) return fmt::format("{:.3g}k", v / 1e3);
  return fmt::format("{:.4g}", v);
}

// A tick's label: with as many decimals as the tick step has, so that ticks 0.002 apart on an axis
// near 14.13 read 14.126, 14.128, not 14.13 each; in the unit of the axis's largest tick `top`,
// so that one axis reads 5k, 10k, not 5000, 10k.
std::string TickLabel(double v, double step, double top) {
  top = std::abs(top);
  if (v != 0 && top >= 1e4 && step >= 1) {
    const auto [unit, suffix] = top >= 1e9   ? std::pair{1e9, "G"}
                                : top >= 1e6 ? std::pair{1e6, "M"}
                                             : std::pair{1e3, "k"};
    return fmt::format("{:g}{}", v / unit, suffix);
  }
  if (!(step > 0) || step >= 1) return Number(v);
  const int decimals = std::clamp(static_cast<int>(-std::floor(std::log10(step) + 1e-9)), 0, 12);
  return fmt::format("{:.{}f}", v, decimals);
}

struct Frame {
  double x0, x1, y0, y1;
  int w, h;
  int right;  // the legend's width, right of the plot
  double X(double x) const {
    return kLeft + (x1 > x0 ? (x - x0) / (x1 - x0) : 0.5) * (w - kLeft - right);
  }
  double Y(double y) const {
    return h - kBottom - (y1 > y0 ? (y - y0) / (y1 - y0) : 0.5) * (h - kTop - kBottom);
  }
};

std::string Axes(const Chart& c, const Frame& f, bool x_ticks) {
  std::string out = fmt::format(
      R"svg(<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{}" height="{}" viewBox="0 0 {} {}" role="img" aria-label="{}">)svg",
      c.width, c.height, c.width, c.height, Escape(c.title));
  out +=
      fmt::format(R"svg(<text x="{}" y="18" class="title">{}</text>)svg", kLeft, Escape(c.title));
  const double ys = TickStep(f.y0, f.y1, 5);
  for (const double y : Ticks(f.y0, f.y1, ys)) {
    out += fmt::format(R"svg(<line x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}" class="grid"/>)svg",
                       kLeft, c.width - c.legend_width, f.Y(y), f.Y(y));
    out += fmt::format(R"svg(<text x="{}" y="{:.1f}" class="tick" text-anchor="end">{}</text>)svg",
                       kLeft - 6, f.Y(y) + 4, TickLabel(y, ys, std::max(-f.y0, f.y1)));
  }
  // A y axis cut above 0 says so, where the eye reads its bottom: differences there look larger
  // than they are (a chart whose title says it already is left alone).
  if (f.y0 > 0 && c.y_label.find("not from 0") == std::string::npos) {
    out += fmt::format(
        R"svg(<text x="{}" y="{}" class="tick axis-cut">y axis from {:.4g}, not 0</text>)svg",
        kLeft + 4, c.height - kBottom - 4, f.y0);
  }
  if (x_ticks && !c.x_ticks.empty()) {
    double last = -1e9;
    for (const auto& [x, label] : c.x_ticks) {
      if (x < f.x0 || x > f.x1) continue;
      // About 7 px a character: a label starts past the previous one's end.
      const double half = 3.5 * static_cast<double>(label.size()) + 4;
      if (f.X(x) - half < last) continue;
      last = f.X(x) + half;
      out += fmt::format(
          R"svg(<line x1="{0:.1f}" x2="{0:.1f}" y1="{1}" y2="{2}" class="axis"/><text x="{0:.1f}" y="{3}" class="tick" text-anchor="middle">{4}</text>)svg",
          f.X(x), c.height - kBottom, c.height - kBottom + 4, c.height - kBottom + 16,
          Escape(label));
    }
  } else if (x_ticks) {
    const double xs = TickStep(f.x0, f.x1, 6);
    for (const double x : Ticks(f.x0, f.x1, xs)) {
      out += fmt::format(
          R"svg(<text x="{:.1f}" y="{}" class="tick" text-anchor="middle">{}</text>)svg", f.X(x),
          c.height - kBottom + 16, TickLabel(x, xs, std::max(-f.x0, f.x1)));
    }
  }
  out += fmt::format(R"svg(<line x1="{}" x2="{}" y1="{}" y2="{}" class="axis"/>)svg", kLeft,
                     c.width - c.legend_width, c.height - kBottom, c.height - kBottom);
  out += fmt::format(R"svg(<line x1="{}" x2="{}" y1="{}" y2="{}" class="axis"/>)svg", kLeft, kLeft,
                     kTop, c.height - kBottom);
  out += fmt::format(R"svg(<text x="{}" y="{}" class="label" text-anchor="middle">{}</text>)svg",
                     (kLeft + c.width - c.legend_width) / 2, c.height - 8, Escape(c.x_label));
  out += fmt::format(
      R"svg(<text x="14" y="{}" class="label" text-anchor="middle" transform="rotate(-90 14 {})">{}</text>)svg",
      (kTop + c.height - kBottom) / 2, (kTop + c.height - kBottom) / 2, Escape(c.y_label));
  return out;
}

std::string Legend(const Chart& c, const std::vector<Series>& series) {
  std::string out;
  for (size_t i = 0; i < series.size(); ++i) {
    const int y = kTop + 8 + static_cast<int>(i) * 18;
    out += fmt::format(R"svg(<rect x="{}" y="{}" width="12" height="12" fill="{}"/>)svg",
                       c.width - c.legend_width + 12, y - 10, Colour(i));
    out += fmt::format(R"svg(<text x="{}" y="{}" class="legend">{}</text>)svg",
                       c.width - c.legend_width + 30, y, Escape(series[i].name));
  }
  return out;
}

}  // namespace

const char* Colour(size_t i) {
  static const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                   "#9467bd", "#8c564b", "#e377c2", "#17becf"};
  return kPalette[i % 8];
}

std::string Escape(const std::string& text) {
  std::string out;
  for (char ch : text) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += ch;
    }
  }
  return out;
}

const char* ChartStyle() {
  return ".chart text{font:12px system-ui,sans-serif;fill:#333}.chart .title{font-weight:600}"
         ".grid{stroke:#eee}.axis{stroke:#888}.mark{stroke:#999;stroke-dasharray:4 3}"
         ".phase-mark{stroke:#b5367a;stroke-dasharray:1 3}.fault-span{fill:#d62728;opacity:.12}"
         ".warm-up{fill:#888;opacity:.12}.warm-up-label{fill:#666;font-size:11px}";
}

std::string StandaloneSvg(const std::string& chart_svg) {
  const size_t open_end = chart_svg.find('>');
  if (open_end == std::string::npos) return chart_svg;
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + chart_svg.substr(0, open_end + 1) +
         "<style>" + ChartStyle() + "</style>" + chart_svg.substr(open_end + 1) + "\n";
}

std::string LineChart(const Chart& given, const std::vector<Series>& series) {
  // Long series names (a sweep's facets) widen the legend, not squeeze the plot.
  Chart chart = given;
  size_t longest = 0;
  for (const Series& s : series) longest = std::max(longest, s.name.size());
  const int legend = std::clamp(36 + 7 * static_cast<int>(longest), chart.legend_width, 480);
  chart.width += legend - chart.legend_width;
  chart.legend_width = legend;
  Frame f{std::numeric_limits<double>::infinity(),
          -std::numeric_limits<double>::infinity(),
          std::numeric_limits<double>::infinity(),
          -std::numeric_limits<double>::infinity(),
          chart.width,
          chart.height,
          chart.legend_width};
  for (const Series& s : series) {
    for (const auto& [x, y] : s.points) {
      f.x0 = std::min(f.x0, x);
      f.x1 = std::max(f.x1, x);
      f.y0 = std::min(f.y0, y);
      f.y1 = std::max(f.y1, y);
    }
    for (const Band& b : s.band) {
      f.y0 = std::min(f.y0, b.low);
      f.y1 = std::max(f.y1, b.high);
    }
  }
  if (!std::isfinite(f.x0)) f.x0 = 0, f.x1 = 1, f.y0 = 0, f.y1 = 1;
  // Values all alike (every policy's peak memory the same): a range of ±1% around them, not
  // ticks 1e-12 apart that all read the same.
  if (f.y1 - f.y0 <= 1e-9 * std::max(1.0, std::abs(f.y1))) {
    const double half = std::max(1e-9, std::abs(f.y1) * 0.01);
    f.y0 -= half;
    f.y1 += half;
  }
  const double pad = (f.y1 - f.y0) * 0.05 + 1e-12;
  f.y0 -= pad;
  f.y1 += pad;
  if (f.x1 == f.x0) {  // one x value (a scatter of one point): centre it in a unit range
    f.x0 -= 0.5;
    f.x1 += 0.5;
  }
  std::string out = Axes(chart, f, true);
  if (const auto [start, end] = chart.warm_up; end > start) {
    const double a = std::max(start, f.x0), b = std::min(end, f.x1);
    if (b > a) {
      out += fmt::format(
          R"svg(<rect class="warm-up" data-start="{}" data-end="{}" x="{:.1f}" y="{}" width="{:.1f}" height="{}"/><text class="warm-up-label" x="{:.1f}" y="{}">warm-up</text>)svg",
          start, end, f.X(a), kTop, f.X(b) - f.X(a), chart.height - kBottom - kTop, f.X(a) + 4,
          kTop + 12);
    }
  }
  for (const auto& [start, end] : chart.spans) {
    const double a = std::max(start, f.x0), b = std::min(end, f.x1);
    if (b <= a) continue;
    out += fmt::format(
        R"svg(<rect class="fault-span" data-start="{}" data-end="{}" x="{:.1f}" y="{}" width="{:.1f}" height="{}"/>)svg",
        start, end, f.X(a), kTop, f.X(b) - f.X(a), chart.height - kBottom - kTop);
  }
  for (const auto& [marks, kind] :
       {std::pair{&chart.x_marks, "mark"}, std::pair{&chart.phase_marks, "phase-mark"}}) {
    for (double x : *marks) {
      if (x < f.x0 || x > f.x1) continue;
      out += fmt::format(
          R"svg(<line class="{}" data-x="{}" x1="{:.1f}" x2="{:.1f}" y1="{}" y2="{}"/>)svg", kind,
          x, f.X(x), f.X(x), kTop, chart.height - kBottom);
    }
  }
  for (size_t i = 0; i < series.size(); ++i) {
    const Series& s = series[i];
    if (!s.band.empty()) {
      std::string poly;
      for (const Band& b : s.band)
        poly += fmt::format("{}{:.1f},{:.1f}", poly.empty() ? "" : " ", f.X(b.x), f.Y(b.high));
      for (auto b = s.band.rbegin(); b != s.band.rend(); ++b)
        poly += fmt::format(" {:.1f},{:.1f}", f.X(b->x), f.Y(b->low));
      out += fmt::format(
          R"svg(<polygon class="band" data-series="{}" fill="{}" fill-opacity="0.15" stroke="none" points="{}"/>)svg",
          Escape(s.name), Colour(i), poly);
    }
    if (s.line) {
      std::string path;
      for (const auto& [x, y] : s.points)
        path += fmt::format("{}{:.1f},{:.1f}", path.empty() ? "" : " ", f.X(x), f.Y(y));
      // Each line after the first dashed its own way: where two policies' lines coincide, the
      // one drawn first shows through the later one's gaps instead of vanishing under it.
      static constexpr const char* kDashes[] = {"", "7 3", "2 2", "9 3 2 3"};
      const char* dash = kDashes[i % std::size(kDashes)];
      out += fmt::format(
          R"svg(<polyline class="series" data-series="{}" fill="none" stroke="{}" stroke-width="1.5"{} points="{}"/>)svg",
          Escape(s.name), Colour(i),
          *dash != '\0' ? fmt::format(R"svg( stroke-dasharray="{}")svg", dash) : std::string(),
          path);
    }
    if (s.markers || !s.line) {
      for (size_t p = 0; p < s.points.size(); ++p) {
        const auto [x, y] = s.points[p];
        const std::string label = p < s.point_labels.size() ? s.point_labels[p] : "";
        out += fmt::format(
            R"svg(<circle class="point" data-series="{}" data-x="{}" data-y="{}" cx="{:.1f}" cy="{:.1f}" r="4" fill="{}"><title>{}{}: {}, {}</title></circle>)svg",
            Escape(s.name), x, y, f.X(x), f.Y(y), Colour(i), Escape(s.name),
            label.empty() ? "" : " · " + Escape(label), Number(x), Number(y));
        if (!label.empty()) {
          // Beside the dot, on the side with room: past the middle, to its left.
          const bool left = f.X(x) > (kLeft + f.w - f.right) / 2.0;
          out += fmt::format(
              R"svg(<text class="tick point-label" x="{:.1f}" y="{:.1f}" text-anchor="{}">{}</text>)svg",
              f.X(x) + (left ? -6 : 6), f.Y(y) - 5, left ? "end" : "start", Escape(label));
        }
      }
    }
  }
  return out + Legend(chart, series) + "</svg>";
}

std::string Base64(const std::string& bytes) {
  static const char* kDigits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t v = static_cast<uint32_t>(static_cast<unsigned char>(bytes[i])) << 16;
    if (i + 1 < bytes.size())
      v |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8;
    if (i + 2 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 2]);
    out += kDigits[(v >> 18) & 63];
    out += kDigits[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kDigits[(v >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kDigits[v & 63] : '=';
  }
  return out;
}

std::string IndexedPng(int width, int height, const std::vector<unsigned char>& pixels,
                       const std::vector<std::array<unsigned char, 3>>& palette) {
  static const std::array<uint32_t, 256> kCrc = [] {
    std::array<uint32_t, 256> table{};
    for (uint32_t n = 0; n < 256; ++n) {
      uint32_t c = n;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
      table[n] = c;
    }
    return table;
  }();
  const auto be32 = [](std::string& out, uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((v >> shift) & 0xff);
  };
  std::string png = "\x89PNG\r\n\x1a\n";
  const auto chunk = [&](const char* type, const std::string& data) {
    be32(png, static_cast<uint32_t>(data.size()));
    const std::string body = type + data;
    uint32_t crc = 0xffffffffu;
    for (const char ch : body)
      crc = kCrc[(crc ^ static_cast<unsigned char>(ch)) & 0xff] ^ (crc >> 8);
    png += body;
    be32(png, crc ^ 0xffffffffu);
  };
  std::string header;
  be32(header, static_cast<uint32_t>(width));
  be32(header, static_cast<uint32_t>(height));
  header += std::string("\x08\x03\x00\x00\x00", 5);  // 8 bits, indexed colour, no interlace
  chunk("IHDR", header);
  std::string plte;
  for (const auto& rgb : palette) plte.append(reinterpret_cast<const char*>(rgb.data()), 3);
  chunk("PLTE", plte);
  chunk("tRNS", std::string(1, '\0'));  // index 0 transparent, the others opaque
  // The scanlines, each after its filter byte (0: none), in zlib's stored deflate blocks.
  std::string raw;
  raw.reserve(static_cast<size_t>(height) * (static_cast<size_t>(width) + 1));
  for (int r = 0; r < height; ++r) {
    raw += '\0';
    raw.append(reinterpret_cast<const char*>(pixels.data()) + static_cast<size_t>(r) * width,
               static_cast<size_t>(width));
  }
  std::string z = "\x78\x01";
  for (size_t at = 0; at == 0 || at < raw.size(); at += 65535) {
    const size_t n = std::min<size_t>(65535, raw.size() - at);
    z += static_cast<char>(at + n >= raw.size() ? 1 : 0);
    z += static_cast<char>(n & 0xff);
    z += static_cast<char>(n >> 8);
    z += static_cast<char>(~n & 0xff);
    z += static_cast<char>((~n >> 8) & 0xff);
    z.append(raw, at, n);
  }
  uint32_t a = 1, b = 0;
  for (const char ch : raw) {
    a = (a + static_cast<unsigned char>(ch)) % 65521;
    b = (b + a) % 65521;
  }
  be32(z, (b << 16) | a);
  chunk("IDAT", z);
  chunk("IEND", "");
  return png;
}

std::string HeatMap(const Chart& chart, const std::vector<std::vector<double>>& values,
                    const HeatMapScale& scale) {
  const size_t rows = values.size(), cols = rows ? values[0].size() : 0;
  double max = scale.max;
  size_t filled = 0;
  for (const auto& row : values) {
    for (double v : row) {
      if (scale.max <= 0) max = std::max(max, v);
      filled += v > 0;
    }
  }
  // Columns are categories (experts) ticked at their centres, or spans of an x range (steps).
  const bool ranged = scale.x_range.second > scale.x_range.first;
  const double x0 = ranged ? scale.x_range.first : -0.5;
  const double x1 = ranged ? scale.x_range.second : static_cast<double>(cols) - 0.5;
  Frame f{x0,
          x1,
          0,
          static_cast<double>(std::max<size_t>(1, rows)),
          chart.width,
          chart.height,
          chart.legend_width};
  const double left = kLeft, right = f.X(x1), top = kTop, bottom = f.Y(0);
  const double cw = (right - left) / static_cast<double>(std::max<size_t>(1, cols));
  const double rh = (bottom - top) / static_cast<double>(std::max<size_t>(1, rows));
  std::string out = fmt::format(
      R"svg(<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{}" height="{}" viewBox="0 0 {} {}" role="img" aria-label="{}">)svg",
      chart.width, chart.height, chart.width, chart.height, Escape(chart.title));
  out += fmt::format(R"svg(<text x="{}" y="18" class="title">{}</text>)svg", kLeft,
                     Escape(chart.title));
  // Darker is more: white to the palette's blue, through the lighter tints; 1..255 as a PNG's
  // palette index (0 is blank).
  const auto level = [&](double v) { return std::clamp(max > 0 ? v / max : 0.0, 0.0, 1.0); };
  const auto rgb = [](double t) {
    const auto mix = [&](int from, int to) {
      return static_cast<unsigned char>(from + (to - from) * t);
    };
    return std::array<unsigned char, 3>{mix(235, 8), mix(242, 48), mix(250, 107)};
  };
  const auto shade = [&](double v) {
    const auto c = rgb(level(v));
    return fmt::format("#{:02x}{:02x}{:02x}", c[0], c[1], c[2]);
  };
  const auto column_text = [&](size_t c) {
    if (!ranged) return fmt::format("{} {}", chart.x_label, c);
    const double w = (x1 - x0) / static_cast<double>(cols);
    return fmt::format("{} {}–{}", chart.x_label, Number(x0 + w * static_cast<double>(c)),
                       Number(x0 + w * static_cast<double>(c + 1)));
  };
  if (filled > kMaxVectorCells) {
    // Each cell k × m pixels, near its size on the page, so that a renderer which smooths a
    // scaled image (librsvg ignores image-rendering) blurs only the cells' borders;
    // at most ~160k pixels (~215 KB of base64).
    const auto fit = [](double px) { return static_cast<size_t>(std::clamp(px, 1.0, 32.0)); };
    size_t kx = fit(cw), ky = fit(rh);
    while (rows * cols * kx * ky > 160000 && (kx > 1 || ky > 1)) (kx >= ky ? kx : ky) -= 1;
    const size_t width = cols * kx, height = rows * ky;
    std::vector<unsigned char> pixels(width * height, 0);
    for (size_t r = 0; r < rows; ++r) {
      for (size_t c = 0; c < cols; ++c) {
        const double v = values[r][c];
        if (!(v > 0)) continue;
        const auto index = static_cast<unsigned char>(1 + std::lround(level(v) * 254));
        for (size_t y = r * ky; y < (r + 1) * ky; ++y)
          std::fill_n(pixels.begin() + static_cast<std::ptrdiff_t>(y * width + c * kx), kx, index);
      }
    }
    std::vector<std::array<unsigned char, 3>> palette(256, {255, 255, 255});
    for (int i = 1; i < 256; ++i) palette[static_cast<size_t>(i)] = rgb((i - 1) / 254.0);
    // optimizeSpeed / pixelated: browsers keep a cell a sharp rectangle when scaling.
    out += fmt::format(
        R"svg(<image class="cells" data-rows="{}" data-columns="{}" x="{}" y="{}" width="{:.1f}" height="{:.1f}" preserveAspectRatio="none" image-rendering="optimizeSpeed" style="image-rendering:pixelated" href="data:image/png;base64,{}"/>)svg",
        rows, cols, kLeft, kTop, right - left, bottom - top,
        Base64(IndexedPng(static_cast<int>(width), static_cast<int>(height), pixels, palette)));
  } else {
    for (size_t r = 0; r < rows; ++r) {
      for (size_t c = 0; c < cols; ++c) {
        const double v = values[r][c];
        if (v <= 0) continue;
        out += fmt::format(
            R"svg(<rect class="cell" data-row="{}" data-column="{}" data-value="{}" x="{:.2f}" y="{:.2f}" width="{:.2f}" height="{:.2f}" fill="{}"><title>{} {}, {}: {}</title></rect>)svg",
            r, c, v, left + cw * static_cast<double>(c), top + rh * static_cast<double>(r),
            std::max(cw, 0.5), std::max(rh, 0.5), shade(v), Escape(chart.y_label), r,
            Escape(column_text(c)), Number(v));
      }
    }
  }
  // Frame, ticks, axis labels and the colour bar.
  out += fmt::format(
      R"svg(<rect x="{}" y="{}" width="{:.1f}" height="{:.1f}" fill="none" class="axis" stroke="#888"/>)svg",
      kLeft, kTop, right - left, bottom - top);
  // x: nice values of the range, or every k-th category.
  const double xs = ranged ? TickStep(x0, x1, 8) : std::max(1.0, TickStep(0, x1, 8));
  for (const double x : Ticks(ranged ? x0 : 0, x1, xs)) {
    out += fmt::format(
        R"svg(<line x1="{0:.1f}" x2="{0:.1f}" y1="{1:.1f}" y2="{2:.1f}" class="axis"/><text x="{0:.1f}" y="{3}" class="tick" text-anchor="middle">{4}</text>)svg",
        f.X(x), bottom, bottom + 4, chart.height - kBottom + 16,
        TickLabel(x, xs, std::max(std::abs(x0), std::abs(x1))));
  }
  // y: a row's number at its centre, every k-th row when there are many.
  const double ys = std::max(1.0, TickStep(0, static_cast<double>(rows), 12));
  for (const double r : Ticks(0, static_cast<double>(rows) - 1, ys)) {
    const double y = top + rh * (r + 0.5);
    out += fmt::format(
        R"svg(<line x1="{0}" x2="{1}" y1="{2:.1f}" y2="{2:.1f}" class="axis"/><text x="{3}" y="{4:.1f}" class="tick" text-anchor="end">{5}</text>)svg",
        kLeft - 4, kLeft, y, kLeft - 6, y + 4, Number(r));
  }
  out += fmt::format(R"svg(<text x="{}" y="{}" class="label" text-anchor="middle">{}</text>)svg",
                     (kLeft + chart.width - chart.legend_width) / 2, chart.height - 8,
                     Escape(chart.x_label));
  out += fmt::format(
      R"svg(<text x="14" y="{0}" class="label" text-anchor="middle" transform="rotate(-90 14 {0})">{1} (0 at the top)</text>)svg",
      (kTop + chart.height - kBottom) / 2, Escape(chart.y_label));
  // The colour bar, as tall as the plot (at least 100 px), with its label beside it.
  const int bar_x = chart.width - chart.legend_width + 24;
  const double bar_h = bottom - top, step_h = bar_h / 40;
  for (int i = 0; i < 40; ++i) {
    out += fmt::format(R"svg(<rect x="{}" y="{:.2f}" width="14" height="{:.2f}" fill="{}"/>)svg",
                       bar_x, top + (39 - i) * step_h, step_h + 0.3, shade(max * (i + 0.5) / 40));
  }
  for (const double t : {0.0, 0.5, 1.0}) {
    out += fmt::format(R"svg(<text x="{}" y="{:.1f}" class="legend">{}</text>)svg", bar_x + 20,
                       top + bar_h * (1 - t) + 4, Number(max * t));
  }
  const double label_x = bar_x + 72, label_y = top + bar_h / 2;
  out += fmt::format(
      R"svg(<text class="scale-label" x="{0}" y="{1:.1f}" text-anchor="middle" transform="rotate(-90 {0} {1:.1f})">{2}</text>)svg",
      label_x, label_y, Escape(scale.label));
  return out + "</svg>";
}

namespace {

// A bar chart's frame: groups along x, values from 0 to a little above `top`; the axes drawn.
struct BarFrame {
  Frame frame;
  double group_w;
  std::string svg;
};

BarFrame BarAxes(const Chart& chart, size_t groups, double top) {
  const Frame f{0,
                static_cast<double>(std::max<size_t>(1, groups)),
                0,
                top > 0 ? top * 1.05 : 1,
                chart.width,
                chart.height,
                chart.legend_width};
  return {
      f,
      (chart.width - kLeft - chart.legend_width) / std::max<double>(1, static_cast<double>(groups)),
      Axes(chart, f, false)};
}

}  // namespace

std::string BarChart(const Chart& chart, const std::vector<std::string>& groups,
                     const std::vector<Series>& series) {
  double top = 0;
  for (const Series& s : series) {
    for (const auto& p : s.points) top = std::max(top, p.second);
  }
  const BarFrame axes = BarAxes(chart, groups.size(), top);
  const Frame& f = axes.frame;
  const double group_w = axes.group_w;
  std::string out = axes.svg;
  const double bar_w = group_w * 0.8 / std::max<double>(1, static_cast<double>(series.size()));
  for (size_t g = 0; g < groups.size(); ++g) {
    const double gx = kLeft + static_cast<double>(g) * group_w + group_w * 0.1;
    out +=
        fmt::format(R"svg(<text x="{:.1f}" y="{}" class="tick" text-anchor="middle">{}</text>)svg",
                    gx + group_w * 0.4, chart.height - kBottom + 16, Escape(groups[g]));
    for (size_t i = 0; i < series.size(); ++i) {
      const double v = g < series[i].points.size() ? series[i].points[g].second : 0;
      out += fmt::format(
          R"svg(<rect class="bar" data-series="{}" x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}"><title>{}: {}</title></rect>)svg",
          Escape(series[i].name), gx + static_cast<double>(i) * bar_w, f.Y(v), bar_w,
          f.Y(0) - f.Y(v), Colour(i), Escape(series[i].name), Number(v));
    }
  }
  return out + Legend(chart, series) + "</svg>";
}

std::string StackedBarChart(const Chart& chart, const std::vector<std::string>& groups,
                            const std::vector<Series>& series) {
  const auto part = [&](size_t i, size_t g) {
    return g < series[i].points.size() ? std::max(0.0, series[i].points[g].second) : 0.0;
  };
  double top = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    double sum = 0;
    for (size_t i = 0; i < series.size(); ++i) sum += part(i, g);
    top = std::max(top, sum);
  }
  const BarFrame axes = BarAxes(chart, groups.size(), top);
  const Frame& f = axes.frame;
  const double group_w = axes.group_w;
  std::string out = axes.svg;
  const double bar_w = group_w * 0.6;
  for (size_t g = 0; g < groups.size(); ++g) {
    const double gx = kLeft + static_cast<double>(g) * group_w + group_w * 0.2;
    out +=
        fmt::format(R"svg(<text x="{:.1f}" y="{}" class="tick" text-anchor="middle">{}</text>)svg",
                    gx + bar_w / 2, chart.height - kBottom + 16, Escape(groups[g]));
    double base = 0;
    for (size_t i = 0; i < series.size(); ++i) {
      const double v = part(i, g);
      out += fmt::format(
          R"svg(<rect class="bar" data-series="{}" x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}"><title>{}: {}</title></rect>)svg",
          Escape(series[i].name), gx, f.Y(base + v), bar_w, f.Y(base) - f.Y(base + v), Colour(i),
          Escape(series[i].name), Number(v));
      base += v;
    }
  }
  return out + Legend(chart, series) + "</svg>";
}

}  // namespace eplb::svg
