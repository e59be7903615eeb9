// The best any placement can do: a lower bound on each layer's maximum GPU load.
//
// The placements bounded are every placement eplb can serve: expert e gets an integral c_e ≥ 1
// replicas, Σ c_e = S (the slots), every one of the G GPUs holds exactly k = S / G replicas, and
// a replica carries x_e / c_e (vLLM, SGLang and DeepSeek split an expert's tokens evenly over
// its replicas). Nodes, groups and "at most one replica of an expert per GPU" are not
// assumed: no built-in policy but fault-tolerant keeps replicas of an expert apart (DeepSeek's
// and replicate-lpt's packings may put two on one GPU), and a bound over more placements is a
// bound for the fewer too.
//
// A limit T is ruled out (no placement has every GPU at or below T) by any of:
//  (1) T < total / G (the mean), or T < the hottest replica: each replica must carry at most T,
//      so c_e ≥ r_e = ceil(x_e / T), which needs Σ r_e ≤ S; greedy replication attains the
//      least hottest replica over all count vectors, so T below it is ruled out at once.
//  (2) Counting, for m = 2 .. k: a GPU with m replicas above T / m carries more than T, so at
//      most (m − 1)·G replicas are above T / m. Expert e has none above when c_e ≥ q_e =
//      ceil(m·x_e / T), else c_e ≥ r_e of them; so some choice of experts kept at r_e (r_e
//      above each) within (m − 1)·G must leave Σ q_e − Σ_kept (q_e − r_e) ≤ S. The most slots
//      that can be saved is a knapsack; its fractional relaxation saves at least as many, so
//      failing with it rules T out.
//  (3) Partners, for a in [T / 2, T): a GPU holds at most one replica above a (two exceed T),
//      and beside it k − 1 more of at most T − a each. So (k − 1)·#above ≤ #partners (replicas
//      at most T − a). Classify each expert by its count: above (c = r_e, the fewest), between
//      (p_e = ceil(x_e / a) replicas, none above a or at most T − a) or partner (c ≥ s_e =
//      ceil(x_e / (T − a)), and any spare slot may join it as a partner). With #partners = S −
//      #above − #between, a placement needs
//        slots:   Σ_above r + Σ_between p + Σ_partner s ≤ S
//        pairing: k·Σ_above r + Σ_between p ≤ S,
//      so for every λ in [0, 1] the weighted sum (1 − λ)·slots + λ·pairing, in which each
//      expert independently takes its cheapest class, must not exceed S. The largest over λ is
//      exact (the sum is concave in λ); the a tried are just below each replica load in
//      (T / 2, T] that some count gives, at most kMaxPartnerSplits of them.
//  (4) Cardinality: spare = S − Σ r_e. With none, c = r exactly and LowerBoundForCounts
//      (optimal.h: the heaviest with the k − 1 lightest, and the pigeonhole of the j·G + 1
//      heaviest) must not exceed T. Otherwise the GPU of the hottest replica (at least greedy's,
//      by (1)) holds k − 1 more, each of expert e at least x_e / (r_e + spare), at most
//      r_e + spare of them.
// Each is a necessary condition, so the largest T found ruled out (bisection between (1) and
// replicate-lpt's busiest GPU, to kBoundTolerance) is a lower bound whatever the tests miss.
// Rounding only ever lowers a count (ReplicasUnder), which admits more and keeps it valid.
//
// How tight (measured, tests/policy_optimal_test.cpp and the run of the shipped scenarios):
//  - S slots of G GPUs with k ≥ 9 and 32 or 16 redundant (the DeepSeek prefill and Qwen3
//    scenarios): the bound is the mean, balancedness 1, and the optimum is within 0.05% of it:
//    greedy counts packed LPT then improved by swaps reach 0.9997 (prefill EP32) and 0.9995
//    (Qwen3-235B EP16) on the windows of the default runs. There a policy's gap to the bound is
//    its own.
//  - k = 2 (DeepSeek decode EP144: 288 slots on 144 GPUs): the hottest replica needs a partner
//    and (3) binds: 0.7263 where the best placement found reaches 0.7247 (the mean and hottest
//    replica alone said 0.7366).
//  - Small random layers (G 2-4, k 1-5, lognormal loads; tests/policy_optimal_test.cpp): never
//    above the exact optimum; equal to it (within 2·kBoundTolerance) on 57% of them (42% for
//    the mean and hottest replica alone), 0.993 of it on average (0.982), 0.79 at worst (the
//    same), the rest being the discreteness of few replicas, which no counting argument sees.
//    The reports use the exact optimum there instead (BestMaxGpuLoadBound).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "eplb/model/load.h"
#include "eplb/model/topology.h"

namespace eplb {

// Per layer, the lower bound above on the maximum GPU load of any placement on `topology`.
std::vector<double> MaxGpuLoadLowerBound(const LoadMatrix& load, const Topology& topology);
// The same for one layer's expert loads on `gpus` GPUs of `per_gpu` slots each.
double LayerMaxGpuLoadLowerBound(std::span<const double> load, int gpus, int per_gpu);
// The partner test's thresholds per limit at most (more cost more, never invalidate), and the
// relative precision of the bisection.
inline constexpr size_t kMaxPartnerSplits = 96;
inline constexpr double kBoundTolerance = 1e-4;
// Per layer, the best maximum GPU load known to be unbeatable: the exact optimum on layers of at
// most kExactExperts experts and kExactSlots slots whose search finishes within
// kExactNodeBudget nodes (a few milliseconds), else MaxGpuLoadLowerBound.
inline constexpr int kExactExperts = 32, kExactSlots = 48;
inline constexpr int64_t kExactNodeBudget = 200'000;
std::vector<double> BestMaxGpuLoadBound(const LoadMatrix& load, const Topology& topology);
// The balancedness no placement can exceed on `load` (metrics.h's definition), from
// BestMaxGpuLoadBound.
double BalancednessUpperBound(const LoadMatrix& load, const Topology& topology);

}  // namespace eplb
