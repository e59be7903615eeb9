// The one definition of the run folder's CSV columns: name, unit, meaning, how the value is
// written, and where it lives in the record. The writers, the readers and RunFolderFiles()
// (run_folder_columns.cpp) are all generated from the tables below.
#include "io/run_folder_fields.h"

#include <type_traits>
#include <vector>

namespace eplb::run_folder {
namespace {

// A field stored in member M of Row (or of a base of Row).
template <typename Row, auto M>
Field<Row> Col(RunFolderColumn doc, Format format, bool added_later = false) {
  return {doc, format,
          [](const Row& r) {
            using T = std::remove_cvref_t<decltype(r.*M)>;
            if constexpr (std::is_floating_point_v<T>) {
              return Cell{0, static_cast<double>(r.*M)};
            } else {
              return Cell{static_cast<int64_t>(r.*M), 0};
            }
          },
          [](Row& r, const Cell& c) {
            using T = std::remove_cvref_t<decltype(r.*M)>;
            if constexpr (std::is_floating_point_v<T>) {
              r.*M = static_cast<T>(c.d);
            } else {
              r.*M = static_cast<T>(c.i);
            }
          },
          added_later};
}

}  // namespace

const std::vector<Field<StepRecord>>& MetricsFields() {
  using R = StepRecord;
  static const std::vector<Field<R>> fields = {
      Col<R, &R::step>({"step", "", "the step's index, from 0"}, Format::kInt32),
      Col<R, &R::start_s>({"time_s", "s", "when the step started, in the backend's clock"},
                          Format::kReal9),
      Col<R, &R::step_s>({"step_s", "s", "the step's duration as the backend ran it"},
                         Format::kReal9),
      Col<R, &R::idle_s>({"idle_step_s", "s", "the same step on idle links (engine/step_model.h)"},
                         Format::kReal9),
      Col<R, &R::balancedness>(
          {"balancedness", "1",
           "vLLM's mean/max GPU load of the step's load under the placement in force"},
          Format::kFixed6),
      Col<R, &R::imbalance_ratio>(
          {"imbalance_ratio", "1", "TensorRT-LLM's (max − mean)/mean GPU load, over layers"},
          Format::kFixed6),
      Col<R, &R::bytes_in_flight>(
          {"bytes_in_flight", "bytes", "migration bytes of layers not yet committed"},
          Format::kInt64),
      Col<R, &R::stalled_s>(
          {"stalled_s", "s",
           "time the step boundary after the step blocked (a rearrangement's policy and start, "
           "a stop-the-world wait, layer commits; the next step's latency holds it), or before it "
           "for a recovery that serving waits for"},
          Format::kReal9),
      Col<R, &R::tokens_lost>(
          {"tokens_lost", "tokens",
           "token-expert assignments that found no live replica, ÷ (layers × top_k) "
           "(engine/step_model.h): 0 unless a GPU was lost"},
          Format::kReal9, /*added_later=*/true),
      Col<R, &R::serving_gpus>(
          {"serving_gpus", "", "GPUs live and serving during the step (0: not recorded)"},
          Format::kInt32, /*added_later=*/true),
      Col<R, &R::latency_s>(
          {"latency_s", "s",
           "the step's latency as its requests see it: from the previous step's end to this "
           "one's, so step_s plus every stall before it (a stop-the-world rearrangement's, a "
           "recovery's); summary.json's latency_s percentiles are of this column, step_time_s's "
           "of step_s"},
          Format::kReal9, /*added_later=*/true),
  };
  return fields;
}

const std::vector<Field<TransferRecord>>& TransferFields() {
  using R = TransferRecord;
  static const std::vector<Field<R>> fields = {
      Col<R, &R::layer>({"layer", "", "the MoE layer"}, Format::kInt32),
      Col<R, &R::expert>({"expert", "", "the logical expert moved"}, Format::kInt32),
      Col<R, &R::src_rank>({"src_rank", "", "the GPU it was read from"}, Format::kInt32),
      Col<R, &R::dst_rank>({"dst_rank", "", "the GPU it was written to"}, Format::kInt32),
      Col<R, &R::bytes>({"bytes", "bytes", "the expert's weights"}, Format::kInt64),
      Col<R, &R::link>({"link", "", "the link class it crossed: nvlink or nic"}, Format::kLink),
      Col<R, &R::start_s>({"start_s", "s", "its flow's start"}, Format::kReal9),
      Col<R, &R::end_s>({"end_s", "s", "its flow's end (bytes arrived)"}, Format::kReal9),
  };
  return fields;
}

const std::vector<Field<LayerBalanceRow>>& LayerBalanceFields() {
  using R = LayerBalanceRow;
  static const std::vector<Field<R>> fields = {
      Col<R, &R::first_step>({"first_step", "", "the span's first step"}, Format::kInt32),
      Col<R, &R::last_step>({"last_step", "", "its last step"}, Format::kInt32),
      Col<R, &R::layer>({"layer", "", "the MoE layer"}, Format::kInt32),
      Col<R, &R::balancedness>(
          {"balancedness", "1",
           "the layer's Σ mean / Σ max GPU tokens over the span's steps; 1 is perfect"},
          Format::kFixed6),
  };
  return fields;
}

const std::vector<Field<RearrangementRow>>& RearrangementFields() {
  using R = RearrangementRow;
  using B = RearrangementRecord;
  static const std::vector<Field<R>> fields = {
      Col<R, &B::step>({"step", "", "the step after which it started"}, Format::kInt32),
      Col<R, &B::start_s>({"start_s", "s", "when the policy ran"}, Format::kReal9),
      Col<R, &B::end_s>({"end_s", "s", "its last commit; −1 if it never finished"}, Format::kReal9),
      Col<R, &B::layers>({"layers", "", "layers whose placement changed"}, Format::kInt32),
      Col<R, &B::transfers>({"transfers", "", "expert transfers"}, Format::kInt64),
      {{"bytes_nvlink", "bytes", "bytes moved over NVLink"},
       Format::kInt64,
       [](const R& r) {
         return Cell{r.bytes[LinkClass::kNvlink], 0};
       },
       [](R& r, const Cell& c) { r.bytes[LinkClass::kNvlink] = c.i; }},
      {{"bytes_nic", "bytes", "bytes moved over NICs"},
       Format::kInt64,
       [](const R& r) {
         return Cell{r.bytes[LinkClass::kNic], 0};
       },
       [](R& r, const Cell& c) { r.bytes[LinkClass::kNic] = c.i; }},
      Col<R, &B::predicted_makespan_s>(
          {"predicted_makespan_s", "s", "Σ over layers of the schedule's makespan (schedule.h)"},
          Format::kReal9),
      Col<R, &B::lower_bound_s>(
          {"lower_bound_s", "s",
           "no backend could stage it faster: Σ of the layers' bounds with one staging buffer, "
           "the bound of all transfers together when layers overlap (Rearranger::lower_bound_s)"},
          Format::kReal9),
      Col<R, &B::policy_ms>({"policy_ms", "ms", "wall time of the policy"}, Format::kFixed3),
      Col<R, &B::window_balancedness_before>(
          {"window_balancedness_before", "1",
           "balancedness of the window under the old placement (after a loss: over the serving "
           "GPUs, live replicas only; the tokens of experts left without one are not counted)"},
          Format::kFixed6),
      Col<R, &B::window_balancedness_after>(
          {"window_balancedness_after", "1", "balancedness of the window under the new placement"},
          Format::kFixed6),
      Col<R, &B::window_balancedness_bound>(
          {"window_balancedness_bound", "1",
           "the best any placement could do on that window (policy/balance_bound.h)"},
          Format::kFixed6),
      Col<R, &R::following_balancedness>(
          {"following_balancedness", "1",
           "mean balancedness of the steps it served, up to the next rearrangement"},
          Format::kFixed6),
      Col<R, &B::reason>({"reason", "",
                          "why it ran: interval (every eplb.step_interval steps), recovery (GPUs "
                          "were lost), scale (a scale fault)"},
                         Format::kReason, /*added_later=*/true),
      Col<R, &B::cancelled>(
          {"cancelled", "",
           "1 when a lost GPU stopped it part way (its committed layers stay new)"},
          Format::kInt32, /*added_later=*/true),
      Col<R, &B::bytes_reloaded>(
          {"bytes_reloaded", "bytes",
           "experts read from the backup (cluster.backup): those no live GPU held, and with "
           "migration.transport host_pool every expert a GPU would have received"},
          Format::kInt64, /*added_later=*/true),
      Col<R, &R::staging_peak_max_bytes>(
          {"staging_peak_bytes", "bytes",
           "the most any GPU held staged at once: layers begun and not committed, each its "
           "written slots × model.expert_bytes (engine/gpu_memory.h)"},
          Format::kInt64, /*added_later=*/true),
      Col<R, &R::peak_memory_bytes>(
          {"peak_memory_bytes", "bytes",
           "resident memory per GPU + staging_peak_bytes: the fullest any GPU was "
           "(engine/gpu_memory.h)"},
          Format::kInt64, /*added_later=*/true),
      Col<R, &B::engine_once_s>(
          {"engine_once_s", "s",
           "the engine's host work once per rearrangement: the load window's all_reduce, its "
           "policy on the CPU, the maps rebuilt (migration.engine; migrate/engine_profile.h; 0 "
           "for eplb)"},
          Format::kReal9, /*added_later=*/true),
      Col<R, &B::engine_planning_s>(
          {"engine_planning_s", "s", "Σ over layers of the slowest rank's planning (numpy, loops)"},
          Format::kReal9, /*added_later=*/true),
      Col<R, &B::engine_transfer_s>(
          {"engine_transfer_s", "s",
           "Σ over layers of the slowest rank's calls issuing and completing the transfers "
           "(per tensor per expert: isend/irecv and waits, or NIXL's calls and releases)"},
          Format::kReal9, /*added_later=*/true),
      Col<R, &B::engine_barrier_s>(
          {"engine_barrier_s", "s",
           "Σ over layers of the engine's barrier (NIXL's monitored_barrier)"},
          Format::kReal9, /*added_later=*/true),
      Col<R, &B::engine_polling_s>(
          {"engine_polling_s", "s",
           "Σ over layers of the completion polling beyond the links' time (NIXL: 0.5 ms period)"},
          Format::kReal9, /*added_later=*/true),
      Col<R, &B::engine_writeback_s>(
          {"engine_writeback_s", "s",
           "Σ over layers of the slowest rank's write-back copies (vLLM async: on the main "
           "thread, whose per-layer apply also waits an event and updates the layer's maps, "
           "~0.05 ms a layer not in this column; its stall is in metrics.csv's stalled_s)"},
          Format::kReal9, /*added_later=*/true),
      Col<R, &B::stalled_s>(
          {"stalled_s", "s",
           "Σ over the step boundaries it blocked of the time they blocked: its policy on the "
           "main thread, the engine's host work as it starts, a stop-the-world wait, its layers' "
           "commits and applies (metrics.csv's stalled_s, faults' stalls apart), over all its "
           "steps"},
          Format::kReal9, /*added_later=*/true),
      Col<R, &B::slowed_s>(
          {"slowed_s", "s",
           "Σ over the steps it was in flight of the step's time beyond the same step on idle "
           "links (step_s − idle_step_s): what it cost without blocking, over all its steps"},
          Format::kReal9, /*added_later=*/true),
  };
  return fields;
}

const std::vector<Field<GpuMemoryRow>>& GpuMemoryFields() {
  using R = GpuMemoryRow;
  static const std::vector<Field<R>> fields = {
      Col<R, &R::rearrangement>(
          {"rearrangement", "", "its line in rearrangements.csv, counting from 0"}, Format::kInt32),
      Col<R, &R::step>({"step", "", "the step after which it started"}, Format::kInt32),
      Col<R, &R::rank>({"rank", "", "the GPU"}, Format::kInt32),
      Col<R, &R::staging_peak_bytes>(
          {"staging_peak_bytes", "bytes",
           "the most the GPU held staged at once during the rearrangement (0: it staged nothing, "
           "or another process ran it)"},
          Format::kInt64),
      Col<R, &R::peak_memory_bytes>(
          {"peak_memory_bytes", "bytes",
           "resident memory per GPU (summary.json gpu_memory) + staging_peak_bytes"},
          Format::kInt64),
  };
  return fields;
}

}  // namespace eplb::run_folder
