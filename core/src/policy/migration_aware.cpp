#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <thread>

#include "eplb/model/slot_preservation.h"
#include "eplb/policy/deepseek.h"
#include "eplb/policy/policies.h"
#include "policy/parallel_for.h"
#include "policy/util.h"

namespace eplb {
namespace {

using policy_util::RowGpuLoads;

// What a layer's placement costs over the next interval, in seconds: the straggler's compute
// on every step it serves, plus the weighted time to bring in the experts it lacks (each GPU's
// incoming bytes over its link, the slowest GPU deciding).
class LayerCost {
 public:
  LayerCost(std::span<const double> layer_load, std::span<const int32_t> current_row,
            const Topology& topology, const PolicyTuning& m)
      : load(layer_load),
        current(current_row),
        topo(topology),
        balance_per_token_(m.serve_steps * m.seconds_per_token / m.window_steps),
        weight_(m.weight),
        experts_(static_cast<int>(layer_load.size())),
        on_gpu_(static_cast<size_t>(topology.num_ranks()) * experts_, 0),
        on_node_(static_cast<size_t>(topology.nodes()) * experts_, 0) {
    for (int s = 0; s < topo.num_slots(); ++s) {
      if (current[s] == kEmptySlot) continue;
      const int g = topo.rank_of_slot(s);
      on_gpu_[static_cast<size_t>(g) * experts_ + current[s]] = 1;
      on_node_[static_cast<size_t>(topo.node_of_rank(g)) * experts_ + current[s]] = 1;
    }
    const auto bytes = static_cast<double>(topo.expert_bytes());
    nvlink_s_ = bytes / topo.link(LinkClass::kNvlink).bandwidth_bytes_per_s;
    nic_s_ = bytes / topo.link(LinkClass::kNic).bandwidth_bytes_per_s;
  }

  // How expert `e` reaches slot `s` of GPU g: 0 already there (or empty), 1 over NVLink, 2 over
  // a NIC. A GPU's incoming time is a count of each, so a swap is priced in O(1).
  int Arrival(int s, int g, int32_t e) const {
    if (e == kEmptySlot || e == current[s] || on_gpu_[static_cast<size_t>(g) * experts_ + e]) {
      return 0;
    }
    return on_node_[static_cast<size_t>(topo.node_of_rank(g)) * experts_ + e] ? 1 : 2;
  }
  // Seconds for `nvlink` experts over NVLink and `nic` over NICs.
  double IncomingTime(int nvlink, int nic) const { return nvlink * nvlink_s_ + nic * nic_s_; }
  // Seconds GPU g spends receiving the experts of `row` it did not hold.
  double Incoming(std::span<const int32_t> row, int g) const {
    const int per = topo.slots_per_gpu();
    int by[3] = {0, 0, 0};
    for (int s = g * per; s < (g + 1) * per; ++s) ++by[Arrival(s, g, row[s])];
    return IncomingTime(by[1], by[2]);
  }
  double Balance(double max_gpu_load) const { return balance_per_token_ * max_gpu_load; }
  // How much hotter a replica must be than another before one is re-pointed: grows with the
  // weight of moving bytes; none when moving is free.
  double hysteresis() const { return 0.25 * weight_; }
  double Move(double max_incoming_s) const { return weight_ * max_incoming_s; }
  double Total(std::span<const int32_t> row) const {
    const auto gpu = RowGpuLoads(load, row, topo);
    double incoming = 0;
    for (int g = 0; g < topo.num_ranks(); ++g) incoming = std::max(incoming, Incoming(row, g));
    return Balance(*std::max_element(gpu.begin(), gpu.end())) + Move(incoming);
  }

  const std::span<const double> load;
  const std::span<const int32_t> current;
  const Topology& topo;

 private:
  double balance_per_token_, weight_;
  int experts_;
  std::vector<char> on_gpu_, on_node_;
  double nvlink_s_ = 0, nic_s_ = 0;
};

// Replica counts reached from `current` by moving one replica at a time from the expert that
// misses it least (smallest load per replica after losing one) to the hottest expert (largest
// load per replica), while the hot one's load per replica exceeds the donor's by more than
// `hysteresis`: small gains are not worth moving an expert for. Empty slots are filled first.
std::vector<int> TargetCounts(std::span<const double> load, const std::vector<int>& current,
                              int slots, double hysteresis) {
  std::vector<int> counts = current;
  int used = 0;
  for (int c : counts) used += c;
  for (size_t e = 0; e < counts.size() && used < slots; ++e) {
    if (counts[e] == 0) {
      counts[e] = 1;
      ++used;
    }
  }
  auto per = [&](size_t e, int c) { return load[e] / c; };
  while (used < slots) {  // empty slots go to the hottest experts
    size_t hot = 0;
    for (size_t e = 1; e < counts.size(); ++e) {
      if (per(e, counts[e]) > per(hot, counts[hot])) hot = e;
    }
    ++counts[hot];
    ++used;
  }
  for (size_t guard = 0; guard < static_cast<size_t>(slots); ++guard) {
    size_t hot = 0;
    for (size_t e = 1; e < counts.size(); ++e) {
      if (per(e, counts[e]) > per(hot, counts[hot])) hot = e;
    }
    int donor = -1;
    for (size_t e = 0; e < counts.size(); ++e) {
      if (e == hot || counts[e] < 2) continue;
      if (donor < 0 || per(e, counts[e] - 1) < per(static_cast<size_t>(donor), counts[donor] - 1))
        donor = static_cast<int>(e);
    }
    if (donor < 0 || per(hot, counts[hot]) <=
                         (1 + hysteresis) * per(static_cast<size_t>(donor), counts[donor] - 1))
      break;
    --counts[donor];
    ++counts[hot];
  }
  return counts;
}

// The three largest of `values` with their indices, so that the largest outside any two
// indices is found in O(1).
class TopThree {
 public:
  explicit TopThree(const std::vector<double>& values) {
    for (int i = 0; i < static_cast<int>(values.size()); ++i) {
      const double v = values[i];
      if (v > value_[0]) {
        value_[2] = value_[1], index_[2] = index_[1];
        value_[1] = value_[0], index_[1] = index_[0];
        value_[0] = v, index_[0] = i;
      } else if (v > value_[1]) {
        value_[2] = value_[1], index_[2] = index_[1];
        value_[1] = v, index_[1] = i;
      } else if (v > value_[2]) {
        value_[2] = v, index_[2] = i;
      }
    }
  }
  // The largest of the values outside indices a and b (0 when there is none).
  double MaxExcept(int a, int b) const {
    for (int k = 0; k < 3; ++k) {
      if (index_[k] != a && index_[k] != b) return value_[k];
    }
    return 0;
  }

 private:
  double value_[3] = {0, 0, 0};  // every value is >= 0
  int index_[3] = {-1, -1, -1};
};

// Reaches the balance-optimal replica counts from the current row with few moves: excess
// replicas leave the busiest GPUs, missing ones fill the freed slots on the least loaded GPUs,
// then swaps off the busiest GPU are kept while they pay for their moves.
std::vector<int32_t> Repair(const LayerCost& cost) {
  const Topology& topo = cost.topo;
  const auto load = cost.load;
  const int per = topo.slots_per_gpu(), gpus = topo.num_ranks();
  std::vector<int32_t> row(cost.current.begin(), cost.current.end());
  std::vector<int> counts(load.size(), 0);
  for (int32_t e : row) {
    if (e != kEmptySlot) ++counts[e];
  }
  const std::vector<int> target = TargetCounts(load, counts, topo.num_slots(), cost.hysteresis());
  auto weight = [&](int32_t e) { return e == kEmptySlot ? 0.0 : load[e] / target[e]; };
  std::vector<double> gpu(static_cast<size_t>(gpus), 0.0);
  auto recompute = [&] {
    std::fill(gpu.begin(), gpu.end(), 0.0);
    for (size_t s = 0; s < row.size(); ++s)
      gpu[topo.rank_of_slot(static_cast<int>(s))] += weight(row[s]);
  };
  recompute();
  std::vector<int> free_slots;
  for (size_t e = 0; e < load.size(); ++e) {
    while (counts[e] > target[e]) {
      int slot = -1;
      for (int s = 0; s < static_cast<int>(row.size()); ++s) {
        if (row[s] == static_cast<int32_t>(e) &&
            (slot < 0 || gpu[topo.rank_of_slot(s)] > gpu[topo.rank_of_slot(slot)]))
          slot = s;
      }
      gpu[topo.rank_of_slot(slot)] -= weight(row[slot]);
      row[slot] = kEmptySlot;
      free_slots.push_back(slot);
      --counts[e];
    }
  }
  for (int s = 0; s < static_cast<int>(row.size()); ++s) {
    if (row[s] == kEmptySlot &&
        std::find(free_slots.begin(), free_slots.end(), s) == free_slots.end())
      free_slots.push_back(s);
  }
  std::vector<int32_t> missing;
  for (size_t e = 0; e < load.size(); ++e) {
    for (int k = counts[e]; k < target[e]; ++k) missing.push_back(static_cast<int32_t>(e));
  }
  std::stable_sort(missing.begin(), missing.end(),
                   [&](int32_t a, int32_t b) { return weight(a) > weight(b); });
  for (int32_t e : missing) {
    auto best = free_slots.end();
    for (auto it = free_slots.begin(); it != free_slots.end(); ++it) {
      if (best == free_slots.end() || gpu[topo.rank_of_slot(*it)] < gpu[topo.rank_of_slot(*best)])
        best = it;
    }
    row[*best] = e;
    gpu[topo.rank_of_slot(*best)] += weight(e);
    free_slots.erase(best);
  }
  // Swaps off the busiest GPU, kept while the interval's saving beats their moving cost. Each
  // candidate changes two GPUs, so it is priced from those two (their arrival counts change by
  // the two slots' arrivals) and the others' maxima: O(1) per candidate. Candidates that cannot
  // beat the best so far are pruned by bounds that never prune one that could.
  std::vector<double> incoming(static_cast<size_t>(gpus));
  std::vector<std::array<int, 3>> arrivals(static_cast<size_t>(gpus), {0, 0, 0});
  for (int g = 0; g < gpus; ++g) {
    for (int s = g * per; s < (g + 1) * per; ++s) ++arrivals[g][cost.Arrival(s, g, row[s])];
    incoming[g] = cost.IncomingTime(arrivals[g][1], arrivals[g][2]);
  }
  double total = cost.Balance(*std::max_element(gpu.begin(), gpu.end())) +
                 cost.Move(*std::max_element(incoming.begin(), incoming.end()));
  std::vector<double> slot_weight(row.size());  // weight(row[s]), kept with the swaps
  for (size_t s = 0; s < row.size(); ++s) slot_weight[s] = weight(row[s]);
  for (int iter = 0; iter < 4 * topo.num_slots(); ++iter) {
    const int g = static_cast<int>(std::max_element(gpu.begin(), gpu.end()) - gpu.begin());
    const TopThree top_load(gpu), top_in(incoming);
    double best_total = total;
    int best_a = -1, best_b = -1;
    for (int h = 0; h < gpus; ++h) {
      // A swap lowers g only by giving h more than it takes: h must be below g to gain, and it
      // ends above gpu[h], while the other GPUs keep their maxima.
      if (h == g || gpu[h] >= gpu[g]) continue;
      const double other_load = top_load.MaxExcept(g, h), other_in = top_in.MaxExcept(g, h);
      const double floor_in = cost.Move(other_in);
      if (cost.Balance(std::max(other_load, gpu[h])) + floor_in >= best_total - 1e-15) continue;
      for (int a = g * per; a < (g + 1) * per; ++a) {
        const double wa = slot_weight[a];
        const int a_out = cost.Arrival(a, g, row[a]);
        for (int b = h * per; b < (h + 1) * per; ++b) {
          if (row[a] == row[b]) continue;
          const double wb = slot_weight[b];
          const double gl = gpu[g] - wa + wb, hl = gpu[h] - wb + wa;
          if (std::max(gl, hl) >= gpu[g]) continue;
          const double balance = cost.Balance(std::max({other_load, gl, hl}));
          if (balance + floor_in >= best_total - 1e-15) continue;
          std::array<int, 3> ag = arrivals[g], ah = arrivals[h];
          --ag[a_out];
          ++ag[cost.Arrival(a, g, row[b])];
          --ah[cost.Arrival(b, h, row[b])];
          ++ah[cost.Arrival(b, h, row[a])];
          const double in = std::max(
              {other_in, cost.IncomingTime(ag[1], ag[2]), cost.IncomingTime(ah[1], ah[2])});
          const double t = balance + cost.Move(in);
          if (t < best_total - 1e-15) {
            best_total = t;
            best_a = a;
            best_b = b;
          }
        }
      }
    }
    if (best_a < 0) break;
    const int h = topo.rank_of_slot(best_b);
    gpu[g] += weight(row[best_b]) - weight(row[best_a]);
    gpu[h] += weight(row[best_a]) - weight(row[best_b]);
    --arrivals[g][cost.Arrival(best_a, g, row[best_a])];
    --arrivals[h][cost.Arrival(best_b, h, row[best_b])];
    std::swap(row[best_a], row[best_b]);
    std::swap(slot_weight[best_a], slot_weight[best_b]);
    ++arrivals[g][cost.Arrival(best_a, g, row[best_a])];
    ++arrivals[h][cost.Arrival(best_b, h, row[best_b])];
    incoming[g] = cost.IncomingTime(arrivals[g][1], arrivals[g][2]);
    incoming[h] = cost.IncomingTime(arrivals[h][1], arrivals[h][2]);
    total = best_total;
  }
  return row;
}

// The balance optimum by exhaustive search, for layers small enough to enumerate: every row in
// which each expert has a replica, keeping the one whose busiest GPU is least loaded.
bool ExhaustiveOptimum(std::span<const double> load, const Topology& topo,
                       std::vector<int32_t>& best) {
  const int experts = static_cast<int>(load.size()), slots = topo.num_slots();
  if (std::pow(static_cast<double>(experts), slots) > 1e6) return false;
  std::vector<int32_t> row(static_cast<size_t>(slots));
  std::vector<int> counts(static_cast<size_t>(experts), 0);
  double best_max = std::numeric_limits<double>::infinity();
  std::function<void(int, int)> fill = [&](int s, int present) {
    if (experts - present > slots - s) return;  // not every expert can appear any more
    if (s == slots) {
      const auto gpu = RowGpuLoads(load, row, topo);
      const double m = *std::max_element(gpu.begin(), gpu.end());
      if (m < best_max) {
        best_max = m;
        best = row;
      }
      return;
    }
    for (int e = 0; e < experts; ++e) {
      row[s] = e;
      fill(s + 1, present + (counts[e]++ == 0));
      --counts[e];
    }
  };
  fill(0, 0);
  return true;
}

// The cheapest of: keeping the layer, repairing it, DeepSeek's balanced row, and (moving free,
// small layers) the exhaustive optimum; on equal cost, the one that moves least.
std::vector<int32_t> BestRow(const PolicyInput& input, const Placement& current,
                             const Placement& deepseek, int l) {
  const LayerCost cost{policy_util::Row(input.load, l), current.phy2log(l), input.topology,
                       input.tuning};
  // Candidates in order of preference on equal cost: fewest moves first.
  std::vector<std::vector<int32_t>> candidates;
  candidates.emplace_back(cost.current.begin(), cost.current.end());
  candidates.push_back(Repair(cost));
  candidates.emplace_back(deepseek.phy2log(l).begin(), deepseek.phy2log(l).end());
  std::vector<int32_t> exact;
  if (input.tuning.weight == 0 && ExhaustiveOptimum(cost.load, input.topology, exact))
    candidates.push_back(exact);
  size_t best = 0;
  double best_cost = cost.Total(candidates[0]);
  for (size_t c = 1; c < candidates.size(); ++c) {
    const double t = cost.Total(candidates[c]);
    if (t < best_cost * (1 - 1e-12)) {
      best = c;
      best_cost = t;
    }
  }
  return std::move(candidates[best]);
}

}  // namespace

Result<Placement> MigrationAwarePolicy::Rebalance(const PolicyInput& input) {
  EPLB_RETURN_IF_ERROR(ValidatePolicyInput(input));
  const Placement current = policy_util::CurrentOrInitial(input);
  DeepSeekPreservePolicy balanced;
  auto deepseek = balanced.Rebalance(input);
  if (!deepseek.ok()) return deepseek.status();
  const int layers = static_cast<int>(input.load.rows());
  std::vector<std::vector<int32_t>> rows(static_cast<size_t>(layers));
  // Layers are independent, and each one's search takes a fraction of a millisecond on the
  // DeepSeek-V3 shapes: spread them over the cores, each thread taking the next layer as it is
  // free (their costs vary), which does not change the result.
  const int threads =
      layers >= 4 ? static_cast<int>(std::max(1u, std::thread::hardware_concurrency())) : 1;
  std::atomic<int> next{0};
  ParallelFor(threads, threads, [&](int, int) {
    for (int l = next++; l < layers; l = next++) rows[l] = BestRow(input, current, *deepseek, l);
  });
  return policy_util::FromRows(current.num_experts(), current.num_slots(), rows);
}

}  // namespace eplb
