// A run folder (eplb/io/run_folder.h, whose reader checks it) arranged for the viewer: the steps'
// metrics, every transfer, the placement of every layer at every step, and the load each
// rearrangement's policy saw. Errors name the file, the line and the problem; nothing is
// half-loaded.
//
// The cursor is a step: "at step s" means after step s's boundary, so the placement at s
// holds every commit made at boundaries ≤ s.
//
// Thread-safety: immutable once loaded; share it freely.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "eplb/base/status.h"

namespace eplb::viewer {

struct TransferRow {
  double start_s;
  double end_s;
  int32_t layer;
  int32_t expert;
  int32_t src_rank;
  int32_t dst_rank;
  int64_t bytes;
  bool nic;  // false: NVLink
};

struct CommitRow {
  int step;
  double time_s;
  int layer;
  int row;  // index into RunData::rows()
};

struct RearrangementRow {
  int step;
  double start_s;
  double end_s;                             // −1 if it never finished
  std::vector<int64_t> staging_peak_bytes;  // per GPU; empty when not recorded
  bool moved = true;  // whether it changed a layer: one that changed none is drawn nowhere
};

// A fault of the scenario while it held: the GPUs it hit, in the backend's time.
struct FaultSpan {
  double start_s;
  double end_s;
  int first_rank;
  int last_rank;
  std::string what;  // "straggler ×1.5", "NIC ÷4"
};

class RunData {
 public:
  static Result<std::shared_ptr<const RunData>> Load(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const std::string& name() const { return name_; }
  const std::string& backend() const { return backend_; }
  const std::string& policy() const { return policy_; }
  int layers() const { return layers_; }
  int experts() const { return experts_; }
  int nodes() const { return nodes_; }
  int gpus_per_node() const { return gpus_per_node_; }
  int gpus() const { return nodes_ * gpus_per_node_; }
  int slots_per_gpu() const { return slots_per_gpu_; }
  int num_slots() const { return gpus() * slots_per_gpu_; }
  int steps() const { return static_cast<int>(step_start_s_.size()); }
  // The steps whose summed load a rearrangement's policy sees (eplb.window_size).
  int window_size() const { return window_size_; }

  // Per step.
  const std::vector<double>& step_start_s() const { return step_start_s_; }
  const std::vector<double>& step_s() const { return step_s_; }
  const std::vector<double>& balancedness() const { return balancedness_; }
  // What the step's requests waited: the step and the stall before it (metrics.csv latency_s).
  const std::vector<double>& latency_s() const { return latency_s_; }
  double step_end_s(int step) const { return step_start_s_[step] + step_s_[step]; }
  double end_s() const { return steps() ? step_end_s(steps() - 1) : 0; }
  // The step during which time t falls (the last one if t is past the end).
  int StepAt(double t) const;

  // Sorted by start.
  const std::vector<TransferRow>& transfers() const { return transfers_; }
  double longest_transfer_s() const { return longest_transfer_s_; }
  // Indices of the transfers that overlap [t0, t1], in start order.
  std::vector<int> TransfersIn(double t0, double t1) const;

  const std::vector<RearrangementRow>& rearrangements() const { return rearrangements_; }
  const std::vector<FaultSpan>& faults() const { return faults_; }
  // Whether `gpu` is gone (a gpu_lost or node_lost fault) by `step`.
  bool IsLost(int gpu, int step) const { return step >= lost_from_step_[static_cast<size_t>(gpu)]; }
  // Every commit, in order.
  const std::vector<CommitRow>& commits() const { return commits_; }

  // The phy2log of `layer` at `step` (−1: the initial placement).
  const std::vector<int32_t>& PlacementAt(int layer, int step) const;
  // The load (tokens per expert of `layer`) of the latest rearrangement at or before `step`;
  // the first rearrangement's before it; empty when the run has none.
  std::vector<float> LoadAt(int layer, int step) const;

  // Each GPU's memory (engine/gpu_memory.h), bytes: its capacity, what it holds while serving,
  // and per GPU the fullest it was (resident + the most it held staged) during the latest
  // rearrangement at or before `step`; empty before the first or when the folder has none.
  double gpu_capacity_bytes() const { return gpu_capacity_bytes_; }
  double gpu_resident_bytes() const { return gpu_resident_bytes_; }
  std::vector<double> PeakMemoryAt(int step) const;

 private:
  std::string dir_, name_, backend_, policy_;
  int layers_ = 0, experts_ = 0, nodes_ = 0, gpus_per_node_ = 0, slots_per_gpu_ = 0;
  int window_size_ = 0;
  std::vector<double> step_start_s_, step_s_, balancedness_, latency_s_;
  std::vector<TransferRow> transfers_;
  double longest_transfer_s_ = 0;
  double gpu_capacity_bytes_ = 0, gpu_resident_bytes_ = 0;
  std::vector<RearrangementRow> rearrangements_;
  std::vector<FaultSpan> faults_;
  std::vector<int> lost_from_step_;         // per GPU: the step it was lost at, or INT_MAX
  std::vector<std::vector<int32_t>> rows_;  // every phy2log row read
  std::vector<int> initial_row_;            // per layer
  std::vector<std::vector<CommitRow>> layer_commits_;  // per layer, in step order
  std::vector<CommitRow> commits_;
  struct LoadSnapshot {
    int step;
    std::vector<std::vector<float>> load;  // [layer][expert]
  };
  std::vector<LoadSnapshot> loads_;
};

}  // namespace eplb::viewer
