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
constexpr int kTitleH = 22, kLegendH = 34, kBarsW = 130;
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

void PlacementView::FocusNode(int node) {
  if (!run_) return;
  node = node < 0 || node >= run_->nodes() ? -1 : node;
  if (node == focus_node_) return;
  focus_node_ = node;
  update();
  emit NodeFocused(node);
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
  const int gpn = run_ ? run_->gpus_per_node() : 1;
  const int per_gpu = run_ ? run_->slots_per_gpu() : 1;
  l.top = kTitleH;
  l.left = kLabelW;
  l.bars_w = kBarsW;
  l.first_gpu = focus_node_ >= 0 ? focus_node_ * gpn : 0;
  l.shown = focus_node_ >= 0 ? gpn : gpus;
  const int shown_nodes = focus_node_ >= 0 ? 1 : nodes;
  const int avail_w = width() - kLabelW - kBarsW - 2 * kMargin;
  l.node_gap = shown_nodes > 1 ? 4 : 0;
  const int avail_h = height() - kTitleH - kLegendH;
  l.row_h = (avail_h - l.node_gap * (shown_nodes - 1)) / std::max(1, l.shown);
  if (l.row_h < kMinRowH && focus_node_ < 0 && gpn > 1) {
    // A row per node: its GPUs side by side, 3 px between them.
    l.by_node = true;
    l.gpu_gap = 3;
    l.node_gap = 2;
    l.row_h = std::max(3, (avail_h - l.node_gap * (nodes - 1)) / std::max(1, nodes));
    l.cell_w = std::max(2, (avail_w - l.gpu_gap * (gpn - 1)) / (gpn * per_gpu));
    l.bars_left = l.left + (l.cell_w * per_gpu + l.gpu_gap) * gpn - l.gpu_gap + kMargin;
    return l;
  }
  l.row_h = std::max(2, l.row_h);
  l.cell_w = std::max(2, avail_w / per_gpu);
  l.bars_left = l.left + l.cell_w * per_gpu + kMargin;
  return l;
}

int PlacementView::RowTop(const Layout& l, int gpu) const {
  const int gpn = run_->gpus_per_node();
  if (l.by_node) return l.top + (gpu / gpn) * (l.row_h + l.node_gap);
  const int i = gpu - l.first_gpu;
  return l.top + i * l.row_h + (i / gpn) * l.node_gap;
}

QRect PlacementView::CellRect(int gpu, int slot) const {
  if (!run_) return {};
  const Layout l = ComputeLayout();
  if (!Shown(l, gpu)) return {};
  const int x0 =
      l.by_node ? (gpu % run_->gpus_per_node()) * (l.cell_w * run_->slots_per_gpu() + l.gpu_gap)
                : 0;
  return QRect(l.left + x0 + slot * l.cell_w, RowTop(l, gpu), l.cell_w, l.row_h);
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
  for (int g = 0; g < run_->gpus(); ++g) {
    for (int s = 0; s < run_->slots_per_gpu(); ++s) {
      if (CellRect(g, s).contains(p)) return {g, s};
    }
  }
  return {-1, -1};
}

// The node whose rows span y (−1: none).
int PlacementView::NodeAtY(const Layout& l, int y) const {
  const int gpn = run_->gpus_per_node();
  for (int g = l.first_gpu; g < l.first_gpu + l.shown; g += gpn) {
    const int top = RowTop(l, g);
    const int bottom = l.by_node ? top + l.row_h : RowTop(l, g + gpn - 1) + l.row_h;
    if (y >= top && y < bottom + l.node_gap) return g / gpn;
  }
  return -1;
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
  const int per_gpu = run_->slots_per_gpu(), gpn = run_->gpus_per_node();
  p.setPen(Qt::black);
  const QString when =
      step_ < 0 ? tr("initial placement")
                : tr("after step %1 (t = %2 s)").arg(step_).arg(run_->step_end_s(step_), 0, 'f', 3);
  const QString rows = focus_node_ >= 0 ? tr(" · node %1 (click a label: all)").arg(focus_node_)
                       : l.by_node      ? tr(" · rows: nodes (click one's label)")
                                        : QString();
  p.drawText(QRect(kMargin, 0, l.bars_left - 2 * kMargin, kTitleH),
             Qt::AlignVCenter | Qt::AlignLeft,
             tr("Layer %1 of %2 — %3%4").arg(layer_).arg(run_->layers()).arg(when).arg(rows));
  DrawBarAxis(p, l);
  // Labels: a GPU's where rows are GPUs and tall enough, else every n-th node's, n as many as
  // leave room for a line of text.
  const int node_rows_h = l.by_node ? l.row_h + l.node_gap : l.row_h * gpn + l.node_gap;
  const int label_every =
      std::max(1, static_cast<int>(std::ceil((p.fontMetrics().height() + 2.0) / node_rows_h)));
  for (int n = l.first_gpu / gpn; n * gpn < l.first_gpu + l.shown; ++n) {
    const int top = RowTop(l, n * gpn);
    p.setPen(Qt::darkGray);
    if (!l.by_node && l.row_h >= 10) {
      for (int g = n * gpn; g < (n + 1) * gpn; ++g) {
        p.drawText(QRect(0, RowTop(l, g), kLabelW - 4, l.row_h), Qt::AlignVCenter | Qt::AlignRight,
                   run_->IsLost(g, step_) &&
                           p.fontMetrics().horizontalAdvance(tr("GPU %1 lost").arg(g)) < kLabelW - 4
                       ? tr("GPU %1 lost").arg(g)
                       : tr("GPU %1").arg(g));
      }
    } else if (n % label_every == 0) {
      p.drawText(QRect(0, top + (node_rows_h - l.node_gap) / 2 - 7, kLabelW - 4, 14),
                 Qt::AlignVCenter | Qt::AlignRight, tr("node %1").arg(n));
    }
  }
  QFont small = font();
  small.setPointSizeF(std::max(6.0, std::min(font().pointSizeF(), l.row_h * 0.75)));
  p.setFont(small);
  const bool outline = l.cell_w >= 6 && l.row_h >= 6;
  const QFontMetrics small_metrics(small);
  for (int g = l.first_gpu; g < l.first_gpu + l.shown; ++g) {
    const int top = RowTop(l, g);
    for (int s = 0; s < per_gpu; ++s) {
      const QRect cell = CellRect(g, s);
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
    // The bar: the GPU's load, or in a node row its hottest GPU's.
    if (GpuScale() > 0 && (!l.by_node || g % gpn == 0)) {
      double load = gpu_load_[g];
      if (l.by_node) {
        for (int h = g; h < g + gpn; ++h) load = std::max(load, gpu_load_[h]);
      }
      const double f = load / GpuScale();
      const int w = static_cast<int>(f * (l.bars_w - 10));
      p.fillRect(QRect(l.bars_left, top + 1, w, std::max(1, l.row_h - 2)), HeatColor(f));
    }
  }
  // Node separators and the mean GPU load.
  p.setPen(QPen(QColor(120, 120, 120), 1, Qt::DotLine));
  if (!l.by_node) {
    for (int g = l.first_gpu + gpn; g < l.first_gpu + l.shown; g += gpn) {
      const int y = RowTop(l, g) - l.node_gap / 2 - 1;
      p.drawLine(0, y, l.bars_left + l.bars_w, y);
    }
  }
  const int legend_top = RowTop(l, l.first_gpu + l.shown - 1) + l.row_h + 4;
  if (GpuScale() > 0) {
    const int x = l.bars_left + static_cast<int>(mean_gpu_load_ / GpuScale() * (l.bars_w - 10));
    p.setPen(QPen(Qt::black, 1, Qt::DashLine));
    p.drawLine(x, l.top, x, legend_top - 4);
  }
  // Legend: what each number is summed over.
  p.setPen(Qt::black);
  p.setFont(font());
  const QString bars = l.by_node ? tr("bars: the node's hottest GPU") : tr("bars: tokens per GPU");
  const QString window = tr("sums over the %1-step window the policy saw").arg(run_->window_size());
  QString legend;
  if (load_.empty()) {
    legend = tr("colour: expert · no load data in this run");
  } else if (mode_ == ColorMode::kLoad) {
    legend = tr("colour: tokens per slot, 0 → %1%2 · %3, dashed: mean · %4")
                 .arg(SlotScale(), 0, 'f', 0)
                 .arg(shared_slot_max_ > max_slot_load_ ? tr(" (scale shared with the other run)")
                                                        : tr(" (max)"))
                 .arg(bars, window);
    for (int i = 0; i < 60; ++i) {
      p.fillRect(QRect(kMargin + i * 2, legend_top + 4, 2, 10), HeatColor(i / 59.0));
    }
  } else {
    legend = tr("colour: logical expert · %1 (max %2 tokens), dashed: mean · %3")
                 .arg(bars)
                 .arg(max_gpu_load_, 0, 'f', 0)
                 .arg(window);
  }
  const int legend_x = mode_ == ColorMode::kLoad && !load_.empty() ? kMargin + 126 : kMargin;
  p.drawText(QRect(legend_x, legend_top, width() - legend_x - kMargin, kLegendH - 2),
             Qt::AlignTop | Qt::AlignLeft | Qt::TextWordWrap, legend);
}

void PlacementView::mousePressEvent(QMouseEvent* event) {
  const QPoint pos = event->position().toPoint();
  // The label column: a node's label shows its GPUs; in a node's GPUs, every node again.
  if (pos.x() < kLabelW && run_ && run_->nodes() > 1) {
    const Layout l = ComputeLayout();
    if (focus_node_ >= 0) {
      FocusNode(-1);
    } else if (l.by_node) {
      FocusNode(NodeAtY(l, pos.y()));
    }
    return;
  }
  const auto [g, s] = CellAt(pos);
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
    QToolTip::showText(help->globalPos(), CellTooltip(g, s), this);
    return true;
  }
  return QWidget::event(event);
}

QString PlacementView::CellTooltip(int g, int s) const {
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
    text += tr("\n%1 tokens to this replica (its expert's %2 ÷ %3 replicas); GPU total %4 —"
               " sums over the %5 steps the latest rearrangement's policy saw")
                .arg(slot_load_[slot], 0, 'f', 0)
                .arg(static_cast<double>(load_[static_cast<size_t>(expert)]), 0, 'f', 0)
                .arg(replicas_[expert])
                .arg(gpu_load_[g], 0, 'f', 0)
                .arg(run_->window_size());
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
  return text;
}

}  // namespace eplb::viewer
