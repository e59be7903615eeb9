// The step model (step_model.h): the faults in force, the compute of a step (roofline or
// simple), the split into micro-batches, and how the step adds up. The all-to-all, its port
// bytes and phase times, is in step_model_ports.cpp.
#include "eplb/engine/step_model.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstddef>
#include <span>

#include "engine/sampling.h"
#include "eplb/engine/workload.h"

namespace eplb {

namespace {

// FlashAttention reads a sequence's cache once per tile of this many query tokens in prefill.
constexpr double kPrefillQueriesPerKvRead = 128;
// FP8 activations travel with one float scale per 128 elements (DeepEP, DeepSeek-V3).
constexpr double kFp8ScaleBytesPerElement = 4.0 / 128;
// The dispatcher's random engine starts from the run's seed mixed with this, so that its
// draws are not the workload generator's.
constexpr uint64_t kDispatchSeedSalt = 0x9e3779b97f4a7c15ull;
// Likewise the micro-batch split's draws.
constexpr uint64_t kSplitSeedSalt = 0xd1b54a32d192ed03ull;

}  // namespace

Slowdowns::Slowdowns(int ranks) : compute(static_cast<size_t>(ranks), 1.0) {
  for (auto& l : link) l.assign(static_cast<size_t>(ranks), 1.0);
}

bool Slowdowns::healthy() const {
  const auto all_one = [](const std::vector<double>& v) {
    return std::all_of(v.begin(), v.end(), [](double f) { return f == 1.0; });
  };
  return all_one(compute) && std::all_of(link.begin(), link.end(), all_one);
}

bool Slowdowns::operator==(const Slowdowns& o) const {
  return compute == o.compute && link == o.link;
}

Slowdowns SlowdownsAt(const std::vector<FaultSpec>& faults, int step, const Topology& topology) {
  Slowdowns s(topology.num_ranks());
  for (const FaultSpec& f : faults) {
    // Losses and scales change which GPUs serve (StepModel::SetRanks), not their speed.
    if (!f.active_at(step) || f.changes_ranks()) continue;
    if (f.kind == FaultKind::kStraggler) {
      s.compute[static_cast<size_t>(f.rank)] *= f.factor;
      continue;
    }
    const int gpn = topology.gpus_per_node();
    for (int r = f.first_rank(gpn); r <= f.last_rank(gpn); ++r) s.link[f.link][r] *= f.factor;
  }
  return s;
}

void StepModel::SetSlowdowns(const Slowdowns& slowdowns) {
  slowdowns_ = slowdowns;
  slowest_gpu_ = *std::max_element(slowdowns_.compute.begin(), slowdowns_.compute.end());
}

void StepModel::SetRanks(const std::vector<char>& lost, const std::vector<char>& serving) {
  const int G = topology_.num_ranks();
  bool all = true;
  serving_count_ = 0;
  serving_in_node_.assign(static_cast<size_t>(topology_.nodes()), 0);
  for (int g = 0; g < G; ++g) {
    all = all && !lost[g] && serving[g];
    if (serving[g] && !lost[g]) {
      ++serving_count_;
      ++serving_in_node_[static_cast<size_t>(topology_.node_of_rank(g))];
    }
  }
  if (all) {
    lost_.clear();
    serving_.clear();
    return;
  }
  lost_ = lost;
  serving_ = serving;
  for (int g = 0; g < G; ++g) serving_[g] = serving_[g] && !lost_[g];
}

StepModel::StepModel(const Scenario& s)
    : topology_(s.topology()),
      compute_(s.compute),
      shape_(s.model),
      gpu_(FindGpuPreset(s.compute.gpu)),
      slowdowns_(s.num_gpus()),
      layers_(s.model.layers),
      dispatcher_(s.eplb.dispatch, s.run.seed ^ kDispatchSeedSalt) {
  const double hidden = s.model.hidden;
  const int combine = s.model.combine_bytes > 0 ? s.model.combine_bytes : s.model.activation_bytes;
  dispatch_bytes_per_token_ = hidden * s.model.activation_bytes;
  if (compute_.all_to_all != AllToAllMode::kBulk && s.model.activation_bytes == 1) {
    dispatch_bytes_per_token_ += hidden * kFp8ScaleBytesPerElement;
  }
  combine_bytes_per_token_ = hidden * combine;
  shape_.combine_bytes = combine;
  if (s.compute.micro_batches == 2 && s.workload.noise) {
    split_normal_ = std::make_unique<NormalTable>(s.run.seed ^ kSplitSeedSalt);
    split_variance_ = SequenceVariance(s.workload, s.tokens_per_forward());
  }
}

StepModel::~StepModel() = default;

double StepModel::RooflineMoe(double tokens, int loaded_experts) const {
  // The GEMMs run each expert as a group, and every group costs as much as
  // compute.expert_fixed_tokens more tokens would.
  const double flops = 6.0 * shape_.hidden * shape_.intermediate *
                       (tokens + loaded_experts * compute_.expert_fixed_tokens);
  const double hbm = gpu_->hbm_gbps * 1e9;
  const double weights = static_cast<double>(loaded_experts) *
                         static_cast<double>(shape_.expert_bytes) /
                         (hbm * compute_.weight_hbm_efficiency);
  const double activations = tokens * shape_.hidden *
                             (shape_.activation_bytes + shape_.combine_bytes) /
                             (hbm * compute_.hbm_efficiency);
  return std::max(flops / (PeakFlops(*gpu_, compute_.gemm_bytes) * compute_.flops_efficiency),
                  weights + activations);
}

double StepModel::RooflineAttention(double tokens) const {
  const double fe = compute_.flops_efficiency, hbm = gpu_->hbm_gbps * 1e9;
  // The dense GEMMs and attention's core are separate kernels, each bound by its own FLOPs or
  // bytes: the GEMMs by their weights (few tokens per weight in decode), attention by its KV
  // cache. Their times add.
  const double gemm =
      std::max(2.0 * shape_.dense_params * tokens / (PeakFlops(*gpu_, compute_.gemm_bytes) * fe),
               shape_.dense_params * compute_.gemm_bytes / (hbm * compute_.weight_hbm_efficiency));
  // A decode step reads each sequence's cache once for all of its tokens (its own and MTP's
  // drafts: FlashMLA takes a sequence's query tokens together).
  const double kv_reuse = compute_.stage == InferenceStage::kDecode
                              ? 1.0 + compute_.mtp_draft_tokens
                              : kPrefillQueriesPerKvRead;
  const double attention = std::max(
      shape_.attention_flops_per_kv * compute_.kv_length * tokens / (PeakFlops(*gpu_, 2) * fe),
      tokens * compute_.kv_length * shape_.kv_bytes_per_token / kv_reuse /
          (hbm * compute_.hbm_efficiency));
  // The kernels between the GEMMs run on their own, memory-bound: their time adds.
  const double elementwise =
      tokens * shape_.elementwise_bytes_per_token / (hbm * compute_.hbm_efficiency);
  return gemm + attention + elementwise;
}

void StepModel::Cost(const LoadMatrix& load, const Placement& placement, StepCost& out) {
  if (split_normal_) {
    SplitMicroBatches(load);
    CostMicroBatches(halves_[0], halves_[1], placement, out);
    return;
  }
  // One pass over the step's load; with two exact halves it stands for both micro-batches.
  const int layers = placement.num_layers();
  StepSums sums;
  BeginStep(layers, out);
  const double share = 1.0 / compute_.micro_batches;
  sums.assignments = PriceLoad(load, placement, share, out, layer_compute_[0], sums);
  const PricedLoad pass{&out, &layer_compute_[0], share};
  FinishStep(layers, std::span<const PricedLoad>(&pass, 1), sums, out);
}

void StepModel::CostMicroBatches(const LoadMatrix& first, const LoadMatrix& second,
                                 const Placement& placement, StepCost& out) {
  assert(compute_.micro_batches == 2);
  const int layers = placement.num_layers();
  StepSums sums;
  BeginStep(layers, out);
  const LoadMatrix* loads[2] = {&first, &second};
  PricedLoad passes[2];
  for (int b = 0; b < 2; ++b) {
    sums.assignments += PriceLoad(*loads[b], placement, 1.0, batch_[b], layer_compute_[b], sums);
    passes[b] = {&batch_[b], &layer_compute_[b], 1.0};
  }
  // The step's ports carry both micro-batches' bytes.
  const auto sum = [](const std::vector<double>& a, const std::vector<double>& b,
                      std::vector<double>& to) {
    to.resize(a.size());
    for (size_t g = 0; g < a.size(); ++g) to[g] = a[g] + b[g];
  };
  for (LinkClass link : kLinkClasses) {
    sum(batch_[0].send[link], batch_[1].send[link], out.send[link]);
    sum(batch_[0].recv[link], batch_[1].recv[link], out.recv[link]);
    out.layer_busiest_bytes[link] =
        batch_[0].layer_busiest_bytes[link] + batch_[1].layer_busiest_bytes[link];
  }
  FinishStep(layers, passes, sums, out);
}

void StepModel::SplitMicroBatches(const LoadMatrix& load) {
  for (LoadMatrix& half : halves_) half.resize(load.rows(), load.cols());
  const double v = split_variance_;
  const double* counts = load.data();
  double* first = halves_[0].data();
  double* second = halves_[1].data();
  for (Eigen::Index i = 0; i < load.size(); ++i) {
    const double n = counts[i];
    // A token falls in either half with even odds, and a sequence's tokens together.
    const double drawn =
        RoundedCount(0.5 * n + std::sqrt(0.25 * (n + n * n * v)) * split_normal_->Next());
    first[i] = n > 0 ? std::min(drawn, n) : 0.0;
    second[i] = n - first[i];
  }
}

void StepModel::BeginStep(int layers, StepCost& out) {
  // The step's ports are its pass's, or the sum of the micro-batches' (CostMicroBatches).
  const auto ranks = static_cast<size_t>(topology_.num_ranks());
  out.layer_mean.resize(static_cast<size_t>(layers));
  out.layer_max.resize(static_cast<size_t>(layers));
  layer_tokens_.assign(static_cast<size_t>(layers) * ranks, 0.0);
  layer_working_.resize(static_cast<size_t>(layers));
  nvlink_counted_.assign(ranks, 0.0);
}

double StepModel::PriceLoad(const LoadMatrix& load, const Placement& placement, double share,
                            StepCost& ports, std::vector<double>& moe, StepSums& sums) {
  const bool normal = compute_.all_to_all == AllToAllMode::kNormal;
  BeginPass(ports);
  gpu_step_.assign(static_cast<size_t>(topology_.num_ranks()), 0.0);
  node_tokens_.assign(static_cast<size_t>(topology_.nodes()), 0.0);
  gpu_layer_.resize(static_cast<size_t>(topology_.num_ranks()));
  node_layer_.resize(static_cast<size_t>(topology_.nodes()));
  if (normal) normal_nvlink_recv_.assign(static_cast<size_t>(topology_.num_ranks()), 0.0);
  moe.resize(static_cast<size_t>(placement.num_layers()));
  double assignments = 0;
  for (int l = 0; l < placement.num_layers(); ++l) {
    const double layer = SplitLayer(load, placement, l, share, moe, sums);
    assignments += layer;
    if (layer <= 0) continue;
    if (normal) {
      NormalLayerPorts(layer, ports, sums);
    } else {
      LayerBusiestPorts(layer, ports);
    }
  }
  if (normal) {
    NormalStepPorts(ports);
  } else {
    DirectStepPorts(ports, assignments);
  }
  return assignments;
}

void StepModel::BeginPass(StepCost& ports) {
  const auto ranks = static_cast<size_t>(topology_.num_ranks());
  for (auto* v : {&ports.send[LinkClass::kNvlink], &ports.send[LinkClass::kNic],
                  &ports.recv[LinkClass::kNvlink], &ports.recv[LinkClass::kNic]}) {
    v->assign(ranks, 0.0);
  }
  for (double& b : ports.layer_busiest_bytes) b = 0;
}

double StepModel::SplitLayer(const LoadMatrix& load, const Placement& placement, int layer,
                             double share, std::vector<double>& moe, StepSums& sums) {
  const int ranks = topology_.num_ranks(), per_gpu = topology_.slots_per_gpu();
  const bool roofline = compute_.model == ComputeModel::kRoofline;
  const bool ranks_changed = RanksChanged();
  const auto row = placement.phy2log(layer);
  // Each live replica's part of its expert's tokens (eplb.dispatch); an expert without a live
  // replica loses its own.
  sums.lost_assignments += dispatcher_.Split(
      std::span<const double>(load.row(layer).data(), static_cast<size_t>(load.cols())), row,
      per_gpu, lost_, slot_tokens_);
  double total = 0, slowest = 0;
  double* step_tokens = &layer_tokens_[static_cast<size_t>(layer) * ranks];
  // The GPUs the layer's mean is over: the serving ones, and idle ones while they still hold
  // experts (after a scale-down, until its rearrangement moves them off), since those take
  // tokens too.
  int working = ranks_changed ? 0 : ranks;
  for (int g = 0; g < ranks; ++g) {
    if (ranks_changed && lost_[g]) {
      gpu_layer_[g] = 0;
      continue;
    }
    double tokens = 0;
    int loaded = 0;
    bool holds = false;
    for (int s = g * per_gpu; s < (g + 1) * per_gpu; ++s) {
      if (row[s] != kEmptySlot) {
        tokens += slot_tokens_[s];
        loaded += slot_tokens_[s] > 0;
        holds = true;
      }
    }
    if (ranks_changed && (serving_[g] || holds)) ++working;
    gpu_step_[g] += tokens;
    step_tokens[g] += tokens;
    total += tokens;
    // This GPU's MoE time; a straggler's takes × its factor (1 on a healthy GPU).
    const double fixed = compute_.layer_fixed_us * 1e-6;
    const double time = roofline ? fixed + RooflineMoe(tokens * share, loaded)
                                 : fixed + compute_.per_token_us * 1e-6 * tokens * share;
    slowest = std::max(slowest, time * slowdowns_.compute[g]);
    gpu_layer_[g] = tokens;
  }
  moe[static_cast<size_t>(layer)] = slowest;
  layer_working_[static_cast<size_t>(layer)] = working;
  return total;
}

void StepModel::FinishStep(int layers, std::span<const PricedLoad> passes, StepSums& sums,
                           StepCost& out) {
  // The step's balance, from its tokens per layer and GPU over both passes.
  const auto ranks = static_cast<size_t>(topology_.num_ranks());
  for (int l = 0; l < layers; ++l) {
    const double* tokens = &layer_tokens_[static_cast<size_t>(l) * ranks];
    double total = 0, busiest = 0;
    for (size_t g = 0; g < ranks; ++g) {
      total += tokens[g];
      busiest = std::max(busiest, tokens[g]);
    }
    const int working = layer_working_[static_cast<size_t>(l)];
    const double mean = working > 0 ? total / working : 0.0;
    out.layer_mean[static_cast<size_t>(l)] = mean;
    out.layer_max[static_cast<size_t>(l)] = busiest;
    sums.mean += mean;
    sums.max += busiest;
    if (mean > 0) {
      sums.imbalance += (busiest - mean) / mean;
      ++sums.loaded_layers;
    }
  }
  if (compute_.all_to_all == AllToAllMode::kNormal) {
    out.counted_rdma_bytes = topology_.nodes() > 1 ? sums.rdma_counted : 0;
    out.counted_nvlink_bytes = *std::max_element(nvlink_counted_.begin(), nvlink_counted_.end());
  } else {
    // Every GPU sends its 1/G of the step's assignments, one message each.
    out.counted_rdma_bytes = out.counted_nvlink_bytes =
        sums.assignments / ServingRanks() * dispatch_bytes_per_token_;
  }
  out.combine_bytes_ratio = combine_bytes_per_token_ / dispatch_bytes_per_token_;
  StepTime(layers, passes, sums, out);
  out.balancedness = sums.max > 0 ? sums.mean / sums.max : 1.0;
  out.imbalance_ratio = sums.loaded_layers > 0 ? sums.imbalance / sums.loaded_layers : 0.0;
}

void StepModel::StepTime(int layers, std::span<const PricedLoad> passes, const StepSums& sums,
                         StepCost& out) {
  const int ranks = topology_.num_ranks(), serving = ServingRanks();
  const int mb = compute_.micro_batches;
  const double mb_share = 1.0 / mb;
  const double assignments_per_token = layers * double(shape_.top_k);
  const double step_tokens = layers > 0 ? sums.assignments / assignments_per_token : 0;
  out.tokens_lost = layers > 0 ? sums.lost_assignments / assignments_per_token : 0;
  // Fewer serving GPUs share the step's attention: the simple model's per-GPU time grows by
  // G / Gs (the roofline's from the tokens each GPU gets).
  const double simple_attention = RanksChanged() ? compute_.attention_us * 1e-6 * ranks / serving
                                                 : compute_.attention_us * 1e-6;
  const double attention =
      slowest_gpu_ * (compute_.model == ComputeModel::kRoofline
                          ? RooflineAttention((step_tokens + out.tokens_lost) / serving * mb_share)
                          : simple_attention * mb_share);
  // Each micro-batch's pass: its own, or the step's standing for both.
  const auto pass_of = [&](int b) -> const PricedLoad& {
    return passes[passes.size() == 1 ? 0 : static_cast<size_t>(b)];
  };
  const double beside = BesideCompute();
  double dispatch[2] = {0, 0}, combine[2] = {0, 0};
  for (int b = 0; b < mb; ++b) {
    const PricedLoad& p = pass_of(b);
    dispatch[b] = beside * PhaseTime(*p.ports, p.scale);
    combine[b] = beside * PhaseTime(*p.ports, p.scale * out.combine_bytes_ratio);
  }
  if (mb == 1) {
    double moe = 0;
    for (double c : *passes[0].moe) moe += c;
    out.compute_s = attention + moe;
    out.attention_s = attention;
    out.dispatch_s = dispatch[0];
    out.combine_s = combine[0];
    out.dispatch_hidden_s = out.combine_hidden_s = out.overlap_fill_s = out.sm_shared_s = 0;
    return;
  }
  // Two micro-batches: in each layer one computes while the other communicates. Prefill
  // overlaps one's attention and MoE with the other's dispatch and combine; decode one's
  // attention with the other's dispatch, MoE and combine, so a layer's MoE also lies on the
  // communication's path (see the header). Each micro-batch brings its own MoE and phases, and
  // each one's compute is paired with the other's communication.
  const bool moe_between_phases = compute_.stage == InferenceStage::kDecode;
  // While the other micro-batch's normal kernels run they hold normal_sms of the GPU's SMs,
  // and this one's compute runs on the rest: compute c overlapped by communication m takes
  // c + share × min(m, c / (1 − share)), slower for as long as the communication runs.
  const double share = compute_.all_to_all == AllToAllMode::kNormal
                           ? static_cast<double>(compute_.normal_sms) / gpu_->sms
                           : 0.0;
  double compute = 0, step = 0;
  out.overlap_fill_s = out.sm_shared_s = 0;
  for (int l = 0; l < layers; ++l) {
    for (int b = 0; b < mb; ++b) {
      // This micro-batch's compute beside the other's communication (and, in decode, the
      // other's MoE between its phases), whose kernels hold the SMs meanwhile.
      const int other = 1 - b;
      const double moe = (*pass_of(b).moe)[static_cast<size_t>(l)];
      const double other_moe = (*pass_of(other).moe)[static_cast<size_t>(l)];
      const double comm = layers > 0 ? (dispatch[other] + combine[other]) / layers : 0;
      const double c = attention / layers + moe;
      const double shared = share > 0 ? share * std::min(comm, c / (1 - share)) : 0.0;
      const double chain = moe_between_phases ? comm + other_moe : comm;
      compute += c + shared;
      out.sm_shared_s += shared;
      step += std::max(c + shared, chain);
      if (l == 0 && b == 0) out.overlap_fill_s = std::min(c, chain);
    }
  }
  step += out.overlap_fill_s;
  const double exposed = std::max(0.0, step - compute);
  const double all_dispatch = dispatch[0] + dispatch[1], all_combine = combine[0] + combine[1];
  out.compute_s = compute;
  out.attention_s = mb * attention;
  out.dispatch_s =
      all_dispatch + all_combine > 0 ? exposed * all_dispatch / (all_dispatch + all_combine) : 0;
  out.combine_s = exposed - out.dispatch_s;
  out.dispatch_hidden_s = all_dispatch - out.dispatch_s;
  out.combine_hidden_s = all_combine - out.combine_s;
}

}  // namespace eplb
