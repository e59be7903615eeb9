// eplb-viewer [RUN_DIR] [--compare RUN_DIR] [--screenshot FILE [--at STEP] [--layer L]
//             [--from STEP] [--to STEP] [--rearrangement N] [--node N]]
// Opens a run folder written by `eplb run` or `eplb device-run`. With --screenshot it renders
// the window to a PNG and exits. --help and --screenshot need no display: without one they
// use Qt's offscreen platform; only the interactive window needs X11 or Wayland.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <QApplication>
#include <QCommandLineParser>

#include "main_window.h"

namespace {

int Fail(const QString& message) {
  std::fprintf(stderr, "eplb-viewer: error: %s\n", message.toLocal8Bit().constData());
  return 2;
}

// True when a display server is named; Qt would abort trying to open one that is not.
bool HasDisplay() {
  for (const char* var : {"DISPLAY", "WAYLAND_DISPLAY"}) {
    const char* v = std::getenv(var);
    if (v != nullptr && *v != '\0') return true;
  }
  return false;
}

// --help, -h, --version and --screenshot produce output without showing a window.
bool NeedsNoWindow(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    for (const char* flag : {"--help", "-h", "--help-all", "--version", "-v", "--screenshot"}) {
      if (std::strcmp(argv[i], flag) == 0 || std::strncmp(argv[i], "--screenshot=", 13) == 0) {
        return true;
      }
    }
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("QT_QPA_PLATFORM") == nullptr && !HasDisplay()) {
    if (!NeedsNoWindow(argc, argv)) {
      return Fail(
          "no display (neither DISPLAY nor WAYLAND_DISPLAY is set); the window needs "
          "one; --screenshot FILE renders without");
    }
    setenv("QT_QPA_PLATFORM", "offscreen", 1);
  }
  QApplication app(argc, argv);
  QApplication::setApplicationName("eplb-viewer");
  QApplication::setOrganizationName("eplb");
  QCommandLineParser parser;
  parser.setApplicationDescription(
      "Animates the expert placement and transfer timeline of an eplb run folder.");
  parser.addHelpOption();
  parser.addPositionalArgument("run", "Run folder (from eplb run or eplb device-run)", "[RUN_DIR]");
  const QCommandLineOption compare("compare", "A second run folder, shown side by side.", "dir");
  const QCommandLineOption screenshot("screenshot", "Render to a PNG file and exit.", "file");
  const QCommandLineOption at("at", "Step to show (default 0; -1: the last).", "step", "0");
  const QCommandLineOption layer("layer", "Layer to show (default 0).", "layer", "0");
  const QCommandLineOption color("color", "Cell colours: expert or load.", "mode", "expert");
  const QCommandLineOption size("size", "Window size (default 1400x900).", "WxH", "1400x900");
  const QCommandLineOption from("from", "First step the timeline and strip show (default 0).",
                                "step");
  const QCommandLineOption to("to", "Last step the timeline and strip show (default: the last).",
                              "step");
  const QCommandLineOption rearrangement(
      "rearrangement", "Zoom to rearrangement N (0: the first) and put the cursor at its step.",
      "N");
  const QCommandLineOption node("node", "Show node N's GPUs a row each (default: every GPU).", "N");
  parser.addOptions({compare, screenshot, at, layer, color, size, from, to, rearrangement, node});
  parser.process(app);

  const QStringList args = parser.positionalArguments();
  if (args.size() > 1) return Fail("give one run folder (use --compare for a second)");
  bool ok_step = false, ok_layer = false;
  const int step = parser.value(at).toInt(&ok_step);
  const int layer_index = parser.value(layer).toInt(&ok_layer);
  if (!ok_step) return Fail(QString("--at '%1': expected a step number").arg(parser.value(at)));
  if (!ok_layer || layer_index < 0) {
    return Fail(QString("--layer '%1': expected a layer number >= 0").arg(parser.value(layer)));
  }
  const QString mode = parser.value(color);
  if (mode != "expert" && mode != "load") {
    return Fail(QString("--color '%1': valid values are expert, load").arg(mode));
  }
  const QStringList wh = parser.value(size).split('x');
  const int w = wh.size() == 2 ? wh[0].toInt() : 0, h = wh.size() == 2 ? wh[1].toInt() : 0;
  // Beyond 8192 a side Qt's painter cannot start on the image (and warns once per drawing call).
  constexpr int kMaxSide = 8192;
  if (w < 320 || h < 240 || w > kMaxSide || h > kMaxSide) {
    return Fail(QString("--size '%1': expected WxH from 320x240 to %2x%2")
                    .arg(parser.value(size))
                    .arg(kMaxSide));
  }

  const bool headless = parser.isSet(screenshot);
  eplb::viewer::MainWindow window;
  window.SetDialogs(!headless);
  window.resize(w, h);
  QString error;
  QObject::connect(&window, &eplb::viewer::MainWindow::ErrorShown,
                   [&](const QString& message) { error = message; });
  if (headless && args.isEmpty()) return Fail("--screenshot needs a run folder");
  if (!args.isEmpty() && !window.OpenRun(args[0]) && headless) return Fail(error);
  if (parser.isSet(compare) && !window.OpenComparison(parser.value(compare)) && headless) {
    return Fail(error);
  }
  window.SetColorMode(mode == "load" ? eplb::viewer::ColorMode::kLoad
                                     : eplb::viewer::ColorMode::kExpert);
  if (window.panel()) {
    if (layer_index >= window.panel()->run().layers()) {
      return Fail(QString("--layer %1: the run has layers 0..%2")
                      .arg(layer_index)
                      .arg(window.panel()->run().layers() - 1));
    }
    // A step the run does not have is a slip, not a wish for the nearest one (-2 drew the last).
    const int steps = window.panel()->run().steps();
    if (step < -1 || step >= steps) {
      return Fail(
          QString("--at %1: the run has steps 0..%2 (-1: the last)").arg(step).arg(steps - 1));
    }
    window.SetLayer(layer_index);
    window.SetStep(step < 0 ? steps - 1 : step);
    // A time range to frame: steps [--from, --to], or a rearrangement.
    const auto step_option = [&](const QCommandLineOption& o, int fallback, int& out) {
      if (!parser.isSet(o)) {
        out = fallback;
        return QString();
      }
      bool ok = false;
      out = parser.value(o).toInt(&ok);
      if (!ok || out < 0 || out >= steps) {
        return QString("--%1 '%2': the run has steps 0..%3")
            .arg(o.names().first(), parser.value(o))
            .arg(steps - 1);
      }
      return QString();
    };
    int first = 0, last = steps - 1;
    if (QString e = step_option(from, 0, first); !e.isEmpty()) return Fail(e);
    if (QString e = step_option(to, steps - 1, last); !e.isEmpty()) return Fail(e);
    if (first > last) {
      return Fail(QString("--from %1 is after --to %2: give --from <= --to").arg(first).arg(last));
    }
    if (parser.isSet(rearrangement)) {
      if (parser.isSet(from) || parser.isSet(to)) {
        return Fail("--rearrangement frames its own range: give it or --from/--to, not both");
      }
      const int count = static_cast<int>(window.panel()->run().rearrangements().size());
      bool ok = false;
      const int n = parser.value(rearrangement).toInt(&ok);
      if (!ok || n < 0 || n >= count) {
        return Fail(count == 0 ? QString("--rearrangement '%1': the run has no rearrangements")
                                     .arg(parser.value(rearrangement))
                               : QString("--rearrangement '%1': the run has rearrangements 0..%2")
                                     .arg(parser.value(rearrangement))
                                     .arg(count - 1));
      }
      window.FrameRearrangement(n);
    } else if (parser.isSet(from) || parser.isSet(to)) {
      window.FrameSteps(first, last);
    }
    if (parser.isSet(node)) {
      const int nodes = window.panel()->run().nodes();
      bool ok = false;
      const int n = parser.value(node).toInt(&ok);
      if (!ok || n < 0 || n >= nodes) {
        return Fail(
            QString("--node '%1': the run has nodes 0..%2").arg(parser.value(node)).arg(nodes - 1));
      }
      window.FocusNode(n);
    }
  }
  window.show();
  if (!headless) return app.exec();
  QApplication::processEvents();
  const QString file = parser.value(screenshot);
  if (!window.Render().save(file, "PNG"))
    return Fail(QString("%1: cannot write the PNG").arg(file));
  std::printf("%s\n", file.toLocal8Bit().constData());
  return 0;
}
