// The step model's all-to-all (step_model.h): the bytes each GPU port carries in a step's
// dispatch and combine, per layer and over the step (the bulk and low-latency modes, one message
// per assignment; DeepEP's normal kernels, once per node reached), the time of one phase on
// them, and the phase as flows for a simulator. step_model.cpp prices the compute and adds the
// step up.
#include "eplb/engine/step_model.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace eplb {

double StepModel::PhaseLatency(LinkClass link) const {
  return compute_.micro_batches * layers_ * topology_.link(link).latency_s;
}

double StepModel::PhaseOverhead() const {
  if (compute_.all_to_all != AllToAllMode::kLowLatency) return 0;
  return compute_.micro_batches * layers_ * compute_.low_latency_overhead_us * 1e-6;
}

double StepModel::PhaseBandwidth(LinkClass link) const {
  const double bw = topology_.link(link).bandwidth_bytes_per_s;
  if (link == LinkClass::kNvlink && compute_.all_to_all == AllToAllMode::kNormal) {
    return bw * compute_.normal_nvlink_efficiency;
  }
  return bw;
}

double StepModel::BesideCompute() const {
  return compute_.micro_batches == 2 && compute_.all_to_all == AllToAllMode::kNormal
             ? compute_.normal_overlap_slowdown
             : 1.0;
}

double StepModel::PhaseTime(const StepCost& cost, double scale) const {
  double phase = 0;
  for (LinkClass link : kLinkClasses) {
    const std::vector<double>& sent = cost.send[link];
    const std::vector<double>& received = cost.recv[link];
    // A slowed port drains its bytes as slowly as factor × as many at full bandwidth (a healthy
    // port's factor is 1, which leaves its bytes exact).
    double busiest = 0;
    for (size_t g = 0; g < sent.size(); ++g)
      busiest = std::max(busiest, std::max(sent[g], received[g]) * slowdowns_.link[link][g]);
    // Each layer's phase waits for that layer's busiest port, which can differ by layer.
    busiest = std::max(busiest, cost.layer_busiest_bytes[link]);
    if (busiest > 0)
      phase = std::max(
          phase, layers_ * topology_.link(link).latency_s + busiest * scale / PhaseBandwidth(link));
  }
  return phase > 0 ? phase + PhaseOverhead() / compute_.micro_batches : 0.0;
}

StepModel::PortBytes StepModel::DirectPortBytes(int g, double t, double in_node, double all) const {
  // Each serving GPU sends its 1/Gs of every assignment; healthy, Gs = G and every node serves
  // with all its GPUs.
  const bool ranks_changed = RanksChanged();
  const int serving = ServingRanks();
  const int n = topology_.node_of_rank(g);
  const bool source = !ranks_changed || serving_[g];
  const int node_sources =
      ranks_changed ? serving_in_node_[static_cast<size_t>(n)] : topology_.gpus_per_node();
  const double per_assignment = dispatch_bytes_per_token_ / serving;
  return {source ? (in_node - t) * per_assignment : 0.0,
          t * (node_sources - (source ? 1 : 0)) * per_assignment,
          source ? (all - in_node) * per_assignment : 0.0,
          t * (serving - node_sources) * per_assignment};
}

void StepModel::LayerBusiestPorts(double layer_assignments, StepCost& out) {
  const int G = topology_.num_ranks();
  std::fill(node_layer_.begin(), node_layer_.end(), 0.0);
  for (int g = 0; g < G; ++g) node_layer_[topology_.node_of_rank(g)] += gpu_layer_[g];
  PerLink<double> busiest;
  for (int g = 0; g < G; ++g) {
    const PortBytes p = DirectPortBytes(g, gpu_layer_[g], node_layer_[topology_.node_of_rank(g)],
                                        layer_assignments);
    busiest[LinkClass::kNvlink] =
        std::max(busiest[LinkClass::kNvlink],
                 std::max(p.nvlink_out, p.nvlink_in) * slowdowns_.link[LinkClass::kNvlink][g]);
    busiest[LinkClass::kNic] =
        std::max(busiest[LinkClass::kNic],
                 std::max(p.rdma_out, p.rdma_in) * slowdowns_.link[LinkClass::kNic][g]);
  }
  for (LinkClass link : kLinkClasses) out.layer_busiest_bytes[link] += busiest[link];
}

void StepModel::NormalLayerPorts(double assignments, StepCost& out, StepSums& sums) {
  // DeepEP's normal kernels: per remote node reached, one RDMA copy to the GPU of the same
  // rail, which forwards over NVLink to each GPU reached there (see the header).
  const int ranks = topology_.num_ranks(), gpus_per_node = topology_.gpus_per_node(),
            nodes = topology_.nodes();
  const bool ranks_changed = RanksChanged();
  const double k = shape_.top_k, tokens = assignments / k, per_source = tokens / ServingRanks();
  const double b = dispatch_bytes_per_token_;
  // The chance that a token reaches each node, and then each GPU (1 − (1 − share)^top_k).
  std::fill(node_layer_.begin(), node_layer_.end(), 0.0);
  for (int g = 0; g < ranks; ++g) node_layer_[topology_.node_of_rank(g)] += gpu_layer_[g];
  double nodes_reached = 0;
  for (double& h : node_layer_) {
    h = 1 - std::pow(1 - h / assignments, k);
    nodes_reached += h;
  }
  if (shape_.topk_groups > 0 && shape_.topk_groups < shape_.groups) {
    const double cap = shape_.topk_groups * std::ceil(double(nodes) / shape_.groups);
    if (nodes_reached > cap) {
      for (double& h : node_layer_) h *= cap / nodes_reached;
      nodes_reached = cap;
    }
  }
  for (int g = 0; g < ranks; ++g) gpu_layer_[g] = 1 - std::pow(1 - gpu_layer_[g] / assignments, k);
  sums.rdma_counted += per_source * nodes_reached * b;
  PerLink<double> busiest;
  auto& nvlink_slowdown = slowdowns_.link[LinkClass::kNvlink];
  auto& nic_slowdown = slowdowns_.link[LinkClass::kNic];
  for (int n = 0; n < nodes; ++n) {
    double node_reached = 0;
    for (int g = n * gpus_per_node; g < (n + 1) * gpus_per_node; ++g) node_reached += gpu_layer_[g];
    const double h = node_layer_[static_cast<size_t>(n)];
    for (int g = n * gpus_per_node; g < (n + 1) * gpus_per_node; ++g) {
      const double d = gpu_layer_[g];
      const double nvlink_in = tokens * d * (gpus_per_node - 1) / gpus_per_node * b;
      if (ranks_changed && (lost_[g] || !serving_[g])) {
        // A lost GPU moves nothing; an idle one only receives for the experts it holds.
        if (!lost_[g]) {
          normal_nvlink_recv_[g] += nvlink_in;
          busiest[LinkClass::kNvlink] =
              std::max(busiest[LinkClass::kNvlink], nvlink_in * nvlink_slowdown[g]);
        }
        continue;
      }
      const double rdma_out = per_source * (nodes_reached - h) * b,
                   rdma_in = (nodes - 1) * per_source * h * b,
                   nvlink_out = tokens * (node_reached - d) / gpus_per_node * b;
      out.send[LinkClass::kNic][g] += rdma_out;
      out.recv[LinkClass::kNic][g] += rdma_in;
      out.send[LinkClass::kNvlink][g] += nvlink_out;
      normal_nvlink_recv_[g] += nvlink_in;
      nvlink_counted_[g] += tokens * d * b;
      busiest[LinkClass::kNvlink] = std::max(busiest[LinkClass::kNvlink],
                                             std::max(nvlink_out, nvlink_in) * nvlink_slowdown[g]);
      busiest[LinkClass::kNic] =
          std::max(busiest[LinkClass::kNic], std::max(rdma_out, rdma_in) * nic_slowdown[g]);
    }
  }
  for (LinkClass link : kLinkClasses) out.layer_busiest_bytes[link] += busiest[link];
}

void StepModel::NormalStepPorts(StepCost& out) {
  out.recv[LinkClass::kNvlink] = normal_nvlink_recv_;
}

void StepModel::DirectStepPorts(StepCost& out, double assignments) {
  // The port bytes of the bulk and low-latency modes are linear in each GPU's and each node's
  // tokens, so they are formed once per pass from the sums over layers.
  const int ranks = topology_.num_ranks();
  for (int g = 0; g < ranks; ++g) node_tokens_[topology_.node_of_rank(g)] += gpu_step_[g];
  for (int g = 0; g < ranks; ++g) {
    const PortBytes p =
        DirectPortBytes(g, gpu_step_[g], node_tokens_[topology_.node_of_rank(g)], assignments);
    out.send[LinkClass::kNvlink][g] = p.nvlink_out;
    out.recv[LinkClass::kNvlink][g] = p.nvlink_in;
    out.send[LinkClass::kNic][g] = p.rdma_out;
    out.recv[LinkClass::kNic][g] = p.rdma_in;
  }
}

std::vector<PhaseFlow> StepModel::AllToAllFlows(const StepCost& cost, bool combine) const {
  std::vector<PhaseFlow> flows;
  for (LinkClass link : kLinkClasses) {
    // Where the kernels run below the link's bandwidth, a flow carries the bytes that take as
    // long at the link's own.
    const double scale = (combine ? cost.combine_bytes_ratio : 1.0) *
                         (topology_.link(link).bandwidth_bytes_per_s / PhaseBandwidth(link)) *
                         BesideCompute();
    const auto& out = combine ? cost.recv[link] : cost.send[link];
    const auto& in = combine ? cost.send[link] : cost.recv[link];
    for (size_t g = 0; g < out.size(); ++g) {
      const int rank = static_cast<int>(g);
      if (out[g] > 0) flows.push_back({rank, link, true, out[g] * scale});
      if (in[g] > 0) flows.push_back({rank, link, false, in[g] * scale});
    }
  }
  return flows;
}

}  // namespace eplb
