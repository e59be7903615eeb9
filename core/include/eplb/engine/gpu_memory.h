// A GPU's memory under a scenario: what it holds while it serves, and what a rearrangement may
// stage on top (the question behind out-of-memory failures in migration, vLLM #25597). Every
// GPU holds the same: equal slots per GPU, and attention data-parallel, each GPU with its own
// sequences and a copy of the dense layers.
//
//   capacity         cluster.gpu_memory_gb, or the compute.gpu preset's (engine/hardware.h)
//   dense weights    model.dense_params × compute.gemm_bytes
//   expert weights   model.layers × slots per GPU × model.expert_bytes: the redundant slots too
//   KV cache         cluster.kv_cache_gb, or what the step's batch needs: in decode each of the
//                    GPU's sequences (workload.tokens_per_step / the GPUs serving at the start)
//                    holds compute.kv_length
//                    positions; in prefill each of its tokens one position; × kv_bytes_per_token
//   reserved         (1 − cluster.memory_utilization) × capacity: left to what is neither
//                    weights nor KV cache (CUDA context, NCCL and DeepEP buffers, activations);
//                    vLLM's --gpu-memory-utilization, default 0.9
//   resident         their sum;  headroom = capacity − resident
//   staging budget   migration.max_staging_gb, or the headroom: what the rearranger may hold
//                    staged on one GPU at once (migrate/rearranger.h)
//   layer staging    what one layer stages on a GPU: its written slots × model.expert_bytes; at
//                    most slots per GPU × expert_bytes, when every slot of the GPU changes
//   peak memory      resident + the most a GPU held staged during a rearrangement
//
// Thread-safety: pure functions over values.
#pragma once

#include "eplb/base/status.h"
#include "eplb/engine/scenario.h"

namespace eplb {

struct GpuMemory {  // bytes, per GPU
  double capacity = 0;
  double dense_weights = 0;
  double expert_weights = 0;
  double kv_cache = 0;
  double reserved = 0;
  double staging_budget = 0;
  double largest_layer_staging = 0;  // slots per GPU × expert_bytes

  double resident() const { return dense_weights + expert_weights + kv_cache + reserved; }
  double headroom() const { return capacity - resident(); }
};

GpuMemory GpuMemoryOf(const Scenario& s);

// Before a run (engine/run_loop.h): OK when the resident terms fit in the capacity, the staging
// budget in the headroom, and the largest layer's staging in the budget (so a rearrangement can
// always move one layer); otherwise InvalidArgument naming the scenario's file, the field to
// change, its value and the terms. Parsing a scenario does not check this: the step model and
// the kernels (`eplb a2a`, published kernel figures) price shapes that need not hold a model.
Status CheckGpuMemory(const Scenario& s);

}  // namespace eplb
