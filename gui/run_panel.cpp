#include "run_panel.h"

#include <algorithm>

#include <QSplitter>
#include <QVBoxLayout>

namespace eplb::viewer {

RunPanel::RunPanel(std::shared_ptr<const RunData> run, QWidget* parent)
    : QWidget(parent), run_(std::move(run)) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  title_ = new QLabel(this);
  double peak = run_->gpu_resident_bytes();
  for (const RearrangementRow& r : run_->rearrangements()) {
    for (int64_t staged : r.staging_peak_bytes)
      peak = std::max(peak, run_->gpu_resident_bytes() + static_cast<double>(staged));
  }
  title_->setText(tr("<b>%1</b> · policy <b>%2</b> — %3 · %4 layers × %5 experts on %6 GPUs (%7 "
                     "nodes) · %8 steps, %9 transfers · peak GPU memory %11 of %12 GB · "
                     "<span style='color:gray'>%10</span>")
                      .arg(QString::fromStdString(run_->name()))
                      .arg(QString::fromStdString(run_->policy()))
                      .arg(QString::fromStdString(run_->backend()))
                      .arg(run_->layers())
                      .arg(run_->experts())
                      .arg(run_->gpus())
                      .arg(run_->nodes())
                      .arg(run_->steps())
                      .arg(run_->transfers().size())
                      .arg(QString::fromStdString(run_->dir()))
                      .arg(peak / 1e9, 0, 'f', 1)
                      .arg(run_->gpu_capacity_bytes() / 1e9, 0, 'f', 1));
  title_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  title_->setToolTip(QString::fromStdString(run_->dir()));
  // The title wraps rather than widen the window past its --size (two panels side by side) or
  // be cut.
  title_->setMinimumWidth(1);
  title_->setWordWrap(true);
  QSizePolicy policy(QSizePolicy::Ignored, QSizePolicy::Maximum);
  policy.setHeightForWidth(true);
  title_->setSizePolicy(policy);
  layout->addWidget(title_);
  auto* split = new QSplitter(Qt::Vertical, this);
  placement_ = new PlacementView(split);
  timeline_ = new TimelineView(split);
  metrics_ = new MetricsStrip(split);
  split->addWidget(placement_);
  split->addWidget(timeline_);
  split->addWidget(metrics_);
  split->setStretchFactor(0, 5);
  split->setStretchFactor(1, 3);
  split->setStretchFactor(2, 2);
  layout->addWidget(split, 1);
  placement_->SetRun(run_);
  timeline_->SetRun(run_);
  metrics_->SetRun(run_);

  metrics_->SetRange(timeline_->t0(), timeline_->t1());
  connect(timeline_, &TimelineView::RangeChanged, metrics_, &MetricsStrip::SetRange);
  connect(placement_, &PlacementView::NodeFocused, timeline_, &TimelineView::FocusNode);
  connect(timeline_, &TimelineView::RearrangementClicked, this, [this](int index) {
    emit StepRequested(run_->rearrangements()[static_cast<size_t>(index)].step);
  });
  connect(metrics_, &MetricsStrip::StepClicked, this, &RunPanel::StepRequested);
  connect(timeline_, &TimelineView::TransferHovered, this,
          [this](int, const QString& text) { emit TransferHovered(text); });
  connect(timeline_, &TimelineView::TransferClicked, this, [this](int index) {
    const TransferRow& t = run_->transfers()[index];
    emit LayerRequested(t.layer);
    emit StepRequested(run_->StepAt(t.end_s));
  });
}

QString RunPanel::title() const {
  return title_->text();
}

void RunPanel::SetStep(int step) {
  placement_->SetStep(step);
  metrics_->SetStep(step);
  if (step >= 0 && step < run_->steps()) timeline_->SetCursorTime(run_->step_end_s(step));
}

void RunPanel::FrameSteps(int first, int last) {
  first = std::clamp(first, 0, run_->steps() - 1);
  last = std::clamp(last, first, run_->steps() - 1);
  timeline_->SetRange(run_->step_start_s()[static_cast<size_t>(first)], run_->step_end_s(last));
}

void RunPanel::SetLayer(int layer) {
  placement_->SetLayer(layer);
}

void RunPanel::SetColorMode(ColorMode mode) {
  placement_->SetColorMode(mode);
}

}  // namespace eplb::viewer
