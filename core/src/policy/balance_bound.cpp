#include "eplb/policy/balance_bound.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "eplb/policy/optimal.h"
#include "policy/util.h"

namespace eplb {
namespace {

// Replicas an expert of `load` needs so that each carries at most `limit`: ceil(load / limit),
// at least one. The quotient is shrunk by a few ulps so that rounding can only lower the count:
// a lower count admits more placements, which keeps the tests below necessary (the bound valid).
double ReplicasUnder(double load, double limit) {
  if (load <= 0) return 1;
  return std::max(1.0, std::ceil(load / limit * (1 - 1e-12)));
}

// Reused across one layer's tests.
struct Scratch {
  std::vector<std::pair<double, double>> keep;  // (slots saved per big replica, big replicas)
  std::vector<double> splits;                   // thresholds a of the partner test
  std::vector<double> r;                        // replica loads
};

// Counting (header, (2)): for m = 2 .. k, at most (m − 1)·G replicas may carry more than
// limit / m. An expert either takes q = ReplicasUnder(x, limit / m) replicas and has none above,
// or keeps r = ReplicasUnder(x, limit) < q and has r above (a count in between saves fewer
// slots and puts more above); the fewest slots, over a fractional choice of whom to keep (a
// relaxation), must not exceed S. m = 1 is (1): Σ r ≤ S.
bool CountsFit(std::span<const double> load, double limit, int gpus, int per_gpu, double slots,
               Scratch& scratch) {
  for (int m = 1; m <= per_gpu; ++m) {
    double all_small = 0;
    scratch.keep.clear();
    for (double x : load) {
      const double q = ReplicasUnder(x, limit / m);
      all_small += q;
      if (m == 1) continue;
      const double r = ReplicasUnder(x, limit);
      if (r < q) scratch.keep.emplace_back((q - r) / r, r);
    }
    if (all_small <= slots) continue;
    if (m == 1) return false;
    std::sort(scratch.keep.begin(), scratch.keep.end(),
              [](const auto& a, const auto& b) { return a.first > b.first; });
    double capacity = static_cast<double>(m - 1) * gpus, saved = 0;
    for (const auto& [ratio, big] : scratch.keep) {
      const double take = std::min(capacity, big);
      saved += ratio * take;
      capacity -= take;
      if (capacity <= 0) break;
    }
    if (all_small - saved > slots + 1e-9) return false;
  }
  return true;
}

// Partners (header, (3)) at one threshold a in [limit / 2, limit): the largest over λ in [0, 1]
// of need(λ) = Σ_e f_e(λ), f_e = min((1 − λ)·s_e, p_e, (1 + λ·(k − 1))·r_e) (the last where
// r_e < p_e), must not exceed S. Each f_e is concave, rising then falling, so need is too: it
// is swept over the λ where some f_e bends, in order, from its value and slope at 0.
bool PartnersFit(std::span<const double> load, double limit, double a, int per_gpu, double slots,
                 Scratch& scratch) {
  const double k1 = per_gpu - 1;
  double value = 0, slope = 0;  // need and its slope at λ = 0
  auto& bends = scratch.keep;   // (λ, change of slope)
  bends.clear();
  for (size_t e = 0; e < load.size(); ++e) {
    const double x = load[e], s = ReplicasUnder(x, limit - a);
    if (s == 1) {  // one replica is a partner: so for every lighter expert (`load` descends)
      const auto lighter = static_cast<double>(load.size() - e);
      value += lighter;
      slope -= lighter;
      break;
    }
    const double r = ReplicasUnder(x, limit), p = ReplicasUnder(x, a);
    const double fall = 1 - p / s;  // where (1 − λ)·s falls to p
    if (r < p) {
      value += r;
      slope += r * k1;
      const double rise = (p / r - 1) / k1;  // where (1 + λ·(k − 1))·r reaches p
      if (rise <= fall) {
        bends.emplace_back(rise, -r * k1);
        bends.emplace_back(fall, -s);
      } else {  // it meets (1 − λ)·s first
        bends.emplace_back((s - r) / (s + r * k1), -r * k1 - s);
      }
    } else if (fall > 0) {
      value += p;
      bends.emplace_back(fall, -s);
    } else {  // p = s: (1 − λ)·s from the start, as every expert light enough to be a partner
      value += p;
      slope -= s;
    }
  }
  if (slope <= 0) return value <= slots + 1e-9;
  std::sort(bends.begin(), bends.end());
  double at = 0;
  for (const auto& [lambda, change] : bends) {
    if (lambda >= 1) break;
    value += slope * (lambda - at);
    at = lambda;
    if (value > slots + 1e-9) return false;
    slope += change;
    if (slope <= 0) return true;  // only falls from here
  }
  value += slope * (1 - at);
  return value <= slots + 1e-9;
}

// Cardinality (header, (4)). Every count vector under `limit` has c ≥ r = ReplicasUnder(x,
// limit) and Σ c = S, so `spare` = S − Σ r replicas beyond r. With none spare, c = r: its
// replicas must pass LowerBoundForCounts. Otherwise the GPU of the hottest replica (at least
// `hottest`, greedy replication's) holds k − 1 more, each of expert e at least
// x / (r_e + spare), and expert e has at most r_e + spare of them.
bool CardinalityFits(std::span<const double> load, double limit, int gpus, int per_gpu,
                     double hottest, Scratch& scratch) {
  if (per_gpu < 2) return true;
  double spare = static_cast<double>(gpus) * per_gpu;
  for (double x : load) spare -= ReplicasUnder(x, limit);
  auto& w = scratch.r;  // replica loads, or (least load, how many)
  w.clear();
  if (spare <= 0) {
    for (double x : load) {
      const double r = ReplicasUnder(x, limit);
      w.insert(w.end(), static_cast<size_t>(r), x / r);
    }
    std::sort(w.begin(), w.end(), std::greater<>());
    return LowerBoundForCounts(w, gpus, per_gpu) <= limit * (1 + 1e-12);
  }
  scratch.keep.clear();
  for (double x : load) {
    const double most = ReplicasUnder(x, limit) + spare;
    scratch.keep.emplace_back(x / most, most);
  }
  std::sort(scratch.keep.begin(), scratch.keep.end());
  double beside = 0, left = per_gpu - 1;
  for (const auto& [least, most] : scratch.keep) {
    const double take = std::min(left, most);
    beside += least * take;
    left -= take;
    if (left <= 0) break;
  }
  return hottest + beside <= limit * (1 + 1e-12);
}

// False when no placement of `load` has every GPU at or below `limit` (the header's tests);
// true does not mean one exists. `hottest`: greedy replication's hottest replica.
bool MayFit(std::span<const double> load, double limit, int gpus, int per_gpu, double hottest,
            Scratch& scratch) {
  const double slots = static_cast<double>(gpus) * per_gpu;
  if (!CountsFit(load, limit, gpus, per_gpu, slots, scratch)) return false;
  if (!CardinalityFits(load, limit, gpus, per_gpu, hottest, scratch)) return false;
  if (per_gpu < 2) return true;
  // The thresholds that matter are just below a replica's load above limit / 2 (it then counts
  // as above): every count of every expert that puts its replicas there.
  scratch.splits.clear();
  for (double x : load) {
    for (double c = ReplicasUnder(x, limit); x / c > limit / 2; ++c)
      scratch.splits.push_back(x / c * (1 - 1e-9));
  }
  std::sort(scratch.splits.begin(), scratch.splits.end());
  scratch.splits.erase(std::unique(scratch.splits.begin(), scratch.splits.end()),
                       scratch.splits.end());
  // Bounded work: every split is a valid test, so a thinned set stays a valid bound. Highest
  // first: the hottest replicas, whose partners must be lightest, are what rules limits out
  // (on DeepSeek decode EP144, a > 0.95·limit in 447 of 449 failures).
  const size_t n = scratch.splits.size();
  const size_t step = (n + kMaxPartnerSplits - 1) / kMaxPartnerSplits;
  for (size_t done = 0; done < n; done += step) {
    const double a = std::max(scratch.splits[n - 1 - done], limit / 2);
    if (a < limit && !PartnersFit(load, limit, a, per_gpu, slots, scratch)) return false;
  }
  return true;
}

// The busiest GPU of replicate-lpt's placement (greedy counts, heaviest replica on the least
// loaded GPU with a free slot): a placement exists there, so every test admits it.
double LptMaxGpuLoad(std::span<const double> load, int gpus, int per_gpu) {
  const auto counts = policy_util::ReplicaCounts(load, gpus * per_gpu);
  std::vector<double> w;
  for (size_t e = 0; e < counts.size(); ++e)
    w.insert(w.end(), static_cast<size_t>(counts[e]), load[e] / counts[e]);
  std::sort(w.begin(), w.end(), std::greater<>());
  std::vector<double> gpu(static_cast<size_t>(gpus), 0.0);
  std::vector<int> used(static_cast<size_t>(gpus), 0);
  for (double x : w) {
    size_t best = gpu.size();
    for (size_t g = 0; g < gpu.size(); ++g) {
      if (used[g] < per_gpu && (best == gpu.size() || gpu[g] < gpu[best])) best = g;
    }
    gpu[best] += x;
    ++used[best];
  }
  return *std::max_element(gpu.begin(), gpu.end());
}

}  // namespace

double LayerMaxGpuLoadLowerBound(std::span<const double> load, int gpus, int per_gpu) {
  const double total = std::accumulate(load.begin(), load.end(), 0.0);
  if (load.empty() || total <= 0) return 0;
  // (1): the mean and the hottest replica under greedy replication, which minimises it.
  const auto counts = policy_util::ReplicaCounts(load, gpus * per_gpu);
  double hottest = 0;
  for (size_t e = 0; e < counts.size(); ++e) hottest = std::max(hottest, load[e] / counts[e]);
  double lo = std::max(total / gpus, hottest);
  // The tests do not depend on the experts' order; heaviest first lets them stop early.
  std::vector<double> sorted(load.begin(), load.end());
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  Scratch scratch;
  if (MayFit(sorted, lo, gpus, per_gpu, hottest, scratch)) return lo;
  // Ruled out: the optimum lies above `lo` and at most at LPT's busiest GPU. Bisect; what is
  // returned is always a limit the tests ruled out.
  double hi = LptMaxGpuLoad(load, gpus, per_gpu);
  while (hi - lo > kBoundTolerance * hi) {
    const double mid = 0.5 * (lo + hi);
    (MayFit(sorted, mid, gpus, per_gpu, hottest, scratch) ? hi : lo) = mid;
  }
  return lo;
}

std::vector<double> MaxGpuLoadLowerBound(const LoadMatrix& load, const Topology& topology) {
  std::vector<double> bound;
  bound.reserve(static_cast<size_t>(load.rows()));
  const int gpus = topology.num_ranks(), per_gpu = topology.num_slots() / gpus;
  for (int l = 0; l < load.rows(); ++l)
    bound.push_back(LayerMaxGpuLoadLowerBound(policy_util::Row(load, l), gpus, per_gpu));
  return bound;
}

std::vector<double> BestMaxGpuLoadBound(const LoadMatrix& load, const Topology& topology) {
  std::vector<double> bound = MaxGpuLoadLowerBound(load, topology);
  if (load.cols() > kExactExperts || topology.num_slots() > kExactSlots) return bound;
  for (int l = 0; l < load.rows(); ++l) {
    const LayerOptimum exact =
        OptimalLayer(policy_util::Row(load, l), topology, {.node_budget = kExactNodeBudget});
    if (exact.proven) bound[static_cast<size_t>(l)] = exact.max_gpu_load;
  }
  return bound;
}

double BalancednessUpperBound(const LoadMatrix& load, const Topology& topology) {
  const auto bound = BestMaxGpuLoadBound(load, topology);
  double mean = 0, max = 0;
  for (int l = 0; l < load.rows(); ++l) {
    mean += load.row(l).sum() / topology.num_ranks();
    max += bound[l];
  }
  return max > 0 ? mean / max : 1.0;
}

}  // namespace eplb
