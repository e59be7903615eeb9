#include <algorithm>

#include "eplb/policy/policies.h"
#include "policy/util.h"

namespace eplb {
namespace {

double MaxPerReplica(std::span<const double> load, const std::vector<int>& counts) {
  double m = 0;
  for (size_t e = 0; e < counts.size(); ++e) m = std::max(m, load[e] / counts[e]);
  return m;
}

// Moves in `row` (against `original`) stay within `budget`.
void Improve(std::span<const double> load, std::span<const int32_t> original,
             std::vector<int32_t>& row, const Topology& topo, int budget) {
  const int per = topo.slots_per_gpu();
  std::vector<int> counts(load.size(), 0);
  for (int32_t e : row) {
    if (e != kEmptySlot) ++counts[e];
  }
  // 1. Re-point a redundant replica of the coldest expert to the hottest one while the largest
  //    load per replica drops.
  while (policy_util::MovedSlots(original, row) < budget) {
    const double before = MaxPerReplica(load, counts);
    int hot = 0;
    for (size_t e = 1; e < counts.size(); ++e) {
      if (load[e] / counts[e] > load[hot] / counts[hot]) hot = static_cast<int>(e);
    }
    int cold = -1;
    for (size_t e = 0; e < counts.size(); ++e) {
      if (static_cast<int>(e) == hot || counts[e] < 2) continue;
      if (cold < 0 || load[e] / (counts[e] - 1) < load[cold] / (counts[cold] - 1))
        cold = static_cast<int>(e);
    }
    if (cold < 0) break;
    --counts[cold];
    ++counts[hot];
    if (MaxPerReplica(load, counts) >= before) {
      ++counts[cold];
      --counts[hot];
      break;
    }
    // Take the cold replica off the busiest GPU holding one, in a slot not yet moved.
    const auto gpu = policy_util::RowGpuLoads(load, row, topo);
    int slot = -1;
    for (int s = 0; s < static_cast<int>(row.size()); ++s) {
      if (row[s] == cold && row[s] == original[s] &&
          (slot < 0 || gpu[topo.rank_of_slot(s)] > gpu[topo.rank_of_slot(slot)])) {
        slot = s;
      }
    }
    if (slot < 0) {
      ++counts[cold];
      --counts[hot];
      break;
    }
    // Keep the re-point only if the straggler does not get slower.
    const double max_before = *std::max_element(gpu.begin(), gpu.end());
    row[slot] = hot;
    const auto after = policy_util::RowGpuLoads(load, row, topo);
    if (*std::max_element(after.begin(), after.end()) > max_before + 1e-12) {
      row[slot] = cold;
      ++counts[cold];
      --counts[hot];
      break;
    }
  }
  // 2. Swap a replica off the busiest GPU with one elsewhere while the busier of the two drops.
  while (policy_util::MovedSlots(original, row) + 2 <= budget) {
    const auto gpu = policy_util::RowGpuLoads(load, row, topo);
    const int g = static_cast<int>(std::max_element(gpu.begin(), gpu.end()) - gpu.begin());
    double best = gpu[g];
    int best_a = -1, best_b = -1;
    for (int a = g * per; a < (g + 1) * per; ++a) {
      if (row[a] == kEmptySlot) continue;
      const double wa = load[row[a]] / counts[row[a]];
      for (int b = 0; b < static_cast<int>(row.size()); ++b) {
        const int h = topo.rank_of_slot(b);
        if (h == g || row[b] == row[a]) continue;
        const double wb = row[b] == kEmptySlot ? 0.0 : load[row[b]] / counts[row[b]];
        const double worst = std::max(gpu[g] - wa + wb, gpu[h] - wb + wa);
        if (worst < best - 1e-12) {
          best = worst;
          best_a = a;
          best_b = b;
        }
      }
    }
    if (best_a < 0) break;
    std::swap(row[best_a], row[best_b]);
    if (policy_util::MovedSlots(original, row) > budget) {
      std::swap(row[best_a], row[best_b]);
      break;
    }
  }
}

}  // namespace

Result<Placement> IncrementalPolicy::Rebalance(const PolicyInput& input) {
  EPLB_RETURN_IF_ERROR(ValidatePolicyInput(input));
  const Placement current = policy_util::CurrentOrInitial(input);
  std::vector<std::vector<int32_t>> rows;
  for (int l = 0; l < input.load.rows(); ++l) {
    const auto original = current.phy2log(l);
    std::vector<int32_t> row(original.begin(), original.end());
    Improve(policy_util::Row(input.load, l), original, row, input.topology,
            input.tuning.max_moves_per_layer);
    rows.push_back(std::move(row));
  }
  return policy_util::FromRows(current.num_experts(), current.num_slots(), rows);
}

}  // namespace eplb
