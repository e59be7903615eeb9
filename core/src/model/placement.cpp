#include "eplb/model/placement.h"

#include <algorithm>

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
  const int layers = static_cast<int>(phy2log.size() / static_cast<size_t>(num_slots));
  std::vector<int> count(static_cast<size_t>(num_experts));
  for (int layer = 0; layer < layers; ++layer) {
    std::fill(count.begin(), count.end(), 0);
    for (int slot = 0; slot < num_slots; ++slot) {
      const int32_t e = phy2log[static_cast<size_t>(layer) * num_slots + slot];
      if (e == kEmptySlot) continue;
      if (e < 0 || e >= num_experts) {
        return Status::InvalidArgument(
            fmt::format("phy2log[{}][{}] is {}; valid values are -1 (empty) or 0..{}", layer, slot,
                        e, num_experts - 1));
      }
      ++count[e];
    }
    const auto missing = std::find(count.begin(), count.end(), 0);
    if (missing != count.end()) {
      return Status::InvalidArgument(fmt::format(
          "layer {}: logical expert {} has no replica; every expert 0..{} needs at least one slot",
          layer, missing - count.begin(), num_experts - 1));
    }
  }
  Placement p;
  p.num_layers_ = layers;
  p.num_slots_ = num_slots;
  p.num_experts_ = num_experts;
  p.phy2log_ = std::move(phy2log);
  p.Derive();
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

void Placement::Derive() {
  const size_t stride = static_cast<size_t>(num_experts_) + 1;
  offsets_.assign(static_cast<size_t>(num_layers_) * stride, 0);
  by_expert_.assign(phy2log_.size(), 0);
  int32_t base = 0;
  for (int layer = 0; layer < num_layers_; ++layer) {
    int32_t* off = offsets_.data() + layer * stride;
    const auto row = phy2log(layer);
    for (int32_t e : row) {
      if (e != kEmptySlot) ++off[e + 1];
    }
    off[0] = base;
    for (int e = 0; e < num_experts_; ++e) off[e + 1] += off[e];
    std::vector<int32_t> cursor(off, off + num_experts_);
    for (int slot = 0; slot < num_slots_; ++slot) {
      if (row[slot] != kEmptySlot) by_expert_[cursor[row[slot]]++] = slot;
    }
    base = off[num_experts_];
  }
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
  p.Derive();
  return p;
}

}  // namespace eplb
