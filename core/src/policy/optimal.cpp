#include "eplb/policy/optimal.h"

#include <algorithm>
#include <functional>
#include <numeric>

#include "eplb/policy/deepseek.h"
#include "policy/util.h"

namespace eplb {
namespace {

// Relative slack for comparing sums formed in different orders.
constexpr double kEps = 1e-12;

double MaxGpuLoad(std::span<const double> load, std::span<const int32_t> row,
                  const Topology& topology) {
  const auto gpu = policy_util::RowGpuLoads(load, row, topology);
  return *std::max_element(gpu.begin(), gpu.end());
}

// Level 2: replicas (heaviest first) onto GPUs of exactly `per_gpu` each, under `best`.
class Packer {
 public:
  Packer(std::span<const double> weights, int gpus, int per_gpu, int64_t& nodes, int64_t budget)
      : w_(weights),
        gpus_(gpus),
        per_gpu_(per_gpu),
        nodes_(nodes),
        budget_(budget),
        load_(static_cast<size_t>(gpus), 0.0),
        count_(static_cast<size_t>(gpus), 0),
        gpu_of_(weights.size(), -1),
        suffix_(weights.size() + 1, 0.0) {
    for (size_t i = weights.size(); i-- > 0;) suffix_[i] = suffix_[i + 1] + weights[i];
  }

  // Looks for a packing whose busiest GPU is below `best`; true when found (then `best` and
  // gpu_of() hold it).
  bool Improve(double& best) {
    best_ = best;
    found_ = false;
    Search(0, 0.0);
    if (found_) best = best_;
    return found_;
  }
  bool aborted() const { return aborted_; }
  const std::vector<int>& gpu_of() const { return best_gpu_of_; }

 private:
  void Search(size_t i, double current_max) {
    if (aborted_) return;
    if (++nodes_ > budget_) {
      aborted_ = true;
      return;
    }
    if (i == w_.size()) {
      if (current_max < best_ * (1 - kEps)) {
        best_ = current_max;
        best_gpu_of_ = gpu_of_;
        found_ = true;
      }
      return;
    }
    // The replicas left must fit in the room under the best found.
    double room = 0;
    for (int g = 0; g < gpus_; ++g) {
      if (count_[g] < per_gpu_) room += std::max(0.0, best_ - load_[g]);
    }
    if (suffix_[i] > room * (1 + kEps)) return;
    for (int g = 0; g < gpus_; ++g) {
      if (count_[g] == per_gpu_ || load_[g] + w_[i] >= best_ * (1 - kEps)) continue;
      bool same_as_earlier = false;  // identical GPUs: the same subtree
      for (int h = 0; h < g && !same_as_earlier; ++h)
        same_as_earlier = count_[h] == count_[g] && load_[h] == load_[g];
      if (same_as_earlier) continue;
      load_[g] += w_[i];
      ++count_[g];
      gpu_of_[i] = g;
      Search(i + 1, std::max(current_max, load_[g]));
      load_[g] -= w_[i];
      --count_[g];
      if (aborted_) return;
    }
  }

  std::span<const double> w_;
  const int gpus_, per_gpu_;
  int64_t& nodes_;
  const int64_t budget_;
  std::vector<double> load_;
  std::vector<int> count_, gpu_of_, best_gpu_of_;
  std::vector<double> suffix_;
  double best_ = 0;
  bool found_ = false, aborted_ = false;
};

}  // namespace

double LowerBoundForCounts(std::span<const double> w, int gpus, int per_gpu) {
  const size_t n = w.size();
  if (n == 0) return 0;
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  double bound = std::max(total / gpus, w[0]);
  // The lightest m replicas, summed: lightest(m) = Σ w[n−m .. n).
  auto lightest = [&](int m) {
    double s = 0;
    for (int i = 0; i < m; ++i) s += w[n - 1 - static_cast<size_t>(i)];
    return s;
  };
  bound = std::max(bound, w[0] + lightest(per_gpu - 1));
  for (int j = 1; j < per_gpu; ++j) {
    const size_t top = static_cast<size_t>(j) * static_cast<size_t>(gpus) + 1;
    if (top > n) break;
    double held = 0;  // the j + 1 lightest of the top j·gpus + 1
    for (size_t i = top - static_cast<size_t>(j) - 1; i < top; ++i) held += w[i];
    bound = std::max(bound, held + lightest(per_gpu - j - 1));
  }
  return bound;
}

LayerOptimum OptimalLayer(std::span<const double> load, const Topology& topology,
                          const OptimumOptions& options) {
  const int experts = static_cast<int>(load.size());
  const int slots = topology.num_slots(), gpus = topology.num_ranks();
  const int per_gpu = slots / gpus;
  LayerOptimum out;
  // The incumbent: the better of replicate-lpt's and DeepSeek's global placement.
  {
    std::vector<int32_t> replicas;
    std::vector<double> weight;
    policy_util::ExpandReplicas(load, policy_util::ReplicaCounts(load, slots), replicas, weight);
    out.phy2log = policy_util::PackLpt(replicas, weight, topology);
    out.max_gpu_load = MaxGpuLoad(load, out.phy2log, topology);
    LoadMatrix one(1, experts);
    for (int e = 0; e < experts; ++e) one(0, e) = load[static_cast<size_t>(e)];
    auto deepseek = RebalanceDeepSeek(one, slots, 1, 1, gpus);
    if (deepseek.ok()) {
      const auto row = deepseek->phy2log(0);
      const double m = MaxGpuLoad(load, row, topology);
      if (m < out.max_gpu_load) {
        out.max_gpu_load = m;
        out.phy2log.assign(row.begin(), row.end());
      }
    }
  }
  const double mean = std::accumulate(load.begin(), load.end(), 0.0) / gpus;
  if (out.max_gpu_load <= mean * (1 + kEps)) {  // nothing beats the mean
    out.proven = true;
    return out;
  }

  std::vector<int> order(static_cast<size_t>(experts));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return load[a] > load[b]; });
  std::vector<int> counts(static_cast<size_t>(experts), 0);
  double best = out.max_gpu_load;
  bool aborted = false;
  std::vector<double> weights;
  std::vector<int32_t> replica_expert;
  std::function<void(int, int)> choose = [&](int j, int left) {
    if (aborted) return;
    if (++out.nodes > options.node_budget) {
      aborted = true;
      return;
    }
    if (j == experts) {
      // Replicas heaviest first, with their experts.
      std::vector<std::pair<double, int32_t>> replicas;
      for (int e = 0; e < experts; ++e) {
        for (int c = 0; c < counts[e]; ++c) replicas.emplace_back(load[e] / counts[e], e);
      }
      std::stable_sort(replicas.begin(), replicas.end(),
                       [](const auto& a, const auto& b) { return a.first > b.first; });
      weights.clear();
      replica_expert.clear();
      for (const auto& [w, e] : replicas) {
        weights.push_back(w);
        replica_expert.push_back(e);
      }
      if (LowerBoundForCounts(weights, gpus, per_gpu) >= best * (1 - kEps)) return;
      Packer packer(weights, gpus, per_gpu, out.nodes, options.node_budget);
      if (packer.Improve(best)) {
        std::vector<int> fill(static_cast<size_t>(gpus), 0);
        for (size_t i = 0; i < weights.size(); ++i) {
          const int g = packer.gpu_of()[i];
          out.phy2log[static_cast<size_t>(g) * per_gpu + fill[g]++] = replica_expert[i];
        }
        out.max_gpu_load = best;
      }
      aborted = packer.aborted();
      return;
    }
    const int e = order[static_cast<size_t>(j)];
    const int others = experts - j - 1;  // each still needs a slot
    const int most = j == experts - 1 ? left : left - others;
    for (int c = j == experts - 1 ? left : 1; c <= most && !aborted; ++c) {
      if (load[e] / c >= best * (1 - kEps)) continue;  // more replicas needed
      counts[e] = c;
      choose(j + 1, left - c);
    }
    counts[e] = 0;
  };
  choose(0, slots);
  out.max_gpu_load = MaxGpuLoad(load, out.phy2log, topology);
  out.proven = !aborted;
  return out;
}

}  // namespace eplb
