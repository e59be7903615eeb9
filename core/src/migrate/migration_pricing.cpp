#include "eplb/migrate/migration_pricing.h"

#include <algorithm>
#include <vector>

namespace eplb {

MigrationPricing::MigrationPricing(const MigrationSetUp& set_up)
    : set_up_(set_up), transport_(CostOf(set_up.transport, set_up.engine)) {
  const int ranks = set_up.ep.ranks;
  worker_ = WorkerCostsOf(set_up.engine, set_up.transport, set_up.tensors,
                          ranks > 0 ? set_up.slots / ranks : 0, set_up.slots, ranks, set_up.mode);
  once_s_ =
      PriceOnce(set_up.engine, set_up.layers, set_up.experts, set_up.slots, set_up.ep).total_s();
  if (set_up.mode.async) in_flight_step_s_ = AsyncStepOverheadS(set_up.engine, ranks);
}

double MigrationPricing::LocalCopiesS(size_t copies, double expert_bytes) const {
  const auto n = static_cast<double>(copies);
  return n * expert_bytes / set_up_.hbm_bytes_per_s + worker_.per_local_copy_s * n;
}

double MigrationPricing::FlowCapBytesPerS(size_t flows) const {
  double cap = transport_.flow_bytes_per_s;
  if (worker_.receive_bytes_per_s > 0 && flows > 0) {
    const double share = worker_.receive_bytes_per_s / static_cast<double>(flows);
    cap = cap > 0 ? std::min(cap, share) : share;
  }
  return cap;
}

Result<Topology> MigrationPricing::CappedTopology(const Topology& topology) const {
  TopologyConfig links = topology.config();
  if (transport_.flow_bytes_per_s > 0) {
    for (LinkSpec* l : {&links.nvlink, &links.nic}) {
      l->bandwidth_bytes_per_s = std::min(l->bandwidth_bytes_per_s, transport_.flow_bytes_per_s);
    }
  }
  return Topology::Create(links);
}

TransportLayerPrice MigrationPricing::PriceTransportLayer(const LayerPlan& plan,
                                                          const Topology& capped,
                                                          ScheduleStrategy strategy,
                                                          int64_t expert_bytes) const {
  const auto ranks = static_cast<size_t>(capped.num_ranks());
  std::vector<double> received(ranks, 0.0), messages(ranks, 0.0), copies(ranks, 0.0);
  for (const Transfer& t : plan.transfers) {
    received[static_cast<size_t>(t.dst_rank)] += static_cast<double>(t.bytes);
    messages[static_cast<size_t>(t.dst_rank)] += 1;
  }
  for (const LocalCopy& c : plan.local_copies) {
    copies[static_cast<size_t>(c.rank)] += static_cast<double>(expert_bytes);
  }
  auto most = [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); };
  TransportLayerPrice price;
  if (transport_.from_host) {
    for (const Reload& r : plan.reloads) {
      received[static_cast<size_t>(r.rank)] += static_cast<double>(r.bytes);
    }
    price.links_s = most(received) / set_up_.host_read_bytes_per_s + set_up_.host_read_latency_s;
  } else {
    const Schedule schedule = ScheduleTransfers(plan.transfers, capped, strategy);
    price.links_s = schedule.makespan_s;
    // An engine whose P2P ops cap what a rank receives: the busiest receiver at that rate.
    if (const double rate = worker_.receive_bytes_per_s; rate > 0) {
      price.links_s = std::max(price.links_s, most(received) / rate);
    }
    if (set_up_.mode.batching) price.executions = std::max(1, schedule.num_rounds());
    price.messages_s = transport_.per_message_s * most(messages);
  }
  price.copies_s = most(copies) / set_up_.hbm_bytes_per_s;
  price.fixed_s = transport_.per_layer_s;
  return price;
}

}  // namespace eplb
