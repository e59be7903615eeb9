#include "palette.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace eplb::viewer {

QColor ExpertColor(int expert) {
  const double hue = std::fmod(0.13 + expert * 0.6180339887498949, 1.0);
  static constexpr std::array<std::pair<double, double>, 3> kBands = {
      {{0.55, 0.95}, {0.80, 0.80}, {0.40, 0.70}}};
  const auto [saturation, value] = kBands[static_cast<size_t>(expert) % kBands.size()];
  const QColor c = QColor::fromHsvF(static_cast<float>(hue), static_cast<float>(saturation),
                                    static_cast<float>(value));
  // As 8-bit RGB, so that it compares equal to the pixels it is painted as.
  return QColor(c.red(), c.green(), c.blue());
}

QColor LostGpuColor() {
  return QColor(120, 120, 120);
}

QColor EmptySlotColor() {
  return QColor(235, 235, 235);
}

QColor HeatColor(double x) {
  // Five stops of matplotlib's viridis, interpolated linearly.
  static constexpr std::array<std::array<int, 3>, 5> kStops = {
      {{68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}}};
  x = std::clamp(x, 0.0, 1.0) * (kStops.size() - 1);
  const auto i = std::min(static_cast<size_t>(x), kStops.size() - 2);
  const double f = x - static_cast<double>(i);
  const auto mix = [&](int c) {
    return static_cast<int>(std::lround(kStops[i][c] + f * (kStops[i + 1][c] - kStops[i][c])));
  };
  return QColor(mix(0), mix(1), mix(2));
}

QColor LinkColor(bool nic) {
  return nic ? QColor(230, 120, 30) : QColor(30, 130, 180);
}

}  // namespace eplb::viewer
