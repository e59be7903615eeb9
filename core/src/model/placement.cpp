#include "eplb/model/placement.h"

#include <algorithm>
#include <cassert>

#include <fmt/format.h>

namespace eplb {

Result<Placement> Placement::Create(int num_experts, int num_slots, std::vector<int32_t> phy2log) {
  if (num_experts < 1) {
    return Status::InvalidArgument(
        fmt::format("experts is {}; it must be at least 1", num_experts));
  }
  if (num_slots < 1) {
    return Status::InvalidArgument(fmt::format("slots is {}; it must be at least 1", num_slots));
  }
  if (phy2log.empty() || phy2log.size() % static_cast<size_t>(num_slots) != 0) {
    return Status::InvalidArgument(fmt::format(
        "phy2log has {} entries; it must be a positive multiple of the {} slots per layer",
        phy2log.size(), num_slots));
  }
  Placement p;
  p.num_layers_ = static_cast<int>(phy2log.size() / static_cast<size_t>(num_slots));
  p.num_slots_ = num_slots;
  p.num_experts_ = num_experts;
  p.phy2log_ = std::move(phy2log);
  EPLB_RETURN_IF_ERROR(p.Derive());
  return p;
}

Result<Placement> Placement::Create(int num_experts,
                                    const std::vector<std::vector<int32_t>>& rows) {
  if (rows.empty()) return Status::InvalidArgument("phy2log has no layers");
  const size_t slots = rows[0].size();
  std::vector<int32_t> flat;
  flat.reserve(rows.size() * slots);
  for (size_t layer = 0; layer < rows.size(); ++layer) {
    if (rows[layer].size() != slots) {
      return Status::InvalidArgument(fmt::format(
          "phy2log layer {} has {} slots but layer 0 has {}; every layer needs the same count",
          layer, rows[layer].size(), slots));
    }
    flat.insert(flat.end(), rows[layer].begin(), rows[layer].end());
  }
  return Create(num_experts, static_cast<int>(slots), std::move(flat));
}

Result<Placement> Placement::Initial(int num_layers, int num_experts, int num_slots) {
  if (num_layers < 1) {
    return Status::InvalidArgument(fmt::format("layers is {}; it must be at least 1", num_layers));
  }
  if (num_slots < num_experts) {
    return Status::InvalidArgument(
        fmt::format("{} slots cannot hold {} experts; slots must be at least the number of experts",
                    num_slots, num_experts));
  }
  std::vector<int32_t> flat(static_cast<size_t>(num_layers) * num_slots);
  for (size_t i = 0; i < flat.size(); ++i)
    flat[i] = static_cast<int32_t>(i % num_slots % num_experts);
  return Create(num_experts, num_slots, std::move(flat));
}

Status Placement::Derive() {
  // Sizes in locals: the compiler cannot keep members in registers across stores to int32
  // arrays, which might alias them.
  const int experts = num_experts_, slots = num_slots_, layers = num_layers_;
  const size_t stride = static_cast<size_t>(experts) + 1;
  offsets_.assign(static_cast<size_t>(layers) * stride, 0);
  by_expert_.assign(phy2log_.size(), 0);
  std::vector<int32_t> cursor(static_cast<size_t>(experts));
  int32_t base = 0;
  for (int layer = 0; layer < layers; ++layer) {
    int32_t* off = offsets_.data() + layer * stride;
    const int32_t* row = phy2log_.data() + static_cast<size_t>(layer) * slots;
    for (int slot = 0; slot < slots; ++slot) {
      const int32_t e = row[slot];
      if (e == kEmptySlot) continue;
      if (e < 0 || e >= experts) {
        return Status::InvalidArgument(
            fmt::format("phy2log[{}][{}] is {}; valid values are -1 (empty) or 0..{}", layer, slot,
                        e, experts - 1));
      }
      ++off[e + 1];
    }
    off[0] = base;
    int32_t end = base;  // in a register: off[e + 1] += off[e] would wait on its own store
    for (int e = 0; e < experts; ++e) {
      if (off[e + 1] == 0) {
        return Status::InvalidArgument(fmt::format(
            "layer {}: logical expert {} has no replica; every expert 0..{} needs at least one "
            "slot",
            layer, e, experts - 1));
      }
      end += off[e + 1];
      off[e + 1] = end;
    }
    std::copy(off, off + experts, cursor.begin());
    int32_t* by_expert = by_expert_.data();
    for (int slot = 0; slot < slots; ++slot) {
      if (row[slot] != kEmptySlot) by_expert[cursor[row[slot]]++] = slot;
    }
    base = end;
  }
  return Status::Ok();
}

std::span<const int32_t> Placement::replicas(int layer, int expert) const {
  const int32_t* off = offsets_.data() + static_cast<size_t>(layer) * (num_experts_ + 1);
  return {by_expert_.data() + off[expert], static_cast<size_t>(off[expert + 1] - off[expert])};
}

int Placement::max_logcnt() const {
  int best = 0;
  for (int layer = 0; layer < num_layers_; ++layer) {
    for (int e = 0; e < num_experts_; ++e) best = std::max(best, logcnt(layer, e));
  }
  return best;
}

Status Placement::CheckFits(const Topology& topology) const {
  if (num_slots_ != topology.num_slots()) {
    return Status::InvalidArgument(fmt::format(
        "placement has {} slots per layer but the cluster has {} ({} GPUs × {} slots)", num_slots_,
        topology.num_slots(), topology.num_ranks(), topology.slots_per_gpu()));
  }
  return Status::Ok();
}

Placement Placement::WithLayerFrom(const Placement& other, int layer) const {
  assert(other.num_slots_ == num_slots_ && other.num_layers_ == num_layers_ &&
         other.num_experts_ == num_experts_);
  Placement p = *this;
  const auto src = other.phy2log(layer);
  std::copy(src.begin(), src.end(),
            p.phy2log_.begin() + static_cast<ptrdiff_t>(layer) * num_slots_);
  const Status derived = p.Derive();  // a layer of a whole placement keeps it whole
  assert(derived.ok());
  (void)derived;
  return p;
}

}  // namespace eplb
