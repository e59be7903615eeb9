// Balancedness and step time over the run, one small plot each, with the cursor. Each pixel
// column shows the min–max band and mean of the steps it covers, so a 30,000-step run draws
// in constant time. A click moves the cursor there.
#pragma once

#include <memory>
#include <vector>

#include <QWidget>

#include "run_data.h"

namespace eplb::viewer {

class MetricsStrip : public QWidget {
  Q_OBJECT
 public:
  explicit MetricsStrip(QWidget* parent = nullptr);
  void SetRun(std::shared_ptr<const RunData> run);
  void SetStep(int step);
  QSize sizeHint() const override { return {700, 150}; }

 signals:
  void StepClicked(int step);

 protected:
  void paintEvent(QPaintEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;

 private:
  void DrawSeries(QPainter& p, const QRect& box, const std::vector<double>& values, double scale,
                  const QString& title, const QString& unit) const;
  int StepAtX(int x) const;

  std::shared_ptr<const RunData> run_;
  int step_ = 0;
};

}  // namespace eplb::viewer
