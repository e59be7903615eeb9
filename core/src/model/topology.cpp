#include "eplb/model/topology.h"

#include <limits>

#include <cmath>

#include <fmt/format.h>

#include "eplb/model/names.h"

namespace eplb {

const char* LinkClassName(LinkClass link) {
  return kLinkClassNames.Name(link);
}

namespace {

Status CheckLink(const char* name, const LinkSpec& link) {
  if (!(link.bandwidth_bytes_per_s > 0) || !std::isfinite(link.bandwidth_bytes_per_s)) {
    return Status::InvalidArgument(
        fmt::format("{} bandwidth is {} bytes/s; it must be a positive finite number", name,
                    link.bandwidth_bytes_per_s));
  }
  if (!(link.latency_s >= 0) || !std::isfinite(link.latency_s)) {
    return Status::InvalidArgument(
        fmt::format("{} latency is {} s; it must be zero or positive", name, link.latency_s));
  }
  return Status::Ok();
}

}  // namespace

Result<Topology> Topology::Create(const TopologyConfig& config) {
  if (config.nodes < 1) {
    return Status::InvalidArgument(fmt::format("nodes is {}; it must be at least 1", config.nodes));
  }
  if (config.gpus_per_node < 1) {
    return Status::InvalidArgument(
        fmt::format("GPUs per node is {}; it must be at least 1", config.gpus_per_node));
  }
  if (config.slots_per_gpu < 1) {
    return Status::InvalidArgument(
        fmt::format("slots per GPU is {}; it must be at least 1", config.slots_per_gpu));
  }
  if (static_cast<int64_t>(config.nodes) * config.gpus_per_node * config.slots_per_gpu >
      (1 << 24)) {
    return Status::InvalidArgument(
        fmt::format("{} nodes × {} GPUs × {} slots is more than 2^24 slots per layer", config.nodes,
                    config.gpus_per_node, config.slots_per_gpu));
  }
  if (config.expert_bytes < 1 || config.expert_bytes > kMaxExpertBytes) {
    return Status::InvalidArgument(
        fmt::format("expert bytes is {}; it must be within 1..{} (1 TiB)", config.expert_bytes,
                    kMaxExpertBytes));
  }
  EPLB_RETURN_IF_ERROR(CheckLink("NVLink", config.nvlink));
  EPLB_RETURN_IF_ERROR(CheckLink("NIC", config.nic));
  return Topology(config);
}

Result<Topology> Topology::FromReplicas(int64_t num_replicas, int num_nodes, int num_gpus,
                                        TopologyConfig base) {
  if (num_nodes < 1) {
    return Status::InvalidArgument(fmt::format("nodes is {}; it must be at least 1", num_nodes));
  }
  if (num_gpus < 1 || num_gpus % num_nodes != 0) {
    return Status::InvalidArgument(fmt::format(
        "GPUs is {}; it must be a positive multiple of nodes ({})", num_gpus, num_nodes));
  }
  if (num_replicas < 1 || num_replicas % num_gpus != 0) {
    return Status::InvalidArgument(fmt::format(
        "replicas is {}; it must be a positive multiple of GPUs ({})", num_replicas, num_gpus));
  }
  if (num_replicas / num_gpus > std::numeric_limits<int>::max()) {
    return Status::InvalidArgument(
        fmt::format("replicas is {}; that is more slots per GPU than eplb holds", num_replicas));
  }
  base.nodes = num_nodes;
  base.gpus_per_node = num_gpus / num_nodes;
  base.slots_per_gpu = static_cast<int>(num_replicas / num_gpus);
  return Create(base);
}

}  // namespace eplb
