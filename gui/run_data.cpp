#include "run_data.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "eplb/engine/gpu_memory.h"
#include "eplb/io/output_folders.h"
#include "eplb/io/run_folder.h"

namespace eplb::viewer {

Result<std::shared_ptr<const RunData>> RunData::Load(const std::string& dir) {
  EPLB_ASSIGN_OR_RETURN(RunFolder folder, ReadRunFolder(dir));
  const RunResult& r = folder.run;
  const Scenario& scenario = r.scenario;
  auto run = std::make_shared<RunData>();
  run->dir_ = dir;
  run->name_ = scenario.name;
  run->backend_ = r.backend;
  run->policy_ = scenario.eplb.policy;
  run->layers_ = scenario.model.layers;
  run->experts_ = scenario.model.experts;
  run->nodes_ = scenario.cluster.nodes;
  run->gpus_per_node_ = scenario.cluster.gpus_per_node;
  run->window_size_ = scenario.eplb.window_size;
  run->slots_per_gpu_ = scenario.num_slots() / scenario.num_gpus();
  const GpuMemory memory = GpuMemoryOf(scenario);
  run->gpu_capacity_bytes_ = memory.capacity;
  run->gpu_resident_bytes_ = memory.resident();

  if (r.steps.empty()) {
    return Status::InvalidArgument(fmt::format("{}/{}: no steps", dir, folder_file::kMetrics));
  }
  for (const StepRecord& s : r.steps) {
    run->step_start_s_.push_back(s.start_s);
    run->step_s_.push_back(s.step_s + s.stalled_s);
    run->balancedness_.push_back(s.balancedness);
    // Folders written before latency_s was a column read it as 0: the step and its stall then.
    run->latency_s_.push_back(s.latency_s > 0 ? s.latency_s : s.step_s + s.stalled_s);
  }
  for (const TransferRecord& t : r.transfers) {
    run->transfers_.push_back({t.start_s, t.end_s, t.layer, t.expert, t.src_rank, t.dst_rank,
                               t.bytes, t.link == LinkClass::kNic});
    run->longest_transfer_s_ = std::max(run->longest_transfer_s_, t.end_s - t.start_s);
  }
  std::stable_sort(
      run->transfers_.begin(), run->transfers_.end(),
      [](const TransferRow& a, const TransferRow& b) { return a.start_s < b.start_s; });
  for (const RearrangementRecord& re : r.rearrangements) {
    run->rearrangements_.push_back(
        {re.step, re.start_s, re.end_s, re.staging_peak_bytes, re.layers > 0});
    if (folder.has_loads) {
      LoadSnapshot snapshot{re.step, {}};
      for (int l = 0; l < run->layers_; ++l) {
        const auto first = re.window_load.begin() + static_cast<ptrdiff_t>(l) * run->experts_;
        snapshot.load.emplace_back(first, first + run->experts_);
      }
      run->loads_.push_back(std::move(snapshot));
    }
  }
  const int steps = static_cast<int>(r.steps.size());
  run->lost_from_step_.assign(static_cast<size_t>(run->gpus()), std::numeric_limits<int>::max());
  for (const FaultSpec& f : scenario.faults) {
    // A scale changes which GPUs serve, not what happens to one: nothing to shade.
    if (f.step >= steps || f.kind == FaultKind::kScale) continue;
    const int last_step = std::min(f.until, steps) - 1;
    const int gpn = run->gpus_per_node_;
    if (f.is_loss()) {
      for (int g = f.first_rank(gpn); g <= f.last_rank(gpn); ++g) {
        int& from = run->lost_from_step_[static_cast<size_t>(g)];
        from = std::min(from, f.step);
      }
    }
    const std::string what =
        f.kind == FaultKind::kStraggler ? fmt::format("straggler ×{}", f.factor)
        : f.kind == FaultKind::kGpuLost ? std::string("GPU lost")
        : f.kind == FaultKind::kNodeLost
            ? std::string("node lost")
            : fmt::format("{} ÷{}", f.link == LinkClass::kNvlink ? "NVLink" : "NIC", f.factor);
    run->faults_.push_back({r.steps[static_cast<size_t>(f.step)].start_s,
                            run->step_end_s(last_step), f.first_rank(gpn), f.last_rank(gpn), what});
  }
  run->layer_commits_.assign(static_cast<size_t>(run->layers_), {});
  for (std::vector<int32_t>& row : folder.initial_phy2log) {
    run->rows_.push_back(std::move(row));
    run->initial_row_.push_back(static_cast<int>(run->rows_.size()) - 1);
  }
  for (const CommitRecord& c : r.commits) {
    run->rows_.push_back(c.phy2log);
    const CommitRow row{c.step, c.time_s, c.layer, static_cast<int>(run->rows_.size()) - 1};
    run->layer_commits_[static_cast<size_t>(c.layer)].push_back(row);
    run->commits_.push_back(row);
  }
  return std::shared_ptr<const RunData>(std::move(run));
}

int RunData::StepAt(double t) const {
  const auto it = std::upper_bound(step_start_s_.begin(), step_start_s_.end(), t);
  if (it == step_start_s_.begin()) return 0;
  return static_cast<int>(it - step_start_s_.begin()) - 1;
}

std::vector<int> RunData::TransfersIn(double t0, double t1) const {
  std::vector<int> out;
  // A transfer overlapping [t0, t1] starts after t0 − longest and before t1.
  const auto first =
      std::lower_bound(transfers_.begin(), transfers_.end(), t0 - longest_transfer_s_,
                       [](const TransferRow& t, double v) { return t.start_s < v; });
  for (auto it = first; it != transfers_.end() && it->start_s <= t1; ++it) {
    if (it->end_s >= t0) out.push_back(static_cast<int>(it - transfers_.begin()));
  }
  return out;
}

const std::vector<int32_t>& RunData::PlacementAt(int layer, int step) const {
  const auto& commits = layer_commits_[layer];
  const auto it = std::upper_bound(commits.begin(), commits.end(), step,
                                   [](int s, const CommitRow& c) { return s < c.step; });
  if (it == commits.begin()) return rows_[initial_row_[layer]];
  return rows_[std::prev(it)->row];
}

std::vector<double> RunData::PeakMemoryAt(int step) const {
  const RearrangementRow* latest = nullptr;
  for (const RearrangementRow& r : rearrangements_) {
    if (r.step <= step) latest = &r;
  }
  std::vector<double> peaks;
  if (latest == nullptr) return peaks;
  for (int64_t staged : latest->staging_peak_bytes)
    peaks.push_back(gpu_resident_bytes_ + static_cast<double>(staged));
  return peaks;
}

std::vector<float> RunData::LoadAt(int layer, int step) const {
  if (loads_.empty()) return {};
  const LoadSnapshot* chosen = &loads_.front();
  for (const LoadSnapshot& s : loads_) {
    if (s.step <= step) chosen = &s;
  }
  return chosen->load[layer];
}

}  // namespace eplb::viewer
