// Transfers over time: for each GPU a send lane and a receive lane, each transfer a bar from
// its start to its end on its source's send lane and its destination's receive lane, coloured
// by link (NVLink, NIC); the scenario's faults as red shading over the lanes of the GPUs they
// hit, while they hold; the cursor as a black line. Where a lane per GPU would be under a few
// pixels (EP72 and beyond) the lanes are a node's GPUs together, as the placement view's rows
// are; FocusNode shows one node's GPUs. Rearrangements are spans on a band above the lanes
// (and shaded over them): hovering one names it, a click zooms to it.
// Wheel zooms about the mouse, dragging pans, a double click shows the whole run. Only the
// transfers overlapping the visible time range are drawn (RunData::TransfersIn).
#pragma once

#include <memory>

#include <QWidget>

#include "run_data.h"

namespace eplb::viewer {

// Axis ticks for a time range: a round step (1, 2 or 5 × 10^k seconds) and labels in the unit
// that suits the range ("250 ms", "1.5 s", "40 µs"), as many decimals as the step needs.
struct TimeTicks {
  double first = 0;  // the first tick at or after the range's start
  double step = 1;
  double scale = 1;  // seconds to the labels' unit: 1 (s), 1e3 (ms) or 1e6 (µs)
  QString Label(double t) const;
};
TimeTicks RoundTimeTicks(double t0, double t1, int about);
// The round value (1, 2 or 5 × 10^k) at or above `raw`.
double RoundTickStep(double raw);

class TimelineView : public QWidget {
  Q_OBJECT
 public:
  explicit TimelineView(QWidget* parent = nullptr);

  void SetRun(std::shared_ptr<const RunData> run);
  void SetCursorTime(double t);
  void SetRange(double t0, double t1);
  void ShowAll();
  double t0() const { return t0_; }
  double t1() const { return t1_; }
  // The x (widget pixels) of time t, and of the cursor at `step` (its end, as the strip's).
  double XOf(double t) const { return X(t); }
  double XOfStep(int step) const;
  // One node's GPUs, a lane pair each (−1: the whole cluster).
  void FocusNode(int node);
  int focused_node() const { return focus_node_; }
  // GPUs per lane pair: 1, or a node's when per-GPU lanes would be too thin to read.
  int gpus_per_lane() const;
  // Where rearrangement `index` is drawn on the band (at least a few pixels wide), the one at
  // `p` (−1: none), and zooming to it (with its step's boundary in view).
  QRect RearrangementRect(int index) const;
  int RearrangementAt(QPoint p) const;
  void ZoomToRearrangement(int index);

  // The transfer drawn under `p` (−1: none), and where transfer `index` is drawn on its
  // receive (or send) lane: the centre of its bar, clipped to the view.
  int TransferAt(QPoint p) const;
  QPoint PointOf(int index, bool receive_lane) const;
  // Where fault `index` (RunData::faults) is shaded, clipped to the plot.
  QRect FaultRect(int index) const;
  // "expert 5, layer 2, 1.0 MB, GPU 0 → GPU 3 (NVLink), 0.120000–0.121400 s, 0.75 GB/s"
  QString Describe(int index) const;
  QSize sizeHint() const override { return {700, 260}; }

 signals:
  void TransferHovered(int index, const QString& description);
  void TransferClicked(int index);
  void RangeChanged(double t0, double t1);
  void RearrangementClicked(int index);

 protected:
  void paintEvent(QPaintEvent* event) override;
  void wheelEvent(QWheelEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  void mouseDoubleClickEvent(QMouseEvent* event) override;

 private:
  QRect Plot() const;
  QRect Band() const;
  int Lanes() const;          // lane pairs shown
  int LaneOf(int gpu) const;  // the lane pair of a GPU, −1 when not shown
  double LaneHeight() const;
  int LaneTop(int lane, bool receive) const;
  double X(double t) const;
  double T(double x) const;

  std::shared_ptr<const RunData> run_;
  double t0_ = 0, t1_ = 1;
  double cursor_ = 0;
  bool dragging_ = false;
  QPoint press_pos_;
  double press_t0_ = 0;
  int hovered_ = -1;
  int focus_node_ = -1;
};

}  // namespace eplb::viewer
