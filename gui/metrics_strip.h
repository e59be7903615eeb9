// Balancedness and latency over the run, one small plot each, with the cursor, on the transfer
// timeline's time axis: the strip shows the time range the timeline shows (RunPanel keeps them
// together) and both put step s at the same x, its end (RunData::step_end_s), so the two
// cursors are one vertical line. The axis below is labelled in simulated time and in steps.
// Each pixel column shows the min–max band and mean of the steps it covers, so a 30,000-step
// run draws in constant time; rearrangements are shaded. A click moves the cursor there.
#pragma once

#include <array>
#include <memory>
#include <utility>
#include <vector>

#include <QWidget>

#include "run_data.h"

namespace eplb::viewer {

class MetricsStrip : public QWidget {
  Q_OBJECT
 public:
  // The plotted series, each with its own y range.
  enum Series { kBalancedness = 0, kLatency = 1, kNumSeries = 2 };

  explicit MetricsStrip(QWidget* parent = nullptr);
  void SetRun(std::shared_ptr<const RunData> run);
  void SetStep(int step);
  // The time range shown, in the run's seconds (the timeline's).
  void SetRange(double t0, double t1);
  // A series' y range over the whole run, and one shared with another run (compare mode: equal
  // heights then mean equal values on both sides); lo > hi: this run's own.
  std::pair<double, double> OwnRange(Series s) const { return own_[s]; }
  std::pair<double, double> RangeOf(Series s) const;
  void ShareRange(Series s, double lo, double hi);

  // The x (widget pixels) where the cursor at `step` is drawn, and the step a click at x asks.
  double XOfStep(int step) const;
  int StepAtX(int x) const;
  // Where series `s` is plotted.
  QRect SeriesBox(Series s) const;
  QSize sizeHint() const override { return {700, 190}; }

 signals:
  void StepClicked(int step);

 protected:
  void paintEvent(QPaintEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;

 private:
  void DrawSeries(QPainter& p, const QRect& box, Series s, const QString& title,
                  const QString& unit) const;
  void DrawAxis(QPainter& p, const QRect& box) const;
  double X(double t) const;
  double T(double x) const;
  const std::vector<double>& Values(Series s) const;
  double Scale(Series s) const { return s == kLatency ? 1e3 : 1.0; }

  std::shared_ptr<const RunData> run_;
  int step_ = 0;
  double t0_ = 0, t1_ = 1;
  std::array<std::pair<double, double>, kNumSeries> own_{}, shared_{};
};

}  // namespace eplb::viewer
