// What moving a rearrangement's weights costs beyond the bytes' time on the links, built once:
// the transport's own costs (transport.h) under the engine's profile (engine_profile.h), the
// engine's once-per-rearrangement, per-layer, per-expert and per-copy host work, and the caps
// on what a flow or a rank receives. A scenario gives its set-up (engine/scenario.h's
// Scenario::migration_set_up); the simulator's backend pays these costs as its workers run,
// the loop reads what the transport takes (host reads, SMs), and `validate --published` prices
// a layer analytically through PriceTransportLayer, from the same values.
//
// To add a transport: its row in transport.cpp's table; an engine profile's counts for it in
// engine_profile.cpp if an engine counts its operations. Nothing here changes.
//
// Thread-safety: immutable after construction.
#pragma once

#include <cstddef>

#include "eplb/migrate/engine_profile.h"
#include "eplb/migrate/schedule.h"
#include "eplb/migrate/transfer_plan.h"
#include "eplb/migrate/transport.h"
#include "eplb/model/topology.h"

namespace eplb {

// What a scenario says about moving weights.
struct MigrationSetUp {
  Engine engine = Engine::kEplb;
  Transport transport = Transport::kNccl;
  int tensors = 4;  // weight tensors per expert (model.expert_tensors)
  // `layers` MoE layers of `experts` logical experts in `slots` physical slots on `ep`.
  int layers = 0, experts = 0, slots = 0;
  EpShape ep = {};
  WorkerMode mode = {};
  double hbm_bytes_per_s = 0;        // a copy within a GPU
  double host_read_bytes_per_s = 0;  // a read from host memory (host_pool), per GPU
  double host_read_latency_s = 0;
};

// One layer's transport costs as the byte schedule predicts them, slowest rank each.
struct TransportLayerPrice {
  double links_s = 0;     // the schedule's makespan, or the host reads, or the P2P receive cap
  double fixed_s = 0;     // the transport's per-layer cost
  double messages_s = 0;  // the transport's per-message cost on the busiest receiver
  double copies_s = 0;    // the busiest GPU's local copies at HBM speed
  int executions = 1;     // migration.batching: the schedule's rounds, each an execution
  double total_s() const { return links_s + messages_s + copies_s + fixed_s; }
};

class MigrationPricing {
 public:
  explicit MigrationPricing(const MigrationSetUp& set_up);

  const MigrationSetUp& set_up() const { return set_up_; }
  // The transport's costs under the engine: a named engine's counts replace its CPU estimates.
  const TransportCost& transport() const { return transport_; }
  // The engine's host work per rank (zero for eplb).
  const WorkerCosts& worker() const { return worker_; }
  bool from_host() const { return transport_.from_host; }
  bool uses_sms() const { return transport_.uses_sms; }

  // Once per rearrangement, before its layers, on the thread that rearranges.
  double OnceS() const { return once_s_; }
  // On every step while a rearrangement is in flight (an async engine's readiness check).
  double InFlightStepS() const { return in_flight_step_s_; }
  // A rank's host work before its layer's transfers: the transport's, the engine's planning
  // and barrier.
  double LayerStartS() const {
    return transport_.per_layer_s + worker_.per_layer_s + worker_.barrier_s;
  }
  // A rank's host work issuing its `sends`, and its `receives` one after another.
  double SendsS(size_t sends) const { return worker_.per_send_s * static_cast<double>(sends); }
  double ReceivesS(size_t receives) const {
    return (transport_.per_message_s + worker_.per_receive_s) * static_cast<double>(receives);
  }
  // A rank's `copies` local copies of `expert_bytes` each, the engine's copy_ calls included.
  double LocalCopiesS(size_t copies, double expert_bytes) const;
  // The most one of a rank's `flows` concurrent receives carries a second (0: the links
  // decide): the transport's cap, and an engine's P2P receive rate shared among them.
  double FlowCapBytesPerS(size_t flows) const;

  // `topology` with each link at most the transport's flow rate: the one the schedule sees.
  Result<Topology> CappedTopology(const Topology& topology) const;
  // One layer's transport costs as the schedule predicts them on `capped` (CappedTopology).
  // The engine's host work is PriceRearrangement's (engine_profile.h), not counted here.
  TransportLayerPrice PriceTransportLayer(const LayerPlan& plan, const Topology& capped,
                                          ScheduleStrategy strategy, int64_t expert_bytes) const;

 private:
  MigrationSetUp set_up_;
  TransportCost transport_;
  WorkerCosts worker_;
  double once_s_ = 0;
  double in_flight_step_s_ = 0;
};

}  // namespace eplb
