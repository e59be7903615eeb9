#include "eplb/engine/step_model.h"

#include <algorithm>

namespace eplb {

StepModel::StepModel(const Scenario& s)
    : topology_(s.topology()),
      compute_(s.compute),
      layers_(s.model.layers),
      bytes_per_assignment_(static_cast<double>(s.model.hidden) * s.model.activation_bytes) {}

double StepModel::PhaseLatency(LinkClass link) const {
  return layers_ * topology_.link(link).latency_s;
}

double StepModel::PhaseTime(const StepCost& cost) const {
  double phase = 0;
  for (int c = 0; c < kNumLinkClasses; ++c) {
    const auto link = static_cast<LinkClass>(c);
    double busiest = 0;
    for (size_t g = 0; g < cost.send[c].size(); ++g)
      busiest = std::max({busiest, cost.send[c][g], cost.recv[c][g]});
    if (busiest > 0)
      phase = std::max(phase,
                       PhaseLatency(link) + busiest / topology_.link(link).bandwidth_bytes_per_s);
  }
  return phase;
}

void StepModel::Cost(const LoadMatrix& load, const Placement& placement, StepCost& out) {
  const int G = topology_.num_ranks(), gpn = topology_.gpus_per_node(),
            per = topology_.slots_per_gpu();
  double moe = 0, sum_mean = 0, sum_max = 0, imbalance = 0, all_tokens = 0;
  int loaded_layers = 0;
  // Over all layers: each GPU's tokens and each node's. The port bytes are linear in them, so
  // they are formed once per step instead of once per layer.
  std::vector<double>& gpu_sum = out.recv[0];
  gpu_sum.assign(static_cast<size_t>(G), 0.0);
  node_tokens_.assign(static_cast<size_t>(topology_.nodes()), 0.0);
  const int E = placement.num_experts();
  expert_share_.resize(static_cast<size_t>(E));
  out.layer_mean.resize(static_cast<size_t>(placement.num_layers()));
  out.layer_max.resize(static_cast<size_t>(placement.num_layers()));
  for (int l = 0; l < placement.num_layers(); ++l) {
    const auto row = placement.phy2log(l);
    // Each replica takes an equal share of its expert's tokens: one division per expert, not per
    // slot (the same quotients, so the same sums).
    for (int e = 0; e < E; ++e) expert_share_[e] = load(l, e) / placement.logcnt(l, e);
    double total = 0, max = 0;
    for (int g = 0; g < G; ++g) {
      double t = 0;
      for (int s = g * per; s < (g + 1) * per; ++s) {
        if (row[s] != kEmptySlot) t += expert_share_[row[s]];
      }
      gpu_sum[g] += t;
      total += t;
      max = std::max(max, t);
    }
    moe += compute_.layer_fixed_us * 1e-6 + compute_.per_token_us * 1e-6 * max;
    all_tokens += total;
    const double mean = total / G;
    out.layer_mean[static_cast<size_t>(l)] = mean;
    out.layer_max[static_cast<size_t>(l)] = max;
    sum_mean += mean;
    sum_max += max;
    if (mean > 0) {
      imbalance += (max - mean) / mean;
      ++loaded_layers;
    }
  }
  for (int g = 0; g < G; ++g) node_tokens_[topology_.node_of_rank(g)] += gpu_sum[g];
  for (auto* v : {&out.send[0], &out.send[1], &out.recv[1]}) v->resize(static_cast<size_t>(G));
  const double per_assignment = bytes_per_assignment_ / G;
  for (int g = 0; g < G; ++g) {
    const double t = gpu_sum[g], node = node_tokens_[topology_.node_of_rank(g)];
    out.recv[1][g] = t * (G - gpn) * per_assignment;
    out.send[0][g] = (node - t) * per_assignment;
    out.send[1][g] = (all_tokens - node) * per_assignment;
    out.recv[0][g] = t * (gpn - 1) * per_assignment;  // last: gpu_sum is this vector
  }
  out.compute_s = compute_.attention_us * 1e-6 + moe;
  out.dispatch_s = out.combine_s = PhaseTime(out);
  out.balancedness = sum_max > 0 ? sum_mean / sum_max : 1.0;
  out.imbalance_ratio = loaded_layers > 0 ? imbalance / loaded_layers : 0.0;
}

std::vector<PhaseFlow> StepModel::AllToAllFlows(const StepCost& cost, bool combine) const {
  std::vector<PhaseFlow> flows;
  for (int c = 0; c < kNumLinkClasses; ++c) {
    const auto link = static_cast<LinkClass>(c);
    const auto& out = combine ? cost.recv[c] : cost.send[c];
    const auto& in = combine ? cost.send[c] : cost.recv[c];
    for (size_t g = 0; g < out.size(); ++g) {
      const int rank = static_cast<int>(g);
      if (out[g] > 0) flows.push_back({rank, link, true, out[g]});
      if (in[g] > 0) flows.push_back({rank, link, false, in[g]});
    }
  }
  return flows;
}

}  // namespace eplb
