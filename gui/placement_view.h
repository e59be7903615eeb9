// The placement of one layer at the cursor: a row per GPU (nodes separated by a gap), a cell per
// slot coloured by logical expert or by load, the selected expert's replicas outlined
// everywhere, and each GPU's load beside its row.
//
// Where a row per GPU would be thinner than kMinRowH (EP72 and beyond in a usual window), a
// row is a node: its GPUs side by side, each GPU's slots together, and the bar is the node's
// hottest GPU (what balancedness divides by). A click on a node's label shows its GPUs a row
// each (FocusNode); a click on the label column again shows every node.
//
// A GPU's load is Σ over its slots of load(expert) / replicas(expert), with the load that the
// latest rearrangement's policy saw (loads.jsonl), so the bars show what the policy balanced.
#pragma once

#include <algorithm>
#include <memory>
#include <vector>

#include <QPainter>
#include <QWidget>

#include "run_data.h"

namespace eplb::viewer {

enum class ColorMode { kExpert, kLoad };

class PlacementView : public QWidget {
  Q_OBJECT
 public:
  explicit PlacementView(QWidget* parent = nullptr);

  void SetRun(std::shared_ptr<const RunData> run);
  void SetLayer(int layer);
  void SetStep(int step);
  void SetColorMode(ColorMode mode);
  void SelectExpert(int expert);  // −1: none
  // One node's GPUs, a row each (−1: every GPU, or every node where rows would be too thin).
  void FocusNode(int node);
  int focused_node() const { return focus_node_; }
  // Whether a row is a node (its GPUs side by side) rather than a GPU.
  bool rows_are_nodes() const { return ComputeLayout().by_node; }
  // The height of a row, pixels.
  int row_height() const { return ComputeLayout().row_h; }
  static constexpr int kMinRowH = 9;
  // Scale maxima shared with another view (compare mode): colours and bars then run from 0 to
  // the larger of this view's own maximum and these, so the same load looks the same in both.
  // 0 and 0: this view's own.
  void ShareScale(double slot_max, double gpu_max);
  double own_max_slot_load() const { return max_slot_load_; }
  double own_max_gpu_load() const { return max_gpu_load_; }

  int layer() const { return layer_; }
  int selected_expert() const { return selected_; }
  // Where slot `slot` (0-based within the GPU) of GPU `gpu` is drawn, and in which colour.
  QRect CellRect(int gpu, int slot) const;
  QColor CellColor(int gpu, int slot) const;
  // The (GPU, slot) under a point, or (−1, −1); an empty rect for a GPU not shown.
  std::pair<int, int> CellAt(QPoint p) const;
  // The tooltip of a cell: its expert, its load and what that load is summed over, its GPU's
  // memory.
  QString CellTooltip(int gpu, int slot) const;
  QSize sizeHint() const override { return {700, 320}; }

 signals:
  void ExpertSelected(int expert);
  void NodeFocused(int node);

 protected:
  void paintEvent(QPaintEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  bool event(QEvent* event) override;  // tooltips

 private:
  struct Layout {
    int top, left, cell_w, row_h, node_gap, bars_left, bars_w;
    bool by_node;   // a row per node, its GPUs side by side
    int gpu_gap;    // between GPUs of a node row
    int first_gpu;  // the GPUs shown: [first_gpu, first_gpu + shown)
    int shown;
  };
  bool Shown(const Layout& l, int gpu) const {
    return gpu >= l.first_gpu && gpu < l.first_gpu + l.shown;
  }
  int NodeAtY(const Layout& l, int y) const;
  Layout ComputeLayout() const;
  void Recompute();
  int RowTop(const Layout& l, int gpu) const;
  void DrawBarAxis(QPainter& p, const Layout& l) const;
  double SlotScale() const { return std::max(max_slot_load_, shared_slot_max_); }
  double GpuScale() const { return std::max(max_gpu_load_, shared_gpu_max_); }

  std::shared_ptr<const RunData> run_;
  int layer_ = 0;
  int step_ = 0;
  ColorMode mode_ = ColorMode::kExpert;
  int selected_ = -1;
  int focus_node_ = -1;
  // Of the current layer and step.
  std::vector<int32_t> row_;
  std::vector<int> replicas_;
  std::vector<float> load_;        // per expert, empty without load data
  std::vector<double> slot_load_;  // per slot
  std::vector<double> gpu_load_;   // per GPU
  double max_slot_load_ = 0, max_gpu_load_ = 0, mean_gpu_load_ = 0;
  double shared_slot_max_ = 0, shared_gpu_max_ = 0;
};

}  // namespace eplb::viewer
