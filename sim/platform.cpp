#include "platform.h"

#include <string>

#include <fmt/format.h>

namespace sg4 = simgrid::s4u;

namespace eplb::sim {

void ConfigureEngine(sg4::Engine& engine) {
  // Bulk transfers take bytes / bandwidth and sharing is max-min fair (shared/notes/simgrid.md).
  engine.set_config("network/model:CM02");
  engine.set_config("network/crosstraffic:0");
  engine.set_config("network/TCP-gamma:0");
  engine.set_config("network/weight-S:0");
}

Platform::Platform(const Topology& topology, double pcie_bytes_per_s, const BackupSpec& backup,
                   double shared_copy_bytes_per_s)
    : topology_(topology), backup_(backup) {
  if (shared_copy_bytes_per_s > 0) {
    BuildOneGpu(shared_copy_bytes_per_s);
    return;
  }
  auto* fabric = sg4::create_star_zone("fabric");
  const int gpn = topology.gpus_per_node();
  const double nvlink = topology.link(LinkClass::kNvlink).bandwidth_bytes_per_s;
  const double nic = topology.link(LinkClass::kNic).bandwidth_bytes_per_s;
  for (int n = 0; n < topology.nodes(); ++n) {
    auto* zone = sg4::create_full_zone("node" + std::to_string(n));
    zone->set_parent(fabric);
    auto* gateway = zone->create_router("gateway" + std::to_string(n));
    std::vector<sg4::Link*> nvl, pcie, nicl;
    for (int g = 0; g < gpn; ++g) {
      const std::string id = std::to_string(n * gpn + g);
      hosts_.push_back(zone->create_host("gpu" + id, 1e15));
      for (auto [list, name, bw] :
           {std::tuple{&nvl, "nvlink", nvlink}, std::tuple{&pcie, "pcie", pcie_bytes_per_s},
            std::tuple{&nicl, "nic", nic}}) {
        sg4::SplitDuplexLink* link = zone->create_split_duplex_link(std::string(name) + id, bw);
        link->set_latency(0);
        list->push_back(link);
        if (list == &nvl) links_[static_cast<int>(LinkClass::kNvlink)].push_back(link);
        if (list == &nicl) links_[static_cast<int>(LinkClass::kNic)].push_back(link);
      }
    }
    for (int a = 0; a < gpn; ++a) {
      sg4::Host* src = hosts_[n * gpn + a];
      for (int b = 0; b < gpn; ++b) {
        if (a == b) continue;
        zone->add_route(src->get_netpoint(), hosts_[n * gpn + b]->get_netpoint(), nullptr, nullptr,
                        {{nvl[a], sg4::LinkInRoute::Direction::UP},
                         {nvl[b], sg4::LinkInRoute::Direction::DOWN}},
                        false);
      }
      zone->add_route(
          src->get_netpoint(), gateway, nullptr, nullptr,
          {{pcie[a], sg4::LinkInRoute::Direction::UP}, {nicl[a], sg4::LinkInRoute::Direction::UP}},
          true);
    }
    // Each GPU's ports, reachable alone: per link class a host per node whose route from a GPU
    // crosses only that GPU's sending links and whose route to a GPU only its receiving links.
    for (int c = 0; c < kNumLinkClasses; ++c) {
      const bool is_nvlink = static_cast<LinkClass>(c) == LinkClass::kNvlink;
      sg4::Host* port =
          zone->create_host(fmt::format("{}-ports{}", is_nvlink ? "nvlink" : "nic", n), 1e15);
      port_hosts_.push_back(port);
      for (int g = 0; g < gpn; ++g) {
        sg4::Host* gpu = hosts_[n * gpn + g];
        using Dir = sg4::LinkInRoute::Direction;
        std::vector<sg4::LinkInRoute> up, down;
        if (is_nvlink) {
          up = {{nvl[g], Dir::UP}};
          down = {{nvl[g], Dir::DOWN}};
        } else {
          up = {{pcie[g], Dir::UP}, {nicl[g], Dir::UP}};
          down = {{nicl[g], Dir::DOWN}, {pcie[g], Dir::DOWN}};
        }
        zone->add_route(gpu->get_netpoint(), port->get_netpoint(), nullptr, nullptr, up, false);
        zone->add_route(port->get_netpoint(), gpu->get_netpoint(), nullptr, nullptr, down, false);
      }
    }
    // The backup: host memory over each GPU's own link, storage through the node's shared one.
    sg4::Host* backup_host = zone->create_host(fmt::format("backup{}", n), 1e15);
    backup_hosts_.push_back(backup_host);
    sg4::Link* storage =
        zone->create_link(fmt::format("storage{}", n), backup.storage_bytes_per_s)->set_latency(0);
    for (int g = 0; g < gpn; ++g) {
      sg4::Link* host_read =
          zone->create_link(fmt::format("host-read{}", n * gpn + g), backup.host_read_bytes_per_s)
              ->set_latency(0);
      std::vector<sg4::LinkInRoute> route;
      if (backup.storage) route.emplace_back(storage);
      route.emplace_back(host_read);
      zone->add_route(backup_host->get_netpoint(), hosts_[n * gpn + g]->get_netpoint(), nullptr,
                      nullptr, route, false);
    }
    zone->seal();
    fabric->add_route(zone->get_netpoint(), nullptr, gateway, nullptr, {}, true);
  }
  fabric->seal();
}

void Platform::BuildOneGpu(double shared_copy_bytes_per_s) {
  using Dir = sg4::LinkInRoute::Direction;
  auto* zone = sg4::create_full_zone("gpu");
  const int ranks = topology_.num_ranks();
  const double stream = topology_.link(LinkClass::kNvlink).bandwidth_bytes_per_s;
  const double nic = topology_.link(LinkClass::kNic).bandwidth_bytes_per_s;
  // Shared, not split-duplex: a device-to-device copy reads and writes the same HBM, and its
  // rate (measured as bytes / time) is what all the ranks' copies together reach.
  shared_copy_ = zone->create_link("gpu-copy", shared_copy_bytes_per_s)->set_latency(0);
  std::vector<sg4::SplitDuplexLink*> streams, nics;
  for (int r = 0; r < ranks; ++r) {
    const std::string id = std::to_string(r);
    hosts_.push_back(zone->create_host("gpu" + id, 1e15));
    streams.push_back(zone->create_split_duplex_link("copy-stream" + id, stream));
    streams.back()->set_latency(0);
    nics.push_back(zone->create_split_duplex_link("nic" + id, nic));
    nics.back()->set_latency(0);
  }
  links_[static_cast<int>(LinkClass::kNvlink)] = streams;
  links_[static_cast<int>(LinkClass::kNic)] = nics;
  for (int a = 0; a < ranks; ++a) {
    for (int b = 0; b < ranks; ++b) {
      if (a == b) continue;
      zone->add_route(hosts_[a]->get_netpoint(), hosts_[b]->get_netpoint(), nullptr, nullptr,
                      {{streams[a], Dir::UP}, {shared_copy_, Dir::NONE}, {streams[b], Dir::DOWN}},
                      false);
    }
  }
  hbm_reader_ = zone->create_host("hbm-reader", 1e15);
  zone->add_route(hbm_reader_->get_netpoint(), hosts_[0]->get_netpoint(), nullptr, nullptr,
                  {{shared_copy_, Dir::NONE}}, false);
  // A step's all-to-all ports: per node and class a host, reached over each rank's own link of
  // that class (the copy streams for NVLink), as on a cluster.
  for (int n = 0; n < topology_.nodes(); ++n) {
    for (int c = 0; c < kNumLinkClasses; ++c) {
      const bool is_nvlink = static_cast<LinkClass>(c) == LinkClass::kNvlink;
      sg4::Host* port =
          zone->create_host(fmt::format("{}-ports{}", is_nvlink ? "nvlink" : "nic", n), 1e15);
      port_hosts_.push_back(port);
      for (int r = 0; r < ranks; ++r) {
        if (topology_.node_of_rank(r) != n) continue;
        sg4::SplitDuplexLink* own = is_nvlink ? streams[r] : nics[r];
        zone->add_route(hosts_[r]->get_netpoint(), port->get_netpoint(), nullptr, nullptr,
                        {{own, Dir::UP}}, false);
        zone->add_route(port->get_netpoint(), hosts_[r]->get_netpoint(), nullptr, nullptr,
                        {{own, Dir::DOWN}}, false);
      }
    }
    sg4::Host* backup_host = zone->create_host(fmt::format("backup{}", n), 1e15);
    backup_hosts_.push_back(backup_host);
    sg4::Link* storage =
        zone->create_link(fmt::format("storage{}", n), backup_.storage_bytes_per_s)->set_latency(0);
    for (int r = 0; r < ranks; ++r) {
      if (topology_.node_of_rank(r) != n) continue;
      sg4::Link* host_read =
          zone->create_link(fmt::format("host-read{}", r), backup_.host_read_bytes_per_s)
              ->set_latency(0);
      std::vector<sg4::LinkInRoute> route;
      if (backup_.storage) route.emplace_back(storage);
      route.emplace_back(host_read);
      zone->add_route(backup_host->get_netpoint(), hosts_[r]->get_netpoint(), nullptr, nullptr,
                      route, false);
    }
  }
  zone->seal();
}

void Platform::SetLinkSlowdown(int rank, LinkClass link, double factor) const {
  const double nominal = topology_.link(link).bandwidth_bytes_per_s;
  sg4::SplitDuplexLink* l = links_[static_cast<int>(link)][static_cast<size_t>(rank)];
  for (sg4::Link* direction : {l->get_link_up(), l->get_link_down()}) {
    direction->set_bandwidth(nominal / factor);
  }
}

}  // namespace eplb::sim
