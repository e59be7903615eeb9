#include "policy/util.h"

#include <algorithm>
#include <numeric>
#include <queue>

namespace eplb::policy_util {

std::vector<int> ReplicaCounts(std::span<const double> load, int slots) {
  const int experts = static_cast<int>(load.size());
  std::vector<int> counts(static_cast<size_t>(experts), 1);
  using Entry = std::pair<double, int>;  // (load per replica, expert)
  auto lower = [](const Entry& a, const Entry& b) {
    return a.first < b.first || (a.first == b.first && a.second > b.second);
  };
  std::priority_queue<Entry, std::vector<Entry>, decltype(lower)> heap(lower);
  for (int e = 0; e < experts; ++e) heap.push({load[e], e});
  for (int i = experts; i < slots; ++i) {
    const int e = heap.top().second;
    heap.pop();
    ++counts[e];
    heap.push({load[e] / counts[e], e});
  }
  return counts;
}

void ExpandReplicas(std::span<const double> load, const std::vector<int>& counts,
                    std::vector<int32_t>& replicas, std::vector<double>& weight) {
  replicas.clear();
  weight.clear();
  for (size_t e = 0; e < counts.size(); ++e) {
    for (int k = 0; k < counts[e]; ++k) {
      replicas.push_back(static_cast<int32_t>(e));
      weight.push_back(load[e] / counts[e]);
    }
  }
}

std::vector<int32_t> PackLpt(const std::vector<int32_t>& replicas,
                             const std::vector<double>& weight, const Topology& topology,
                             std::span<const int> lost_ranks) {
  const int gpus = topology.num_ranks(), per = topology.slots_per_gpu();
  std::vector<size_t> order(replicas.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return weight[a] > weight[b]; });
  std::vector<double> gpu_load(static_cast<size_t>(gpus), 0.0);
  std::vector<int> used(static_cast<size_t>(gpus), 0);
  for (int r : lost_ranks) used[static_cast<size_t>(r)] = per;  // full: their slots stay empty
  std::vector<int32_t> row(static_cast<size_t>(topology.num_slots()), kEmptySlot);
  for (size_t i : order) {
    int best = -1;
    for (int g = 0; g < gpus; ++g) {
      if (used[g] < per && (best < 0 || gpu_load[g] < gpu_load[best])) best = g;
    }
    row[static_cast<size_t>(best) * per + used[best]++] = replicas[i];
    gpu_load[best] += weight[i];
  }
  return row;
}

int LiveSlots(const PolicyInput& input) {
  return input.topology.num_slots() -
         static_cast<int>(input.lost_ranks.size()) * input.topology.slots_per_gpu();
}

std::vector<double> RowGpuLoads(std::span<const double> load, std::span<const int32_t> row,
                                const Topology& topology) {
  std::vector<int> counts(load.size(), 0);
  for (int32_t e : row) {
    if (e != kEmptySlot) ++counts[e];
  }
  std::vector<double> gpu(static_cast<size_t>(topology.num_ranks()), 0.0);
  for (size_t s = 0; s < row.size(); ++s) {
    if (row[s] != kEmptySlot)
      gpu[topology.rank_of_slot(static_cast<int>(s))] += load[row[s]] / counts[row[s]];
  }
  return gpu;
}

int MovedSlots(std::span<const int32_t> a, std::span<const int32_t> b) {
  int moved = 0;
  for (size_t s = 0; s < a.size(); ++s) moved += a[s] != b[s];
  return moved;
}

Placement CurrentOrInitial(const PolicyInput& input) {
  if (input.current != nullptr) return *input.current;
  return *Placement::Initial(static_cast<int>(input.load.rows()),
                             static_cast<int>(input.load.cols()), input.topology.num_slots());
}

Result<Placement> OnLiveRanks(const PolicyInput& input,
                              const std::function<Result<Placement>(const PolicyInput&)>& place) {
  if (input.lost_ranks.empty()) return place(input);
  const Topology& t = input.topology;
  std::vector<int> live;
  for (int r = 0; r < t.num_ranks(); ++r) {
    if (!IsLost(input, r)) live.push_back(r);
  }
  // Whole nodes lost: the others keep their shape.
  bool whole_nodes = true;
  for (int n = 0; n < t.nodes() && whole_nodes; ++n) {
    int lost = 0;
    for (int g = n * t.gpus_per_node(); g < (n + 1) * t.gpus_per_node(); ++g)
      lost += IsLost(input, g);
    whole_nodes = lost == 0 || lost == t.gpus_per_node();
  }
  TopologyConfig config = t.config();
  const int count = static_cast<int>(live.size());
  config.nodes = whole_nodes ? count / t.gpus_per_node() : 1;
  config.gpus_per_node = whole_nodes ? t.gpus_per_node() : count;
  EPLB_ASSIGN_OR_RETURN(Topology compact, Topology::Create(config));
  PolicyInput sub{input.load,          compact,     nullptr, input.num_groups,
                  input.window_chunks, input.tuning};
  EPLB_ASSIGN_OR_RETURN(Placement inner, place(sub));
  const int per = t.slots_per_gpu();
  std::vector<int32_t> flat(static_cast<size_t>(inner.num_layers()) * t.num_slots(), kEmptySlot);
  for (int l = 0; l < inner.num_layers(); ++l) {
    const auto row = inner.phy2log(l);
    int32_t* out = flat.data() + static_cast<size_t>(l) * t.num_slots();
    for (int i = 0; i < count; ++i) {
      for (int k = 0; k < per; ++k) out[live[i] * per + k] = row[static_cast<size_t>(i) * per + k];
    }
  }
  return Placement::Create(inner.num_experts(), t.num_slots(), std::move(flat));
}

Result<Placement> FromRows(int experts, int slots, const std::vector<std::vector<int32_t>>& rows) {
  std::vector<int32_t> flat;
  flat.reserve(rows.size() * static_cast<size_t>(slots));
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  return Placement::Create(experts, slots, std::move(flat));
}

}  // namespace eplb::policy_util
