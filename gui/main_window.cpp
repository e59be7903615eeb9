#include "main_window.h"

#include <algorithm>
#include <utility>

#include <QAction>
#include <QComboBox>
#include <QFileDialog>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QSettings>
#include <QSlider>
#include <QSpinBox>
#include <QSplitter>
#include <QStatusBar>
#include <QStyle>
#include <QToolBar>

namespace eplb::viewer {
namespace {
constexpr int kFrameMs = 40;
constexpr int kMaxRecent = 8;
const int kSpeeds[] = {1, 4, 16, 64, 256, 1024};
}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  setWindowTitle(tr("eplb viewer"));
  split_ = new QSplitter(Qt::Horizontal, this);
  auto* hint = new QLabel(tr("Open a run folder written by <tt>eplb run</tt> or <tt>eplb "
                             "device-run</tt> (File → Open, Ctrl+O)."),
                          split_);
  hint->setAlignment(Qt::AlignCenter);
  split_->addWidget(hint);
  setCentralWidget(split_);
  timer_.setInterval(kFrameMs);
  connect(&timer_, &QTimer::timeout, this, &MainWindow::Tick);
  BuildActions();
  resize(1400, 900);
}

void MainWindow::BuildActions() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  QAction* open = file->addAction(tr("&Open run…"), this, [this] {
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Open a run folder"));
    if (!dir.isEmpty()) OpenRun(dir);
  });
  open->setShortcut(QKeySequence::Open);
  recent_menu_ = file->addMenu(tr("Open &recent"));
  RefreshRecentMenu();
  QAction* compare = file->addAction(tr("&Compare with run…"), this, [this] {
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Open a run to compare"));
    if (!dir.isEmpty()) OpenComparison(dir);
  });
  compare->setShortcut(QKeySequence(tr("Ctrl+Shift+O")));
  file->addAction(tr("Close comparison"), this, &MainWindow::CloseComparison);
  QAction* exp = file->addAction(tr("&Export PNG…"), this, [this] {
    const QString path =
        QFileDialog::getSaveFileName(this, tr("Export PNG"), "eplb-viewer.png", "PNG (*.png)");
    if (!path.isEmpty() && !Render().save(path, "PNG")) ShowError(tr("%1: cannot write").arg(path));
  });
  exp->setShortcut(QKeySequence(tr("Ctrl+E")));
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

  QToolBar* bar = addToolBar(tr("Playback"));
  bar->setMovable(false);
  const auto add = [&](const QString& text, const QString& tip, const QKeySequence& key,
                       auto slot) {
    QAction* a = bar->addAction(text, this, slot);
    a->setToolTip(tr("%1 (%2)").arg(tip, key.toString()));
    a->setShortcut(key);
    return a;
  };
  // Keys without a button: the toolbar fits a 1,400 px window (what they do has a control there).
  const auto key = [&](const QString& text, const QKeySequence& shortcut, auto slot) {
    auto* a = new QAction(text, this);
    a->setShortcut(shortcut);
    connect(a, &QAction::triggered, this, slot);
    addAction(a);
  };
  const auto icon = [this](QStyle::StandardPixmap p) { return style()->standardIcon(p); };
  add(tr("First"), tr("First step"), QKeySequence(Qt::Key_Home), [this] {
    SetStep(0);
  })->setIcon(icon(QStyle::SP_MediaSkipBackward));
  add(tr("Previous commit"), tr("Previous commit"), QKeySequence(Qt::SHIFT | Qt::Key_Left), [this] {
    JumpToCommit(-1);
  })->setIcon(icon(QStyle::SP_MediaSeekBackward));
  add(tr("Back"), tr("Step back"), QKeySequence(Qt::Key_Left), [this] {
    SetStep(step_ - 1);
  })->setIcon(icon(QStyle::SP_ArrowLeft));
  play_action_ = add(tr("Play"), tr("Play / pause"), QKeySequence(Qt::Key_Space),
                     [this] { SetPlaying(!playing()); });
  play_action_->setIcon(icon(QStyle::SP_MediaPlay));
  add(tr("Forward"), tr("Step forward"), QKeySequence(Qt::Key_Right), [this] {
    SetStep(step_ + 1);
  })->setIcon(icon(QStyle::SP_ArrowRight));
  add(tr("Next commit"), tr("Next commit"), QKeySequence(Qt::SHIFT | Qt::Key_Right), [this] {
    JumpToCommit(+1);
  })->setIcon(icon(QStyle::SP_MediaSeekForward));
  add(tr("Last"), tr("Last step"), QKeySequence(Qt::Key_End), [this] {
    SetStep(1 << 30);
  })->setIcon(icon(QStyle::SP_MediaSkipForward));

  speed_box_ = new QComboBox(bar);
  for (int s : kSpeeds) speed_box_->addItem(tr("%1 steps/frame").arg(s), s);
  speed_box_->setToolTip(tr("Playback speed (+ / −)"));
  connect(speed_box_, &QComboBox::currentIndexChanged, this,
          [this](int i) { speed_ = speed_box_->itemData(i).toInt(); });
  bar->addWidget(speed_box_);
  key(tr("Faster"), QKeySequence(Qt::Key_Plus), [this] {
    speed_box_->setCurrentIndex(std::min(speed_box_->count() - 1, speed_box_->currentIndex() + 1));
  });
  key(tr("Slower"), QKeySequence(Qt::Key_Minus),
      [this] { speed_box_->setCurrentIndex(std::max(0, speed_box_->currentIndex() - 1)); });

  slider_ = new QSlider(Qt::Horizontal, bar);
  slider_->setRange(0, 0);
  slider_->setMinimumWidth(120);
  slider_->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
  slider_->setToolTip(tr("The whole run: drag to any step"));
  connect(slider_, &QSlider::valueChanged, this, [this](int v) { SetStep(v); });
  bar->addWidget(slider_);
  step_label_ = new QLabel(bar);
  step_label_->setMinimumWidth(150);
  bar->addWidget(step_label_);

  bar->addSeparator();
  bar->addWidget(new QLabel(tr(" Layer "), bar));
  layer_box_ = new QSpinBox(bar);
  layer_box_->setRange(0, 0);
  layer_box_->setToolTip(tr("Layer shown (Page Up / Page Down)"));
  connect(layer_box_, &QSpinBox::valueChanged, this, [this](int v) { SetLayer(v); });
  bar->addWidget(layer_box_);
  key(tr("Next layer"), QKeySequence(Qt::Key_PageUp), [this] { SetLayer(layer_ + 1); });
  key(tr("Previous layer"), QKeySequence(Qt::Key_PageDown), [this] { SetLayer(layer_ - 1); });
  color_box_ = new QComboBox(bar);
  color_box_->addItem(tr("Colour: expert"));
  color_box_->addItem(tr("Colour: load"));
  color_box_->setToolTip(tr("Cell colours (C toggles)"));
  connect(color_box_, &QComboBox::currentIndexChanged, this,
          [this](int i) { SetColorMode(i == 0 ? ColorMode::kExpert : ColorMode::kLoad); });
  bar->addWidget(color_box_);
  key(tr("Toggle colour mode"), QKeySequence(Qt::Key_C),
      [this] { color_box_->setCurrentIndex(1 - color_box_->currentIndex()); });
  toolbar_ = bar;
  UpdateStepLabel();
}

void MainWindow::ShowError(const QString& message) {
  statusBar()->showMessage(message, 15000);
  emit ErrorShown(message);
  if (dialogs_) {
    auto* box =
        new QMessageBox(QMessageBox::Critical, tr("eplb viewer"), message, QMessageBox::Ok, this);
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open();
  }
}

RunPanel* MainWindow::MakePanel(std::shared_ptr<const RunData> run) {
  auto* panel = new RunPanel(std::move(run));
  connect(panel, &RunPanel::StepRequested, this, &MainWindow::SetStep);
  connect(panel, &RunPanel::LayerRequested, this, &MainWindow::SetLayer);
  connect(panel, &RunPanel::TransferHovered, this,
          [this](const QString& text) { statusBar()->showMessage(text); });
  // Selecting an expert in one run highlights it in the other.
  connect(panel->placement(), &PlacementView::ExpertSelected, this, [this](int expert) {
    for (RunPanel* p : {panel_, comparison_}) {
      if (p) p->placement()->SelectExpert(expert);
    }
  });
  panel->SetColorMode(mode_);
  return panel;
}

bool MainWindow::OpenRun(const QString& dir) {
  auto run = RunData::Load(dir.toStdString());
  if (!run.ok()) {
    ShowError(tr("Cannot open the run: %1").arg(QString::fromStdString(run.status().message())));
    return false;
  }
  CloseComparison();
  RunPanel* panel = MakePanel(*run);
  delete split_->widget(0);
  split_->insertWidget(0, panel);
  panel_ = panel;
  setWindowTitle(tr("eplb viewer — %1").arg(dir));
  slider_->setRange(0, (*run)->steps() - 1);
  layer_box_->setRange(0, (*run)->layers() - 1);
  RememberRecent(dir);
  step_ = -1;
  SetLayer(std::min(layer_, (*run)->layers() - 1));
  SetStep(0);
  return true;
}

bool MainWindow::OpenComparison(const QString& dir) {
  if (!panel_) {
    ShowError(tr("Open a run before a run to compare it with"));
    return false;
  }
  auto run = RunData::Load(dir.toStdString());
  if (!run.ok()) {
    ShowError(tr("Cannot open the run to compare: %1")
                  .arg(QString::fromStdString(run.status().message())));
    return false;
  }
  if ((*run)->layers() != panel_->run().layers()) {
    ShowError(tr("%1 has %2 layers, the open run %3: compare runs of one model")
                  .arg(dir)
                  .arg((*run)->layers())
                  .arg(panel_->run().layers()));
    return false;
  }
  CloseComparison();
  comparison_ = MakePanel(*run);
  split_->addWidget(comparison_);
  // One time axis for both: an x is one simulated time on either side, so a slower run's
  // steps are visibly later; zooming or panning either moves both.
  TimelineView* mine = panel_->timeline();
  TimelineView* other = comparison_->timeline();
  for (const auto& pair : {std::pair{mine, other}, std::pair{other, mine}}) {
    TimelineView* to = pair.second;  // a variable, not a binding: lambdas capture those (C++17)
    connect(pair.first, &TimelineView::RangeChanged, to, [to](double t0, double t1) {
      if (t0 != to->t0() || t1 != to->t1()) to->SetRange(t0, t1);
    });
  }
  mine->SetRange(0, std::max({1e-6, panel_->run().end_s(), (*run)->end_s()}));
  comparison_->SetLayer(layer_);
  comparison_->SetStep(std::min(step_, (*run)->steps() - 1));
  SyncScales();
  RememberRecent(dir);
  return true;
}

void MainWindow::CloseComparison() {
  delete comparison_;
  comparison_ = nullptr;
  SyncScales();
}

// Compared runs share one load scale, so a colour or bar means the same tokens in both, and one
// y range per metric, so a height means the same value in both strips.
void MainWindow::SyncScales() {
  if (!panel_) return;
  PlacementView* a = panel_->placement();
  for (int i = 0; i < MetricsStrip::kNumSeries; ++i) {
    const auto s = static_cast<MetricsStrip::Series>(i);
    MetricsStrip* mine = panel_->metrics();
    if (!comparison_) {
      mine->ShareRange(s, 1, 0);
      continue;
    }
    MetricsStrip* other = comparison_->metrics();
    const double lo = std::min(mine->OwnRange(s).first, other->OwnRange(s).first);
    const double hi = std::max(mine->OwnRange(s).second, other->OwnRange(s).second);
    mine->ShareRange(s, lo, hi);
    other->ShareRange(s, lo, hi);
  }
  if (!comparison_) {
    a->ShareScale(0, 0);
    return;
  }
  PlacementView* b = comparison_->placement();
  const double slot = std::max(a->own_max_slot_load(), b->own_max_slot_load());
  const double gpu = std::max(a->own_max_gpu_load(), b->own_max_gpu_load());
  a->ShareScale(slot, gpu);
  b->ShareScale(slot, gpu);
}

void MainWindow::SetStep(int step) {
  if (!panel_) return;
  step = std::clamp(step, 0, panel_->run().steps() - 1);
  if (step == step_) return;
  step_ = step;
  panel_->SetStep(step);
  if (comparison_) comparison_->SetStep(std::min(step, comparison_->run().steps() - 1));
  SyncScales();
  const QSignalBlocker block(slider_);
  slider_->setValue(step);
  UpdateStepLabel();
  emit StepChanged(step);
}

// The compared run's timeline follows (one time axis).
void MainWindow::FrameSteps(int first, int last) {
  if (panel_) panel_->FrameSteps(first, last);
}

bool MainWindow::FrameRearrangement(int index) {
  if (!panel_ || index < 0 || index >= static_cast<int>(panel_->run().rearrangements().size())) {
    return false;
  }
  SetStep(panel_->run().rearrangements()[static_cast<size_t>(index)].step);
  panel_->timeline()->ZoomToRearrangement(index);
  return true;
}

void MainWindow::FocusNode(int node) {
  for (RunPanel* p : {panel_, comparison_}) {
    if (p) p->placement()->FocusNode(node);
  }
}

void MainWindow::SetLayer(int layer) {
  if (!panel_) return;
  layer_ = std::clamp(layer, 0, panel_->run().layers() - 1);
  panel_->SetLayer(layer_);
  if (comparison_) comparison_->SetLayer(layer_);
  SyncScales();
  const QSignalBlocker block(layer_box_);
  layer_box_->setValue(layer_);
}

void MainWindow::SetColorMode(ColorMode mode) {
  mode_ = mode;
  for (RunPanel* p : {panel_, comparison_}) {
    if (p) p->SetColorMode(mode);
  }
  const QSignalBlocker block(color_box_);
  color_box_->setCurrentIndex(mode == ColorMode::kExpert ? 0 : 1);
}

void MainWindow::SetPlaying(bool playing) {
  if (playing && panel_) {
    if (step_ >= panel_->run().steps() - 1) SetStep(0);
    timer_.start();
  } else {
    timer_.stop();
  }
  play_action_->setIcon(
      style()->standardIcon(timer_.isActive() ? QStyle::SP_MediaPause : QStyle::SP_MediaPlay));
  play_action_->setText(timer_.isActive() ? tr("Pause") : tr("Play"));
}

void MainWindow::SetSpeed(int steps_per_frame) {
  int best = 0;
  for (int i = 0; i < speed_box_->count(); ++i) {
    if (speed_box_->itemData(i).toInt() <= steps_per_frame) best = i;
  }
  speed_box_->setCurrentIndex(best);
  speed_ = steps_per_frame;
}

void MainWindow::Tick() {
  if (!panel_) return SetPlaying(false);
  const int last = panel_->run().steps() - 1;
  SetStep(std::min(last, step_ + speed_));
  if (step_ >= last) SetPlaying(false);
}

void MainWindow::JumpToCommit(int direction) {
  if (!panel_) return;
  const auto& commits = panel_->run().commits();
  if (direction > 0) {
    for (const CommitRow& c : commits) {
      if (c.step > step_) return SetStep(c.step);
    }
  } else {
    for (auto it = commits.rbegin(); it != commits.rend(); ++it) {
      if (it->step < step_) return SetStep(it->step);
    }
  }
}

void MainWindow::UpdateStepLabel() {
  if (!panel_) {
    step_label_->setText(tr(" no run"));
    return;
  }
  const RunData& run = panel_->run();
  step_label_->setText(tr(" step %1 / %2 · %3 s")
                           .arg(step_)
                           .arg(run.steps() - 1)
                           .arg(run.step_end_s(step_), 0, 'f', 3));
}

void MainWindow::RememberRecent(const QString& dir) {
  QSettings settings("eplb", "eplb-viewer");
  QStringList recent = settings.value("recent").toStringList();
  recent.removeAll(dir);
  recent.prepend(dir);
  while (recent.size() > kMaxRecent) recent.removeLast();
  settings.setValue("recent", recent);
  RefreshRecentMenu();
}

void MainWindow::RefreshRecentMenu() {
  recent_menu_->clear();
  const QStringList recent = QSettings("eplb", "eplb-viewer").value("recent").toStringList();
  for (const QString& dir : recent) {
    recent_menu_->addAction(dir, this, [this, dir] { OpenRun(dir); });
  }
  recent_menu_->setEnabled(!recent.isEmpty());
}

QImage MainWindow::Render() {
  return grab().toImage();
}

}  // namespace eplb::viewer
