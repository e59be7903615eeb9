#include "eplb/model/slot_preservation.h"

#include <cassert>
#include <vector>

namespace eplb {

Placement PreserveSlots(const Placement& old_placement, const Placement& new_placement,
                        const Topology& topology) {
  assert(old_placement.num_slots() == topology.num_slots());
  assert(new_placement.num_slots() == topology.num_slots());
  assert(old_placement.num_layers() == new_placement.num_layers());
  const int per_rank = topology.slots_per_gpu();
  std::vector<int32_t> out = new_placement.phy2log_flat();
  std::vector<char> used(static_cast<size_t>(per_rank)), kept(static_cast<size_t>(per_rank));
  for (int layer = 0; layer < new_placement.num_layers(); ++layer) {
    const auto old_row = old_placement.phy2log(layer);
    const auto new_row = new_placement.phy2log(layer);
    int32_t* row = out.data() + static_cast<size_t>(layer) * topology.num_slots();
    for (int rank = 0; rank < topology.num_ranks(); ++rank) {
      const int base = rank * per_rank;
      std::fill(used.begin(), used.end(), 0);
      std::fill(kept.begin(), kept.end(), 0);
      // First pass: each old slot keeps its expert if the new set still has an unused copy.
      for (int i = 0; i < per_rank; ++i) {
        for (int j = 0; j < per_rank; ++j) {
          if (!used[j] && new_row[base + j] == old_row[base + i]) {
            row[base + i] = new_row[base + j];
            used[j] = kept[i] = 1;
            break;
          }
        }
      }
      // Second pass: the remaining new experts, in order, fill the remaining slots, in order.
      int next = 0;
      for (int i = 0; i < per_rank; ++i) {
        if (kept[i]) continue;
        while (used[next]) ++next;
        row[base + i] = new_row[base + next];
        used[next] = 1;
      }
    }
  }
  return *Placement::Create(new_placement.num_experts(), new_placement.num_slots(), std::move(out));
}

}  // namespace eplb
