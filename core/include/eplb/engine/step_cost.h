// What one inference step costs: the StepCost that the step model (step_model.h, private to
// eplb) prices and a backend's StepRunner (eplb_loop.h) runs. Its own header so that running a
// scenario needs the result of the pricing, not the model behind it.
//
// Thread-safety: a plain value.
#pragma once

#include <vector>

#include "eplb/model/topology.h"

namespace eplb {

struct StepCost {
  double compute_s = 0;    // attention and MoE work (with two micro-batches, both of them)
  double attention_s = 0;  // the attention and dense layers' part of compute_s
  // The part of compute_s lost to the normal kernels' SMs (compute.normal_sms) beside it.
  double sm_shared_s = 0;
  double dispatch_s = 0;  // the dispatch time that compute does not hide
  double combine_s = 0;   // likewise combine
  // With two micro-batches, the communication time hidden behind compute, per phase.
  double dispatch_hidden_s = 0, combine_hidden_s = 0;
  double overlap_fill_s = 0;   // with two micro-batches, the compute no communication overlaps
  double balancedness = 1;     // of this step's load under the placement (metrics.h)
  double imbalance_ratio = 0;  // likewise
  std::vector<double> layer_mean, layer_max;  // per layer: mean and busiest GPU's tokens
  // Per link class and rank, the bytes each GPU sends and receives in dispatch, over the step.
  PerLink<std::vector<double>> send, recv;
  // Per link class, Σ over layers of that layer's busiest port (its bytes × the port's link
  // slowdown): each layer's phase waits for its own busiest GPU. With the step split into two
  // micro-batches, the sum of each one's (each waits for its own).
  PerLink<double> layer_busiest_bytes;
  double combine_bytes_ratio = 1;  // combine's bytes per dispatch byte
  // The bytes DeepEP's benchmarks divide by a phase's time to print its "bottleneck bandwidth",
  // for the busiest GPU (dispatch; combine's are these × combine_bytes_ratio): normal kernels
  // count RDMA as tokens × nodes reached (the GPU's own node included) and NVLink as tokens
  // received (its own included); low-latency kernels count every message.
  double counted_rdma_bytes = 0, counted_nvlink_bytes = 0;
  // Token-expert assignments that found no live replica (every GPU holding the expert lost),
  // over layers × top_k: the step's tokens' worth of expert work dropped or held.
  double tokens_lost = 0;
  double total_s() const { return compute_s + dispatch_s + combine_s; }
};

}  // namespace eplb
