// The viewer, driven headless (QT_QPA_PLATFORM=offscreen) on a tiny run folder that the test
// run writes first (`eplb run scenarios/tiny.yaml --set run.steps=240`, a ctest fixture), so
// the viewer is tested on what the writer writes today.
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QSignalSpy>
#include <QSlider>
#include <QTemporaryDir>
#include <QToolBar>
#include <QtTest>

#include "eplb/base/file_io.h"
#include "main_window.h"
#include "palette.h"
#include "timeline_view.h"

using eplb::viewer::ColorMode;
using eplb::viewer::ExpertColor;
using eplb::viewer::LostGpuColor;
using eplb::viewer::MainWindow;
using eplb::viewer::MetricsStrip;
using eplb::viewer::PlacementView;
using eplb::viewer::RunData;
using eplb::viewer::TimelineView;

class ViewerTest : public QObject {
  Q_OBJECT

 private:
  static QString RunDir() { return QStringLiteral(EPLB_VIEWER_TEST_RUN); }

  // A point of the cell's fill: left of the expert id drawn at its centre, inside the outlines.
  static QPoint FillPoint(const QRect& cell) { return {cell.left() + 3, cell.center().y()}; }

  // The colour drawn in (gpu, slot), read back from the rendered widget.
  static QColor Pixel(PlacementView* view, int gpu, int slot) {
    const QImage image = view->grab().toImage();
    return image.pixelColor(FillPoint(view->CellRect(gpu, slot)));
  }

  // Every cell of the layer shows the colour of the expert `row` puts there.
  static void ExpectRow(PlacementView* view, const RunData& run, const std::vector<int32_t>& row) {
    const QImage image = view->grab().toImage();
    for (int g = 0; g < run.gpus(); ++g) {
      for (int s = 0; s < run.slots_per_gpu(); ++s) {
        const int expert = row[static_cast<size_t>(g) * run.slots_per_gpu() + s];
        QCOMPARE(image.pixelColor(FillPoint(view->CellRect(g, s))),
                 expert < 0 ? eplb::viewer::EmptySlotColor() : ExpertColor(expert));
      }
    }
  }

  // Opens the test run in a shown window whose errors do not open dialogs.
  static bool OpenTestRun(MainWindow& w) {
    w.SetDialogs(false);
    if (!w.OpenRun(RunDir())) return false;
    w.show();
    return true;
  }

  // Copies the test run into `dir` for a corrupted variant.
  // Rewrites DIR's manifest for the files now there.
  static void Restamp(const QString& dir) {
    QVERIFY(eplb::WriteFolderManifest(dir.toStdString(), "run").ok());
  }

  // Runs the viewer offscreen; its exit code and standard error.
  static std::pair<int, QByteArray> RunViewer(const QStringList& args) {
    QProcess viewer;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("QT_QPA_PLATFORM", "offscreen");
    viewer.setProcessEnvironment(env);
    viewer.start(EPLB_VIEWER_BINARY, args);
    if (!viewer.waitForFinished(60000)) return {-1, "timed out"};
    return {viewer.exitCode(), viewer.readAllStandardError()};
  }

  // The first column, in `widget`'s parent panel's coordinates, whose pixel at row y is the
  // cursor's black (−1: none).
  static int CursorColumn(QWidget* widget, QWidget* panel, int y) {
    const QImage image = widget->grab().toImage();
    for (int x = 0; x < image.width(); ++x) {
      if (image.pixelColor(x, y) == QColor(Qt::black))
        return widget->mapTo(panel, QPoint(x, y)).x();
    }
    return -1;
  }

  static QString CopyRun(const QTemporaryDir& tmp, const QString& name) {
    QString dst = tmp.path() + "/" + name;
    QDir().mkpath(dst);
    for (const QString& f : QDir(RunDir()).entryList(QDir::Files)) {
      QFile::copy(RunDir() + "/" + f, dst + "/" + f);
      QFile(dst + "/" + f).setPermissions(QFile::ReadOwner | QFile::WriteOwner);
    }
    return dst;
  }

 private slots:
  void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

  void OpensARunAndShowsItsFirstPlacement() {
    MainWindow w;
    QVERIFY(OpenTestRun(w));
    const RunData& run = w.panel()->run();
    QCOMPARE(run.name(), std::string("tiny"));
    QCOMPARE(w.step(), 0);
    // No commit at step 0: the initial placement, cell by cell.
    QVERIFY(run.commits().front().step > 0);
    PlacementView* view = w.panel()->placement();
    const auto& initial = run.PlacementAt(0, -1);
    QCOMPARE(Pixel(view, 0, 0), ExpertColor(initial[0]));
    ExpectRow(view, run, initial);
  }

  // Each GPU's memory: what it holds, and its fullest during the latest rearrangement.
  void GpuMemoryFollowsTheRearrangements() {
    MainWindow w;
    QVERIFY(OpenTestRun(w));
    const RunData& run = w.panel()->run();
    QCOMPARE(run.gpu_capacity_bytes(), 141e9);   // tiny runs on the H200 preset
    QVERIFY(run.gpu_resident_bytes() > 14.1e9);  // the 10% reserve and tiny's weights
    QVERIFY(!run.rearrangements().empty());
    const int first = run.rearrangements().front().step;
    QVERIFY(run.PeakMemoryAt(first - 1).empty());
    const std::vector<double> peaks = run.PeakMemoryAt(first);
    QCOMPARE(static_cast<int>(peaks.size()), run.gpus());
    double most = 0;
    for (size_t g = 0; g < peaks.size(); ++g) {
      const int64_t staged = run.rearrangements().front().staging_peak_bytes[g];
      QCOMPARE(peaks[g], run.gpu_resident_bytes() + static_cast<double>(staged));
      most = std::max(most, peaks[g]);
    }
    QVERIFY(most > run.gpu_resident_bytes());  // some GPU staged a layer
    for (const auto& r : run.rearrangements()) {
      for (int64_t staged : r.staging_peak_bytes)
        most = std::max(most, run.gpu_resident_bytes() + static_cast<double>(staged));
    }
    QVERIFY(w.panel()->title().contains(
        QString("peak GPU memory %1 of 141.0 GB").arg(most / 1e9, 0, 'f', 1)));
  }

  void PlayAdvancesFrames() {
    MainWindow w;
    QVERIFY(OpenTestRun(w));
    w.activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(&w));
    QSignalSpy steps(&w, &MainWindow::StepChanged);
    w.SetSpeed(4);
    QTest::keyClick(&w, Qt::Key_Space);
    QVERIFY(w.playing());
    QTRY_VERIFY_WITH_TIMEOUT(w.step() >= 12, 5000);
    QVERIFY(steps.count() >= 3);
    QTest::keyClick(&w, Qt::Key_Space);
    QVERIFY(!w.playing());
    const int paused_at = w.step();
    QTest::qWait(200);
    QCOMPARE(w.step(), paused_at);
    QTest::keyClick(&w, Qt::Key_Right);
    QCOMPARE(w.step(), paused_at + 1);
    QTest::keyClick(&w, Qt::Key_Left);
    QCOMPARE(w.step(), paused_at);
  }

  void TheSliderShowsALaterCommitsPlacement() {
    MainWindow w;
    QVERIFY(OpenTestRun(w));
    const RunData& run = w.panel()->run();
    // The last commit of the run, on its layer.
    const eplb::viewer::CommitRow last = run.commits().back();
    w.SetLayer(last.layer);
    w.activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(&w));
    w.slider()->setValue(last.step);
    QCOMPARE(w.step(), last.step);
    const auto& committed = run.PlacementAt(last.layer, last.step);
    QVERIFY(committed != run.PlacementAt(last.layer, -1));
    ExpectRow(w.panel()->placement(), run, committed);
    // Shift+Left goes to the commit before it.
    QTest::keyClick(&w, Qt::Key_Left, Qt::ShiftModifier);
    QVERIFY(w.step() < last.step);
  }

  void FaultsAreShadedOverTheLanesOfTheGpusTheyHit() {
    MainWindow w;
    w.SetDialogs(false);
    QVERIFY(w.OpenRun(RunDir() + "-fault"));
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    const RunData& run = w.panel()->run();
    QCOMPARE(run.faults().size(), size_t{1});
    const auto& f = run.faults().front();
    QCOMPARE(f.first_rank, 1);
    QCOMPARE(f.last_rank, 1);
    QCOMPARE(f.start_s, run.step_start_s()[10]);
    QCOMPARE(f.end_s, run.step_end_s(19));
    auto* timeline = w.panel()->timeline();
    // Steps 5 to 25: the fault and healthy steps either side, before any transfer.
    timeline->SetRange(run.step_start_s()[5], run.step_end_s(25));
    const QRect r = timeline->FaultRect(0);
    QVERIFY(r.width() > 20 && r.height() > 2);
    const QImage image = timeline->grab().toImage();
    const QColor in = image.pixelColor(r.center());
    const QColor out = image.pixelColor(r.left() - 10, r.center().y());
    QVERIFY2(in.red() > in.green() + 15, qPrintable(in.name()));
    QCOMPARE(out.red(), out.green());  // the lane's own grey
    // GPU 0's lanes, above, are not shaded.
    const QColor other = image.pixelColor(r.center().x(), r.top() - 3);
    QCOMPARE(other.red(), other.green());
  }

  void LostGpusAreGreyedInTheGridFromTheirStep() {
    MainWindow w;
    w.SetDialogs(false);
    QVERIFY(w.OpenRun(RunDir() + "-lost"));
    const RunData& run = w.panel()->run();
    QVERIFY(run.IsLost(2, 30) && run.IsLost(3, 59));
    QVERIFY(!run.IsLost(2, 29) && !run.IsLost(0, 59));
    PlacementView* view = w.panel()->placement();
    w.SetStep(29);
    QVERIFY(view->CellColor(2, 0) != LostGpuColor());
    w.SetStep(30);
    for (int slot = 0; slot < run.slots_per_gpu(); ++slot) {
      QCOMPARE(view->CellColor(2, slot), LostGpuColor());
      QCOMPARE(view->CellColor(3, slot), LostGpuColor());
      QVERIFY(view->CellColor(0, slot) != LostGpuColor());
    }
    // Drawn: the cell's pixels are the lost grey.
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    const QImage image = view->grab().toImage();
    const QRect cell = view->CellRect(3, 0);
    QCOMPARE(image.pixelColor(cell.center()), LostGpuColor());
    // The timeline shades the lost GPUs' lanes from the loss on.
    QCOMPARE(run.faults().size(), size_t{1});
    QCOMPARE(run.faults().front().first_rank, 2);
    QCOMPARE(run.faults().front().last_rank, 3);
  }

  void HoveringATransferReportsItsFields() {
    MainWindow w;
    QVERIFY(OpenTestRun(w));
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    const RunData& run = w.panel()->run();
    QVERIFY(!run.transfers().empty());
    auto* timeline = w.panel()->timeline();
    // Zoom to the first transfer so that it is wide enough to hover.
    const auto& t = run.transfers().front();
    timeline->SetRange(t.start_s - (t.end_s - t.start_s), t.end_s + (t.end_s - t.start_s));
    QSignalSpy hovered(timeline, &eplb::viewer::TimelineView::TransferHovered);
    const QPoint at = timeline->PointOf(0, true);
    QCOMPARE(timeline->TransferAt(at), 0);
    QTest::mouseMove(timeline, at);
    QTRY_VERIFY(hovered.count() >= 1);
    const QString text = hovered.last().at(1).toString();
    QVERIFY2(text.contains(QString("expert %1, layer %2").arg(t.expert).arg(t.layer)),
             qPrintable(text));
    QVERIFY2(text.contains(QString("GPU %1 → GPU %2").arg(t.src_rank).arg(t.dst_rank)),
             qPrintable(text));
    QVERIFY(text.contains(t.nic ? "NIC" : "NVLink"));
    QVERIFY(text.contains(QString::number(t.start_s, 'f', 6)));
    QVERIFY(text.contains(QString::number(t.end_s, 'f', 6)));
    QVERIFY(text.contains(" MB") && text.contains(" GB/s"));
    // A click moves the placement to the transfer's layer and time.
    QTest::mouseClick(timeline, Qt::LeftButton, {}, at);
    QCOMPARE(w.layer(), t.layer);
    QCOMPARE(w.step(), run.StepAt(t.end_s));
  }

  void SelectingAnExpertOutlinesItsReplicas() {
    MainWindow w;
    QVERIFY(OpenTestRun(w));
    PlacementView* view = w.panel()->placement();
    const QRect cell = view->CellRect(0, 0);
    const int expert = w.panel()->run().PlacementAt(0, 0)[0];
    QTest::mouseClick(view, Qt::LeftButton, {}, cell.center());
    QCOMPARE(view->selected_expert(), expert);
    // The outline is drawn just inside the cell.
    const QImage image = view->grab().toImage();
    QCOMPARE(image.pixelColor(cell.left() + 1, cell.center().y()), QColor(Qt::black));
  }

  void LoadColoursUseTheRearrangementsLoad() {
    MainWindow w;
    QVERIFY(OpenTestRun(w));
    const RunData& run = w.panel()->run();
    QVERIFY(!run.LoadAt(0, 0).empty());
    w.SetColorMode(ColorMode::kLoad);
    PlacementView* view = w.panel()->placement();
    // The hottest slot is drawn at the top of the heat scale.
    const auto& row = run.PlacementAt(0, 0);
    const auto load = run.LoadAt(0, 0);
    std::vector<int> replicas(static_cast<size_t>(run.experts()), 0);
    for (int e : row) replicas[e]++;
    const auto per_replica = [&](size_t s) {
      return static_cast<double>(load[row[s]]) / replicas[row[s]];
    };
    int hottest = 0;
    for (size_t s = 0; s < row.size(); ++s) {
      if (per_replica(s) > per_replica(static_cast<size_t>(hottest))) hottest = static_cast<int>(s);
    }
    QCOMPARE(Pixel(view, hottest / run.slots_per_gpu(), hottest % run.slots_per_gpu()),
             eplb::viewer::HeatColor(1.0));
  }

  void CompareLocksTheCursors() {
    MainWindow w;
    w.SetDialogs(false);
    QVERIFY(w.OpenRun(RunDir()));
    QVERIFY(w.OpenComparison(RunDir()));
    w.show();
    QVERIFY(w.comparison() != nullptr);
    const int later = w.panel()->run().commits().back().step;
    w.SetStep(later);
    w.SetLayer(w.panel()->run().commits().back().layer);
    const RunData& run = w.comparison()->run();
    ExpectRow(w.comparison()->placement(), run,
              run.PlacementAt(w.panel()->run().commits().back().layer, later));
  }

  // Compared runs share one load scale: the hottest slot of the two is at the top of the scale,
  // and the other run's hottest slot is drawn at its share of it, pixel for pixel.
  void CompareUsesOneColourScale() {
    MainWindow w;
    w.SetDialogs(false);
    QVERIFY(w.OpenRun(RunDir()));
    QVERIFY(w.OpenComparison(RunDir() + "-static"));
    w.SetColorMode(ColorMode::kLoad);
    w.show();
    w.SetStep(200);
    PlacementView* views[] = {w.panel()->placement(), w.comparison()->placement()};
    const double shared = std::max(views[0]->own_max_slot_load(), views[1]->own_max_slot_load());
    QVERIFY(views[0]->own_max_slot_load() != views[1]->own_max_slot_load());
    for (PlacementView* view : views) {
      const RunData& run = view == views[0] ? w.panel()->run() : w.comparison()->run();
      const auto& row = run.PlacementAt(0, 200);
      const auto load = run.LoadAt(0, 200);
      std::vector<int> replicas(static_cast<size_t>(run.experts()), 0);
      for (int e : row) replicas[e]++;
      size_t hottest = 0;
      double hottest_load = -1;
      for (size_t s = 0; s < row.size(); ++s) {
        const double l = static_cast<double>(load[row[s]]) / replicas[row[s]];
        if (l > hottest_load) hottest = s, hottest_load = l;
      }
      const int gpu = static_cast<int>(hottest) / run.slots_per_gpu();
      const int slot = static_cast<int>(hottest) % run.slots_per_gpu();
      QCOMPARE(Pixel(view, gpu, slot), eplb::viewer::HeatColor(hottest_load / shared));
    }
    // Each panel names its scenario and policy.
    QVERIFY(w.panel()->title().contains("policy <b>deepseek</b>"));
    QVERIFY(w.comparison()->title().contains("policy <b>static</b>"));
  }

  void TimeTicksAreRoundWithUnits() {
    using eplb::viewer::RoundTimeTicks;
    const auto a = RoundTimeTicks(0, 0.243, 5);
    QCOMPARE(a.step, 0.05);
    QCOMPARE(a.Label(0.1), QString("100 ms"));
    QCOMPARE(a.Label(0.15), QString("150 ms"));
    const auto b = RoundTimeTicks(12.3, 931.7, 5);
    QCOMPARE(b.step, 200.0);
    QCOMPARE(b.first, 200.0);
    QCOMPARE(b.Label(400), QString("400 s"));
    const auto c = RoundTimeTicks(0, 4e-5, 4);
    QCOMPARE(c.Label(2e-5), QString("20 µs"));
    const auto d = RoundTimeTicks(0, 0.0031, 7);
    QCOMPARE(d.step, 0.0005);
    QCOMPARE(d.Label(0.0015), QString("1.5 ms"));
  }

  void TheScreenshotCommandHonoursTheSizeInCompareMode() {
    QTemporaryDir tmp;
    const QString png = tmp.path() + "/compare.png";
    QProcess viewer;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("QT_QPA_PLATFORM", "offscreen");
    viewer.setProcessEnvironment(env);
    viewer.start(EPLB_VIEWER_BINARY, {RunDir(), "--compare", RunDir() + "-static", "--screenshot",
                                      png, "--size", "900x600"});
    QVERIFY(viewer.waitForFinished(60000));
    QVERIFY2(viewer.exitCode() == 0, viewer.readAllStandardError().constData());
    QCOMPARE(QImage(png).size(), QSize(900, 600));
  }

  void AScreenshotSizeBeyondWhatQtPaintsIsRefused() {
    QTemporaryDir tmp;
    QProcess viewer;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("QT_QPA_PLATFORM", "offscreen");
    viewer.setProcessEnvironment(env);
    viewer.start(EPLB_VIEWER_BINARY,
                 {RunDir(), "--screenshot", tmp.path() + "/big.png", "--size", "100000x100000"});
    QVERIFY(viewer.waitForFinished(60000));
    QCOMPARE(viewer.exitCode(), 2);
    const QByteArray err = viewer.readAllStandardError();
    QVERIFY2(err.contains("--size '100000x100000': expected WxH from 320x240 to 8192x8192"),
             err.constData());
    QVERIFY2(!err.contains("QPainter"), err.constData());
    QVERIFY(!QFile::exists(tmp.path() + "/big.png"));
  }

  // --at names a step of the run (or -1, the last); any other is refused with the range, and
  // nothing is drawn.
  void AStepOutsideTheRunIsRefused() {
    QTemporaryDir tmp;
    for (const QString& at : {QString("-2"), QString("240"), QString("-2147483648")}) {
      QProcess viewer;
      QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
      env.insert("QT_QPA_PLATFORM", "offscreen");
      viewer.setProcessEnvironment(env);
      viewer.start(EPLB_VIEWER_BINARY,
                   {RunDir(), "--screenshot", tmp.path() + "/at.png", "--at", at});
      QVERIFY(viewer.waitForFinished(60000));
      QCOMPARE(viewer.exitCode(), 2);
      const QByteArray err = viewer.readAllStandardError();
      QVERIFY2(err.contains(("--at " + at + ": the run has steps 0..239 (-1: the last)").toUtf8()),
               err.constData());
      QVERIFY(!QFile::exists(tmp.path() + "/at.png"));
    }
  }

  void TheScreenshotCommandWritesAPng() {
    QTemporaryDir tmp;
    const QString png = tmp.path() + "/shot.png";
    QProcess viewer;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("QT_QPA_PLATFORM", "offscreen");
    viewer.setProcessEnvironment(env);
    viewer.start(EPLB_VIEWER_BINARY, {RunDir(), "--screenshot", png, "--at", "150", "--layer", "2",
                                      "--size", "900x700"});
    QVERIFY(viewer.waitForFinished(60000));
    QVERIFY2(viewer.exitCode() == 0, viewer.readAllStandardError().constData());
    QImage image(png);
    QVERIFY(!image.isNull());
    QCOMPARE(image.size(), QSize(900, 700));
    QSet<QRgb> colours;
    for (int y = 0; y < image.height(); y += 7) {
      for (int x = 0; x < image.width(); x += 7) colours.insert(image.pixel(x, y));
    }
    QVERIFY2(colours.size() > 20, qPrintable(QString("%1 colours").arg(colours.size())));
  }

  // One time base: the strip shows the timeline's time range, and both draw the cursor at one
  // step in the same pixel column, whole run or zoomed.
  void TheStripAndTheTimelineDrawAStepAtOneX() {
    MainWindow w;
    QVERIFY(OpenTestRun(w));
    w.resize(1400, 900);
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    auto* panel = w.panel();
    TimelineView* timeline = panel->timeline();
    MetricsStrip* strip = panel->metrics();
    const RunData& run = panel->run();
    const auto columns = [&](int step) {
      const double xt = timeline->XOfStep(step) + timeline->mapTo(panel, QPoint(0, 0)).x();
      const double xs = strip->XOfStep(step) + strip->mapTo(panel, QPoint(0, 0)).x();
      // Drawn: a row of the lanes just above the time axis, a row at the latency plot's foot.
      const int pt = CursorColumn(timeline, panel, timeline->height() - 24);
      const int ps =
          CursorColumn(strip, panel, strip->SeriesBox(MetricsStrip::kLatency).bottom() - 2);
      return std::make_tuple(xt, xs, pt, ps);
    };
    struct Case {
      int first, last, step;  // the frame (−1: the whole run) and the cursor
    };
    for (const Case& c : {Case{-1, -1, 0}, Case{-1, -1, 117}, Case{-1, -1, 239},
                          Case{100, 140, 120}, Case{30, 31, 31}}) {
      if (c.first >= 0) {
        w.FrameSteps(c.first, c.last);
        QCOMPARE(timeline->t0(), run.step_start_s()[static_cast<size_t>(c.first)]);
        QCOMPARE(timeline->t1(), run.step_end_s(c.last));
      } else {
        timeline->ShowAll();
      }
      w.SetStep(c.step);
      const auto [xt, xs, pt, ps] = columns(c.step);
      QCOMPARE(xs, xt);
      QVERIFY2(pt >= 0 && pt == ps,
               qPrintable(QString("step %1: timeline %2, strip %3").arg(c.step).arg(pt).arg(ps)));
      QVERIFY2(std::abs(pt - xt) <= 1.5,  // a 2 px pen about x
               qPrintable(QString("pixel %1, x %2").arg(pt).arg(xt)));
      // A click on the strip at that column asks for that step.
      QCOMPARE(strip->StepAtX(static_cast<int>(strip->XOfStep(c.step))), c.step);
    }
  }

  // Compare mode: one y range per metric, the two runs' together; alone, the run's own.
  void CompareSharesOneYRangePerMetric() {
    MainWindow w;
    w.SetDialogs(false);
    QVERIFY(w.OpenRun(RunDir()));
    QVERIFY(w.OpenComparison(RunDir() + "-static"));
    MetricsStrip* a = w.panel()->metrics();
    MetricsStrip* b = w.comparison()->metrics();
    QVERIFY(a->OwnRange(MetricsStrip::kBalancedness) != b->OwnRange(MetricsStrip::kBalancedness));
    for (auto s : {MetricsStrip::kBalancedness, MetricsStrip::kLatency}) {
      const double lo = std::min(a->OwnRange(s).first, b->OwnRange(s).first);
      const double hi = std::max(a->OwnRange(s).second, b->OwnRange(s).second);
      QCOMPARE(a->RangeOf(s), std::make_pair(lo, hi));
      QCOMPARE(b->RangeOf(s), std::make_pair(lo, hi));
    }
    // One time axis: both timelines show the longer run whole, and zooming one zooms both.
    TimelineView* ta = w.panel()->timeline();
    TimelineView* tb = w.comparison()->timeline();
    const double end = std::max(w.panel()->run().end_s(), w.comparison()->run().end_s());
    QCOMPARE(ta->t1(), end);
    QCOMPARE(tb->t1(), end);
    w.FrameSteps(100, 140);
    QCOMPARE(tb->t0(), ta->t0());
    QCOMPARE(tb->t1(), ta->t1());
    QCOMPARE(b->XOfStep(120), tb->XOfStep(120));
    tb->ShowAll();
    QCOMPARE(ta->t1(), w.comparison()->run().end_s());
    w.CloseComparison();
    QCOMPARE(a->RangeOf(MetricsStrip::kLatency), a->OwnRange(MetricsStrip::kLatency));
  }

  // Headers wrap rather than cut: at 1,400 px each compared panel's title is as tall as its
  // text needs at its width.
  void CompareHeadersFitAt1400Px() {
    MainWindow w;
    w.SetDialogs(false);
    QVERIFY(w.OpenRun(RunDir()));
    QVERIFY(w.OpenComparison(RunDir() + "-static"));
    w.resize(1400, 900);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    for (auto* panel : {w.panel(), w.comparison()}) {
      QLabel* title = panel->title_label();
      QVERIFY(title->wordWrap());
      QVERIFY2(
          title->height() >= title->heightForWidth(title->width()),
          qPrintable(
              QString("%1 < %2").arg(title->height()).arg(title->heightForWidth(title->width()))));
    }
  }

  // Every control of the toolbar is shown at the default 1,400 px (none pushed into the
  // overflow menu).
  void TheToolbarFitsItsWindow() {
    MainWindow w;
    QVERIFY(OpenTestRun(w));
    w.resize(1400, 900);
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QToolBar* bar = w.toolbar();
    for (QAction* a : bar->actions()) {
      QWidget* widget = bar->widgetForAction(a);
      if (widget == nullptr || a->isSeparator()) continue;
      QVERIFY2(widget->isVisible() && widget->geometry().right() < bar->width(),
               qPrintable(a->text()));
    }
  }

  // Too thin for a row per GPU: a row per node, its GPUs side by side; a click on a node's
  // label shows its GPUs a row each, in the placement and the timeline, and a second click
  // every node again.
  void RowsAreNodesWhereGpuRowsWouldBeTooThin() {
    auto loaded = RunData::Load(RunDir().toStdString());
    QVERIFY(loaded.ok());
    const RunData& run = **loaded;
    PlacementView widget;
    PlacementView* view = &widget;
    view->SetRun(*loaded);
    view->SetStep(0);
    view->setMinimumSize(0, 0);
    view->resize(700, 400);
    QVERIFY(!view->rows_are_nodes());
    // 4 GPUs, rows under PlacementView::kMinRowH: 22 title + 34 legend + 4 gap + 4 × 8 px.
    view->resize(view->width(), 22 + 34 + 4 + 4 * 8);
    QVERIFY(view->rows_are_nodes());
    QVERIFY(view->row_height() >= PlacementView::kMinRowH);
    const QImage image = view->grab().toImage();
    QList<QRect> cells;
    for (int g = 0; g < run.gpus(); ++g) {
      for (int s = 0; s < run.slots_per_gpu(); ++s) {
        const QRect cell = view->CellRect(g, s);
        QVERIFY(view->rect().contains(cell));
        QCOMPARE(cell.top(),
                 view->CellRect(g / run.gpus_per_node() * run.gpus_per_node(), 0).top());
        for (const QRect& other : cells) QVERIFY(!cell.intersects(other));
        cells << cell;
        const int expert = run.PlacementAt(0, 0)[static_cast<size_t>(g) * run.slots_per_gpu() + s];
        QCOMPARE(image.pixelColor(FillPoint(cell)), ExpertColor(expert));
        QCOMPARE(view->CellAt(cell.center()), std::make_pair(g, s));
      }
    }
    QSignalSpy focused(view, &PlacementView::NodeFocused);
    QTest::mouseClick(view, Qt::LeftButton, {}, QPoint(10, view->CellRect(2, 0).center().y()));
    QCOMPARE(view->focused_node(), 1);
    QCOMPARE(focused.count(), 1);
    QCOMPARE(focused.first().first().toInt(), 1);
    QVERIFY(view->CellRect(0, 0).isEmpty());
    QVERIFY(!view->rows_are_nodes());
    QVERIFY(view->CellRect(3, 0).top() > view->CellRect(2, 0).bottom());
    QTest::mouseClick(view, Qt::LeftButton, {}, QPoint(10, view->CellRect(2, 0).center().y()));
    QCOMPARE(view->focused_node(), -1);
    // In a window the timeline follows the placement's focus.
    MainWindow w;
    QVERIFY(OpenTestRun(w));
    w.panel()->placement()->FocusNode(1);
    QCOMPARE(w.panel()->timeline()->focused_node(), 1);
    QCOMPARE(w.panel()->timeline()->gpus_per_lane(), 1);
    w.panel()->placement()->FocusNode(-1);
    QCOMPARE(w.panel()->timeline()->focused_node(), -1);
  }

  // The timeline's lanes: a pair per GPU where there is room, else a pair per node.
  void TimelineLanesArePerNodeWhereThin() {
    auto run = RunData::Load(RunDir().toStdString());
    QVERIFY(run.ok());
    TimelineView timeline;
    timeline.SetRun(*run);
    timeline.setMinimumSize(0, 0);
    timeline.resize(700, 300);
    QCOMPARE(timeline.gpus_per_lane(), 1);
    timeline.resize(700, 18 + 16 + 18 + 4 * 4);  // title, band, axis and 4 px a GPU
    QCOMPARE(timeline.gpus_per_lane(), (*run)->gpus_per_node());
    // A transfer's point is on its destination node's receive lane, and hovering it finds one
    // received by that node.
    const auto& t = (*run)->transfers().front();
    timeline.SetRange(t.start_s, t.end_s);
    const int found = timeline.TransferAt(timeline.PointOf(0, true));
    QVERIFY(found >= 0);
    QCOMPARE((*run)->transfers()[static_cast<size_t>(found)].dst_rank / (*run)->gpus_per_node(),
             t.dst_rank / (*run)->gpus_per_node());
  }

  // A rearrangement is a span on the band above the lanes, wide enough to see; a click moves
  // the cursor to its step and zooms the timeline (and the strip) to it.
  void ARearrangementIsASpanThatZoomsWhenClicked() {
    MainWindow w;
    QVERIFY(OpenTestRun(w));
    w.resize(1400, 900);
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    TimelineView* timeline = w.panel()->timeline();
    const RunData& run = w.panel()->run();
    QVERIFY(run.rearrangements().size() >= 2);
    timeline->ShowAll();
    const int index = 1;
    const auto& r = run.rearrangements()[index];
    const QRect span = timeline->RearrangementRect(index);
    QVERIFY(span.width() >= 4 && span.height() >= 8);
    QCOMPARE(timeline->grab().toImage().pixelColor(span.center()), QColor(200, 40, 40));
    QCOMPARE(timeline->RearrangementAt(span.center()), index);
    QTest::mouseClick(timeline, Qt::LeftButton, {}, span.center());
    QCOMPARE(w.step(), r.step);
    QVERIFY(timeline->t0() <= r.start_s && timeline->t1() >= r.end_s);
    QVERIFY(timeline->t1() - timeline->t0() < run.end_s() / 4);
    QVERIFY(timeline->RearrangementRect(index).width() > timeline->width() / 2);
    QCOMPARE(w.panel()->metrics()->XOfStep(r.step), timeline->XOfStep(r.step));
  }

  // A rearrangement that changed no layer (the static policy's, each interval) is drawn nowhere:
  // no span on the timeline's band to click, no shade over the metrics (issue 65); one that
  // moved is shaded.
  void ARearrangementThatMovedNothingIsDrawnNowhere() {
    const auto shaded = [](const QString& dir) {
      auto run = RunData::Load(dir.toStdString());
      if (!run.ok()) return -1;
      MetricsStrip strip;
      strip.SetRun(*run);
      strip.resize(900, 200);
      const QImage image = strip.grab().toImage();
      const QRect box = strip.SeriesBox(MetricsStrip::kBalancedness);
      int count = 0;  // the shade: red over the box's near-white
      for (int x = box.left() + 1; x < box.right(); ++x) {
        const QColor c = image.pixelColor(x, box.top() + 2);
        count += c.red() - c.green() > 8;
      }
      return count;
    };
    auto still = RunData::Load((RunDir() + "-static").toStdString());
    QVERIFY(still.ok());
    QVERIFY(!(*still)->rearrangements().empty());
    TimelineView timeline;
    timeline.SetRun(*still);
    timeline.resize(900, 300);
    for (size_t i = 0; i < (*still)->rearrangements().size(); ++i) {
      QVERIFY(!(*still)->rearrangements()[i].moved);
      QVERIFY(timeline.RearrangementRect(static_cast<int>(i)).isEmpty());
    }
    QCOMPARE(timeline.RearrangementAt(QPoint(timeline.width() / 2, 20)), -1);
    QCOMPARE(shaded(RunDir() + "-static"), 0);
    QVERIFY(shaded(RunDir()) > 0);
  }

  // What a number is summed over: the load window the policy saw.
  void TooltipsSayWhatALoadIsSummedOver() {
    MainWindow w;
    QVERIFY(OpenTestRun(w));
    const RunData& run = w.panel()->run();
    QCOMPARE(run.window_size(), 50);  // scenarios/tiny.yaml
    const QString tip = w.panel()->placement()->CellTooltip(0, 0);
    QVERIFY2(tip.contains("tokens to this replica") &&
                 tip.contains("sums over the 50 steps the latest rearrangement's policy saw"),
             qPrintable(tip));
  }

  // --from/--to, --rearrangement and --node: each frames what it names, and a value the run
  // does not have is refused with what it has, before anything is drawn.
  void TheScreenshotFramesARangeARearrangementAndANode() {
    QTemporaryDir tmp;
    const QString png = tmp.path() + "/framed.png";
    struct Case {
      QStringList args;
      QString error;  // empty: succeeds
    };
    const QList<Case> cases = {
        {{"--from", "100", "--to", "140"}, ""},
        {{"--to", "20"}, ""},
        {{"--rearrangement", "0"}, ""},
        {{"--node", "1", "--at", "-1"}, ""},
        {{"--from", "500"}, "--from '500': the run has steps 0..239"},
        {{"--to", "x"}, "--to 'x': the run has steps 0..239"},
        {{"--from", "140", "--to", "100"}, "--from 140 is after --to 100: give --from <= --to"},
        {{"--rearrangement", "99"}, "--rearrangement '99': the run has rearrangements 0.."},
        {{"--rearrangement", "0", "--from", "3"},
         "--rearrangement frames its own range: give it or --from/--to, not both"},
        {{"--node", "2"}, "--node '2': the run has nodes 0..1"},
    };
    for (const Case& c : cases) {
      QFile::remove(png);
      const auto [code, err] = RunViewer(QStringList{RunDir(), "--screenshot", png} + c.args);
      const QString what = c.args.join(' ') + ": " + QString::fromUtf8(err);
      if (c.error.isEmpty()) {
        QVERIFY2(code == 0, qPrintable(what));
        QCOMPARE(QImage(png).size(), QSize(1400, 900));
      } else {
        QVERIFY2(code == 2 && err.contains(c.error.toUtf8()), qPrintable(what));
        QVERIFY(!QFile::exists(png));
      }
    }
    // Framed as asked, in the window the command draws.
    MainWindow w;
    QVERIFY(OpenTestRun(w));
    QVERIFY(w.FrameRearrangement(0));
    QCOMPARE(w.step(), w.panel()->run().rearrangements().front().step);
    QVERIFY(!w.FrameRearrangement(99));
    w.FocusNode(1);
    QCOMPARE(w.panel()->placement()->focused_node(), 1);
    QCOMPARE(w.panel()->timeline()->focused_node(), 1);
  }

  void CorruptFoldersGiveAnErrorNotACrash() {
    QTemporaryDir tmp;
    struct Case {
      QString name, file, content, expected;
      bool restamp;  // rewrite the manifest, as a faulty writer would have: the files' own checks
    };
    const QString header_t = "layer,expert,src_rank,dst_rank,bytes,link,start_s,end_s\n";
    const QString header_m =
        "step,time_s,step_s,idle_step_s,balancedness,imbalance_ratio,bytes_in_flight,stalled_s\n";
    const QList<Case> cases = {
        // Unfinished: no manifest, or a partial folder of a killed process.
        {"no-manifest", "manifest.tsv", "", "not a finished run folder", false},
        {"tiny-run.partial-4242", "", "", "an unfinished run folder", false},
        // Changed since written: cut at a line boundary, so it still parses.
        {"cut", "metrics.csv", header_m + "0,0,1,1,1,1,0,0\n", "truncated or changed", false},
        // Malformed, inconsistent with the scenario or summary, or out of range.
        {"bad-transfers", "transfers.csv", header_t + "0,1,0,1,100,nvlink\n",
         "transfers.csv:2: 6 fields, expected 8", true},
        {"bad-placement", "placements.jsonl", "{\"step\": -1, \"layer\": 0, \"phy2log\": [1,2\n",
         "placements.jsonl:1:", true},
        {"rank-outside", "transfers.csv", header_t + "0,1,0,99,100,nic,0,1\n", "outside", true},
        {"ends-before-start", "transfers.csv", header_t + "0,1,0,1,100,nic,2,1\n",
         "end_s 1 is before start_s 2", true},
        // Outside the run's span (240 steps of well under a second): the timeline would be
        // scaled to it.
        {"ends-past-the-run", "transfers.csv", header_t + "0,1,0,1,100,nic,0,1e300\n",
         "transfers.csv:2: end_s 1e+300 is past the run's end", true},
        {"starts-past-the-run", "transfers.csv", header_t + "0,1,0,1,100,nic,5e3,5e3\n",
         "transfers.csv:2: end_s 5000 is past the run's end", true},
        {"not-finite", "metrics.csv", header_m + "0,inf,1,1,1,1,0,0\n", "not a finite number",
         true},
        {"negative", "metrics.csv", header_m + "0,0,-1,1,1,1,0,0\n", "never negative", true},
        {"fewer-steps", "metrics.csv", header_m + "0,0,1,1,1,1,0,0\n",
         "has 1 steps but summary.json says", true},
    };
    for (const Case& c : cases) {
      const QString dir = CopyRun(tmp, c.name);
      if (c.file.isEmpty()) {
      } else if (c.content.isEmpty()) {
        QVERIFY(QFile::remove(dir + "/" + c.file));
      } else {
        QFile f(dir + "/" + c.file);
        QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
        f.write(c.content.toUtf8());
      }
      if (c.restamp) Restamp(dir);
      MainWindow w;
      w.SetDialogs(false);
      QSignalSpy errors(&w, &MainWindow::ErrorShown);
      QVERIFY(!w.OpenRun(dir));
      QCOMPARE(errors.count(), 1);
      const QString message = errors.first().first().toString();
      QVERIFY2(message.contains(c.expected), qPrintable(c.name + ": " + message));
      QVERIFY(w.panel() == nullptr);
    }
    // The command line says the same and exits non-zero, with no display at all: the viewer
    // falls back to the offscreen platform for --screenshot.
    QProcess viewer;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    for (const char* var : {"QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY"}) env.remove(var);
    viewer.setProcessEnvironment(env);
    viewer.start(EPLB_VIEWER_BINARY,
                 {tmp.path() + "/ends-before-start", "--screenshot", tmp.path() + "/x.png"});
    QVERIFY(viewer.waitForFinished(60000));
    QCOMPARE(viewer.exitCode(), 2);
    QVERIFY(viewer.readAllStandardError().contains("end_s 1 is before start_s 2"));
    QVERIFY(!QFile::exists(tmp.path() + "/x.png"));
  }
};

QTEST_MAIN(ViewerTest)
#include "viewer_test.moc"
