// Weight transports: how engines move expert weights between GPUs (`migration.transport`), and
// what each costs beyond its bytes' time on the links. What-ifs that the simulator prices
// (sim/sim_backend.h); the GPU backend moves weights over NCCL or CUDA peer copies only, and
// device-run refuses the others.
//
//   nccl       point-to-point sends and receives in one group per layer (vLLM's torch_nccl and
//              pynccl, SGLang). GPU to GPU over NVLink or the NIC at the links' rates; each
//              message's start-up is the link's latency (3 µs: nccl-tests' small-message
//              sendrecv on H100). Runs on SMs that compute loses: migration.sms of them while a
//              rearrangement is in flight (0, the default, leaves them unpriced).
//   nixl       one-sided RDMA reads (vLLM's default when NIXL is installed). Copy engines, at the
//              links' rates; per layer a CPU barrier before the reads (one gloo operation,
//              0.2 ms: an underestimate, as vLLM's monitored_barrier grows with the ranks) and
//              completion polling every 0.5 ms (0.25 ms on average); per expert UCX's cuda_ipc
//              overhead (7 µs; NIXL batches a peer's reads, so this is an upper estimate). The
//              ranks' barriers are priced as a wait each, not as a synchronisation.
//   gloo       staged through host memory (vLLM's torch_gloo): each expert copied to the host,
//              sent by gloo over TCP and copied back. Each flow at most gloo's rate (2.4 GB/s)
//              and each message 0.2 ms of CPU work, one after another within a round and link
//              class. The flows take the GPUs' own links in the model, not the host path.
//   host_pool  every expert a GPU would receive from another read instead from a copy of the
//              weights in host memory, no GPU-to-GPU traffic (TensorRT-LLM's host memory pool
//              copied in by CPU threads over C2C): priced as reloads at cluster.host_read_gbps,
//              on each GPU's own host link (not shared with its NIC traffic). Copies within a GPU
//              stay HBM copies. The schedule's bounds count transfers only, so they read 0.
//
// Sources: vLLM's vllm/distributed/eplb/ communicators (one execute() per layer; NIXL's
// monitored_barrier and time.sleep(0.0005) polling); NVIDIA/nccl #1487 (nccl-tests: ~3 µs for a
// small send/recv between two H100s over NVLink); UCX's cost model as `ucx_info -d` prints it
// (vLLM #26382: cuda_ipc "latency: 1000 nsec, overhead: 7000 ns"); torchft #199's gloo over TCP
// (all_reduce: 19.3 Gb/s at 40 MB; about 5,000 small operations per second; send/recv is taken
// to cost the same); TensorRT-LLM's tech blog 4 (host memory pool, in-place updates).
//
// These per-layer and per-message CPU estimates stand for an unnamed engine (migration.engine
// eplb). A named engine profile (migrate/engine_profile.h: vllm, sglang) counts its own
// operations instead, and CostOf(transport, engine) leaves only the rates and paths here.
//
// Thread-safety: immutable values.
#pragma once

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

}  // namespace eplb
