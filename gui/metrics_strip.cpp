#include "metrics_strip.h"

#include <algorithm>
#include <cmath>

#include <QMouseEvent>
#include <QPainter>

#include "palette.h"
#include "timeline_view.h"

namespace eplb::viewer {
namespace {
// Below the plots: a row of time ticks over their labels, then a row of step ticks over theirs;
// a tick ends where its label begins, so no tick runs through a label.
constexpr int kTickH = 4, kStripLabelH = 14, kStripAxisRowH = kTickH + kStripLabelH,
              kStripAxisH = 2 * kStripAxisRowH + 2;

// A tick label's rect, below the tick at x of the row starting at y, centred on x and moved
// inside the plot's columns at either end so that it never runs into the axis titles.
QRect LabelRect(int x, int y, const QRect& box) {
  constexpr int kHalf = 30;
  const int centre = std::clamp(x, box.left() + kHalf, box.right() - kHalf);
  return QRect(centre - kHalf, y + kTickH, 2 * kHalf, kStripLabelH);
}
}  // namespace

MetricsStrip::MetricsStrip(QWidget* parent) : QWidget(parent) {
  setMinimumSize(320, 120);
  for (auto& r : shared_) r = {1, 0};
}

void MetricsStrip::SetRun(std::shared_ptr<const RunData> run) {
  run_ = std::move(run);
  step_ = 0;
  for (int s = 0; s < kNumSeries; ++s) {
    double lo = 1e300, hi = -1e300;
    for (double v : Values(static_cast<Series>(s))) {
      lo = std::min(lo, v * Scale(static_cast<Series>(s)));
      hi = std::max(hi, v * Scale(static_cast<Series>(s)));
    }
    if (hi - lo < 1e-12) {
      hi += 0.5;
      lo -= 0.5;
    }
    own_[s] = {lo, hi};
  }
  t0_ = 0;
  t1_ = std::max(1e-6, run_->end_s());
  update();
}

void MetricsStrip::SetStep(int step) {
  step_ = step;
  update();
}

void MetricsStrip::SetRange(double t0, double t1) {
  if (!(t1 > t0)) return;
  t0_ = t0;
  t1_ = t1;
  update();
}

std::pair<double, double> MetricsStrip::RangeOf(Series s) const {
  if (shared_[s].first > shared_[s].second) return own_[s];
  return {std::min(own_[s].first, shared_[s].first), std::max(own_[s].second, shared_[s].second)};
}

void MetricsStrip::ShareRange(Series s, double lo, double hi) {
  shared_[s] = {lo, hi};
  update();
}

const std::vector<double>& MetricsStrip::Values(Series s) const {
  return s == kLatency ? run_->latency_s() : run_->balancedness();
}

// The same mapping as TimelineView's: plot from kLabelW to the width less kMargin.
double MetricsStrip::X(double t) const {
  const double w = std::max(10, width() - kLabelW - kMargin);
  return kLabelW + (t - t0_) / (t1_ - t0_) * w;
}

double MetricsStrip::T(double x) const {
  const double w = std::max(10, width() - kLabelW - kMargin);
  return t0_ + (x - kLabelW) / w * (t1_ - t0_);
}

double MetricsStrip::XOfStep(int step) const {
  if (!run_) return kLabelW;
  return X(run_->step_end_s(std::clamp(step, 0, run_->steps() - 1)));
}

int MetricsStrip::StepAtX(int x) const {
  // Half a pixel left: the cursor's column (a step's end) asks for that step, not the next.
  return run_ ? run_->StepAt(T(x - 0.5)) : 0;
}

QRect MetricsStrip::SeriesBox(Series s) const {
  const int w = std::max(10, width() - kLabelW - kMargin);
  const int h = std::max(10, (height() - kStripAxisH - 2 * kMargin) / 2);
  return QRect(kLabelW, kMargin + s * (h + kMargin / 2), w, h);
}

void MetricsStrip::DrawSeries(QPainter& p, const QRect& box, Series s, const QString& title,
                              const QString& unit) const {
  const std::vector<double>& values = Values(s);
  const double scale = Scale(s);
  const std::pair<double, double> range = RangeOf(s);
  const double lo = range.first, hi = range.second;  // variables: lambdas capture those (C++17)
  const auto y = [&](double v) {
    return box.bottom() - (v * scale - lo) / (hi - lo) * box.height();
  };
  p.fillRect(box, QColor(250, 250, 250));
  p.setPen(QColor(220, 220, 220));
  p.drawRect(box);
  p.save();
  p.setClipRect(box);
  // Rearrangements, as on the timeline.
  for (const RearrangementRow& r : run_->rearrangements()) {
    if (!r.moved) continue;
    const double x0 = X(r.start_s), x1 = X(r.end_s < 0 ? run_->end_s() : r.end_s);
    p.fillRect(QRectF(x0, box.top(), std::max(2.0, x1 - x0), box.height()),
               QColor(214, 39, 40, 28));
  }
  const int n = static_cast<int>(values.size());
  QPolygonF mean;
  for (int px = 0; px < box.width(); ++px) {
    const double ta = T(box.left() + px), tb = T(box.left() + px + 1);
    if (tb < 0 || ta > run_->end_s()) continue;
    const int first = run_->StepAt(ta), last = run_->StepAt(tb);
    double mn = 1e300, mx = -1e300, sum = 0;
    for (int i = first; i <= std::min(last, n - 1); ++i) {
      mn = std::min(mn, values[i]);
      mx = std::max(mx, values[i]);
      sum += values[i];
    }
    const int count = std::min(last, n - 1) - first + 1;
    if (count <= 0) continue;
    p.setPen(QColor(170, 200, 230));
    p.drawLine(QPointF(box.left() + px, y(mn)), QPointF(box.left() + px, y(mx)));
    mean << QPointF(box.left() + px + 0.5, y(sum / count));
  }
  p.setPen(QPen(QColor(30, 90, 160), 1.2));
  p.drawPolyline(mean);
  p.restore();
  p.setPen(Qt::darkGray);
  const QString u = unit.isEmpty() ? QString() : " " + unit;
  p.drawText(QRect(0, box.top(), kLabelW - 4, 14), Qt::AlignRight, QString::number(hi, 'g', 3) + u);
  p.drawText(QRect(0, box.bottom() - 14, kLabelW - 4, 14), Qt::AlignRight,
             QString::number(lo, 'g', 3) + u);
  p.setPen(Qt::black);
  const double now = values[std::clamp(step_, 0, n - 1)] * scale;
  p.drawText(
      box.adjusted(4, 1, -4, 0), Qt::AlignTop | Qt::AlignLeft,
      QStringLiteral("%1 at step %2: %3%4").arg(title).arg(step_).arg(now, 0, 'g', 5).arg(u));
}

// Ticks at round times (as the timeline's) over a row of round step numbers.
void MetricsStrip::DrawAxis(QPainter& p, const QRect& box) const {
  const int y0 = box.bottom() + 1;
  p.setPen(Qt::darkGray);
  const int steps_y = y0 + kStripAxisRowH + 1;
  p.drawText(QRect(0, y0 + kTickH, kLabelW - 4, kStripLabelH), Qt::AlignRight | Qt::AlignVCenter,
             tr("time"));
  p.drawText(QRect(0, steps_y + kTickH, kLabelW - 4, kStripLabelH),
             Qt::AlignRight | Qt::AlignVCenter, tr("step"));
  const TimeTicks ticks = RoundTimeTicks(t0_, t1_, std::max(2, box.width() / 110));
  for (double t = ticks.first; t <= t1_ + ticks.step * 1e-9; t += ticks.step) {
    const int x = static_cast<int>(X(t));
    p.drawLine(x, y0, x, y0 + kTickH - 1);
    p.drawText(LabelRect(x, y0, box), Qt::AlignCenter, ticks.Label(t));
  }
  const int s0 = run_->StepAt(std::max(0.0, t0_)), s1 = run_->StepAt(t1_);
  const double every = RoundTickStep(std::max(1.0, (s1 - s0) / std::max(2.0, box.width() / 110.0)));
  const int step_every = std::max(1, static_cast<int>(std::lround(every)));
  p.setPen(QColor(90, 90, 90));
  for (int s = (s0 + step_every - 1) / step_every * step_every; s <= s1; s += step_every) {
    const int x = static_cast<int>(XOfStep(s));
    if (x < box.left() || x > box.right()) continue;
    p.drawLine(x, steps_y, x, steps_y + kTickH - 1);
    p.drawText(LabelRect(x, steps_y, box), Qt::AlignCenter, QString::number(s));
  }
}

void MetricsStrip::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), Qt::white);
  if (!run_ || run_->steps() == 0) return;
  const QRect top = SeriesBox(kBalancedness), bottom = SeriesBox(kLatency);
  DrawSeries(p, top, kBalancedness, tr("balancedness (mean/max GPU load)"), "");
  DrawSeries(p, bottom, kLatency, tr("latency (the step and the stall before it)"), "ms");
  DrawAxis(p, bottom);
  const double x = XOfStep(step_);
  if (x >= top.left() && x <= top.right() + 1) {
    p.setPen(QPen(Qt::black, 2));
    p.drawLine(QPointF(x, top.top()), QPointF(x, bottom.bottom()));
  }
}

void MetricsStrip::mousePressEvent(QMouseEvent* event) {
  if (run_) emit StepClicked(StepAtX(event->position().toPoint().x()));
}

}  // namespace eplb::viewer
