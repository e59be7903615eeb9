// Slot preservation: vLLM's preserve_intragpu_slots cases and its invariants.
#include "eplb/model/slot_preservation.h"

#include <algorithm>
#include <random>

#include <gtest/gtest.h>

#include "eplb/migrate/transfer_plan.h"
#include "test_util.h"

namespace eplb {
namespace {

using testing::MakeTopology;
using testing::RandomPlacement;

std::vector<int32_t> Preserve(const std::vector<int32_t>& old_row,
                              const std::vector<int32_t>& new_row, int gpus, int experts) {
  const Topology topo = MakeTopology(1, gpus, static_cast<int>(old_row.size()) / gpus);
  const Placement old_p = *Placement::Create(experts, {old_row});
  const Placement new_p = *Placement::Create(experts, {new_row});
  const Placement out = PreserveSlots(old_p, new_p, topo);
  return {out.phy2log(0).begin(), out.phy2log(0).end()};
}

TEST(SlotPreservation, VllmCases) {
  EXPECT_EQ(Preserve({0, 1, 2, 3, 4, 5, 6, 7}, {1, 5, 0, 4, 6, 2, 7, 3}, 2, 8),
            (std::vector<int32_t>{0, 1, 5, 4, 2, 3, 6, 7}));
  EXPECT_EQ(Preserve({0, 1, 0, 2, 3, 4, 5, 6, 1, 2}, {0, 5, 4, 0, 1, 6, 2, 3, 2, 1}, 2, 7),
            (std::vector<int32_t>{0, 1, 0, 5, 4, 3, 2, 6, 1, 2}));
  EXPECT_EQ(
      Preserve({0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}, {0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 0}, 3, 4),
      (std::vector<int32_t>{0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3}));
}

TEST(SlotPreservation, KeepsEachGpusExpertsAndMovesFewerBytes) {
  std::mt19937_64 rng(77);
  for (int trial = 0; trial < 500; ++trial) {
    const int gpus = 1 + trial % 6, per = 1 + trial % 7;
    const Topology topo = MakeTopology(1, gpus, per, 1000);
    const int experts = std::max(1, gpus * per - trial % 3);
    const Placement a = RandomPlacement(rng, 2, gpus * per, experts);
    const Placement b = RandomPlacement(rng, 2, gpus * per, experts);
    const Placement p = PreserveSlots(a, b, topo);
    int64_t bytes_plain = 0, bytes_preserved = 0, writes_plain = 0, writes_preserved = 0;
    for (int l = 0; l < 2; ++l) {
      for (int g = 0; g < gpus; ++g) {
        auto span_of = [&](const Placement& x) {
          std::vector<int32_t> v(x.phy2log(l).begin() + g * per,
                                 x.phy2log(l).begin() + (g + 1) * per);
          std::sort(v.begin(), v.end());
          return v;
        };
        ASSERT_EQ(span_of(p), span_of(b)) << "GPU " << g << " holds other experts";
        for (int i = 0; i < per; ++i) {
          const int s = g * per + i;
          const int32_t e = a.expert_at(l, s);
          // An expert that stays on this GPU keeps its old slot (when the new set still has it).
          const auto before =
              std::count(b.phy2log(l).begin() + g * per, b.phy2log(l).begin() + (g + 1) * per, e);
          const auto kept_before =
              std::count(a.phy2log(l).begin() + g * per, a.phy2log(l).begin() + s, e);
          if (before > kept_before) {
            ASSERT_EQ(p.expert_at(l, s), e);
          }
        }
      }
      auto plain = PlanLayer(l, a.phy2log(l), b.phy2log(l), topo, SenderRule::kLocal);
      auto kept = PlanLayer(l, a.phy2log(l), p.phy2log(l), topo, SenderRule::kLocal);
      bytes_plain += plain->bytes.sum();
      bytes_preserved += kept->bytes.sum();
      for (const auto& w : plain->written_slots) writes_plain += static_cast<int64_t>(w.size());
      for (const auto& w : kept->written_slots) writes_preserved += static_cast<int64_t>(w.size());
    }
    ASSERT_EQ(bytes_preserved, bytes_plain);  // the same experts arrive on each GPU
    ASSERT_LE(writes_preserved, writes_plain);
  }
}

}  // namespace
}  // namespace eplb
