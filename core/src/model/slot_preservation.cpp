#include "eplb/model/slot_preservation.h"

#include <algorithm>
#include <cassert>
#include <vector>

namespace eplb {

void PreserveSlotsInRow(std::span<const int64_t> old_row, std::span<const int64_t> new_row,
                        int slots_per_gpu, std::span<int64_t> source) {
  assert(slots_per_gpu > 0 && new_row.size() % static_cast<size_t>(slots_per_gpu) == 0);
  assert(old_row.size() == new_row.size() && source.size() == new_row.size());
  const size_t per = static_cast<size_t>(slots_per_gpu);
  std::vector<char> used(per), kept(per);
  for (size_t base = 0; base < new_row.size(); base += per) {
    std::fill(used.begin(), used.end(), 0);
    std::fill(kept.begin(), kept.end(), 0);
    // First pass: each old slot keeps its expert if the new set still has an unused copy.
    for (size_t i = 0; i < per; ++i) {
      for (size_t j = 0; j < per; ++j) {
        if (!used[j] && new_row[base + j] == old_row[base + i]) {
          source[base + i] = static_cast<int64_t>(base + j);
          used[j] = kept[i] = 1;
          break;
        }
      }
    }
    // Second pass: the remaining new experts, in order, fill the remaining slots, in order.
    size_t next = 0;
    for (size_t i = 0; i < per; ++i) {
      if (kept[i]) continue;
      while (used[next]) ++next;
      source[base + i] = static_cast<int64_t>(base + next);
      used[next] = 1;
    }
  }
}

Placement PreserveSlots(const Placement& old_placement, const Placement& new_placement,
                        const Topology& topology) {
  assert(old_placement.num_slots() == topology.num_slots());
  assert(new_placement.num_slots() == topology.num_slots());
  assert(old_placement.num_layers() == new_placement.num_layers());
  const size_t slots = static_cast<size_t>(topology.num_slots());
  std::vector<int64_t> old_row(slots), new_row(slots), source(slots);
  std::vector<int32_t> out(static_cast<size_t>(new_placement.num_layers()) * slots);
  for (int layer = 0; layer < new_placement.num_layers(); ++layer) {
    std::ranges::copy(old_placement.phy2log(layer), old_row.begin());
    std::ranges::copy(new_placement.phy2log(layer), new_row.begin());
    PreserveSlotsInRow(old_row, new_row, topology.slots_per_gpu(), source);
    int32_t* row = out.data() + static_cast<size_t>(layer) * slots;
    for (size_t s = 0; s < slots; ++s) row[s] = static_cast<int32_t>(new_row[source[s]]);
  }
  return *Placement::Create(new_placement.num_experts(), new_placement.num_slots(), std::move(out));
}

}  // namespace eplb
