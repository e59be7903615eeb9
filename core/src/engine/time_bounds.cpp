#include "eplb/engine/time_bounds.h"

#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "eplb/engine/step_model.h"
#include "eplb/model/placement.h"

namespace eplb {

namespace {

bool Bounded(double seconds) {
  return std::isfinite(seconds) && seconds >= 0 && seconds <= kMaxDerivedSeconds;
}

std::string Seconds(double seconds) {
  return std::isfinite(seconds) ? fmt::format("{:.3g} s", seconds) : std::string("infinite");
}

// One path an expert's bytes take, and the fields its rate is the product of (10^9 bytes/s).
struct CopyPath {
  const char* what;
  std::vector<std::pair<const char*, double>> factors;  // field, value
  double scale = 1;  // a share of the product (an NVSwitch's capacity per GPU)
};

// The time of one step of the scenario's tokens spread evenly, or NaN where the model refuses.
double EvenStepSeconds(const Scenario& s) {
  auto placement = Placement::Initial(s.model.layers, s.model.experts, s.num_slots());
  if (!placement.ok()) return std::nan("");
  const double per_expert =
      double(s.workload.tokens_per_step) * s.model.top_k / double(s.model.experts);
  const LoadMatrix load = LoadMatrix::Constant(s.model.layers, s.model.experts, per_expert);
  StepModel model(s);
  StepCost cost;
  model.Cost(load, *placement, cost);
  return cost.total_s();
}

// The step model's fields that set a rate or a time, each as a reference into a scenario.
struct StepField {
  const char* name;
  double& (*of)(Scenario&);
};
constexpr StepField kStepFields[] = {
    {"compute.flops_efficiency", [](Scenario& s) -> double& { return s.compute.flops_efficiency; }},
    {"compute.hbm_efficiency", [](Scenario& s) -> double& { return s.compute.hbm_efficiency; }},
    {"compute.weight_hbm_efficiency",
     [](Scenario& s) -> double& { return s.compute.weight_hbm_efficiency; }},
    {"compute.normal_nvlink_efficiency",
     [](Scenario& s) -> double& { return s.compute.normal_nvlink_efficiency; }},
    {"cluster.nvlink.bandwidth_gbps",
     [](Scenario& s) -> double& { return s.cluster.nvlink.bandwidth_gbps; }},
    {"cluster.nvlink.efficiency",
     [](Scenario& s) -> double& { return s.cluster.nvlink.efficiency; }},
    {"cluster.nic.bandwidth_gbps",
     [](Scenario& s) -> double& { return s.cluster.nic.bandwidth_gbps; }},
    {"cluster.nic.efficiency", [](Scenario& s) -> double& { return s.cluster.nic.efficiency; }},
    {"cluster.pcie_gbps", [](Scenario& s) -> double& { return s.cluster.pcie_gbps; }},
    {"cluster.nvswitch_gbps", [](Scenario& s) -> double& { return s.cluster.nvswitch_gbps; }},
    {"compute.per_token_us", [](Scenario& s) -> double& { return s.compute.per_token_us; }},
    {"compute.attention_us", [](Scenario& s) -> double& { return s.compute.attention_us; }},
    {"compute.layer_fixed_us", [](Scenario& s) -> double& { return s.compute.layer_fixed_us; }},
    {"compute.kv_length", [](Scenario& s) -> double& { return s.compute.kv_length; }},
};

}  // namespace

std::optional<UnboundedTime> FindUnboundedTime(const Scenario& s) {
  const ClusterSpec& c = s.cluster;
  const std::vector<CopyPath> paths = {
      {"over NVLink",
       {{"cluster.nvlink.bandwidth_gbps", c.nvlink.bandwidth_gbps},
        {"cluster.nvlink.efficiency", c.nvlink.efficiency}}},
      {"over the NIC",
       {{"cluster.nic.bandwidth_gbps", c.nic.bandwidth_gbps},
        {"cluster.nic.efficiency", c.nic.efficiency}}},
      {"over PCIe", {{"cluster.pcie_gbps", c.pcie_gbps}}},
      {"within a GPU's HBM", {{"cluster.hbm_gbps", c.hbm_gbps}}},
      {"from host memory", {{"cluster.host_read_gbps", c.host_read_gbps}}},
      {"from storage", {{"cluster.storage_read_gbps", c.storage_read_gbps}}},
  };
  const double bytes = double(s.model.expert_bytes);
  std::vector<CopyPath> all = paths;
  if (c.nvswitch_gbps > 0) {
    all.push_back({"through the NVSwitch",
                   {{"cluster.nvswitch_gbps", c.nvswitch_gbps}},
                   1.0 / c.gpus_per_node});
  }
  for (const CopyPath& p : all) {
    // Each factor alone first, so that the message names the one that is too small.
    double rate = 1e9 * p.scale;
    for (const auto& [field, value] : p.factors) {
      rate *= value;
      const double seconds = bytes / rate;
      if (!Bounded(seconds)) {
        return UnboundedTime{
            field, fmt::format("{} is {:g}: one expert ({} bytes) {} would take {}; eplb "
                               "simulates times of at most {:g} s, so raise it",
                               field, value, s.model.expert_bytes, p.what, Seconds(seconds),
                               kMaxDerivedSeconds)};
      }
    }
  }
  const double step = EvenStepSeconds(s);
  if (Bounded(step)) return std::nullopt;
  Scenario defaults;
  for (const StepField& f : kStepFields) {
    Scenario fixed = s;
    double& value = f.of(fixed);
    const double was = value;
    value = f.of(defaults);
    if (Bounded(EvenStepSeconds(fixed))) {
      return UnboundedTime{
          f.name, fmt::format("{} is {:g}: one step of the workload's tokens spread evenly over "
                              "the experts would take {}; eplb simulates times of at most {:g} "
                              "s, so raise it",
                              f.name, was, Seconds(step), kMaxDerivedSeconds)};
    }
  }
  return UnboundedTime{
      "compute", fmt::format("one step of the workload's tokens spread evenly over the experts "
                             "would take {}; eplb simulates times of at most {:g} s: the "
                             "compute and link fields together make it so",
                             Seconds(step), kMaxDerivedSeconds)};
}

}  // namespace eplb
