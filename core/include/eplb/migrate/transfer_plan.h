// Transfer planning: what each rank must copy, send and receive to turn one layer's old
// placement into its new one.
//
// For every slot whose expert changes, the new expert comes from, in this order of preference:
//   1. the same rank, which held it before: a local copy from the old slot (through the staging
//      buffer, because that old slot may itself be overwritten);
//   2. another slot of the same rank that receives the same expert in this plan: one receive,
//      then a local copy after it (a rank never receives one expert twice);
//   3. another rank that held it before: a transfer, whose sender the SenderRule picks;
//   4. none (every rank that held it is lost): a reload from the backup (host memory or
//      storage) into the first slot of each rank that needs it; its other slots copy that one.
// Lost ranks send nothing and may receive nothing. Slots whose expert does not change are never
// written. Slots that become empty need nothing.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "eplb/base/status.h"
#include "eplb/model/placement.h"
#include "eplb/model/topology.h"

namespace eplb {

enum class SenderRule {
  // vLLM's rule (rebalance_execute.py): per expert, senders = old holders (ascending),
  // receivers = new holders that lacked it (ascending); with n = receivers / senders, sender p
  // serves receivers [p·n, (p+1)·n) and one of the remainder, round-robin.
  kVllm,
  // Ours: prefer a sender on the receiver's node; among the candidates, the one with the fewest
  // bytes to send so far on that link (then the same local GPU index, i.e. the same NIC rail,
  // then the lowest rank). Another node only when the receiver's node has no copy.
  kLocal,
};
const char* SenderRuleName(SenderRule rule);
Result<SenderRule> ParseSenderRule(std::string_view name);

struct Transfer {
  int32_t expert = 0;
  int32_t src_rank = 0;
  int32_t src_slot = 0;  // global slot index, on src_rank; read from the old weights
  int32_t dst_rank = 0;
  int32_t dst_slot = 0;  // global slot index, on dst_rank; written into its staging buffer
  int64_t bytes = 0;
  LinkClass link = LinkClass::kNvlink;
};

struct LocalCopy {
  int32_t rank = 0;
  int32_t expert = 0;
  int32_t src_slot = 0;
  int32_t dst_slot = 0;
  // false: the source is an old slot (live weights). true: the source is a slot that a transfer
  // of this plan fills, so the copy runs after the receives (staging to staging).
  bool after_receive = false;
};

// An expert's weights read from the backup into a slot of `rank` (its staging buffer).
struct Reload {
  int32_t rank = 0;
  int32_t expert = 0;
  int32_t dst_slot = 0;
  int64_t bytes = 0;
};

struct LayerPlan {
  int layer = 0;
  std::vector<Transfer> transfers;
  std::vector<LocalCopy> local_copies;
  std::vector<Reload> reloads;  // ascending by rank
  // Slots that are written on each rank (transfer and copy destinations), ascending.
  std::vector<std::vector<int32_t>> written_slots;
  // Slots that become empty: nothing is moved, only the routing table changes.
  std::vector<int32_t> emptied_slots;
  PerLink<int64_t> bytes;
  int64_t reload_bytes = 0;

  // True when the layer's placement does not change at all.
  bool empty() const {
    return transfers.empty() && local_copies.empty() && emptied_slots.empty() && reloads.empty();
  }
};

// Plans one layer. `old_row` and `new_row` are that layer's phy2log (topology.num_slots()
// entries each); every expert of new_row must appear in old_row on a rank not in `lost_ranks`
// (ascending), or it is reloaded. new_row must leave the lost ranks' slots as they were or
// empty.
Result<LayerPlan> PlanLayer(int layer, std::span<const int32_t> old_row,
                            std::span<const int32_t> new_row, const Topology& topology,
                            SenderRule rule, std::span<const int> lost_ranks = {});

// Plans every layer whose placement changes, in layer order.
Result<std::vector<LayerPlan>> PlanMigration(const Placement& old_placement,
                                             const Placement& new_placement,
                                             const Topology& topology, SenderRule rule,
                                             std::span<const int> lost_ranks = {});

// Replays `plan` on `old_row` as an executor would and returns the resulting row, checking
// every source: a transfer reads an old slot on its sender that holds its expert; a local copy
// reads an old slot of its own rank, or (after_receive) a slot this plan's transfers or reloads
// fill; a reload brings an expert no live rank held.
// Used by tests and as a self-check.
Result<std::vector<int32_t>> ApplyPlan(std::span<const int32_t> old_row, const LayerPlan& plan,
                                       const Topology& topology);

}  // namespace eplb
