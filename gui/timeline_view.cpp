#include "timeline_view.h"

#include <algorithm>
#include <cmath>

#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QWheelEvent>

#include "palette.h"

namespace eplb::viewer {

double RoundTickStep(double raw) {
  if (!(raw > 0)) return 1;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (raw <= m * magnitude * (1 + 1e-9)) return m * magnitude;
  }
  return 10 * magnitude;
}

TimeTicks RoundTimeTicks(double t0, double t1, int about) {
  TimeTicks ticks;
  const double raw = (t1 - t0) / std::max(1, about);
  if (!(raw > 0)) return {t0, 1, 1};
  ticks.step = RoundTickStep(raw);
  ticks.first = std::ceil(t0 / ticks.step - 1e-9) * ticks.step;
  const double top = std::max(std::abs(t0), std::abs(t1));
  ticks.scale = top >= 1 ? 1 : top >= 1e-3 ? 1e3 : 1e6;
  return ticks;
}

QString TimeTicks::Label(double t) const {
  const char* unit = scale == 1 ? "s" : scale == 1e3 ? "ms" : "µs";
  const double scaled_step = step * scale;
  // Decimals: none for a step of 1 or more in the unit, else enough to show the step.
  const int decimals =
      scaled_step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(scaled_step) - 1e-9));
  const double v = std::abs(t) < step * 1e-6 ? 0 : t * scale;
  return QString("%1 %2").arg(v, 0, 'f', decimals).arg(QString::fromUtf8(unit));
}

namespace {
constexpr int kAxisH = 18, kTimelineTitleH = 18, kBandH = 14;
// A lane pair per GPU needs this many pixels to be told apart; below, a pair per node.
constexpr double kMinLanePairH = 6;
}  // namespace

TimelineView::TimelineView(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setMinimumSize(320, 120);
}

void TimelineView::SetRun(std::shared_ptr<const RunData> run) {
  run_ = std::move(run);
  hovered_ = -1;
  ShowAll();
}

void TimelineView::ShowAll() {
  if (!run_) return;
  SetRange(0, std::max(1e-6, run_->end_s()));
}

void TimelineView::SetRange(double t0, double t1) {
  if (t1 <= t0) return;
  t0_ = t0;
  t1_ = t1;
  update();
  emit RangeChanged(t0_, t1_);
}

double TimelineView::XOfStep(int step) const {
  if (!run_) return Plot().left();
  return X(run_->step_end_s(std::clamp(step, 0, run_->steps() - 1)));
}

void TimelineView::FocusNode(int node) {
  if (!run_) return;
  focus_node_ = node < 0 || node >= run_->nodes() ? -1 : node;
  hovered_ = -1;
  update();
}

int TimelineView::gpus_per_lane() const {
  if (!run_ || focus_node_ >= 0) return 1;
  const double pair_h = static_cast<double>(Plot().height()) / run_->gpus();
  return pair_h >= kMinLanePairH ? 1 : run_->gpus_per_node();
}

int TimelineView::Lanes() const {
  if (!run_) return 1;
  if (focus_node_ >= 0) return run_->gpus_per_node();
  return run_->gpus() / gpus_per_lane();
}

int TimelineView::LaneOf(int gpu) const {
  if (focus_node_ >= 0) {
    const int first = focus_node_ * run_->gpus_per_node();
    return gpu >= first && gpu < first + run_->gpus_per_node() ? gpu - first : -1;
  }
  return gpu / gpus_per_lane();
}

QRect TimelineView::Band() const {
  return QRect(kLabelW, kTimelineTitleH, std::max(10, width() - kLabelW - kMargin), kBandH);
}

QRect TimelineView::RearrangementRect(int index) const {
  const RearrangementRow& r = run_->rearrangements()[static_cast<size_t>(index)];
  if (!r.moved) return {};  // nothing moved: no span to draw or hit (a static run's)
  const double x0 = X(r.start_s), x1 = X(r.end_s < 0 ? run_->end_s() : r.end_s);
  // Never thinner than 4 px, so a rearrangement of the whole run's scale can be seen and hit.
  const double mid = (x0 + x1) / 2, half = std::max(2.0, (x1 - x0) / 2);
  const QRect band = Band();
  return QRectF(QPointF(mid - half, band.top() + 1), QPointF(mid + half, band.bottom()))
      .toAlignedRect()
      .intersected(band);
}

int TimelineView::RearrangementAt(QPoint p) const {
  if (!run_ || !Band().contains(p)) return -1;
  for (size_t i = 0; i < run_->rearrangements().size(); ++i) {
    if (RearrangementRect(static_cast<int>(i)).adjusted(-1, 0, 1, 0).contains(p)) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

void TimelineView::ZoomToRearrangement(int index) {
  if (!run_ || index < 0 || index >= static_cast<int>(run_->rearrangements().size())) return;
  const RearrangementRow& r = run_->rearrangements()[static_cast<size_t>(index)];
  const double end = r.end_s < 0 ? run_->end_s() : r.end_s;
  // From its step's boundary (where the cursor goes) to its end, a tenth of it either side.
  const double start =
      std::min(r.start_s, run_->step_end_s(std::clamp(r.step, 0, run_->steps() - 1)));
  const double pad = std::max(1e-6, (end - start) * 0.1);
  SetRange(start - pad, end + pad);
}

void TimelineView::SetCursorTime(double t) {
  cursor_ = t;
  // Keep the cursor in view while playing.
  if (t < t0_ || t > t1_) {
    const double w = t1_ - t0_;
    SetRange(t - w * 0.1, t + w * 0.9);
  }
  update();
}

QRect TimelineView::Plot() const {
  const int top = kTimelineTitleH + kBandH + 2;
  return QRect(kLabelW, top, std::max(10, width() - kLabelW - kMargin),
               std::max(10, height() - top - kAxisH));
}

double TimelineView::LaneHeight() const {
  return run_ ? static_cast<double>(Plot().height()) / (2.0 * Lanes()) : 1.0;
}

int TimelineView::LaneTop(int lane, bool receive) const {
  return Plot().top() + static_cast<int>(std::floor((2 * lane + (receive ? 1 : 0)) * LaneHeight()));
}

double TimelineView::X(double t) const {
  const QRect p = Plot();
  return p.left() + (t - t0_) / (t1_ - t0_) * p.width();
}

double TimelineView::T(double x) const {
  const QRect p = Plot();
  return t0_ + (x - p.left()) / p.width() * (t1_ - t0_);
}

QString TimelineView::Describe(int index) const {
  const TransferRow& t = run_->transfers()[index];
  const double seconds = t.end_s - t.start_s;
  const double gbps = seconds > 0 ? static_cast<double>(t.bytes) / seconds / 1e9 : 0;
  return tr("expert %1, layer %2, %3 MB, GPU %4 → GPU %5 (%6), %7–%8 s, %9 GB/s")
      .arg(t.expert)
      .arg(t.layer)
      .arg(static_cast<double>(t.bytes) / 1e6, 0, 'f', 2)
      .arg(t.src_rank)
      .arg(t.dst_rank)
      .arg(t.nic ? "NIC" : "NVLink")
      .arg(t.start_s, 0, 'f', 6)
      .arg(t.end_s, 0, 'f', 6)
      .arg(gbps, 0, 'f', 2);
}

int TimelineView::TransferAt(QPoint pos) const {
  if (!run_ || !Plot().contains(pos)) return -1;
  const int half = static_cast<int>((pos.y() - Plot().top()) / LaneHeight());
  const int lane = half / 2;
  const bool receive = half % 2 == 1;
  // A pixel's worth of slack so that short transfers can be hovered when zoomed out.
  const double slack = (t1_ - t0_) / Plot().width() * 2;
  const double t = T(pos.x());
  int best = -1;
  for (int i : run_->TransfersIn(t - slack, t + slack)) {
    const TransferRow& tr = run_->transfers()[i];
    if (LaneOf(receive ? tr.dst_rank : tr.src_rank) == lane) {
      best = i;
      if (tr.start_s <= t && t <= tr.end_s) break;  // an exact hit beats a near one
    }
  }
  return best;
}

QPoint TimelineView::PointOf(int index, bool receive_lane) const {
  const TransferRow& t = run_->transfers()[index];
  const double mid = X(std::clamp((t.start_s + t.end_s) / 2, t0_, t1_));
  const int lane = LaneOf(receive_lane ? t.dst_rank : t.src_rank);
  if (lane < 0) return {-1, -1};
  return QPoint(static_cast<int>(mid),
                LaneTop(lane, receive_lane) + static_cast<int>(LaneHeight() / 2));
}

QRect TimelineView::FaultRect(int index) const {
  const FaultSpan& f = run_->faults()[static_cast<size_t>(index)];
  // The lanes of the first and last GPU hit that are shown.
  int first = -1, last = -1;
  for (int g = f.first_rank; g <= f.last_rank; ++g) {
    if (LaneOf(g) < 0) continue;
    if (first < 0) first = LaneOf(g);
    last = LaneOf(g);
  }
  if (first < 0) return {};
  const int top = LaneTop(first, false);
  const int bottom = LaneTop(last, true) + static_cast<int>(std::ceil(LaneHeight()));
  const QRectF r(QPointF(X(f.start_s), top), QPointF(X(f.end_s), bottom));
  return r.toAlignedRect().intersected(Plot());
}

void TimelineView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), Qt::white);
  if (!run_) return;
  const QRect plot = Plot(), band = Band();
  const std::vector<int> visible = run_->TransfersIn(t0_, t1_);
  const int per_lane = gpus_per_lane(), gpn = run_->gpus_per_node();
  const QString lanes = focus_node_ >= 0 ? tr("node %1's GPUs").arg(focus_node_)
                        : per_lane > 1   ? tr("per node")
                                         : tr("per GPU");
  p.setPen(Qt::black);
  const QString title =
      tr("Transfers %1 (send / receive lanes) · %2 of %3 shown · wheel: zoom, drag: pan, "
         "double click: all, click a red span: zoom to it")
          .arg(lanes)
          .arg(visible.size())
          .arg(run_->transfers().size());
  // Elided where narrow (compare mode); the hints are the tail.
  p.drawText(QRect(kMargin, 0, width() - 2 * kMargin, kTimelineTitleH),
             Qt::AlignVCenter | Qt::AlignLeft,
             p.fontMetrics().elidedText(title, Qt::ElideRight, width() - 2 * kMargin));
  p.setPen(Qt::darkGray);
  p.drawText(QRect(0, band.top(), kLabelW - 4, band.height()), Qt::AlignVCenter | Qt::AlignRight,
             tr("rearr."));
  const double lane_h = LaneHeight();
  // Lane backgrounds and labels: one per lane pair when tall enough, else one per node.
  const int lanes_per_node = per_lane > 1 ? 1 : gpn;
  for (int lane = 0; lane < Lanes(); ++lane) {
    if (lane % 2 == 1) {
      p.fillRect(QRect(plot.left(), LaneTop(lane, false), plot.width(),
                       static_cast<int>(std::ceil(2 * lane_h))),
                 QColor(246, 246, 246));
    }
    const int gpu = focus_node_ >= 0 ? focus_node_ * gpn + lane : lane * per_lane;
    const QString name = per_lane > 1 ? tr("node %1").arg(gpu / gpn) : tr("GPU %1").arg(gpu);
    p.setPen(Qt::darkGray);
    if (lane_h * 2 >= 10) {
      p.drawText(QRect(0, LaneTop(lane, false), kLabelW - 4, static_cast<int>(2 * lane_h)),
                 Qt::AlignVCenter | Qt::AlignRight, name);
    } else if (lane % (lanes_per_node * std::max(1, static_cast<int>(std::ceil(
                                                        10 / (2 * lane_h * lanes_per_node))))) ==
               0) {
      // Every n-th node's label, n as many as make room for a line of text.
      p.drawText(QRect(0, LaneTop(lane, false) + static_cast<int>(lane_h) - 7, kLabelW - 4, 14),
                 Qt::AlignVCenter | Qt::AlignRight, tr("node %1").arg(gpu / gpn));
    }
  }
  p.setClipRect(plot);
  for (size_t i = 0; i < run_->faults().size(); ++i) {
    const QRect r = FaultRect(static_cast<int>(i));
    if (r.isEmpty()) continue;
    p.fillRect(r, QColor(214, 39, 40, 40));
    const QString what = QString::fromStdString(run_->faults()[i].what);
    if (p.fontMetrics().horizontalAdvance(what) + 8 < r.width() &&
        p.fontMetrics().height() < r.height()) {
      p.setPen(QColor(160, 30, 30));
      p.drawText(r.adjusted(4, 0, 0, 0), Qt::AlignVCenter | Qt::AlignLeft, what);
    }
  }
  const int bar_h = std::max(1, static_cast<int>(lane_h) - (lane_h >= 4 ? 1 : 0));
  for (int i : visible) {
    const TransferRow& t = run_->transfers()[i];
    const double x0 = X(t.start_s), x1 = X(t.end_s);
    const QColor c = i == hovered_ ? QColor(20, 20, 20) : LinkColor(t.nic);
    if (const int lane = LaneOf(t.src_rank); lane >= 0) {
      p.fillRect(QRectF(x0, LaneTop(lane, false), std::max(1.0, x1 - x0), bar_h), c.lighter(130));
    }
    if (const int lane = LaneOf(t.dst_rank); lane >= 0) {
      p.fillRect(QRectF(x0, LaneTop(lane, true), std::max(1.0, x1 - x0), bar_h), c);
    }
  }
  // Rearrangements: a light shade over the lanes, a span on the band above.
  for (size_t i = 0; i < run_->rearrangements().size(); ++i) {
    const QRect r = RearrangementRect(static_cast<int>(i));
    p.fillRect(QRect(r.left(), plot.top(), r.width(), plot.height()), QColor(214, 39, 40, 22));
  }
  p.setClipRect(band);
  p.fillRect(band, QColor(252, 244, 244));
  for (size_t i = 0; i < run_->rearrangements().size(); ++i) {
    const QRect r = RearrangementRect(static_cast<int>(i));
    p.fillRect(r, QColor(200, 40, 40));
    const QString label =
        tr("rearrangement %1 · step %2").arg(i).arg(run_->rearrangements()[i].step);
    if (p.fontMetrics().horizontalAdvance(label) + 6 < r.width()) {
      p.setPen(Qt::white);
      p.drawText(r.adjusted(3, 0, 0, 0), Qt::AlignVCenter | Qt::AlignLeft, label);
    }
  }
  p.setClipRect(plot.united(band));
  p.setPen(QPen(Qt::black, 2));
  const double cx = X(cursor_);
  p.drawLine(QPointF(cx, band.top()), QPointF(cx, plot.bottom()));
  p.setClipping(false);
  // Time axis: ticks at round times (1, 2 or 5 × a power of ten), labelled in s, ms or µs.
  p.setPen(Qt::darkGray);
  p.drawText(QRect(0, plot.bottom() + 2, kLabelW - 4, kAxisH - 2),
             Qt::AlignRight | Qt::AlignVCenter, tr("time"));
  const TimeTicks ticks = RoundTimeTicks(t0_, t1_, std::max(2, plot.width() / 110));
  for (double t = ticks.first; t <= t1_ + ticks.step * 1e-9; t += ticks.step) {
    const int x = static_cast<int>(X(t));
    p.drawLine(x, plot.bottom(), x, plot.bottom() + 4);
    // Kept inside the plot's columns, clear of the axis title.
    const int centre = std::clamp(x, plot.left() + 30, plot.right() - 30);
    p.drawText(QRect(centre - 30, plot.bottom() + 2, 60, kAxisH - 2), Qt::AlignCenter,
               ticks.Label(t));
  }
  if (visible.empty() && run_->transfers().empty()) {
    p.drawText(plot, Qt::AlignCenter, tr("no transfers in this run"));
  }
}

void TimelineView::wheelEvent(QWheelEvent* event) {
  if (!run_) return;
  const double factor = std::pow(0.8, event->angleDelta().y() / 120.0);
  const double at = T(event->position().x());
  const double w = std::clamp((t1_ - t0_) * factor, 1e-7, std::max(1e-6, run_->end_s()) * 1.5);
  const double f = (at - t0_) / (t1_ - t0_);
  SetRange(at - f * w, at + (1 - f) * w);
  event->accept();
}

void TimelineView::mousePressEvent(QMouseEvent* event) {
  press_pos_ = event->position().toPoint();
  press_t0_ = t0_;
  dragging_ = false;
}

void TimelineView::mouseMoveEvent(QMouseEvent* event) {
  const QPoint pos = event->position().toPoint();
  if (event->buttons() & Qt::LeftButton) {
    if (std::abs(pos.x() - press_pos_.x()) > 3) dragging_ = true;
    if (dragging_) {
      const double w = t1_ - t0_;
      const double shift = (pos.x() - press_pos_.x()) * w / Plot().width();
      SetRange(press_t0_ - shift, press_t0_ - shift + w);
    }
    return;
  }
  if (const int r = RearrangementAt(pos); r >= 0) {
    const RearrangementRow& row = run_->rearrangements()[static_cast<size_t>(r)];
    const QString text =
        tr("rearrangement %1, after step %2: %3–%4 s · click: zoom to it")
            .arg(r)
            .arg(row.step)
            .arg(row.start_s, 0, 'f', 4)
            .arg(row.end_s < 0 ? tr("unfinished") : QString::number(row.end_s, 'f', 4));
    QToolTip::showText(event->globalPosition().toPoint(), text, this);
    emit TransferHovered(-1, text);
    return;
  }
  const int hit = TransferAt(pos);
  if (hit != hovered_) {
    hovered_ = hit;
    update();
  }
  if (hit >= 0) {
    const QString text = Describe(hit);
    QToolTip::showText(event->globalPosition().toPoint(), text, this);
    emit TransferHovered(hit, text);
  } else {
    QToolTip::hideText();
  }
}

void TimelineView::mouseReleaseEvent(QMouseEvent* event) {
  if (!dragging_) {
    if (const int r = RearrangementAt(event->position().toPoint()); r >= 0) {
      dragging_ = false;
      emit RearrangementClicked(r);
      ZoomToRearrangement(r);
      return;
    }
    const int hit = TransferAt(event->position().toPoint());
    if (hit >= 0) emit TransferClicked(hit);
  }
  dragging_ = false;
}

void TimelineView::mouseDoubleClickEvent(QMouseEvent*) {
  ShowAll();
}

}  // namespace eplb::viewer
