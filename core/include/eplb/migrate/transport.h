// Weight transports: how engines move expert weights between GPUs (`migration.transport`), and
// what each costs beyond its bytes' time on the links. What-ifs that the simulator prices
// (migrate/migration_pricing.h); the GPU backend moves weights over NCCL or CUDA peer copies
// only, and device-run refuses the others.
//
//   nccl       point-to-point sends and receives in one group per layer (vLLM's torch_nccl and
//              pynccl, SGLang), GPU to GPU over NVLink or the NIC at the links' rates; each
//              message's start-up is the link's latency. Runs on SMs that compute loses:
//              migration.sms of them while a rearrangement is in flight (0 leaves them
//              unpriced).
//   nixl       one-sided RDMA reads on copy engines (vLLM's default when NIXL is installed):
//              per layer a CPU barrier before the reads and completion polling, per expert
//              UCX's cuda_ipc overhead (NIXL batches a peer's reads, so an upper estimate). The
//              ranks' barriers are priced as a wait each, not as a synchronisation.
//   gloo       staged through host memory (vLLM's torch_gloo): each expert copied to the host,
//              sent by gloo over TCP and copied back; each flow at most gloo's rate and each
//              message a gloo operation's CPU work, one after another within a round and link
//              class. The flows take the GPUs' own links in the model, not the host path.
//   host_pool  every expert a GPU would receive from another read instead from a copy of the
//              weights in host memory, no GPU-to-GPU traffic (TensorRT-LLM's host memory pool
//              copied in by CPU threads over C2C): priced as reloads at cluster.host_read_gbps,
//              on each GPU's own host link (not shared with its NIC traffic). Copies within a GPU
//              stay HBM copies. The schedule's bounds count transfers only, so they read 0.
//
// Every number is written once, with its source, in transport.cpp's table (TransportRows);
// docs/transports.md's table is TransportsMarkdown() (a test checks it). These per-layer and
// per-message CPU estimates stand for an unnamed engine (migration.engine eplb); a named engine
// profile (engine_profile.h) counts its own operations instead, and CostOf(transport, engine)
// leaves only the rates and paths here.
//
// Thread-safety: immutable values.
#pragma once

#include <span>
#include <string>

#include "eplb/base/status.h"

namespace eplb {

enum class Transport { kNccl, kNixl, kGloo, kHostPool };
const char* TransportName(Transport transport);
Result<Transport> ParseTransport(const std::string& name);

struct TransportCost {
  double per_layer_s = 0;       // per layer and rank, before its transfers
  double per_message_s = 0;     // per expert a rank receives, one after another
  double flow_bytes_per_s = 0;  // the most one flow carries (0: the links decide)
  bool from_host = false;       // written slots read from host memory, not from GPUs
  bool uses_sms = false;        // copies run on SMs (documented; not priced)
};

TransportCost CostOf(Transport transport);

// A transport as docs/transports.md's table describes it.
struct TransportRow {
  Transport transport;
  const char* engines;  // who moves weights this way
  const char* path;     // where the bytes travel
};
// In the enum's order.
std::span<const TransportRow> TransportRows();
// What CostOf(transport) prices, in words, with its numbers and their sources.
std::string PricedText(Transport transport);
// docs/transports.md's table, one row per transport.
std::string TransportsMarkdown();

}  // namespace eplb
