#include "eplb/engine/scenario.h"

#include <algorithm>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "eplb/base/file_io.h"
#include "eplb/engine/scenario_names.h"
#include "eplb/policy/policy.h"

namespace eplb {

const char* FaultKindName(FaultKind kind) {
  return kFaultKindNames.Name(kind);
}
const char* DispatchName(Dispatch d) {
  return kDispatchNames.Name(d);
}
Result<Dispatch> ParseDispatch(const std::string& n) {
  return kDispatchNames.Parse(n);
}
const char* StatisticsName(EplbSpec::Statistics s) {
  return kStatisticsNames.Name(s);
}
Result<EplbSpec::Statistics> ParseStatistics(const std::string& n) {
  return kStatisticsNames.Parse(n);
}
const char* BalancednessGateName(EplbSpec::BalancednessGate g) {
  return kBalancednessGateNames.Name(g);
}
Result<EplbSpec::BalancednessGate> ParseBalancednessGate(const std::string& n) {
  return kBalancednessGateNames.Parse(n);
}
const char* ComputeModelName(ComputeModel m) {
  return kComputeModelNames.Name(m);
}
const char* AllToAllModeName(AllToAllMode m) {
  return kAllToAllModeNames.Name(m);
}
const char* InferenceStageName(InferenceStage s) {
  return kInferenceStageNames.Name(s);
}
Result<ComputeModel> ParseComputeModel(const std::string& n) {
  return kComputeModelNames.Parse(n);
}
Result<AllToAllMode> ParseAllToAllMode(const std::string& n) {
  return kAllToAllModeNames.Parse(n);
}
Result<InferenceStage> ParseInferenceStage(const std::string& n) {
  return kInferenceStageNames.Parse(n);
}

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

MigrationSetUp Scenario::migration_set_up() const {
  MigrationSetUp m;
  m.engine = migration.engine;
  m.transport = migration.transport;
  m.tensors = model.expert_tensors;
  m.layers = model.layers;
  m.experts = model.experts;
  m.slots = num_slots();
  m.ep = ep_shape();
  m.mode = {.batching = migration.batching, .async = eplb.use_async};
  m.hbm_bytes_per_s = cluster.hbm_gbps * 1e9;
  m.host_read_bytes_per_s = cluster.host_read_gbps * 1e9;
  m.host_read_latency_s = cluster.host_read_latency_us * 1e-6;
  return m;
}

MemoryEstimate EstimateRunMemory(const Scenario& s) {
  // Doubles throughout: the point is to refuse sizes whose byte counts would overflow.
  const double layers = s.model.layers, experts = s.model.experts, slots = s.num_slots();
  const double steps = s.run.steps, gpus = s.num_gpus();
  const double rearrangements = steps / s.eplb.step_interval + 1;
  // Bytes per item, in memory and in the folder's text (written from memory): a step's record,
  // metrics line and trace events; a transfer's record, CSV line and trace events.
  constexpr double kPerStep = 64 + 120 + 400;
  constexpr double kPerTransfer = 48 + 80 + 300;
  constexpr double kPerSlot = 3 * 4 + 8;   // phy2log, log2phy, counts; and as JSON text
  constexpr double kPerLoadCell = 4 + 12;  // a window's float, and as JSON text
  constexpr double kPerGpu = 64.0 * 1024;  // the simulator's hosts, links and routes
  const std::vector<std::pair<std::string, double>> terms = {
      {"eplb.window_size × model.layers × model.experts (the sliding window)",
       double(s.eplb.window_size) * layers * experts * 4},
      {"run.steps (one record per step)", steps * kPerStep},
      {"run.steps / eplb.step_interval × model.layers × model.experts (each rearrangement's "
       "window load)",
       rearrangements * layers * experts * kPerLoadCell},
      {"run.steps / eplb.step_interval × model.layers × (model.experts + "
       "eplb.num_redundant_experts) (each rearrangement's placements and transfers)",
       rearrangements * layers * slots * (kPerSlot + kPerTransfer)},
      {"cluster.nodes × cluster.gpus_per_node (the simulated cluster)", gpus * kPerGpu},
  };
  MemoryEstimate out;
  for (const auto& [name, bytes] : terms) {
    out.bytes += bytes;
    if (bytes > out.largest_bytes) {
      out.largest = name;
      out.largest_bytes = bytes;
    }
  }
  return out;
}

Status CheckRunFitsInMemory(const Scenario& s, int64_t available_bytes) {
  // The policy's own work per call, where it grows without bound (the topology-aware search).
  EPLB_RETURN_IF_ERROR(
      CheckPolicyCallSize(s.eplb.policy, s.model.layers, s.num_slots(), s.num_gpus()));
  int64_t physical = 0;
  if (available_bytes <= 0) {
    physical = PhysicalMemoryBytes();
    if (physical <= 0) return Status::Ok();  // unknown: let it try
    available_bytes = physical / 5 * 4;
  }
  const MemoryEstimate e = EstimateRunMemory(s);
  if (e.bytes <= static_cast<double>(available_bytes)) return Status::Ok();
  const auto show = [](double bytes) {
    return bytes >= 9e18 ? std::string("more than 8 EiB")
                         : FormatBytes(static_cast<int64_t>(bytes));
  };
  return Status::InvalidArgument(fmt::format(
      "{}: this run would need about {} of memory, more than the {} it may use{}; most of it "
      "({}) comes from {}: lower those fields",
      s.source.empty() ? "scenario" : s.source, show(e.bytes), show(double(available_bytes)),
      physical > 0 ? fmt::format(" (80% of this machine's {})", FormatBytes(physical)) : "",
      show(e.largest_bytes), e.largest));
}

}  // namespace eplb
