#include "eplb/migrate/transport.h"

#include <array>

#include <fmt/format.h>

#include "eplb/migrate/engine_profile.h"
#include "eplb/migrate/names.h"

namespace eplb {

const char* TransportName(Transport transport) {
  return kTransportNames.Name(transport);
}

Result<Transport> ParseTransport(const std::string& name) {
  if (const auto t = kTransportNames.Find(name)) return *t;
  return Status::InvalidArgument(
      fmt::format("transport '{}' is not one of {}", name, kTransportNames.Joined()));
}

namespace {

// The transports' own numbers, each written here once. The gloo operations and NIXL's polling
// are engine_profile.cpp's per-operation costs (VllmOpCosts), shared with the engines' counts.
//  - UCX's cost model as `ucx_info -d` prints it: cuda_ipc "latency: 1000 nsec, overhead:
//    7000 ns" (vLLM #26382).
constexpr double kUcxCudaIpcOverheadS = 7e-6;
//  - torchft #199's gloo over TCP: all_reduce at 19.3 Gb/s for 40 MB (send/recv taken to run
//    at the same rate).
constexpr double kGlooFlowBytesPerS = 2.4e9;

// The nixl barrier: vLLM's monitored_barrier before the reads, one gloo operation (an
// underestimate: it grows with the ranks); the polling: half of time.sleep(0.0005) on average.
double NixlBarrierS() {
  return VllmOpCosts().gloo_op_s;
}
double NixlPollingS() {
  return VllmOpCosts().nixl_poll_period_s / 2;
}

constexpr std::array<TransportRow, 4> kRows = {{
    {Transport::kNccl, "vLLM `torch_nccl`/`pynccl`, SGLang", "GPU to GPU, on SMs"},
    {Transport::kNixl, "vLLM's default when NIXL is installed",
     "GPU to GPU, one-sided reads on copy engines"},
    {Transport::kGloo, "vLLM `torch_gloo` (its fallback)",
     "GPU to host, gloo over TCP, host to GPU"},
    {Transport::kHostPool, "TensorRT-LLM's host memory pool", "host memory to GPU only"},
}};

std::string Ms(double seconds) {
  return fmt::format("{:.3g} ms", seconds * 1e3);
}
std::string Us(double seconds) {
  return fmt::format("{:.3g} µs", seconds * 1e6);
}

}  // namespace

// Sources beside each value: vLLM's vllm/distributed/eplb/ communicators (one execute() per
// layer; NIXL's monitored_barrier and time.sleep(0.0005) polling); torchft #199 (about 5,000
// small gloo operations a second); TensorRT-LLM's tech blog 4 (host memory pool, in-place
// updates). A message's start-up on NCCL is the link's latency, the topology's.
TransportCost CostOf(Transport transport) {
  TransportCost c;
  switch (transport) {
    case Transport::kNccl:
      c.uses_sms = true;
      break;
    case Transport::kNixl:
      c.per_layer_s = NixlBarrierS() + NixlPollingS();
      c.per_message_s = kUcxCudaIpcOverheadS;
      break;
    case Transport::kGloo:
      c.per_message_s = VllmOpCosts().gloo_message_s;
      c.flow_bytes_per_s = kGlooFlowBytesPerS;
      break;
    case Transport::kHostPool:
      c.from_host = true;
      break;
  }
  return c;
}

std::span<const TransportRow> TransportRows() {
  return kRows;
}

std::string PricedText(Transport transport) {
  const TransportCost c = CostOf(transport);
  switch (transport) {
    case Transport::kNccl:
      return "each message's start-up, the link's latency; with `migration.sms`, the SMs it "
             "holds while a rearrangement is in flight";
    case Transport::kNixl:
      return fmt::format(
          "{} per layer (a gloo barrier before the reads, {}; half of vLLM's {} completion "
          "polling); {} per message (UCX `cuda_ipc` overhead)",
          Ms(c.per_layer_s), Ms(NixlBarrierS()), Ms(2 * NixlPollingS()), Us(c.per_message_s));
    case Transport::kGloo:
      return fmt::format(
          "each flow at most {:.3g} GB/s and each message {} of CPU work (torchft #199's gloo "
          "measurements)",
          c.flow_bytes_per_s / 1e9, Ms(c.per_message_s));
    case Transport::kHostPool:
      return "every expert a GPU would receive from another, read at `cluster.host_read_gbps` "
             "instead; nothing crosses NVLink or a NIC";
  }
  return "";
}

std::string TransportsMarkdown() {
  std::string out =
      "| transport | engine | path | priced beyond the links' rates |\n|---|---|---|---|\n";
  for (const TransportRow& row : kRows) {
    out += fmt::format("| `{}`{} | {} | {} | {} |\n", TransportName(row.transport),
                       row.transport == Transport::kNccl ? " (default)" : "", row.engines, row.path,
                       PricedText(row.transport));
  }
  return out;
}

}  // namespace eplb
