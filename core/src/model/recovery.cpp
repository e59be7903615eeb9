#include "eplb/model/recovery.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include <fmt/format.h>

namespace eplb {

Result<Placement> RepairAroundLostRanks(const Placement& current, const LoadMatrix& load,
                                        const Topology& topology, std::span<const int> excluded) {
  EPLB_RETURN_IF_ERROR(current.CheckFits(topology));
  const int layers = current.num_layers(), experts = current.num_experts();
  const int slots = current.num_slots(), per = topology.slots_per_gpu();
  if (load.rows() != layers || load.cols() != experts) {
    return Status::InvalidArgument(
        fmt::format("the load is {} × {} but the placement has {} layers of {} experts",
                    load.rows(), load.cols(), layers, experts));
  }
  std::vector<char> gone(static_cast<size_t>(topology.num_ranks()), 0);
  for (int r : excluded) gone[static_cast<size_t>(r)] = 1;
  std::vector<int32_t> flat(current.phy2log_flat());
  std::vector<int> count(static_cast<size_t>(experts));
  std::vector<double> gpu(static_cast<size_t>(topology.num_ranks()));
  std::vector<int> missing;
  for (int l = 0; l < layers; ++l) {
    int32_t* row = flat.data() + static_cast<size_t>(l) * slots;
    std::fill(count.begin(), count.end(), 0);
    std::vector<int> free_slots;
    for (int s = 0; s < slots; ++s) {
      if (gone[static_cast<size_t>(topology.rank_of_slot(s))]) {
        row[s] = kEmptySlot;
      } else if (row[s] == kEmptySlot) {
        free_slots.push_back(s);
      } else {
        ++count[static_cast<size_t>(row[s])];
      }
    }
    missing.clear();
    for (int e = 0; e < experts; ++e) {
      if (count[static_cast<size_t>(e)] == 0) missing.push_back(e);
    }
    if (missing.empty()) continue;
    std::stable_sort(missing.begin(), missing.end(),
                     [&](int a, int b) { return load(l, a) > load(l, b); });
    std::fill(gpu.begin(), gpu.end(), 0.0);
    for (int s = 0; s < slots; ++s) {
      if (row[s] != kEmptySlot)
        gpu[static_cast<size_t>(topology.rank_of_slot(s))] +=
            load(l, row[s]) / count[static_cast<size_t>(row[s])];
    }
    for (int e : missing) {
      int slot = -1;
      if (!free_slots.empty()) {
        // The least loaded GPU's free slot.
        auto best = std::min_element(free_slots.begin(), free_slots.end(), [&](int a, int b) {
          return gpu[static_cast<size_t>(a / per)] < gpu[static_cast<size_t>(b / per)];
        });
        slot = *best;
        free_slots.erase(best);
      } else {
        // Give up a replica of the expert whose load per replica stays lowest without it.
        int victim = -1;
        for (int x = 0; x < experts; ++x) {
          if (count[static_cast<size_t>(x)] < 2) continue;
          if (victim < 0 || load(l, x) / (count[static_cast<size_t>(x)] - 1) <
                                load(l, victim) / (count[static_cast<size_t>(victim)] - 1))
            victim = x;
        }
        if (victim < 0) {
          return Status::InvalidArgument(
              fmt::format("layer {}: the live GPUs' {} slots cannot hold all {} experts", l,
                          slots - static_cast<int>(excluded.size()) * per, experts));
        }
        for (int s = 0; s < slots; ++s) {
          if (row[s] == victim && (slot < 0 || gpu[static_cast<size_t>(s / per)] <
                                                   gpu[static_cast<size_t>(slot / per)]))
            slot = s;
        }
        --count[static_cast<size_t>(victim)];
      }
      row[slot] = e;
      count[static_cast<size_t>(e)] = 1;
      gpu[static_cast<size_t>(slot / per)] += load(l, e);
    }
  }
  return Placement::Create(experts, slots, std::move(flat));
}

}  // namespace eplb
