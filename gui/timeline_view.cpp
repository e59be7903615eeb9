#include "timeline_view.h"

#include <algorithm>
#include <cmath>

#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QWheelEvent>

#include "palette.h"

namespace eplb::viewer {

TimeTicks RoundTimeTicks(double t0, double t1, int about) {
  TimeTicks ticks;
  const double raw = (t1 - t0) / std::max(1, about);
  if (!(raw > 0)) return {t0, 1, 1};
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  ticks.step = 10 * magnitude;
  for (double m : {1.0, 2.0, 5.0}) {
    if (raw <= m * magnitude) {
      ticks.step = m * magnitude;
      break;
    }
  }
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
constexpr int kAxisH = 18, kTimelineTitleH = 18;
}

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
  return QRect(kLabelW, kTimelineTitleH, std::max(10, width() - kLabelW - kMargin),
               std::max(10, height() - kTimelineTitleH - kAxisH));
}

double TimelineView::LaneHeight() const {
  return run_ ? static_cast<double>(Plot().height()) / (2.0 * run_->gpus()) : 1.0;
}

int TimelineView::LaneTop(int gpu, bool receive) const {
  return Plot().top() + static_cast<int>(std::floor((2 * gpu + (receive ? 1 : 0)) * LaneHeight()));
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
  const int lane = static_cast<int>((pos.y() - Plot().top()) / LaneHeight());
  const int gpu = lane / 2;
  const bool receive = lane % 2 == 1;
  // A pixel's worth of slack so that short transfers can be hovered when zoomed out.
  const double slack = (t1_ - t0_) / Plot().width() * 2;
  const double t = T(pos.x());
  int best = -1;
  for (int i : run_->TransfersIn(t - slack, t + slack)) {
    const TransferRow& tr = run_->transfers()[i];
    if ((receive ? tr.dst_rank : tr.src_rank) == gpu) {
      best = i;
      if (tr.start_s <= t && t <= tr.end_s) break;  // an exact hit beats a near one
    }
  }
  return best;
}

QPoint TimelineView::PointOf(int index, bool receive_lane) const {
  const TransferRow& t = run_->transfers()[index];
  const double mid = X(std::clamp((t.start_s + t.end_s) / 2, t0_, t1_));
  const int gpu = receive_lane ? t.dst_rank : t.src_rank;
  return QPoint(static_cast<int>(mid),
                LaneTop(gpu, receive_lane) + static_cast<int>(LaneHeight() / 2));
}

QRect TimelineView::FaultRect(int index) const {
  const FaultSpan& f = run_->faults()[static_cast<size_t>(index)];
  const int top = LaneTop(f.first_rank, false);
  const int bottom = LaneTop(f.last_rank, true) + static_cast<int>(std::ceil(LaneHeight()));
  const QRectF r(QPointF(X(f.start_s), top), QPointF(X(f.end_s), bottom));
  return r.toAlignedRect().intersected(Plot());
}

void TimelineView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), Qt::white);
  if (!run_) return;
  const QRect plot = Plot();
  const std::vector<int> visible = run_->TransfersIn(t0_, t1_);
  p.setPen(Qt::black);
  p.drawText(QRect(kMargin, 0, width(), kTimelineTitleH), Qt::AlignVCenter | Qt::AlignLeft,
             tr("Transfers per GPU (upper lane: send, lower: receive) — %1 of %2 shown · "
                "%3–%4 s · wheel: zoom, drag: pan, double click: all")
                 .arg(visible.size())
                 .arg(run_->transfers().size())
                 .arg(t0_, 0, 'f', 3)
                 .arg(t1_, 0, 'f', 3));
  const double lane_h = LaneHeight();
  // Lane backgrounds and labels.
  for (int g = 0; g < run_->gpus(); ++g) {
    if (g % 2 == 1) {
      p.fillRect(QRect(plot.left(), LaneTop(g, false), plot.width(),
                       static_cast<int>(std::ceil(2 * lane_h))),
                 QColor(246, 246, 246));
    }
    // A label per GPU when lanes are tall enough, else one per node.
    const int node_h = static_cast<int>(2 * lane_h * run_->gpus_per_node());
    p.setPen(Qt::darkGray);
    if (lane_h * 2 >= 10) {
      p.drawText(QRect(0, LaneTop(g, false), kLabelW - 4, static_cast<int>(2 * lane_h)),
                 Qt::AlignVCenter | Qt::AlignRight, tr("GPU %1").arg(g));
    } else if (g % run_->gpus_per_node() == 0 && node_h >= 10) {
      p.drawText(QRect(0, LaneTop(g, false), kLabelW - 4, node_h),
                 Qt::AlignVCenter | Qt::AlignRight, tr("node %1").arg(g / run_->gpus_per_node()));
    }
  }
  p.setClipRect(plot);
  for (size_t i = 0; i < run_->faults().size(); ++i) {
    const QRect r = FaultRect(static_cast<int>(i));
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
    const QRectF send(x0, LaneTop(t.src_rank, false), std::max(1.0, x1 - x0), bar_h);
    const QRectF recv(x0, LaneTop(t.dst_rank, true), std::max(1.0, x1 - x0), bar_h);
    const QColor c = i == hovered_ ? QColor(20, 20, 20) : LinkColor(t.nic);
    p.fillRect(send, c.lighter(130));
    p.fillRect(recv, c);
  }
  // Rearrangement starts and the cursor.
  p.setPen(QPen(QColor(200, 30, 30), 1, Qt::DashLine));
  for (const RearrangementRow& r : run_->rearrangements()) {
    const double x = X(r.start_s);
    p.drawLine(QPointF(x, plot.top()), QPointF(x, plot.bottom()));
  }
  p.setPen(QPen(Qt::black, 2));
  const double cx = X(cursor_);
  p.drawLine(QPointF(cx, plot.top()), QPointF(cx, plot.bottom()));
  p.setClipping(false);
  // Time axis: ticks at round times (1, 2 or 5 × a power of ten), labelled in s, ms or µs.
  p.setPen(Qt::darkGray);
  const TimeTicks ticks = RoundTimeTicks(t0_, t1_, std::max(2, plot.width() / 110));
  for (double t = ticks.first; t <= t1_ + ticks.step * 1e-9; t += ticks.step) {
    const int x = static_cast<int>(X(t));
    p.drawLine(x, plot.bottom(), x, plot.bottom() + 4);
    p.drawText(QRect(x - 60, plot.bottom() + 2, 120, kAxisH - 2), Qt::AlignCenter, ticks.Label(t));
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
    const int hit = TransferAt(event->position().toPoint());
    if (hit >= 0) emit TransferClicked(hit);
  }
  dragging_ = false;
}

void TimelineView::mouseDoubleClickEvent(QMouseEvent*) {
  ShowAll();
}

}  // namespace eplb::viewer
