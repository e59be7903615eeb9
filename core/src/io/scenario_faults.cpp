// The `faults:` list of a scenario file, and the checks of the GPUs its losses and scales
// leave (scenarios/README.md).
#include <algorithm>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "eplb/engine/scenario_names.h"
#include "eplb/model/names.h"
#include "eplb/policy/policy.h"
#include "io/scenario_fields.h"

namespace eplb::scenario_fields {

// One entry of `faults:`; each kind reads only its own fields, so a field of another kind is
// reported as unknown with the kind's valid ones.
void ReadFault(const YAML::Node& node, size_t index, Scenario& s, Reader& r) {
  const std::string path = fmt::format("faults[{}]", index);
  r.Remember(path, node);  // where later checks of the whole fault point
  MapReader m(node, path, r);
  std::string kind;
  m.String("kind", kind, kFaultKindNames.List());
  if (kind.empty()) {
    if (r.status().ok()) {
      // "straggler, link_degraded, gpu_lost, node_lost or scale"
      std::string kinds = kFaultKindNames.Joined();
      kinds.replace(kinds.rfind(", "), 2, " or ");
      r.Fail(node, path, path + " has no kind (" + kinds + ")");
    }
    return;
  }
  FaultSpec f;
  f.kind = *kFaultKindNames.Find(kind);
  f.until = std::numeric_limits<int>::max();
  m.Int("step", f.step, 0);
  // Losses are for good and a scale holds until the next: only slowdowns end.
  const bool slowdown = f.kind == FaultKind::kStraggler || f.kind == FaultKind::kLinkDegraded;
  if (slowdown) m.Int("until", f.until, 1);
  if (f.kind != FaultKind::kNodeLost && f.kind != FaultKind::kScale)
    m.Int("rank", f.rank, 0, kMaxGpus - 1);
  if (f.kind == FaultKind::kLinkDegraded || f.kind == FaultKind::kNodeLost)
    m.Int("node", f.node, 0, kMaxGpus - 1);
  if (f.kind == FaultKind::kLinkDegraded) {
    std::string link = kLinkClassNames.Name(f.link);
    m.String("link", link, kLinkClassNames.List());
    f.link = *kLinkClassNames.Find(link);
  }
  // Beyond a thousandfold a step outlasts any run (1e308 made SimGrid's clock infinite).
  if (slowdown) m.Double("factor", f.factor, 1, kMaxSlowdown);
  if (f.kind == FaultKind::kScale) m.Int("gpus", f.gpus, 1, kMaxGpus);
  m.Finish();
  if (!r.status().ok()) return;
  if (f.until <= f.step) {
    r.FailAt(path + ".until", fmt::format("{}.until is {}; it must be after {}.step ({})", path,
                                          f.until, path, f.step));
  } else if ((f.kind == FaultKind::kStraggler || f.kind == FaultKind::kGpuLost) && f.rank < 0) {
    r.Fail(node, path, fmt::format("{} ({}) needs the rank it hits", path, kind));
  } else if (f.kind == FaultKind::kNodeLost && f.node < 0) {
    r.Fail(node, path, fmt::format("{} (node_lost) needs the node it loses", path));
  } else if (f.kind == FaultKind::kScale && f.gpus == 0) {
    r.Fail(node, path, fmt::format("{} (scale) needs gpus, the GPUs serving from then on", path));
  } else if (f.kind == FaultKind::kLinkDegraded && (f.rank < 0) == (f.node < 0)) {
    r.Fail(node, path,
           fmt::format("{} (link_degraded) needs either a rank or a node, not both", path));
  } else if (f.rank >= s.num_gpus()) {
    r.FailAt(path + ".rank", fmt::format("{}.rank is {}; the cluster's ranks are 0..{}", path,
                                         f.rank, s.num_gpus() - 1));
  } else if (f.node >= s.cluster.nodes) {
    r.FailAt(path + ".node", fmt::format("{}.node is {}; the cluster's nodes are 0..{}", path,
                                         f.node, s.cluster.nodes - 1));
  } else if (f.gpus > s.num_gpus()) {
    r.FailAt(path + ".gpus",
             fmt::format("{}.gpus is {}; the cluster has 1..{} GPUs", path, f.gpus, s.num_gpus()));
  }
  s.faults.push_back(f);
}

namespace {

bool SameTarget(const FaultSpec& a, const FaultSpec& b) {
  return a.kind == b.kind && a.rank == b.rank && a.node == b.node &&
         (a.kind != FaultKind::kLinkDegraded || a.link == b.link);
}

}  // namespace

void ValidateFaultOverlaps(const Scenario& s, Reader& r) {
  // Losses and scales are checked in order of steps by ValidateRankChanges.
  for (size_t j = 0; j < s.faults.size(); ++j) {
    const FaultSpec& b = s.faults[j];
    if (b.changes_ranks()) continue;
    for (size_t i = 0; i < j; ++i) {
      const FaultSpec& a = s.faults[i];
      if (!SameTarget(a, b) || a.until <= b.step || b.until <= a.step) continue;
      r.FailAt(fmt::format("faults[{}]", j),
               fmt::format("faults[{}] ({}) hits what faults[{}] hits over the same steps; give "
                           "one fault with the combined factor",
                           j, FaultKindName(b.kind), i));
      return;
    }
  }
}

void ValidateRankChanges(const Scenario& s, Reader& r) {
  const int gpus = s.num_gpus(), per = s.num_slots() / gpus, gpn = s.cluster.gpus_per_node;
  if (s.initial_gpus() * per < s.model.experts) {
    r.FailAt("cluster.initial_gpus",
             fmt::format("cluster.initial_gpus is {}: {} GPUs × {} slots cannot hold {} experts",
                         s.cluster.initial_gpus, s.initial_gpus(), per, s.model.experts));
    return;
  }
  std::vector<size_t> order;
  for (size_t i = 0; i < s.faults.size(); ++i) {
    if (s.faults[i].changes_ranks()) order.push_back(i);
  }
  const bool needed = !order.empty() || s.initial_gpus() < gpus;
  if (!needed) return;
  if (!PolicyHonoursLostRanks(s.eplb.policy)) {
    r.FailAt(order.empty() ? "cluster.initial_gpus" : fmt::format("faults[{}]", order.front()),
             fmt::format("eplb.policy is {}, which cannot place around lost or idle GPUs; the "
                         "policies that can: {}",
                         QuoteInput(s.eplb.policy), fmt::join(PoliciesHonouringLostRanks(), ", ")));
    return;
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return s.faults[a].step < s.faults[b].step; });
  std::vector<bool> lost(static_cast<size_t>(gpus), false);
  int serving = s.initial_gpus();
  for (size_t i : order) {
    const FaultSpec& f = s.faults[i];
    if (f.kind == FaultKind::kScale) {
      if (f.gpus == serving) {
        r.FailAt(fmt::format("faults[{}]", i),
                 fmt::format("faults[{}] (scale at step {}) changes nothing: {} GPUs serve then; "
                             "remove it",
                             i, f.step, serving));
        return;
      }
      serving = f.gpus;
    }
    if (f.is_loss()) {
      // A loss must take a serving GPU that is still live: losing one already lost, or one
      // that serves no tokens, would run a recovery for nothing.
      bool takes_one = false, hits_lost = false;
      for (int g = f.first_rank(gpn); g <= f.last_rank(gpn); ++g) {
        takes_one = takes_one || (g < serving && !lost[static_cast<size_t>(g)]);
        hits_lost = hits_lost || lost[static_cast<size_t>(g)];
        lost[static_cast<size_t>(g)] = true;
      }
      if (!takes_one) {
        const std::string what =
            f.kind == FaultKind::kGpuLost
                ? fmt::format("GPU {} is {}", f.rank, hits_lost ? "already lost" : "idle then")
                : fmt::format("node {}'s GPUs are all lost or idle then", f.node);
        r.FailAt(fmt::format("faults[{}]", i),
                 fmt::format("faults[{}] ({} at step {}) loses no serving GPU: {} (GPUs 0..{} "
                             "serve); remove it",
                             i, FaultKindName(f.kind), f.step, what, serving - 1));
        return;
      }
    }
    int live = 0;
    for (int g = 0; g < serving; ++g) live += lost[static_cast<size_t>(g)] ? 0 : 1;
    if (live * per < s.model.experts) {
      r.FailAt(fmt::format("faults[{}]", i),
               fmt::format("faults[{}] ({} at step {}) leaves {} live GPUs × {} slots for {} "
                           "experts; every expert needs a slot",
                           i, FaultKindName(f.kind), f.step, live, per, s.model.experts));
      return;
    }
  }
}

}  // namespace eplb::scenario_fields
