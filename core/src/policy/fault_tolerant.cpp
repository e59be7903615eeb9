// fault-tolerant: survive the loss of any one failure domain — the node when the cluster has
// several, else the GPU — without reloading weights, where the slots allow. Every expert gets a
// second replica, hottest first, while redundant slots last (with slots ≥ 2 × experts, all of
// them do); the rest go where they cut the load per replica most, as replicate-lpt's do. Replicas
// are packed heaviest first on the least loaded GPU with a free slot in a domain that holds no
// replica of that expert yet; an expert left with all its replicas in one domain is then swapped
// with the nearest-weight replica of another domain that the swap leaves survivable. It trades
// balance for survivability: ExposureToFailure (model/survivability.h) measures what it buys.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <queue>

#include "eplb/policy/policies.h"
#include "policy/util.h"

namespace eplb {

namespace {

// Replica counts: one each, a second for the hottest experts while slots last, then the greedy
// max-load-per-replica rule of ReplicaCounts.
std::vector<int> SurvivableCounts(std::span<const double> load, int slots, bool spread) {
  const int experts = static_cast<int>(load.size());
  if (!spread) return policy_util::ReplicaCounts(load, slots);
  std::vector<int> counts(static_cast<size_t>(experts), 1);
  std::vector<int> order(static_cast<size_t>(experts));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return load[a] > load[b]; });
  int extra = slots - experts;
  for (int i = 0; i < experts && extra > 0; ++i, --extra) ++counts[static_cast<size_t>(order[i])];
  // The rest: to the largest load per replica, lowest index on ties.
  using Entry = std::pair<double, int>;  // (load per replica, -expert)
  std::priority_queue<Entry> heap;
  for (int e = 0; e < experts; ++e) heap.push({load[e] / counts[static_cast<size_t>(e)], -e});
  for (; extra > 0; --extra) {
    const int e = -heap.top().second;
    heap.pop();
    ++counts[static_cast<size_t>(e)];
    heap.push({load[e] / counts[static_cast<size_t>(e)], -e});
  }
  return counts;
}

class DomainPacker {
 public:
  DomainPacker(const Topology& t, int experts, int per_domain, std::span<const int> lost)
      : t_(t),
        per_domain_(per_domain),
        load_(static_cast<size_t>(t.num_ranks()), 0.0),
        free_(static_cast<size_t>(t.num_ranks()), t.slots_per_gpu()),
        slots_of_(static_cast<size_t>(t.num_ranks())),
        domains_of_(static_cast<size_t>(experts)) {
    for (int r : lost) free_[static_cast<size_t>(r)] = 0;
  }

  int Domain(int gpu) const { return gpu / per_domain_; }

  void Place(int expert, double weight) {
    int best = -1, fallback = -1;
    const auto& used = domains_of_[static_cast<size_t>(expert)];
    for (int g = 0; g < t_.num_ranks(); ++g) {
      if (free_[g] == 0) continue;
      if (fallback < 0 || load_[g] < load_[fallback]) fallback = g;
      if (std::find(used.begin(), used.end(), Domain(g)) != used.end()) continue;
      if (best < 0 || load_[g] < load_[best]) best = g;
    }
    const int g = best >= 0 ? best : fallback;
    load_[g] += weight;
    --free_[g];
    slots_of_[g].push_back({expert, weight});
    domains_of_[static_cast<size_t>(expert)].push_back(Domain(g));
  }

  // Swaps replicas until every expert with two or more replicas spans two domains, where a
  // swap can do it without leaving its partner in one domain.
  void Repair() {
    for (size_t e = 0; e < domains_of_.size(); ++e) {
      const auto& d = domains_of_[e];
      if (d.size() < 2 || std::any_of(d.begin(), d.end(), [&](int x) { return x != d[0]; }))
        continue;
      SwapOut(static_cast<int>(e), d[0]);
    }
  }

  std::vector<int32_t> Row() const {
    std::vector<int32_t> row;
    row.reserve(static_cast<size_t>(t_.num_slots()));
    for (const auto& slots : slots_of_) {
      for (const Replica& r : slots) row.push_back(r.expert);
      // A lost GPU's slots stay empty.
      for (size_t i = slots.size(); i < static_cast<size_t>(t_.slots_per_gpu()); ++i)
        row.push_back(kEmptySlot);
    }
    return row;
  }

 private:
  struct Replica {
    int expert;
    double weight;
  };

  // Whether `expert`'s replicas, with one in `from` moved to `to`, span two domains.
  bool SurvivesMove(int expert, int from, int to) const {
    std::vector<int> d = domains_of_[static_cast<size_t>(expert)];
    if (d.size() < 2) return true;
    *std::find(d.begin(), d.end(), from) = to;
    return std::any_of(d.begin(), d.end(), [&](int x) { return x != d[0]; });
  }

  void SwapOut(int expert, int domain) {
    // One of its replicas (on GPU a) trades places with a replica of another domain's GPU b.
    int best_a = -1, best_b = -1;
    size_t best_i = 0, best_j = 0;
    double best_gap = INFINITY;
    for (int a = domain * per_domain_; a < (domain + 1) * per_domain_; ++a) {
      for (size_t i = 0; i < slots_of_[a].size(); ++i) {
        if (slots_of_[a][i].expert != expert) continue;
        const double w = slots_of_[a][i].weight;
        for (int b = 0; b < t_.num_ranks(); ++b) {
          if (Domain(b) == domain) continue;
          for (size_t j = 0; j < slots_of_[b].size(); ++j) {
            const Replica& f = slots_of_[b][j];
            if (f.expert == expert || !SurvivesMove(f.expert, Domain(b), domain)) continue;
            const double gap = std::fabs(w - f.weight);
            if (gap < best_gap) {
              best_gap = gap;
              best_a = a, best_b = b, best_i = i, best_j = j;
            }
          }
        }
        break;  // one replica of `expert` per GPU is enough to try
      }
    }
    if (best_a < 0) return;  // no swap keeps both survivable: leave it
    Replica& x = slots_of_[best_a][best_i];
    Replica& y = slots_of_[best_b][best_j];
    load_[best_a] += y.weight - x.weight;
    load_[best_b] += x.weight - y.weight;
    auto& dx = domains_of_[static_cast<size_t>(x.expert)];
    *std::find(dx.begin(), dx.end(), Domain(best_a)) = Domain(best_b);
    auto& dy = domains_of_[static_cast<size_t>(y.expert)];
    *std::find(dy.begin(), dy.end(), Domain(best_b)) = Domain(best_a);
    std::swap(x, y);
  }

  const Topology& t_;
  int per_domain_;
  std::vector<double> load_;
  std::vector<int> free_;
  std::vector<std::vector<Replica>> slots_of_;  // per GPU, in slot order
  std::vector<std::vector<int>> domains_of_;    // per expert, a domain per replica
};

}  // namespace

Result<Placement> FaultTolerantPolicy::Rebalance(const PolicyInput& input) {
  EPLB_RETURN_IF_ERROR(ValidatePolicyInput(input, /*honour_lost_ranks=*/true));
  const Topology& t = input.topology;
  const int per_domain = t.nodes() > 1 ? t.gpus_per_node() : 1;
  // Spreading needs two domains with a live GPU.
  int live_domains = 0;
  for (int d = 0; d < t.num_ranks() / per_domain; ++d) {
    bool live = false;
    for (int g = d * per_domain; g < (d + 1) * per_domain; ++g) live |= !IsLost(input, g);
    live_domains += live;
  }
  const bool spread = live_domains >= 2;
  const int experts = static_cast<int>(input.load.cols()), slots = t.num_slots();
  const int live_slots = policy_util::LiveSlots(input);
  std::vector<std::vector<int32_t>> rows;
  std::vector<int32_t> replicas;
  std::vector<double> weight;
  for (int l = 0; l < input.load.rows(); ++l) {
    const auto load = policy_util::Row(input.load, l);
    policy_util::ExpandReplicas(load, SurvivableCounts(load, live_slots, spread), replicas, weight);
    std::vector<size_t> order(replicas.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return weight[a] > weight[b]; });
    DomainPacker packer(t, experts, per_domain, input.lost_ranks);
    for (size_t i : order) packer.Place(replicas[i], weight[i]);
    if (spread) packer.Repair();
    rows.push_back(packer.Row());
  }
  return policy_util::FromRows(experts, slots, rows);
}

}  // namespace eplb
