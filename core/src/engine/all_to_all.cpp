#include "eplb/engine/all_to_all.h"

#include <fmt/format.h>

#include "eplb/engine/step_model.h"
#include "eplb/model/load.h"
#include "eplb/model/placement.h"

namespace eplb {

Result<AllToAllResult> SimulateAllToAll(const Scenario& scenario, int tokens_per_gpu,
                                        AllToAllMode mode) {
  if (tokens_per_gpu < 1) {
    return Status::InvalidArgument(
        fmt::format("--tokens is {}; it must be at least 1 (tokens per GPU)", tokens_per_gpu));
  }
  if (scenario.num_gpus() < 2) {
    // One GPU's tokens never leave it: there is no all-to-all to time, and a bandwidth of 0
    // over a link it does not use would read as a result.
    return Status::InvalidArgument(
        fmt::format("the cluster has {} GPU; an all-to-all needs at least 2 (cluster.nodes × "
                    "cluster.gpus_per_node)",
                    scenario.num_gpus()));
  }
  Scenario s = scenario;
  s.model.layers = 1;
  s.compute.micro_batches = 1;
  s.compute.all_to_all = mode;
  s.eplb.dispatch = Dispatch::kEven;  // the expected counts, undrawn
  const int G = s.num_gpus(), E = s.model.experts;
  EPLB_ASSIGN_OR_RETURN(const Placement placement, Placement::Initial(1, E, s.num_slots()));
  // Expected counts of uniform routing: every expert receives the same share of assignments.
  LoadMatrix load(1, E);
  load.setConstant(double(tokens_per_gpu) * G * s.model.top_k / E);
  StepModel model(s);
  StepCost cost;
  model.Cost(load, placement, cost);

  AllToAllResult r;
  r.mode = mode;
  r.ranks = G;
  r.nodes = s.cluster.nodes;
  r.tokens_per_gpu = tokens_per_gpu;
  r.dispatch_s = cost.dispatch_s;
  r.combine_s = cost.combine_s;
  const bool nvl = mode == AllToAllMode::kNormal && r.nodes == 1;
  r.bottleneck = nvl ? "NVL" : "RDMA";
  r.dispatch_bytes = nvl ? cost.counted_nvlink_bytes : cost.counted_rdma_bytes;
  r.combine_bytes = r.dispatch_bytes * cost.combine_bytes_ratio;
  r.dispatch_gbps = r.dispatch_s > 0 ? r.dispatch_bytes / r.dispatch_s / 1e9 : 0;
  r.combine_gbps = r.combine_s > 0 ? r.combine_bytes / r.combine_s / 1e9 : 0;
  return r;
}

}  // namespace eplb
