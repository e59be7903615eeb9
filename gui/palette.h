// The viewer's colours, defined once: a stable colour per logical expert (the same expert has
// the same colour in every view and every run) and a heat scale for loads; and the geometry the
// views share, so that their rows line up under one another.
#pragma once

#include <QColor>

namespace eplb::viewer {

// Hues spread by the golden ratio, so neighbouring expert ids never look alike; three
// saturation/value bands separate experts whose hues come close.
QColor ExpertColor(int expert);
// The colour of an empty slot.
QColor EmptySlotColor();
// A lost GPU's slots: darker than an empty slot, so that it reads as gone rather than free.
QColor LostGpuColor();
// 0 → cool dark blue, 1 → hot yellow (a viridis-like ramp); clamped.
QColor HeatColor(double x);
QColor LinkColor(bool nic);

// Every view's left column of row labels, and the margin around its drawing, in pixels.
inline constexpr int kLabelW = 64, kMargin = 6;

}  // namespace eplb::viewer
