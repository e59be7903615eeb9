// The viewer's window: one run (or two side by side, cursors locked), playback controls over
// the steps, a layer chooser, colour modes, File → Open / Open Recent / Compare / Export PNG.
//
// Errors (a missing, corrupt or partial run folder) go to an error dialog naming the file and
// the problem, and to ErrorShown; the window keeps what it had.
#pragma once

#include <memory>

#include <QMainWindow>
#include <QTimer>

#include "run_panel.h"

class QComboBox;
class QLabel;
class QSlider;
class QSpinBox;
class QSplitter;
class QAction;
class QToolBar;
class QMenu;

namespace eplb::viewer {

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(QWidget* parent = nullptr);

  // Both return false after showing the error.
  bool OpenRun(const QString& dir);
  bool OpenComparison(const QString& dir);
  void CloseComparison();

  void SetStep(int step);
  // Frames steps [first, last] (their simulated times) on the timelines and strips.
  void FrameSteps(int first, int last);
  // Moves the cursor to rearrangement `index` (RunData::rearrangements) and zooms the timelines
  // to it; false if the run has no such rearrangement.
  bool FrameRearrangement(int index);
  // Shows node `node`'s GPUs a row and a lane pair each in every panel (−1: the whole cluster).
  void FocusNode(int node);
  void SetLayer(int layer);
  void SetColorMode(ColorMode mode);
  void SetPlaying(bool playing);
  // Steps advanced per frame (frames every 40 ms).
  void SetSpeed(int steps_per_frame);
  // Whether errors also open a dialog (off for headless screenshots).
  void SetDialogs(bool on) { dialogs_ = on; }

  int step() const { return step_; }
  int layer() const { return layer_; }
  bool playing() const { return timer_.isActive(); }
  RunPanel* panel() const { return panel_; }
  RunPanel* comparison() const { return comparison_; }
  QSlider* slider() const { return slider_; }
  QToolBar* toolbar() const { return toolbar_; }
  QImage Render();

 signals:
  void ErrorShown(const QString& message);
  void StepChanged(int step);

 private:
  void BuildActions();
  void ShowError(const QString& message);
  void SyncScales();
  void Tick();
  void JumpToCommit(int direction);
  void RememberRecent(const QString& dir);
  void RefreshRecentMenu();
  void UpdateStepLabel();
  RunPanel* MakePanel(std::shared_ptr<const RunData> run);

  QSplitter* split_;
  RunPanel* panel_ = nullptr;
  RunPanel* comparison_ = nullptr;
  QTimer timer_;
  int step_ = 0;
  int layer_ = 0;
  int speed_ = 1;
  ColorMode mode_ = ColorMode::kExpert;
  bool dialogs_ = true;
  QSlider* slider_;
  QSpinBox* layer_box_;
  QComboBox* speed_box_;
  QComboBox* color_box_;
  QAction* play_action_;
  QLabel* step_label_;
  QMenu* recent_menu_;
  QToolBar* toolbar_ = nullptr;
};

}  // namespace eplb::viewer
