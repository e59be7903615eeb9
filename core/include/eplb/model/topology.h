// Topology: the shape of the expert-parallel group and the links between its GPUs.
//
// Ranks are numbered 0..G-1 with G = nodes × gpus_per_node; rank r lives on node
// r / gpus_per_node. Physical slots are numbered 0..P-1 per layer with P = G × slots_per_gpu;
// slot s lives on rank s / slots_per_gpu.
//
// Thread-safety: immutable after construction; safe to share between threads.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "eplb/base/status.h"

namespace eplb {

// Which link a transfer between two ranks crosses.
enum class LinkClass { kNvlink = 0, kNic = 1 };
inline constexpr int kNumLinkClasses = 2;
inline constexpr std::array<LinkClass, kNumLinkClasses> kLinkClasses = {LinkClass::kNvlink,
                                                                        LinkClass::kNic};
const char* LinkClassName(LinkClass link);

// One value per link class, indexed by the class: bytes[LinkClass::kNic], not bytes[1].
template <typename T>
struct PerLink {
  std::array<T, kNumLinkClasses> values{};

  T& operator[](LinkClass link) { return values[static_cast<size_t>(link)]; }
  const T& operator[](LinkClass link) const { return values[static_cast<size_t>(link)]; }
  T sum() const { return values[0] + values[1]; }
  auto begin() { return values.begin(); }
  auto end() { return values.end(); }
  auto begin() const { return values.begin(); }
  auto end() const { return values.end(); }
  bool operator==(const PerLink&) const = default;
};

// One direction of one link: bandwidth in bytes per second and a fixed start-up latency.
struct LinkSpec {
  double bandwidth_bytes_per_s = 0;
  double latency_s = 0;
};

// The largest expert eplb accepts (1 TiB per expert per layer, far beyond any model): byte
// totals over a migration stay within int64 (PlanMigration checks the product).
inline constexpr int64_t kMaxExpertBytes = int64_t{1} << 40;

struct TopologyConfig {
  int nodes = 1;
  int gpus_per_node = 1;
  int slots_per_gpu = 1;
  // Per GPU, per direction. Defaults: H100/H200 NVLink 4 through NVSwitch (450 GB/s) and a
  // rail-optimised 400 Gb/s NIC per GPU (50 GB/s); latencies as measured for p2p start-up.
  LinkSpec nvlink{450e9, 3e-6};
  LinkSpec nic{50e9, 10e-6};
  // Bytes of one expert's weights in one layer (DeepSeek-V3 in FP8: 3 × 7168 × 2048).
  int64_t expert_bytes = 3LL * 7168 * 2048;
};

class Topology {
 public:
  // Validates `config`; the error names the field and value.
  static Result<Topology> Create(const TopologyConfig& config);
  // From the arguments DeepSeek's policy takes: `num_replicas` slots over `num_gpus` GPUs on
  // `num_nodes` nodes, the rest (links, expert bytes) from `base`. The one check that GPUs
  // divide the slots and nodes divide the GPUs, for every front end (CLI, Python).
  static Result<Topology> FromReplicas(int64_t num_replicas, int num_nodes, int num_gpus,
                                       TopologyConfig base = {});

  int nodes() const { return config_.nodes; }
  int gpus_per_node() const { return config_.gpus_per_node; }
  int slots_per_gpu() const { return config_.slots_per_gpu; }
  int num_ranks() const { return config_.nodes * config_.gpus_per_node; }
  int num_slots() const { return num_ranks() * config_.slots_per_gpu; }
  int64_t expert_bytes() const { return config_.expert_bytes; }
  const TopologyConfig& config() const { return config_; }

  int rank_of_slot(int slot) const { return slot / config_.slots_per_gpu; }
  int node_of_rank(int rank) const { return rank / config_.gpus_per_node; }
  int first_slot_of_rank(int rank) const { return rank * config_.slots_per_gpu; }
  bool same_node(int rank_a, int rank_b) const {
    return node_of_rank(rank_a) == node_of_rank(rank_b);
  }
  LinkClass link_between(int src_rank, int dst_rank) const {
    return same_node(src_rank, dst_rank) ? LinkClass::kNvlink : LinkClass::kNic;
  }
  const LinkSpec& link(LinkClass c) const {
    return c == LinkClass::kNvlink ? config_.nvlink : config_.nic;
  }

 private:
  explicit Topology(const TopologyConfig& config) : config_(config) {}
  TopologyConfig config_;
};

}  // namespace eplb
