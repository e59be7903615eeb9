#include "eplb/engine/workload.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <numeric>
#include <random>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/sampling.h"
#include "eplb/base/csv.h"
#include "eplb/base/file_io.h"
#include "eplb/formats/json.h"
#include "eplb/formats/load_file.h"

namespace eplb {
namespace {

// Counts for one layer: `total` assignments spread by `share` (sums to 1). With `noise`, each
// expert's count is drawn around its mean from a normal with the variance of Poisson sampling
// plus mean² · `count_variance` (StepVariance): N sequences per step whose log-popularity
// deviates from the layer's by N(0, σ²) each add (e^{σ²} − 1) / N to that factor, and the step's
// own movement e^{step_sigma²} − 1. The first two moments are those of drawing each sequence's
// and the step's multipliers, at a cost that does not grow with N; a normal stands in for their
// shape, which is why workload.step_sigma is bounded at 1.
//
// The draws move popularity, never the number of tokens: a step routes exactly `total`
// assignments (its tokens × top_k), and no expert more than `cap` (each token reaches an expert
// at most once). The draws, cut at 0, are scaled to `total`; what lies above `cap` goes to the
// others in proportion; then each count is rounded so that the running sum is rounded, which
// keeps the sum exact and each count within one of its share.
void Sample(const double* share, int experts, double total, double cap, bool noise,
            double count_variance, NormalTable& normal, double* out) {
  if (!noise) {
    for (int e = 0; e < experts; ++e) out[e] = total * share[e];
    return;
  }
  double sum = 0;
  for (int e = 0; e < experts; ++e) {
    const double mean = total * share[e];
    out[e] = std::max(0.0, mean + std::sqrt(mean + mean * mean * count_variance) * normal.Next());
    sum += out[e];
  }
  if (!(sum > 0)) {
    for (int e = 0; e < experts; ++e) out[e] = total * share[e];
  } else {
    const double scale = total / sum;
    for (int e = 0; e < experts; ++e) out[e] *= scale;
  }
  // Water-filling: each pass clamps the experts above the cap and spreads their excess over the
  // rest; an expert pushed over the cap by it is clamped in the next pass.
  for (int pass = 0; pass < experts; ++pass) {
    double excess = 0, below = 0;
    for (int e = 0; e < experts; ++e) {
      if (out[e] > cap) {
        excess += out[e] - cap;
        out[e] = cap;
      } else if (out[e] < cap) {
        below += out[e];
      }
    }
    if (excess <= 0 || below <= 0) break;
    const double grow = 1 + excess / below;
    for (int e = 0; e < experts; ++e) {
      if (out[e] < cap) out[e] *= grow;
    }
  }
  double running = 0, rounded = 0;
  for (int e = 0; e < experts; ++e) {
    running += out[e];
    const double next = RoundedCount(running);
    out[e] = std::max(0.0, next - rounded);
    rounded = std::max(rounded, next);
  }
}

class GeneratorWorkload final : public Workload {
 public:
  explicit GeneratorWorkload(const Scenario& s)
      : spec_(s.workload),
        layers_(s.model.layers),
        experts_(s.model.experts),
        total_(s.tokens_per_forward() * s.model.top_k),
        cap_(s.tokens_per_forward()),
        rng_(s.run.seed * 0x9e3779b97f4a7c15ULL + 17),
        normal_(s.run.seed + 101),
        count_variance_(StepVariance(s.workload, s.tokens_per_forward())),
        log_pop_(static_cast<size_t>(layers_) * experts_),
        share_(static_cast<size_t>(experts_)) {
    std::normal_distribution<double> n(0.0, 1.0);
    std::vector<int> order(static_cast<size_t>(experts_));
    for (int l = 0; l < layers_; ++l) {
      double* lp = &log_pop_[static_cast<size_t>(l) * experts_];
      if (spec_.popularity == "zipf") {
        // Rank r (1-based) gets weight r^-s; a random permutation picks which expert is hot.
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), rng_);
        for (int r = 0; r < experts_; ++r) lp[order[r]] = -spec_.zipf_s * std::log(r + 1.0);
      } else {
        for (int e = 0; e < experts_; ++e) lp[e] = spec_.sigma * n(rng_);
      }
    }
    phases_ = spec_.phases;
    std::sort(phases_.begin(), phases_.end(),
              [](const PhaseChange& a, const PhaseChange& b) { return a.step < b.step; });
  }

  void Next(LoadMatrix& load) override {
    load.resize(layers_, experts_);
    while (next_phase_ < phases_.size() && phases_[next_phase_].step <= step_)
      Shuffle(phases_[next_phase_++].shuffle);
    for (int l = 0; l < layers_; ++l) {
      double* lp = &log_pop_[static_cast<size_t>(l) * experts_];
      double max = -1e300;
      for (int e = 0; e < experts_; ++e) {
        if (spec_.drift > 0) lp[e] += spec_.drift * normal_.Next();
        max = std::max(max, lp[e]);
      }
      double sum = 0;
      for (int e = 0; e < experts_; ++e) sum += share_[e] = std::exp(lp[e] - max);
      for (int e = 0; e < experts_; ++e) share_[e] /= sum;
      Sample(share_.data(), experts_, total_, cap_, spec_.noise, count_variance_, normal_,
             load.row(l).data());
    }
    ++step_;
  }

 private:
  // Swaps the popularity of a `fraction` of experts in every layer with other experts'.
  void Shuffle(double fraction) {
    const int moved = static_cast<int>(std::round(fraction * experts_));
    std::vector<int> pick(static_cast<size_t>(experts_));
    for (int l = 0; l < layers_; ++l) {
      double* lp = &log_pop_[static_cast<size_t>(l) * experts_];
      std::iota(pick.begin(), pick.end(), 0);
      std::shuffle(pick.begin(), pick.end(), rng_);
      // Rotate the popularity of the first `moved` picked experts among themselves.
      for (int i = 0; i + 1 < moved; ++i) std::swap(lp[pick[i]], lp[pick[i + 1]]);
    }
  }

  WorkloadSpec spec_;
  int layers_, experts_;
  double total_;
  double cap_;  // an expert's assignments: at most one per token
  std::mt19937_64 rng_;
  NormalTable normal_;
  double count_variance_;
  std::vector<double> log_pop_;
  std::vector<double> share_;
  std::vector<PhaseChange> phases_;
  size_t next_phase_ = 0;
  int step_ = 0;
};

// Recorded steps, replayed in order and repeated.
class ReplayWorkload final : public Workload {
 public:
  explicit ReplayWorkload(std::vector<LoadMatrix> steps) : steps_(std::move(steps)) {}
  void Next(LoadMatrix& load) override {
    load = steps_[next_];
    next_ = (next_ + 1) % steps_.size();
  }

 private:
  std::vector<LoadMatrix> steps_;
  size_t next_ = 0;
};

// A fixed distribution sampled per step: each step draws the same number of assignments as the
// recorded matrix holds per layer, with sampling noise.
class DistributionWorkload final : public Workload {
 public:
  DistributionWorkload(const LoadMatrix& counts, const Scenario& s)
      : share_(counts), normal_(s.run.seed + 7) {
    for (Eigen::Index l = 0; l < share_.rows(); ++l) {
      const double sum = share_.row(l).sum();
      totals_.push_back(sum);
      // A token reaches an expert once; a recording that says otherwise keeps its own maximum.
      caps_.push_back(std::max(sum / s.model.top_k, share_.row(l).maxCoeff()));
      count_variance_.push_back(StepVariance(s.workload, sum / s.model.top_k));
      if (sum > 0) share_.row(l) /= sum;
    }
    noise_ = s.workload.noise;
  }
  void Next(LoadMatrix& load) override {
    load.resize(share_.rows(), share_.cols());
    for (Eigen::Index l = 0; l < share_.rows(); ++l) {
      Sample(share_.row(l).data(), static_cast<int>(share_.cols()), totals_[l], caps_[l], noise_,
             count_variance_[l], normal_, load.row(l).data());
    }
  }

 private:
  LoadMatrix share_;
  std::vector<double> totals_;
  std::vector<double> caps_;  // per layer: the most one expert may receive
  bool noise_ = true;
  NormalTable normal_;
  std::vector<double> count_variance_;  // per layer
};

}  // namespace

double SequenceVariance(const WorkloadSpec& w, double tokens) {
  if (w.sequence_tokens <= 0 || w.sequence_sigma <= 0 || tokens <= 0) return 0;
  const double sequences = std::max(1.0, tokens / w.sequence_tokens);
  return std::expm1(w.sequence_sigma * w.sequence_sigma) / sequences;
}

double StepVariance(const WorkloadSpec& w, double tokens) {
  return SequenceVariance(w, tokens) + std::expm1(w.step_sigma * w.step_sigma);
}

Result<std::unique_ptr<Workload>> MakeWorkload(const Scenario& s) {
  if (s.workload.kind == "generator") return std::unique_ptr<Workload>(new GeneratorWorkload(s));
  std::filesystem::path path(s.workload.trace);
  if (path.is_relative()) path = std::filesystem::path(s.base_dir) / path;
  const std::string p = path.string();
  LoadReadOptions options;
  options.layers = s.model.layers;
  options.experts = s.model.experts;
  options.layers_name = "the scenario's model.layers";
  options.experts_name = "the scenario's model.experts";
  auto series = ReadLoadSeries(p, options);
  if (!series.ok()) return series.status();
  // A recording of several steps replays step by step; a single matrix is a distribution.
  if (series->steps.size() > 1) {
    return std::unique_ptr<Workload>(new ReplayWorkload(std::move(series->steps)));
  }
  return std::unique_ptr<Workload>(new DistributionWorkload(series->steps[0], s));
}

}  // namespace eplb
