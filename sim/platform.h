// The SimGrid platform of a GPU cluster, built from a Topology: one zone per node with a
// gateway router, and per GPU a host and split-duplex links for NVLink, PCIe and the NIC.
// Intra-node routes cross the sender's NVLink up and the receiver's NVLink down (NVSwitch is
// non-blocking, so it adds no shared link); inter-node routes cross PCIe and the NIC up, the
// fabric (a star, non-blocking), and the NIC and PCIe down. Per node and link class a port host
// lets a flow load one GPU's sending or receiving links alone (an all-to-all phase's port).
//
// One GPU (`shared_copy_bytes_per_s` > 0: eplb device-run --virtual, every rank a virtual one
// on the same GPU): one zone, and every route between two ranks crosses the sender's and the
// receiver's NVLink (here: each rank's copy stream) and one link that all of them share, the
// GPU's device-to-device copy rate (its HBM and copy engines), whatever node the topology puts
// a rank on; the NIC links then carry only a step's all-to-all (sim/one_gpu.h).
//
// Link latencies are zero and the network model is set so that a flow alone on a link takes
// exactly bytes / bandwidth (shared/notes/simgrid.md); callers add the start-up latency.
// This file is the only one that builds platforms, so a SimGrid API change stays here.
#pragma once

#include <vector>

#include <simgrid/s4u.hpp>

#include "eplb/model/topology.h"

namespace eplb::sim {

// Where recovery reads experts no live GPU holds (engine/scenario.h's cluster.backup): per node
// a backup host whose route to each GPU crosses that GPU's host link (host memory over PCIe)
// and, reading from storage, first the node's storage link, which its GPUs share.
struct BackupSpec {
  bool storage = false;
  double host_read_bytes_per_s = 25e9;
  double host_read_latency_s = 10e-6;
  double storage_bytes_per_s = 8e9;
  double storage_latency_s = 500e-6;
  double latency_s() const { return host_read_latency_s + (storage ? storage_latency_s : 0); }
};

// Creates the engine's configuration; call before building a platform.
void ConfigureEngine(simgrid::s4u::Engine& engine);

class Platform {
 public:
  // `pcie_bytes_per_s`: the GPU-to-NIC link. `shared_copy_bytes_per_s` > 0: all ranks on one
  // GPU whose copies share that rate (above).
  Platform(const Topology& topology, double pcie_bytes_per_s, const BackupSpec& backup = {},
           double shared_copy_bytes_per_s = 0);
  simgrid::s4u::Host* host(int rank) const { return hosts_[rank]; }
  // The host that `rank`'s reloads come from (BackupSpec).
  simgrid::s4u::Host* backup_host(int rank) const {
    return backup_hosts_[static_cast<size_t>(topology_.node_of_rank(rank))];
  }
  const BackupSpec& backup() const { return backup_; }
  // The host that reaches `rank`'s ports of class `link` alone: a flow from `rank` to it crosses
  // only the rank's sending links of that class, a flow from it to `rank` only its receiving ones.
  simgrid::s4u::Host* port_host(int rank, LinkClass link) const {
    return port_hosts_[static_cast<size_t>(topology_.node_of_rank(rank)) * kNumLinkClasses +
                       static_cast<size_t>(link)];
  }
  const Topology& topology() const { return topology_; }
  // The link every rank's copies cross on one GPU; null on a cluster.
  simgrid::s4u::Link* shared_copy_link() const { return shared_copy_; }
  // On one GPU, the host whose flows to rank 0 cross only the shared copy link: what an
  // emulated step reads from HBM, competing with the copies (sim/one_gpu.h); null on a cluster.
  simgrid::s4u::Host* hbm_reader_host() const { return hbm_reader_; }
  // A fault slows both directions of `rank`'s link of class `link` to its bandwidth ÷ `factor`
  // (1: back to nominal); flows in flight share the new rate from now on.
  void SetLinkSlowdown(int rank, LinkClass link, double factor) const;

 private:
  void BuildOneGpu(double shared_copy_bytes_per_s);

  Topology topology_;
  BackupSpec backup_;
  simgrid::s4u::Link* shared_copy_ = nullptr;
  simgrid::s4u::Host* hbm_reader_ = nullptr;
  std::vector<simgrid::s4u::Host*> hosts_;
  std::vector<simgrid::s4u::Host*> backup_hosts_;                       // [node]
  std::vector<simgrid::s4u::Host*> port_hosts_;                         // [node × link class]
  std::vector<simgrid::s4u::SplitDuplexLink*> links_[kNumLinkClasses];  // [class][rank]
};

}  // namespace eplb::sim
