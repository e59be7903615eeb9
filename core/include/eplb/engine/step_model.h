// The cost of one inference step, from its load and the placement in force.
//
//   GPU tokens     t(l, g) = Σ over g's slots of load(l, e) / replicas(l, e)
//   compute        attention + Σ_l (layer_fixed + per_token × max_g t(l, g)): every MoE layer
//                  waits for its most loaded GPU (the straggler)
//   dispatch       tokens are spread evenly over the GPUs (data-parallel attention), so GPU g
//                  receives t(l, g)·(gpn−1)/G assignments over NVLink and t(l, g)·(G−gpn)/G over
//                  its NIC, and sends Σ_{h on its node, h≠g} t(l, h)/G over NVLink and
//                  Σ_{h on other nodes} t(l, h)/G over its NIC; each assignment carries
//                  hidden × activation_bytes. Combine is the mirror image.
//   a2a phase      per link class: layers × latency + the busiest port's bytes / bandwidth; the
//                  two classes overlap, so a phase lasts as long as the slower class
//   step time      compute + dispatch + combine, on idle links
//
// On links shared with expert migrations the simulator plays each phase as one flow per GPU port
// (AllToAllFlows) and the step lasts longer; on idle links it gives exactly the analytic time.
//
// Thread-safety: a StepModel is not thread-safe (it keeps scratch buffers).
#pragma once

#include <vector>

#include "eplb/engine/scenario.h"
#include "eplb/model/load.h"
#include "eplb/model/placement.h"
#include "eplb/model/topology.h"

namespace eplb {

// The traffic of one GPU port in an a2a phase: everything `rank` sends (outbound) or receives
// over one link class.
struct PhaseFlow {
  int rank;
  LinkClass link;
  bool outbound;
  double bytes;
};

struct StepCost {
  double compute_s = 0;
  double dispatch_s = 0;
  double combine_s = 0;
  double balancedness = 1;                    // of this step's load under the placement (metrics.h)
  double imbalance_ratio = 0;                 // likewise
  std::vector<double> layer_mean, layer_max;  // per layer: mean and busiest GPU's tokens
  // Per link class and rank, the bytes each GPU sends and receives in dispatch.
  std::vector<double> send[kNumLinkClasses], recv[kNumLinkClasses];
  double total_s() const { return compute_s + dispatch_s + combine_s; }
};

class StepModel {
 public:
  explicit StepModel(const Scenario& scenario);
  void Cost(const LoadMatrix& load, const Placement& placement, StepCost& out);

  // One a2a phase as flows: per link class and GPU, one flow through its sending port with all
  // it sends and one through its receiving port with all it receives (none where that is zero).
  // Each port drains on its own, as a real all-to-all's does when a GPU exchanges with many
  // peers at once: a port slowed by a migration delays the phase by its own backlog only. On
  // idle links the busiest port decides, which is exactly the analytic phase time.
  // `combine` swaps the roles of sends and receives.
  std::vector<PhaseFlow> AllToAllFlows(const StepCost& cost, bool combine) const;
  // Layers × latency of `link`: the start-up cost of one phase on it.
  double PhaseLatency(LinkClass link) const;
  const Topology& topology() const { return topology_; }

 private:
  double PhaseTime(const StepCost& cost) const;

  Topology topology_;
  ComputeSpec compute_;
  int layers_;
  double bytes_per_assignment_;
  std::vector<double> node_tokens_;   // per node, over all layers
  std::vector<double> expert_share_;  // load(l, e) / replicas of e, for the current layer
};

}  // namespace eplb
