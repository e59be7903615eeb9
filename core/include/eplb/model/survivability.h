// What a single failure costs a placement: when one failure domain (a GPU, or a node with all of
// its GPUs) is lost, every expert whose replicas all lived there has none left, the tokens routed
// to it are lost (or stall) until its weights are reloaded from a host-memory backup or storage,
// and those weights are the bytes to reload. Measured over a load (the window a policy saw).
//
//   tokens_lost_mean    mean over the domains, each lost alone, of the share of all tokens
//                       routed to experts left without a replica (0 when every expert has
//                       replicas in two domains)
//   tokens_lost_worst   the same for the worst domain
//   experts_lost_mean   mean over the domains of the (layer, expert) pairs left without a replica
//   reload_bytes_mean   experts_lost_mean × expert bytes: what recovery must reload
//
// Thread-safety: pure functions.
#pragma once

#include "eplb/model/load.h"
#include "eplb/model/placement.h"
#include "eplb/model/topology.h"

namespace eplb {

enum class FailureDomain { kGpu, kNode };

struct FailureExposure {
  double tokens_lost_mean = 0;
  double tokens_lost_worst = 0;
  double experts_lost_mean = 0;
  double reload_bytes_mean = 0;
};

// `load` is layers × experts, `placement` of the same shape on `topology`.
FailureExposure ExposureToFailure(const LoadMatrix& load, const Placement& placement,
                                  const Topology& topology, FailureDomain domain);

}  // namespace eplb
