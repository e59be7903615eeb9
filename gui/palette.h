// The viewer's colours, defined once: a stable colour per logical expert (the same expert has
// the same colour in every view and every run) and a heat scale for loads.
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

}  // namespace eplb::viewer
