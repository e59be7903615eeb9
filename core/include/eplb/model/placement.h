// Placement: which logical expert each physical slot holds, per MoE layer.
//
// phy2log(layer)[slot] is the logical expert in `slot`, or kEmptySlot. Derived views:
// replicas(layer, expert) lists the slots that hold `expert` in ascending order (vLLM's
// log2phy row without padding) and logcnt(layer, expert) is their count.
//
// A Placement is always valid: every entry is kEmptySlot or in [0, num_experts), and every
// logical expert has at least one replica in every layer. It is an immutable value.
// Thread-safety: safe to share between threads.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "eplb/base/status.h"
#include "eplb/model/topology.h"

namespace eplb {

inline constexpr int32_t kEmptySlot = -1;

class Placement {
 public:
  // Validates and builds. `phy2log` is `layers × slots`, row-major.
  static Result<Placement> Create(int num_experts, int num_slots, std::vector<int32_t> phy2log);
  static Result<Placement> Create(int num_experts, const std::vector<std::vector<int32_t>>& rows);

  // vLLM's initial placement: slot s holds expert s % num_experts.
  static Result<Placement> Initial(int num_layers, int num_experts, int num_slots);

  int num_layers() const { return num_layers_; }
  int num_slots() const { return num_slots_; }
  int num_experts() const { return num_experts_; }

  std::span<const int32_t> phy2log(int layer) const {
    return {phy2log_.data() + static_cast<size_t>(layer) * num_slots_,
            static_cast<size_t>(num_slots_)};
  }
  int32_t expert_at(int layer, int slot) const { return phy2log(layer)[slot]; }
  std::span<const int32_t> replicas(int layer, int expert) const;
  int logcnt(int layer, int expert) const {
    const int32_t* off = offsets_.data() + static_cast<size_t>(layer) * (num_experts_ + 1);
    return off[expert + 1] - off[expert];
  }
  int max_logcnt() const;
  const std::vector<int32_t>& phy2log_flat() const { return phy2log_; }

  // OK when this placement has as many slots as `topology` has.
  Status CheckFits(const Topology& topology) const;

  // A copy with `layer` taken from `other` (same shape). Used to commit one layer at a time.
  Placement WithLayerFrom(const Placement& other, int layer) const;

  friend bool operator==(const Placement& a, const Placement& b) {
    return a.num_experts_ == b.num_experts_ && a.num_slots_ == b.num_slots_ &&
           a.phy2log_ == b.phy2log_;
  }

 private:
  Placement() = default;
  // Checks phy2log_ (each entry an expert or kEmptySlot, every expert in every layer) while it
  // fills the views below, the checks made on the way rather than in a pass of their own: the
  // first bad entry is named.
  Status Derive();

  int num_layers_ = 0;
  int num_slots_ = 0;
  int num_experts_ = 0;
  std::vector<int32_t> phy2log_;
  // Per layer, CSR of slots by expert: slots of (layer, e) are
  // by_expert_[offsets_[layer*(E+1)+e] .. offsets_[layer*(E+1)+e+1]).
  std::vector<int32_t> offsets_;
  std::vector<int32_t> by_expert_;
};

}  // namespace eplb
