#include <algorithm>

#include "eplb/policy/policies.h"
#include "policy/util.h"

namespace eplb {

Result<Placement> TimeSeriesPolicy::Rebalance(const PolicyInput& input) {
  EPLB_RETURN_IF_ERROR(ValidatePolicyInput(input, /*honour_lost_ranks=*/true));
  return policy_util::OnLiveRanks(input, [this](const PolicyInput& in) { return OnAllRanks(in); });
}

Result<Placement> TimeSeriesPolicy::OnAllRanks(const PolicyInput& input) {
  const int slots = input.topology.num_slots();
  const int experts = static_cast<int>(input.load.cols());
  std::vector<LoadMatrix> single;
  std::span<const LoadMatrix> chunks = input.window_chunks;
  if (chunks.empty()) {
    single.push_back(input.load);
    chunks = single;
  }
  const size_t k_chunks = chunks.size();
  std::vector<std::vector<int32_t>> rows;
  std::vector<int32_t> replicas;
  std::vector<double> weight;
  std::vector<int> counts(static_cast<size_t>(experts));
  std::vector<double> top1(k_chunks), top2(k_chunks), gain(static_cast<size_t>(experts));
  std::vector<int> arg1(k_chunks);
  for (int l = 0; l < input.load.rows(); ++l) {
    std::fill(counts.begin(), counts.end(), 1);
    for (int i = experts; i < slots; ++i) {
      // Per chunk, the two largest loads per replica; only the largest expert's replica helps.
      for (size_t k = 0; k < k_chunks; ++k) {
        top1[k] = top2[k] = -1;
        arg1[k] = 0;
        for (int e = 0; e < experts; ++e) {
          const double v = chunks[k](l, e) / counts[e];
          if (v > top1[k]) {
            top2[k] = top1[k];
            top1[k] = v;
            arg1[k] = e;
          } else if (v > top2[k]) {
            top2[k] = v;
          }
        }
      }
      std::fill(gain.begin(), gain.end(), 0.0);
      for (size_t k = 0; k < k_chunks; ++k) {
        const int e = arg1[k];
        gain[e] += top1[k] - std::max(top2[k], chunks[k](l, e) / (counts[e] + 1));
      }
      int best = 0;
      for (int e = 1; e < experts; ++e) {
        // Ties (for example no gain anywhere) go to the larger load per replica over the window.
        const double a = input.load(l, e) / counts[e], b = input.load(l, best) / counts[best];
        if (gain[e] > gain[best] || (gain[e] == gain[best] && a > b)) best = e;
      }
      ++counts[best];
    }
    policy_util::ExpandReplicas(policy_util::Row(input.load, l), counts, replicas, weight);
    rows.push_back(policy_util::PackLpt(replicas, weight, input.topology));
  }
  return policy_util::FromRows(experts, slots, rows);
}

}  // namespace eplb
