#include "metrics_strip.h"

#include <algorithm>

#include <QMouseEvent>
#include <QPainter>

#include "palette.h"

namespace eplb::viewer {

MetricsStrip::MetricsStrip(QWidget* parent) : QWidget(parent) {
  setMinimumSize(320, 90);
}

void MetricsStrip::SetRun(std::shared_ptr<const RunData> run) {
  run_ = std::move(run);
  step_ = 0;
  update();
}

void MetricsStrip::SetStep(int step) {
  step_ = step;
  update();
}

int MetricsStrip::StepAtX(int x) const {
  const int w = std::max(1, width() - kLabelW - kMargin);
  const double f = std::clamp(static_cast<double>(x - kLabelW) / w, 0.0, 1.0);
  return std::min(run_->steps() - 1, static_cast<int>(f * run_->steps()));
}

void MetricsStrip::DrawSeries(QPainter& p, const QRect& box, const std::vector<double>& values,
                              double scale, const QString& title, const QString& unit) const {
  double lo = 1e300, hi = -1e300;
  for (double v : values) {
    lo = std::min(lo, v * scale);
    hi = std::max(hi, v * scale);
  }
  if (hi - lo < 1e-12) {
    hi += 0.5;
    lo -= 0.5;
  }
  const auto y = [&](double v) {
    return box.bottom() - (v * scale - lo) / (hi - lo) * box.height();
  };
  p.fillRect(box, QColor(250, 250, 250));
  p.setPen(QColor(220, 220, 220));
  p.drawRect(box);
  const int n = static_cast<int>(values.size());
  QPolygonF mean;
  for (int px = 0; px < box.width(); ++px) {
    const int first = static_cast<int>(static_cast<int64_t>(px) * n / box.width());
    const int last =
        std::max(first + 1, static_cast<int>(static_cast<int64_t>(px + 1) * n / box.width()));
    double mn = 1e300, mx = -1e300, sum = 0;
    for (int i = first; i < std::min(last, n); ++i) {
      mn = std::min(mn, values[i]);
      mx = std::max(mx, values[i]);
      sum += values[i];
    }
    if (first >= n) break;
    const int count = std::min(last, n) - first;
    p.setPen(QColor(170, 200, 230));
    p.drawLine(QPointF(box.left() + px, y(mn)), QPointF(box.left() + px, y(mx)));
    mean << QPointF(box.left() + px, y(sum / count));
  }
  p.setPen(QPen(QColor(30, 90, 160), 1.2));
  p.drawPolyline(mean);
  p.setPen(Qt::darkGray);
  p.drawText(QRect(0, box.top(), kLabelW - 4, 14), Qt::AlignRight, QString::number(hi, 'g', 4));
  p.drawText(QRect(0, box.bottom() - 14, kLabelW - 4, 14), Qt::AlignRight,
             QString::number(lo, 'g', 4));
  p.setPen(Qt::black);
  const double now = values[std::clamp(step_, 0, n - 1)] * scale;
  p.drawText(box.adjusted(4, 1, -4, 0), Qt::AlignTop | Qt::AlignLeft,
             QStringLiteral("%1: %2 %3").arg(title).arg(now, 0, 'g', 5).arg(unit));
}

void MetricsStrip::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), Qt::white);
  if (!run_ || run_->steps() == 0) return;
  const int w = std::max(10, width() - kLabelW - kMargin);
  const int h = std::max(10, (height() - 3 * kMargin) / 2);
  const QRect top(kLabelW, kMargin, w, h), bottom(kLabelW, 2 * kMargin + h, w, h);
  DrawSeries(p, top, run_->balancedness(), 1.0, tr("balancedness (mean/max GPU load)"), "");
  DrawSeries(p, bottom, run_->step_s(), 1e3, tr("step time"), "ms");
  const double x = kLabelW + (step_ + 0.5) / run_->steps() * w;
  p.setPen(QPen(Qt::black, 2));
  p.drawLine(QPointF(x, top.top()), QPointF(x, bottom.bottom()));
}

void MetricsStrip::mousePressEvent(QMouseEvent* event) {
  if (run_) emit StepClicked(StepAtX(event->position().toPoint().x()));
}

}  // namespace eplb::viewer
