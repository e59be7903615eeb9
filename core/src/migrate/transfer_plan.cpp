#include "eplb/migrate/transfer_plan.h"

#include <algorithm>
#include <functional>
#include <limits>

#include <fmt/format.h>

#include "eplb/migrate/names.h"

namespace eplb {

const char* SenderRuleName(SenderRule rule) {
  return kSenderRuleNames.Name(rule);
}

Result<SenderRule> ParseSenderRule(std::string_view name) {
  if (const auto r = kSenderRuleNames.Find(name)) return *r;
  return Status::InvalidArgument(
      fmt::format("sender rule is '{}'; valid rules: {}", name, kSenderRuleNames.Joined()));
}

namespace {

// A rank that must receive an expert it did not hold, and the first slot it receives into.
struct Need {
  int32_t rank;
  int32_t slot;
};

// Picks, for each receiving rank (ascending), the index into `senders` that serves it.
void AssignVllm(std::span<const int32_t> senders, std::span<const Need> receivers,
                std::vector<int>& pick) {
  pick.assign(receivers.size(), 0);
  const size_t n = receivers.size() / senders.size();
  for (size_t p = 0; p < senders.size(); ++p) {
    for (size_t i = p * n; i < (p + 1) * n; ++i) pick[i] = static_cast<int>(p);
    const size_t remainder = senders.size() * n + p;
    if (remainder < receivers.size()) pick[remainder] = static_cast<int>(p);
  }
}

// Bytes sent over NICs and the index into `senders` of the senders of one rail, as a min-heap.
using RailHeap = std::vector<std::pair<int64_t, int>>;

// The local rule: a sender on the receiver's node when there is one; otherwise, of all senders,
// the one that has sent least over that link class in this layer so far, on the receiver's rail
// among those that tie, then the lowest rank. Senders ascend by rank, so a node's senders are
// one contiguous run and the same-node choice scans at most a node's GPUs. The remote choice
// keeps the senders in a min-heap per rail, so an expert with S senders and R receivers costs
// O(S + R log S) instead of the O(S × R) of scanning every sender for every receiver: at 4,096
// GPUs that scan was the planner's whole cost. `by_rail` is scratch space kept between calls.
void AssignLocal(std::span<const int32_t> senders, std::span<const Need> receivers,
                 const Topology& topology, std::vector<int64_t> (&sent)[kNumLinkClasses],
                 std::vector<RailHeap>& by_rail, std::vector<int>& pick) {
  pick.assign(receivers.size(), 0);
  const int gpn = topology.gpus_per_node();
  const int64_t bytes = topology.expert_bytes();
  std::vector<int64_t>& nvlink_sent = sent[static_cast<int>(LinkClass::kNvlink)];
  std::vector<int64_t>& nic_sent = sent[static_cast<int>(LinkClass::kNic)];
  constexpr auto kAfter = std::greater<>();  // heap order: least (bytes, index) on top
  constexpr size_t kScanSenders = 32;
  bool heaps_built = false;
  for (size_t i = 0; i < receivers.size(); ++i) {
    const int32_t dst = receivers[i].rank;
    const int32_t node_first = topology.node_of_rank(dst) * gpn;
    const auto lo = std::lower_bound(senders.begin(), senders.end(), node_first);
    const auto hi = std::lower_bound(lo, senders.end(), node_first + gpn);
    if (lo != hi) {
      // The first of the node's senders that has sent least over NVLink.
      auto best = lo;
      for (auto it = lo + 1; it != hi; ++it) {
        if (nvlink_sent[*it] < nvlink_sent[*best]) best = it;
      }
      nvlink_sent[*best] += bytes;
      pick[i] = static_cast<int>(best - senders.begin());
      continue;
    }
    if (senders.size() <= kScanSenders) {
      // Few senders: one scan is cheaper than building the heaps.
      size_t best = 0;
      for (size_t p = 1; p < senders.size(); ++p) {
        const int64_t a = nic_sent[senders[p]], b = nic_sent[senders[best]];
        if (a < b || (a == b && senders[p] % gpn == dst % gpn && senders[best] % gpn != dst % gpn))
          best = p;
      }
      nic_sent[senders[best]] += bytes;
      pick[i] = static_cast<int>(best);
      continue;
    }
    if (!heaps_built) {
      by_rail.resize(static_cast<size_t>(gpn));
      for (RailHeap& heap : by_rail) heap.clear();
      for (size_t p = 0; p < senders.size(); ++p)
        by_rail[senders[p] % gpn].push_back({nic_sent[senders[p]], static_cast<int>(p)});
      for (RailHeap& heap : by_rail) std::make_heap(heap.begin(), heap.end(), kAfter);
      heaps_built = true;
    }
    size_t lowest = by_rail.size();  // the rail whose top is least
    for (size_t q = 0; q < by_rail.size(); ++q) {
      if (!by_rail[q].empty() &&
          (lowest == by_rail.size() || by_rail[q].front() < by_rail[lowest].front())) {
        lowest = q;
      }
    }
    const auto own = static_cast<size_t>(dst % gpn);
    const bool own_ties =
        !by_rail[own].empty() && by_rail[own].front().first == by_rail[lowest].front().first;
    RailHeap& from = by_rail[own_ties ? own : lowest];
    std::pop_heap(from.begin(), from.end(), kAfter);
    from.back().first += bytes;
    const int p = from.back().second;
    std::push_heap(from.begin(), from.end(), kAfter);
    nic_sent[senders[p]] += bytes;
    pick[i] = p;
  }
}

}  // namespace

Result<LayerPlan> PlanLayer(int layer, std::span<const int32_t> old_row,
                            std::span<const int32_t> new_row, const Topology& topology,
                            SenderRule rule, std::span<const int> lost_ranks) {
  const int slots = topology.num_slots();
  if (static_cast<int>(old_row.size()) != slots || static_cast<int>(new_row.size()) != slots) {
    return Status::InvalidArgument(
        fmt::format("layer {}: old placement has {} slots and new has {}; the cluster has {}",
                    layer, old_row.size(), new_row.size(), slots));
  }
  const int ranks = topology.num_ranks();
  const int per_rank = topology.slots_per_gpu();
  int experts = 0;
  for (int s = 0; s < slots; ++s) experts = std::max({experts, old_row[s] + 1, new_row[s] + 1});
  std::vector<char> lost(static_cast<size_t>(ranks), 0);
  for (int r : lost_ranks) {
    if (r < 0 || r >= ranks) {
      return Status::InvalidArgument(fmt::format(
          "layer {}: lost rank {} is not among the cluster's 0..{}", layer, r, ranks - 1));
    }
    lost[static_cast<size_t>(r)] = 1;
  }

  // first_old[rank * experts + e]: the rank's first old slot holding e, or -1. Ranks scan in
  // ascending order, so each expert's holders come out ascending.
  std::vector<int32_t> first_old(static_cast<size_t>(ranks) * experts, -1);
  std::vector<int32_t> holder_count(static_cast<size_t>(experts) + 1, 0);
  for (int s = 0; s < slots; ++s) {
    const int32_t e = old_row[s];
    // A lost rank's weights are gone: it is no one's source.
    if (e == kEmptySlot || lost[static_cast<size_t>(topology.rank_of_slot(s))]) continue;
    int32_t& first = first_old[static_cast<size_t>(topology.rank_of_slot(s)) * experts + e];
    if (first < 0) {
      first = s;
      ++holder_count[e + 1];
    }
  }
  for (int e = 0; e < experts; ++e) holder_count[e + 1] += holder_count[e];
  std::vector<int32_t> holders(static_cast<size_t>(holder_count[experts]));
  {
    std::vector<int32_t> cursor(holder_count.begin(), holder_count.end() - 1);
    for (int r = 0; r < ranks; ++r) {
      for (int e = 0; e < experts; ++e) {
        if (first_old[static_cast<size_t>(r) * experts + e] >= 0) holders[cursor[e]++] = r;
      }
    }
  }

  LayerPlan plan;
  plan.layer = layer;
  plan.written_slots.resize(static_cast<size_t>(ranks));
  // first_new[rank * experts + e]: the slot a rank receives e into, once; further slots copy it.
  std::vector<int32_t> first_new(static_cast<size_t>(ranks) * experts, -1);
  std::vector<std::vector<Need>> needs(static_cast<size_t>(experts));
  for (int r = 0; r < ranks; ++r) {
    for (int s = r * per_rank; s < (r + 1) * per_rank; ++s) {
      const int32_t e = new_row[s];
      if (e == old_row[s]) continue;
      if (e == kEmptySlot) {
        plan.emptied_slots.push_back(s);
        continue;
      }
      if (lost[static_cast<size_t>(r)]) {
        return Status::InvalidArgument(
            fmt::format("layer {}: the new placement puts expert {} in slot {} of lost rank {}",
                        layer, e, s, r));
      }
      plan.written_slots[r].push_back(s);
      const int32_t local = first_old[static_cast<size_t>(r) * experts + e];
      if (local >= 0) {
        plan.local_copies.push_back({r, e, local, s, false});
        continue;
      }
      const bool held = holder_count[e] != holder_count[e + 1];
      if (!held && std::find(old_row.begin(), old_row.end(), e) == old_row.end()) {
        return Status::InvalidArgument(fmt::format(
            "layer {}: expert {} is in the new placement (slot {}) but nowhere in the old one",
            layer, e, s));
      }
      int32_t& first = first_new[static_cast<size_t>(r) * experts + e];
      if (first >= 0) {
        plan.local_copies.push_back({r, e, first, s, true});
      } else if (!held) {
        // Every replica was on lost ranks: from the backup.
        first = s;
        plan.reloads.push_back({r, e, s, topology.expert_bytes()});
        plan.reload_bytes += topology.expert_bytes();
      } else {
        first = s;
        needs[e].push_back({r, s});
      }
    }
  }

  std::vector<int64_t> sent[kNumLinkClasses] = {
      std::vector<int64_t>(static_cast<size_t>(ranks), 0),
      std::vector<int64_t>(static_cast<size_t>(ranks), 0)};
  std::vector<int> pick;
  std::vector<RailHeap> by_rail;
  for (int e = 0; e < experts; ++e) {
    if (needs[e].empty()) continue;
    const std::span<const int32_t> senders(
        holders.data() + holder_count[e],
        static_cast<size_t>(holder_count[e + 1] - holder_count[e]));
    if (rule == SenderRule::kVllm) {
      AssignVllm(senders, needs[e], pick);
    } else {
      AssignLocal(senders, needs[e], topology, sent, by_rail, pick);
    }
    for (size_t i = 0; i < needs[e].size(); ++i) {
      const Need& need = needs[e][i];
      const int32_t src = senders[pick[i]];
      Transfer t;
      t.expert = e;
      t.src_rank = src;
      t.src_slot = first_old[static_cast<size_t>(src) * experts + e];
      t.dst_rank = need.rank;
      t.dst_slot = need.slot;
      t.bytes = topology.expert_bytes();
      t.link = topology.link_between(src, need.rank);
      plan.bytes[t.link] += t.bytes;
      plan.transfers.push_back(t);
    }
  }
  return plan;
}

Result<std::vector<LayerPlan>> PlanMigration(const Placement& old_placement,
                                             const Placement& new_placement,
                                             const Topology& topology, SenderRule rule,
                                             std::span<const int> lost_ranks) {
  EPLB_RETURN_IF_ERROR(old_placement.CheckFits(topology).WithContext("old placement: "));
  EPLB_RETURN_IF_ERROR(new_placement.CheckFits(topology).WithContext("new placement: "));
  if (old_placement.num_layers() != new_placement.num_layers()) {
    return Status::InvalidArgument(fmt::format("old placement has {} layers but new has {}",
                                               old_placement.num_layers(),
                                               new_placement.num_layers()));
  }
  // Every byte count a plan yields (per layer, per link, the whole migration's) is at most
  // every slot of every layer moved: bounding that keeps them all in int64.
  const int64_t slots = int64_t{old_placement.num_layers()} * old_placement.num_slots();
  if (slots > 0 && topology.expert_bytes() > std::numeric_limits<int64_t>::max() / slots) {
    return Status::InvalidArgument(fmt::format(
        "expert bytes is {}: moving {} layers × {} slots of it could count more bytes than a "
        "64-bit total holds; expert bytes must be at most {}",
        topology.expert_bytes(), old_placement.num_layers(), old_placement.num_slots(),
        std::numeric_limits<int64_t>::max() / slots));
  }
  std::vector<LayerPlan> plans;
  for (int layer = 0; layer < old_placement.num_layers(); ++layer) {
    auto plan = PlanLayer(layer, old_placement.phy2log(layer), new_placement.phy2log(layer),
                          topology, rule, lost_ranks);
    if (!plan.ok()) return plan.status();
    if (!plan->empty()) plans.push_back(std::move(plan).value());
  }
  return plans;
}

Result<std::vector<int32_t>> ApplyPlan(std::span<const int32_t> old_row, const LayerPlan& plan,
                                       const Topology& topology) {
  std::vector<int32_t> row(old_row.begin(), old_row.end());
  std::vector<int32_t> received(old_row.size(), kEmptySlot);
  auto bad = [&](const std::string& what) {
    return Status::Internal(fmt::format("layer {}: {}", plan.layer, what));
  };
  for (const Transfer& t : plan.transfers) {
    if (topology.rank_of_slot(t.src_slot) != t.src_rank ||
        topology.rank_of_slot(t.dst_slot) != t.dst_rank) {
      return bad(fmt::format("transfer of expert {} names slots off its ranks", t.expert));
    }
    if (old_row[t.src_slot] != t.expert) {
      return bad(fmt::format("transfer reads slot {} for expert {} but it held {}", t.src_slot,
                             t.expert, old_row[t.src_slot]));
    }
    if (t.src_rank == t.dst_rank)
      return bad(fmt::format("transfer of expert {} to its own rank", t.expert));
    received[t.dst_slot] = t.expert;
  }
  for (const Reload& r : plan.reloads) {
    if (topology.rank_of_slot(r.dst_slot) != r.rank) {
      return bad(fmt::format("reload of expert {} names a slot off its rank", r.expert));
    }
    received[r.dst_slot] = r.expert;
  }
  for (const LocalCopy& c : plan.local_copies) {
    if (topology.rank_of_slot(c.src_slot) != c.rank ||
        topology.rank_of_slot(c.dst_slot) != c.rank) {
      return bad(fmt::format("local copy of expert {} crosses ranks", c.expert));
    }
    const int32_t source = c.after_receive ? received[c.src_slot] : old_row[c.src_slot];
    if (source != c.expert) {
      return bad(fmt::format("local copy of expert {} reads slot {} which holds {}", c.expert,
                             c.src_slot, source));
    }
    row[c.dst_slot] = c.expert;
  }
  for (const Transfer& t : plan.transfers) row[t.dst_slot] = t.expert;
  for (const Reload& r : plan.reloads) row[r.dst_slot] = r.expert;
  for (const int32_t s : plan.emptied_slots) row[s] = kEmptySlot;
  return row;
}

}  // namespace eplb
