#include "eplb/engine/gpu_memory.h"

#include <fmt/format.h>

#include "eplb/engine/hardware.h"

namespace eplb {

namespace {

std::string Gb(double bytes) {
  return fmt::format("{:.2f} GB", bytes / 1e9);
}

}  // namespace

GpuMemory GpuMemoryOf(const Scenario& s) {
  GpuMemory m;
  const GpuSpec* gpu = FindGpuPreset(s.compute.gpu);
  m.capacity = (s.cluster.gpu_memory_gb > 0 ? s.cluster.gpu_memory_gb
                                            : (gpu != nullptr ? gpu->memory_gb : 0)) *
               1e9;
  m.dense_weights = s.model.dense_params * s.compute.gemm_bytes;
  const double slot_bytes = static_cast<double>(s.model.expert_bytes);
  m.expert_weights = double(s.model.layers) * s.slots_per_gpu() * slot_bytes;
  if (s.cluster.kv_cache_gb > 0) {
    m.kv_cache = s.cluster.kv_cache_gb * 1e9;
  } else {
    // The step's batch over the GPUs serving at the start (cluster.initial_gpus).
    const double per_gpu = double(s.workload.tokens_per_step) / s.initial_gpus();
    const double positions =
        s.compute.stage == InferenceStage::kDecode ? per_gpu * s.compute.kv_length : per_gpu;
    m.kv_cache = positions * s.model.kv_bytes_per_token;
  }
  m.reserved = (1 - s.cluster.memory_utilization) * m.capacity;
  m.staging_budget =
      s.migration.max_staging_gb > 0 ? s.migration.max_staging_gb * 1e9 : m.headroom();
  m.largest_layer_staging = s.slots_per_gpu() * slot_bytes;
  return m;
}

Status CheckGpuMemory(const Scenario& s) {
  const GpuMemory m = GpuMemoryOf(s);
  const auto fail = [&](const std::string& message) {
    return Status::InvalidArgument(
        fmt::format("{}: {}", s.source.empty() ? "scenario" : s.source, message));
  };
  const std::string terms = fmt::format(
      "dense weights {} (model.dense_params × compute.gemm_bytes), expert weights {} "
      "(model.layers {} × {} slots per GPU × model.expert_bytes), KV cache {}{}, reserved {} "
      "(1 − cluster.memory_utilization of the capacity)",
      Gb(m.dense_weights), Gb(m.expert_weights), s.model.layers, s.slots_per_gpu(), Gb(m.kv_cache),
      s.cluster.kv_cache_gb > 0 ? " (cluster.kv_cache_gb)" : " (the step's batch)", Gb(m.reserved));
  const std::string capacity = s.cluster.gpu_memory_gb > 0
                                   ? "cluster.gpu_memory_gb"
                                   : fmt::format("the {} preset's (compute.gpu)", s.compute.gpu);
  if (m.headroom() <= 0) {
    return fail(
        fmt::format("a GPU would hold {} ({}) but has {}, {}: the model does not fit; "
                    "spread it over more GPUs, use fewer redundant experts, or raise "
                    "cluster.gpu_memory_gb",
                    Gb(m.resident()), terms, Gb(m.capacity), capacity));
  }
  if (s.migration.max_staging_gb > 0 && m.staging_budget > m.headroom()) {
    return fail(
        fmt::format("migration.max_staging_gb is {} but a GPU has {} left after what it "
                    "holds ({}); valid: up to {:.2f} (0: all of it)",
                    s.migration.max_staging_gb, Gb(m.headroom()), terms, m.headroom() / 1e9));
  }
  if (m.largest_layer_staging > m.staging_budget) {
    const bool explicit_budget = s.migration.max_staging_gb > 0;
    return fail(fmt::format(
        "a rearrangement cannot stage even one layer: a layer whose every slot on a GPU "
        "changes stages {} ({} slots × model.expert_bytes) but the staging budget is {} "
        "({}); {}",
        Gb(m.largest_layer_staging), s.slots_per_gpu(), Gb(m.staging_budget),
        explicit_budget ? "migration.max_staging_gb"
                        : fmt::format("what is left of {} after {}", Gb(m.capacity), terms),
        explicit_budget ? fmt::format("raise migration.max_staging_gb to at least {:.2f}",
                                      m.largest_layer_staging / 1e9)
                        : "free memory (fewer redundant experts, a smaller KV cache) or "
                          "raise cluster.gpu_memory_gb"));
  }
  return Status::Ok();
}

}  // namespace eplb
