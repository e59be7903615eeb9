#include "placement_view.h"

#include <algorithm>
#include <cmath>

#include <QFontMetrics>
#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>

#include "palette.h"

namespace eplb::viewer {
namespace {
constexpr int kTitleH = 22, kLegendH = 22, kBarsW = 130;
}

PlacementView::PlacementView(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setMinimumSize(320, 160);
}

void PlacementView::SetRun(std::shared_ptr<const RunData> run) {
  run_ = std::move(run);
  layer_ = std::clamp(layer_, 0, run_->layers() - 1);
  step_ = std::clamp(step_, -1, run_->steps() - 1);
  Recompute();
}

void PlacementView::SetLayer(int layer) {
  if (!run_ || layer == layer_) return;
  layer_ = std::clamp(layer, 0, run_->layers() - 1);
  Recompute();
}

void PlacementView::SetStep(int step) {
  if (!run_ || step == step_) return;
  step_ = std::clamp(step, -1, run_->steps() - 1);
  Recompute();
}

void PlacementView::SetColorMode(ColorMode mode) {
  mode_ = mode;
  update();
}

void PlacementView::SelectExpert(int expert) {
  if (expert == selected_) return;
  selected_ = expert;
  update();
  emit ExpertSelected(expert);
}

void PlacementView::ShareScale(double slot_max, double gpu_max) {
  if (slot_max == shared_slot_max_ && gpu_max == shared_gpu_max_) return;
  shared_slot_max_ = slot_max;
  shared_gpu_max_ = gpu_max;
  update();
}

void PlacementView::Recompute() {
  const auto& row = run_->PlacementAt(layer_, step_);
  row_.assign(row.begin(), row.end());
  replicas_.assign(static_cast<size_t>(run_->experts()), 0);
  for (int32_t e : row_) {
    if (e >= 0) ++replicas_[e];
  }
  load_ = run_->LoadAt(layer_, step_);
  slot_load_.assign(row_.size(), 0);
  gpu_load_.assign(static_cast<size_t>(run_->gpus()), 0);
  if (!load_.empty()) {
    for (size_t s = 0; s < row_.size(); ++s) {
      if (row_[s] < 0) continue;
      slot_load_[s] = static_cast<double>(load_[row_[s]]) / replicas_[row_[s]];
      gpu_load_[s / run_->slots_per_gpu()] += slot_load_[s];
    }
  }
  max_slot_load_ = *std::max_element(slot_load_.begin(), slot_load_.end());
  max_gpu_load_ = *std::max_element(gpu_load_.begin(), gpu_load_.end());
  double sum = 0;
  for (double g : gpu_load_) sum += g;
  mean_gpu_load_ = gpu_load_.empty() ? 0 : sum / static_cast<double>(gpu_load_.size());
  update();
}

PlacementView::Layout PlacementView::ComputeLayout() const {
  Layout l{};
  const int gpus = run_ ? run_->gpus() : 1, nodes = run_ ? run_->nodes() : 1;
  const int per_gpu = run_ ? run_->slots_per_gpu() : 1;
  l.top = kTitleH;
  l.left = kLabelW;
  l.node_gap = nodes > 1 ? 4 : 0;
  const int avail_h = height() - kTitleH - kLegendH - l.node_gap * (nodes - 1);
  l.row_h = std::max(2, avail_h / std::max(1, gpus));
  l.bars_w = kBarsW;
  const int avail_w = width() - kLabelW - kBarsW - 2 * kMargin;
  l.cell_w = std::max(2, avail_w / per_gpu);
  l.bars_left = l.left + l.cell_w * per_gpu + kMargin;
  return l;
}

int PlacementView::RowTop(const Layout& l, int gpu) const {
  return l.top + gpu * l.row_h + (gpu / run_->gpus_per_node()) * l.node_gap;
}

QRect PlacementView::CellRect(int gpu, int slot) const {
  if (!run_) return {};
  const Layout l = ComputeLayout();
  return QRect(l.left + slot * l.cell_w, RowTop(l, gpu), l.cell_w, l.row_h);
}

QColor PlacementView::CellColor(int gpu, int slot) const {
  const size_t s = static_cast<size_t>(gpu) * run_->slots_per_gpu() + slot;
  const int expert = row_[s];
  // A lost GPU is grey whatever the routing table still says (its layer may not be recovered).
  if (run_->IsLost(gpu, step_)) return LostGpuColor();
  if (expert < 0) return EmptySlotColor();
  if (mode_ == ColorMode::kLoad && !load_.empty()) {
    return HeatColor(SlotScale() > 0 ? slot_load_[s] / SlotScale() : 0);
  }
  return ExpertColor(expert);
}

std::pair<int, int> PlacementView::CellAt(QPoint p) const {
  if (!run_) return {-1, -1};
  const Layout l = ComputeLayout();
  for (int g = 0; g < run_->gpus(); ++g) {
    const int top = RowTop(l, g);
    if (p.y() < top || p.y() >= top + l.row_h) continue;
    const int slot = (p.x() - l.left) / l.cell_w;
    if (p.x() >= l.left && slot < run_->slots_per_gpu()) return {g, slot};
  }
  return {-1, -1};
}

// Above the per-GPU bars: an axis in tokens, ticks at round values from 0 to the scale.
void PlacementView::DrawBarAxis(QPainter& p, const Layout& l) const {
  if (GpuScale() <= 0) return;
  const int width = l.bars_w - 10, y = kTitleH - 3;
  const double raw = GpuScale() / 2;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10 * magnitude;
  for (double m : {1.0, 2.0, 5.0}) {
    if (raw <= m * magnitude) {
      step = m * magnitude;
      break;
    }
  }
  QFont tiny = font();
  tiny.setPointSizeF(std::max(6.0, font().pointSizeF() * 0.8));
  p.setFont(tiny);
  p.setPen(Qt::darkGray);
  p.drawLine(l.bars_left, y, l.bars_left + width, y);
  for (double v = 0; v <= GpuScale() * (1 + 1e-9); v += step) {
    const int x = l.bars_left + static_cast<int>(v / GpuScale() * width);
    p.drawLine(x, y, x, y + 3);
    const QString label = v >= 1e6   ? QString("%1M").arg(v / 1e6, 0, 'g', 3)
                          : v >= 1e3 ? QString("%1k").arg(v / 1e3, 0, 'g', 3)
                                     : QString::number(v, 'g', 3);
    p.drawText(QRect(x - 30, 0, 60, y - 1), Qt::AlignHCenter | Qt::AlignBottom, label);
  }
  p.setFont(font());
}

void PlacementView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), Qt::white);
  if (!run_) {
    p.drawText(rect(), Qt::AlignCenter, tr("Open a run folder (File → Open)"));
    return;
  }
  const Layout l = ComputeLayout();
  const int per_gpu = run_->slots_per_gpu();
  p.setPen(Qt::black);
  const QString when =
      step_ < 0 ? tr("initial placement")
                : tr("after step %1 (t = %2 s)").arg(step_).arg(run_->step_end_s(step_), 0, 'f', 3);
  p.drawText(QRect(kMargin, 0, l.bars_left - 2 * kMargin, kTitleH),
             Qt::AlignVCenter | Qt::AlignLeft,
             tr("Layer %1 of %2 — %3").arg(layer_).arg(run_->layers()).arg(when));
  DrawBarAxis(p, l);
  QFont small = font();
  small.setPointSizeF(std::max(6.0, std::min(font().pointSizeF(), l.row_h * 0.75)));
  p.setFont(small);
  const bool outline = l.cell_w >= 6 && l.row_h >= 6;
  const QFontMetrics small_metrics(small);
  for (int g = 0; g < run_->gpus(); ++g) {
    const int top = RowTop(l, g);
    // A label per GPU when rows are tall enough, else one per node.
    const int node_h = l.row_h * run_->gpus_per_node();
    p.setPen(Qt::darkGray);
    if (l.row_h >= 10) {
      p.drawText(QRect(0, top, kLabelW - 4, l.row_h), Qt::AlignVCenter | Qt::AlignRight,
                 run_->IsLost(g, step_) ? tr("GPU %1 lost").arg(g) : tr("GPU %1").arg(g));
    } else if (g % run_->gpus_per_node() == 0 && node_h >= 10) {
      p.drawText(QRect(0, top, kLabelW - 4, node_h), Qt::AlignVCenter | Qt::AlignRight,
                 tr("node %1").arg(g / run_->gpus_per_node()));
    }
    for (int s = 0; s < per_gpu; ++s) {
      const QRect cell(l.left + s * l.cell_w, top, l.cell_w, l.row_h);
      p.fillRect(cell, CellColor(g, s));
      if (outline) {
        p.setPen(QColor(255, 255, 255));
        p.drawRect(cell.adjusted(0, 0, -1, -1));
      }
      const int expert = row_[static_cast<size_t>(g) * per_gpu + s];
      // The expert's id on its cell where it fits, in black or white against the fill.
      if (expert >= 0 && l.row_h >= 12 &&
          small_metrics.horizontalAdvance(QString::number(expert)) + 12 <= l.cell_w) {
        const QColor fill = CellColor(g, s);
        p.setPen(fill.lightnessF() > 0.55 ? Qt::black : Qt::white);
        p.drawText(cell, Qt::AlignCenter, QString::number(expert));
      }
      if (selected_ >= 0 && expert == selected_) {
        p.setPen(QPen(Qt::black, 2));
        p.drawRect(cell.adjusted(1, 1, -2, -2));
      }
    }
    if (GpuScale() > 0) {
      const double f = gpu_load_[g] / GpuScale();
      const int w = static_cast<int>(f * (l.bars_w - 10));
      p.fillRect(QRect(l.bars_left, top + 1, w, std::max(1, l.row_h - 2)), HeatColor(f));
    }
  }
  // Node separators and the mean GPU load.
  p.setPen(QPen(QColor(120, 120, 120), 1, Qt::DotLine));
  for (int n = 1; n < run_->nodes(); ++n) {
    const int y = RowTop(l, n * run_->gpus_per_node()) - l.node_gap / 2 - 1;
    p.drawLine(0, y, l.bars_left + l.bars_w, y);
  }
  const int legend_top = RowTop(l, run_->gpus() - 1) + l.row_h + 4;
  if (GpuScale() > 0) {
    const int x = l.bars_left + static_cast<int>(mean_gpu_load_ / GpuScale() * (l.bars_w - 10));
    p.setPen(QPen(Qt::black, 1, Qt::DashLine));
    p.drawLine(x, l.top, x, legend_top - 4);
  }
  // Legend.
  p.setPen(Qt::black);
  p.setFont(font());
  QString legend;
  if (load_.empty()) {
    legend = tr("colour: expert · no load data in this run");
  } else if (mode_ == ColorMode::kLoad) {
    legend = tr("colour: tokens per slot, 0 → %1%2 · bars: tokens per GPU, dashed: mean")
                 .arg(SlotScale(), 0, 'f', 0)
                 .arg(shared_slot_max_ > max_slot_load_ ? tr(" (scale shared with the other run)")
                                                        : tr(" (max)"));
    for (int i = 0; i < 60; ++i) {
      p.fillRect(QRect(kMargin + i * 2, legend_top + 4, 2, 10), HeatColor(i / 59.0));
    }
  } else {
    legend = tr("colour: logical expert · bars: tokens per GPU (max %1), dashed: mean")
                 .arg(max_gpu_load_, 0, 'f', 0);
  }
  const int legend_x = mode_ == ColorMode::kLoad && !load_.empty() ? kMargin + 126 : kMargin;
  p.drawText(QRect(legend_x, legend_top, width() - legend_x, kLegendH - 4),
             Qt::AlignVCenter | Qt::AlignLeft, legend);
}

void PlacementView::mousePressEvent(QMouseEvent* event) {
  const auto [g, s] = CellAt(event->position().toPoint());
  if (g < 0) {
    SelectExpert(-1);
    return;
  }
  const int expert = row_[static_cast<size_t>(g) * run_->slots_per_gpu() + s];
  SelectExpert(expert == selected_ ? -1 : expert);
}

bool PlacementView::event(QEvent* event) {
  if (event->type() == QEvent::ToolTip && run_) {
    auto* help = static_cast<QHelpEvent*>(event);
    const auto [g, s] = CellAt(help->pos());
    if (g < 0) {
      QToolTip::hideText();
      event->ignore();
      return true;
    }
    const size_t slot = static_cast<size_t>(g) * run_->slots_per_gpu() + s;
    const int expert = row_[slot];
    QString text = expert < 0 ? tr("GPU %1, slot %2: empty").arg(g).arg(slot)
                              : tr("GPU %1 (node %2), slot %3: expert %4, %5 replica(s)")
                                    .arg(g)
                                    .arg(g / run_->gpus_per_node())
                                    .arg(slot)
                                    .arg(expert)
                                    .arg(replicas_[expert]);
    if (expert >= 0 && !load_.empty()) {
      text += tr("\n%1 tokens per replica; GPU total %2")
                  .arg(slot_load_[slot], 0, 'f', 0)
                  .arg(gpu_load_[g], 0, 'f', 0);
    }
    // What the GPU holds, and its fullest during the latest rearrangement (engine/gpu_memory.h).
    const std::vector<double> peaks = run_->PeakMemoryAt(step_);
    text += tr("\nGPU memory: %1 GB resident of %2 GB")
                .arg(run_->gpu_resident_bytes() / 1e9, 0, 'f', 1)
                .arg(run_->gpu_capacity_bytes() / 1e9, 0, 'f', 1);
    if (static_cast<size_t>(g) < peaks.size()) {
      text += tr("; %1 GB at its fullest in the latest rearrangement")
                  .arg(peaks[static_cast<size_t>(g)] / 1e9, 0, 'f', 2);
    }
    QToolTip::showText(help->globalPos(), text, this);
    return true;
  }
  return QWidget::event(event);
}

}  // namespace eplb::viewer
