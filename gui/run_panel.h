// One run on screen: its title, the placement view, the transfer timeline and the metrics
// strip, all following one cursor (a step) and one layer. The timeline and the strip share one
// time axis (zooming the timeline zooms the strip), and the placement's node focus is the
// timeline's.
#pragma once

#include <memory>

#include <QLabel>
#include <QWidget>

#include "metrics_strip.h"
#include "placement_view.h"
#include "run_data.h"
#include "timeline_view.h"

namespace eplb::viewer {

class RunPanel : public QWidget {
  Q_OBJECT
 public:
  explicit RunPanel(std::shared_ptr<const RunData> run, QWidget* parent = nullptr);

  const RunData& run() const { return *run_; }
  PlacementView* placement() const { return placement_; }
  TimelineView* timeline() const { return timeline_; }
  MetricsStrip* metrics() const { return metrics_; }
  QLabel* title_label() const { return title_; }
  QString title() const;

  void SetStep(int step);
  void SetLayer(int layer);
  void SetColorMode(ColorMode mode);
  // Frames steps [first, last] (their times) on the timeline and the strip.
  void FrameSteps(int first, int last);

 signals:
  // A click asked for another step (the metrics strip) or layer and time (a transfer).
  void StepRequested(int step);
  void LayerRequested(int layer);
  void TransferHovered(const QString& description);

 private:
  std::shared_ptr<const RunData> run_;
  QLabel* title_;
  PlacementView* placement_;
  TimelineView* timeline_;
  MetricsStrip* metrics_;
};

}  // namespace eplb::viewer
