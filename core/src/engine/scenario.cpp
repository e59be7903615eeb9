#include "eplb/engine/scenario.h"

#include <algorithm>

namespace eplb {

Topology Scenario::topology() const {
  TopologyConfig c;
  c.nodes = cluster.nodes;
  c.gpus_per_node = cluster.gpus_per_node;
  c.slots_per_gpu = num_slots() / num_gpus();
  c.expert_bytes = model.expert_bytes;
  double nvlink_gbps = cluster.nvlink.bandwidth_gbps * cluster.nvlink.efficiency;
  if (cluster.nvswitch_gbps > 0) {
    nvlink_gbps = std::min(nvlink_gbps, cluster.nvswitch_gbps / cluster.gpus_per_node);
  }
  c.nvlink = {nvlink_gbps * 1e9, cluster.nvlink.latency_us * 1e-6};
  // Inter-node flows cross the GPU's PCIe link to reach its NIC: the slower of the two limits
  // them, and an oversubscribed fabric gives each GPU only its share.
  const double nic_gbps =
      std::min(cluster.nic.bandwidth_gbps * cluster.nic.efficiency, cluster.pcie_gbps);
  c.nic = {nic_gbps / cluster.fabric_oversubscription * 1e9, cluster.nic.latency_us * 1e-6};
  return *Topology::Create(c);
}

}  // namespace eplb
