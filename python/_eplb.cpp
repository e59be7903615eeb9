// _eplb: the C++ core as a Python extension. The public API is the `eplb` package around it
// (python/eplb/), which converts torch tensors and speaks each engine's calling convention; this
// module takes and returns numpy arrays only.
//
// Arrays come in as C-contiguous float64 (loads) or int64 (placements); pybind11 converts other
// dtypes and layouts once, and passes matching ones through without a copy. Every call releases
// the GIL while the core works, so threads of one process can run policies side by side (each
// call makes its own Policy object, as policy.h requires). Expected failures (bad shapes, values
// out of range, an unknown policy) raise ValueError with the core's message.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "eplb/base/excerpt.h"
#include "eplb/formats/load_file.h"
#include "eplb/io/run_folder.h"
#include "eplb/migrate/names.h"
#include "eplb/migrate/schedule.h"
#include "eplb/migrate/transfer_plan.h"
#include "eplb/model/load.h"
#include "eplb/model/metrics.h"
#include "eplb/policy/balance_bound.h"
#include "eplb/policy/deepseek.h"
#include "eplb/policy/external_policy.h"
#include "eplb/policy/policy.h"
#include "eplb/policy/topology_aware.h"
#include "eplb/usecases/plan.h"
#include "eplb/usecases/rebalance.h"

namespace py = pybind11;

namespace eplb::python {
namespace {

using LoadArray = py::array_t<double, py::array::c_style | py::array::forcecast>;
using IndexArray = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;
using Float32Array = py::array_t<float, py::array::c_style | py::array::forcecast>;

// Policies do not look at bytes; calls that only place experts use the topology's default.
constexpr int64_t kDefaultExpertBytes = TopologyConfig{}.expert_bytes;

[[noreturn]] void Raise(const Status& status) {
  throw py::value_error(PrintableLine(status.message()));
}

template <typename T>
T Take(Result<T> result) {
  if (!result.ok()) Raise(result.status());
  return std::move(result).value();
}

// A [layers, experts] load as one step, or a [steps, layers, experts] load summed into at most
// `max_chunks` chunks of consecutive steps as LoadSeries::Chunks cuts them (no copy of every
// step: a vLLM window is thousands), each step checked as the CLI's readers check it (a negative
// count hides in a sum). `steps` receives how many steps the load held.
LoadSeries SeriesOf(const LoadArray& load, int max_chunks, int64_t* steps = nullptr) {
  LoadSeries series;
  if (load.ndim() == 2) {
    series.steps.emplace_back(
        Eigen::Map<const LoadMatrix>(load.data(), load.shape(0), load.shape(1)));
    if (Status s = ValidateLoad(series.steps[0]); !s.ok()) Raise(s);
    if (steps != nullptr) *steps = 1;
    return series;
  }
  if (load.ndim() != 3) {
    throw py::value_error(fmt::format(
        "load has {} dimensions; expected [layers, experts] or [steps, layers, experts]",
        load.ndim()));
  }
  const int64_t count = load.shape(0);
  const Eigen::Index layers = load.shape(1), experts = load.shape(2);
  if (count < 1) throw py::value_error("load has no steps: its first dimension is 0");
  const int64_t per_chunk = LoadSeries::StepsPerChunk(count, max_chunks);
  const size_t cells = static_cast<size_t>(layers * experts);
  for (int64_t first = 0; first < count; first += per_chunk) {
    LoadMatrix chunk = LoadMatrix::Zero(layers, experts);
    for (int64_t t = first; t < std::min(count, first + per_chunk); ++t) {
      const Eigen::Map<const LoadMatrix> step(load.data() + t * cells, layers, experts);
      if (Status s = ValidateLoad(step); !s.ok())
        Raise(s.WithContext(fmt::format("load[{}]: ", t)));
      chunk += step;
    }
    series.steps.push_back(std::move(chunk));
  }
  if (steps != nullptr) *steps = count;
  return series;
}

// The topology of `num_slots` slots over `num_gpus` GPUs on `num_nodes` nodes, checked as every
// front end checks it (Topology::FromReplicas); links and expert bytes as given, or the core's
// defaults for calls that only place experts.
Topology MakeTopology(int64_t num_slots, int num_gpus, int num_nodes,
                      int64_t expert_bytes = kDefaultExpertBytes,
                      double nvlink_gbps = TopologyConfig{}.nvlink.bandwidth_bytes_per_s / 1e9,
                      double nic_gbps = TopologyConfig{}.nic.bandwidth_bytes_per_s / 1e9) {
  TopologyConfig links;
  links.expert_bytes = expert_bytes;
  links.nvlink.bandwidth_bytes_per_s = nvlink_gbps * 1e9;
  links.nic.bandwidth_bytes_per_s = nic_gbps * 1e9;
  auto topology = Topology::FromReplicas(num_slots, num_nodes, num_gpus, links);
  if (!topology.ok()) {
    Raise(topology.status().WithContext(fmt::format(
        "num_replicas {} over num_gpus {} on num_nodes {}: ", num_slots, num_gpus, num_nodes)));
  }
  return std::move(topology).value();
}

Placement ReadPlacement(const IndexArray& phy2log, int num_experts, const char* what) {
  if (phy2log.ndim() != 2) {
    throw py::value_error(
        fmt::format("{} has {} dimensions; expected [layers, slots]", what, phy2log.ndim()));
  }
  std::vector<int32_t> flat(static_cast<size_t>(phy2log.size()));
  const int64_t* data = phy2log.data();
  for (size_t i = 0; i < flat.size(); ++i) {
    if (data[i] < -1 || data[i] >= num_experts) {
      throw py::value_error(fmt::format(
          "{}: entry {} (layer {}, slot {}) is {}; it must be -1 (empty) or an expert in [0, {})",
          what, i, i / phy2log.shape(1), i % phy2log.shape(1), data[i], num_experts));
    }
    flat[i] = static_cast<int32_t>(data[i]);
  }
  auto placement =
      Placement::Create(num_experts, static_cast<int>(phy2log.shape(1)), std::move(flat));
  if (!placement.ok()) Raise(placement.status().WithContext(std::string(what) + ": "));
  return std::move(placement).value();
}

py::array_t<int64_t> ToArray(const Placement& placement) {
  py::array_t<int64_t> out({placement.num_layers(), placement.num_slots()});
  std::copy(placement.phy2log_flat().begin(), placement.phy2log_flat().end(), out.mutable_data());
  return out;
}

// (log2phy [layers, experts, max count], logcnt [layers, experts]): each expert's slots in
// ascending order, padded with -1.
py::tuple Log2PhyArrays(const Placement& placement) {
  const int experts = placement.num_experts(), width = placement.max_logcnt();
  py::array_t<int64_t> log2phy({placement.num_layers(), experts, width});
  py::array_t<int64_t> logcnt({placement.num_layers(), experts});
  int64_t* out = log2phy.mutable_data();
  int64_t* count = logcnt.mutable_data();
  std::fill(out, out + log2phy.size(), -1);
  for (int l = 0; l < placement.num_layers(); ++l) {
    for (int e = 0; e < experts; ++e, out += width) {
      const auto slots = placement.replicas(l, e);
      std::copy(slots.begin(), slots.end(), out);
      *count++ = static_cast<int64_t>(slots.size());
    }
  }
  return py::make_tuple(log2phy, logcnt);
}

// `values` as a numpy array of `shape` that takes them over: no copy.
py::array_t<int64_t> Adopt(std::unique_ptr<int64_t[]> values, std::vector<py::ssize_t> shape) {
  // The capsule owns the buffer from here on (if making it throws, `values` still does), and
  // frees it with the array, or at once if the array cannot be made.
  const py::capsule release(values.get(), [](void* p) { delete[] static_cast<int64_t*>(p); });
  return py::array_t<int64_t>(std::move(shape), values.release(), release);
}

py::array_t<double> ToArray(const LoadMatrix& m) {
  py::array_t<double> out({m.rows(), m.cols()});
  std::copy(m.data(), m.data() + m.size(), out.mutable_data());
  return out;
}

// A policy run that owns everything it reads, so that it may outlive the call that started it.
struct PolicyJob {
  PolicyJob(std::string name, LoadSeries series, Topology cluster)
      : policy(std::move(name)), load(std::move(series)), topology(cluster) {}
  std::string policy;
  LoadSeries load;
  Topology topology;
  std::optional<Placement> current;
  RebalanceOptions options;  // options.current points at `current`
  std::mutex mu;
  std::condition_variable cv;
  std::optional<Result<Rebalanced>> result;  // set once, under mu
};

// Runs the job on a thread of its own while this one waits without the GIL and checks Python's
// signals every 50 ms, so that Ctrl-C raises KeyboardInterrupt at once instead of when a long
// policy returns. Policies cannot stop midway: an interrupted one finishes on its thread and its
// result is dropped (the job owns what it reads, so the caller's arrays may go).
Result<Rebalanced> RunInterruptibly(const std::shared_ptr<PolicyJob>& job) {
  std::thread([job] {
    Result<Rebalanced> done =
        RebalanceRecordedLoad(job->policy, job->load, job->topology, job->options);
    std::lock_guard lock(job->mu);
    job->result = std::move(done);
    job->cv.notify_all();
  }).detach();
  for (;;) {
    {
      py::gil_scoped_release release;
      std::unique_lock lock(job->mu);
      if (job->cv.wait_for(lock, std::chrono::milliseconds(50),
                           [&] { return job->result.has_value(); })) {
        break;
      }
    }
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
  std::lock_guard lock(job->mu);
  return std::move(*job->result);
}

py::array_t<int64_t> Rebalance(const LoadArray& load, int64_t num_replicas, int num_gpus,
                               int num_nodes, int num_groups, const std::string& policy_name,
                               const std::optional<IndexArray>& current, int max_chunks,
                               const py::dict& options, std::vector<int> lost_ranks) {
  int64_t steps = 0;
  LoadSeries series = SeriesOf(load, std::max(1, max_chunks), &steps);
  const Topology topology = MakeTopology(num_replicas, num_gpus, num_nodes);
  auto job = std::make_shared<PolicyJob>(policy_name, std::move(series), topology);
  if (current) job->current = ReadPlacement(*current, job->load.experts(), "current");
  job->options.current = job->current ? &*job->current : nullptr;
  job->options.num_groups = std::max(1, num_groups);  // engines pass 0 for none
  job->options.max_chunks = std::max(1, max_chunks);
  job->options.window_steps = steps;
  job->options.lost_ranks = std::move(lost_ranks);
  for (const auto& [key, value] : options) {
    job->options.policy_options.emplace_back(key.cast<std::string>(),
                                             py::str(value).cast<std::string>());
  }
  return ToArray(Take(RunInterruptibly(job)).placement);
}

py::dict Plan(const IndexArray& old_phy2log, const IndexArray& new_phy2log, int num_gpus,
              int num_nodes, int num_experts, int64_t expert_bytes, const std::string& sender,
              const std::string& strategy, double nvlink_gbps, double nic_gbps) {
  const Placement old_placement = ReadPlacement(old_phy2log, num_experts, "old");
  const Placement new_placement = ReadPlacement(new_phy2log, num_experts, "new");
  const Topology topology = MakeTopology(old_placement.num_slots(), num_gpus, num_nodes,
                                         expert_bytes, nvlink_gbps, nic_gbps);
  PlanOptions options;
  options.sender_rule = sender;
  options.schedule = strategy;
  // Planned without the GIL; the error, if any, raised with it.
  auto planned = [&] {
    py::gil_scoped_release release;
    return PlanPlacementChange(old_placement, new_placement, topology, options);
  }();
  const PlannedMigration migration = Take(std::move(planned));
  const std::vector<LayerPlan>& plans = migration.plans;
  const std::vector<Schedule>& schedules = migration.schedules;

  size_t n = 0;
  for (const LayerPlan& plan : plans) n += plan.transfers.size();
  py::array_t<int64_t> layer(n), expert(n), src_rank(n), src_slot(n), dst_rank(n), dst_slot(n),
      bytes(n), link(n), round(n);
  size_t i = 0;
  std::vector<int64_t> plan_layer, nvlink_bytes, nic_bytes, rounds, local_copies;
  std::vector<double> makespan, lower_bound;
  for (size_t p = 0; p < plans.size(); ++p) {
    const LayerPlan& plan = plans[p];
    for (size_t t = 0; t < plan.transfers.size(); ++t, ++i) {
      const Transfer& x = plan.transfers[t];
      layer.mutable_at(i) = plan.layer;
      expert.mutable_at(i) = x.expert;
      src_rank.mutable_at(i) = x.src_rank;
      src_slot.mutable_at(i) = x.src_slot;
      dst_rank.mutable_at(i) = x.dst_rank;
      dst_slot.mutable_at(i) = x.dst_slot;
      bytes.mutable_at(i) = x.bytes;
      link.mutable_at(i) = static_cast<int>(x.link);
      round.mutable_at(i) = schedules[p].round_of_transfer[t];
    }
    plan_layer.push_back(plan.layer);
    nvlink_bytes.push_back(plan.bytes[eplb::LinkClass::kNvlink]);
    nic_bytes.push_back(plan.bytes[eplb::LinkClass::kNic]);
    rounds.push_back(schedules[p].num_rounds());
    local_copies.push_back(static_cast<int64_t>(plan.local_copies.size()));
    makespan.push_back(schedules[p].makespan_s);
    lower_bound.push_back(schedules[p].lower_bound_s);
  }
  py::dict transfers;
  transfers["layer"] = layer;
  transfers["expert"] = expert;
  transfers["src_rank"] = src_rank;
  transfers["src_slot"] = src_slot;
  transfers["dst_rank"] = dst_rank;
  transfers["dst_slot"] = dst_slot;
  transfers["bytes"] = bytes;
  transfers["link"] = link;
  transfers["round"] = round;
  py::dict layers;
  layers["layer"] = py::array_t<int64_t>(plan_layer.size(), plan_layer.data());
  layers["nvlink_bytes"] = py::array_t<int64_t>(nvlink_bytes.size(), nvlink_bytes.data());
  layers["nic_bytes"] = py::array_t<int64_t>(nic_bytes.size(), nic_bytes.data());
  layers["local_copies"] = py::array_t<int64_t>(local_copies.size(), local_copies.data());
  layers["rounds"] = py::array_t<int64_t>(rounds.size(), rounds.data());
  layers["makespan_s"] = py::array_t<double>(makespan.size(), makespan.data());
  layers["lower_bound_s"] = py::array_t<double>(lower_bound.size(), lower_bound.data());
  py::dict out;
  out["transfers"] = transfers;
  out["layers"] = layers;
  return out;
}

py::array_t<double> GpuLoadsOf(const LoadArray& load, const IndexArray& phy2log, int num_gpus) {
  const LoadMatrix window = SeriesOf(load, 1).Total();
  const Placement placement = ReadPlacement(phy2log, static_cast<int>(window.cols()), "phy2log");
  if (placement.num_layers() != window.rows()) {
    throw py::value_error(fmt::format("phy2log has {} layers but the load has {}",
                                      placement.num_layers(), window.rows()));
  }
  const Topology topology = MakeTopology(placement.num_slots(), num_gpus, 1);
  return ToArray(GpuLoads(window, placement, topology));
}

}  // namespace

void BindVllmParts(py::module_& m);  // _eplb_vllm.cpp
void BindFolders(py::module_& m);    // _eplb_io.cpp

}  // namespace eplb::python

PYBIND11_MODULE(_eplb, m) {
  using namespace eplb::python;
  m.doc() = "eplb's C++ core; use the `eplb` package, which wraps it.";
  m.def(
      "name_program_policy",
      [](const std::string& name) {
        // The run folders of a function's policy name it; this process's reader must know the
        // name (it runs nothing here: the eplb command's processes ran the function).
        const eplb::Status s = eplb::RegisterExternalPolicy({name, "a Python function"});
        if (!s.ok()) throw py::value_error(s.message());
      },
      "Makes `name` a policy that is a user's program in this process (scenario.py's policy=fn), "
      "so that its run folders read back.");
  m.def(
      "policies",
      [] {
        py::list out;
        for (const auto& info : eplb::RegisteredPolicies()) {
          out.append(py::make_tuple(info.name, info.summary));
        }
        return out;
      },
      "Every registered policy as (name, summary), built-ins first.");
  m.def(
      "deepseek_full",
      [](const Float32Array& weight, int num_replicas, int num_groups, int num_nodes,
         int num_gpus) {
        if (weight.ndim() != 2) {
          throw py::value_error(fmt::format(
              "weight has {} dimensions; expected [layers, num_logical_experts]", weight.ndim()));
        }
        if (weight.shape(0) > std::numeric_limits<int>::max()) {
          throw py::value_error(fmt::format("weight has {} layers; at most {} are supported",
                                            weight.shape(0), std::numeric_limits<int>::max()));
        }
        std::optional<eplb::Result<eplb::DeepSeekMaps>> result;
        {
          py::gil_scoped_release release;
          result = eplb::RebalanceDeepSeekMaps(
              std::span(weight.data(), static_cast<size_t>(weight.size())),
              static_cast<int>(weight.shape(0)), weight.shape(1), num_replicas, num_groups,
              num_nodes, num_gpus);
        }
        eplb::DeepSeekMaps maps = Take(std::move(*result));
        return py::make_tuple(
            Adopt(std::move(maps.phy2log), {maps.layers, maps.replicas}),
            Adopt(std::move(maps.log2phy), {maps.layers, maps.experts, maps.width}),
            Adopt(std::move(maps.logcnt), {maps.layers, maps.experts}));
      },
      py::arg("weight"), py::arg("num_replicas"), py::arg("num_groups"), py::arg("num_nodes"),
      py::arg("num_gpus"),
      "DeepSeek's rebalance_experts exactly, all three of its outputs (the global policy when "
      "groups % nodes != 0): (phy2log [layers, num_replicas], log2phy [layers, experts, max "
      "count], logcnt [layers, experts]), int64.");
  m.def(
      "topology_aware",
      [](const LoadArray& tokens, const LoadArray& costs, std::optional<int> num_physical_experts,
         std::optional<int> num_local_physical_experts) {
        if (tokens.ndim() != 3) {
          throw py::value_error(
              fmt::format("tokens_per_source_expert has {} dimensions; expected [num_layers, "
                          "num_source_ranks, num_logical_experts]",
                          tokens.ndim()));
        }
        constexpr int64_t kMax = std::numeric_limits<int>::max();
        if (tokens.shape(0) > kMax || tokens.shape(1) > kMax || tokens.shape(2) > kMax) {
          throw py::value_error("tokens_per_source_expert has a dimension above 2^31 - 1");
        }
        if (costs.ndim() != 2 || costs.shape(0) != costs.shape(1)) {
          std::vector<py::ssize_t> shape(costs.shape(), costs.shape() + costs.ndim());
          throw py::value_error(fmt::format(
              "rank_cost_matrix must be a square matrix of ranks x ranks costs; it has shape "
              "({}{})",
              fmt::join(shape, ", "), shape.size() == 1 ? "," : ""));
        }
        eplb::RankCostMatrix matrix{static_cast<int>(costs.shape(0)),
                                    {costs.data(), costs.data() + costs.size()}};
        std::optional<eplb::Result<eplb::TopologyAwareMaps>> result;
        {
          py::gil_scoped_release release;
          result = eplb::RebalanceTopologyAware(
              std::span(tokens.data(), static_cast<size_t>(tokens.size())),
              static_cast<int>(tokens.shape(0)), static_cast<int>(tokens.shape(1)),
              static_cast<int>(tokens.shape(2)), matrix, num_physical_experts,
              num_local_physical_experts);
        }
        const eplb::TopologyAwareMaps maps = Take(std::move(*result));
        auto array = [](const std::vector<int64_t>& v, std::vector<py::ssize_t> shape) {
          py::array_t<int64_t> out(std::move(shape));
          std::copy(v.begin(), v.end(), out.mutable_data());
          return out;
        };
        return py::make_tuple(array(maps.phy2log, {maps.layers, maps.experts}),
                              array(maps.log2phy, {maps.layers, maps.experts, 1}),
                              array(maps.logcnt, {maps.layers, maps.experts}));
      },
      py::arg("tokens_per_source_expert"), py::arg("rank_cost_matrix"),
      py::arg("num_physical_experts") = py::none(),
      py::arg("num_local_physical_experts") = py::none(),
      "SGLang's rebalance_experts_topology_aware (topology_aware.h): (phy2log [layers, experts], "
      "log2phy [layers, experts, 1], logcnt [layers, experts]), int64.");
  m.def(
      "log2phy",
      [](const IndexArray& phy2log, int num_experts) {
        return Log2PhyArrays(ReadPlacement(phy2log, num_experts, "phy2log"));
      },
      py::arg("phy2log"), py::arg("num_experts"),
      "(log2phy [layers, experts, max count], logcnt [layers, experts]): each expert's slots "
      "ascending, padded with -1.");
  m.def("rebalance", &Rebalance, py::arg("load"), py::arg("num_replicas"), py::arg("num_gpus"),
        py::arg("num_nodes"), py::arg("num_groups"), py::arg("policy"),
        py::arg("current") = py::none(), py::arg("max_chunks") = 16,
        py::arg("options") = py::dict(), py::arg("lost_ranks") = std::vector<int>{},
        "phy2log [layers, num_replicas] (int64) chosen by `policy` for `load` ([layers, "
        "experts], or [steps, layers, experts] summed over steps and cut into chunks).");
  // The names `plan` takes, from the tables that define them (migrate/names.h).
  m.attr("schedule_names") = eplb::kScheduleStrategyNames.List();
  m.attr("sender_rule_names") = eplb::kSenderRuleNames.List();
  m.def("plan", &Plan, py::arg("old"), py::arg("new"), py::arg("num_gpus"), py::arg("num_nodes"),
        py::arg("num_experts"), py::arg("expert_bytes"), py::arg("sender") = "local",
        py::arg("strategy") = "best",
        py::arg("nvlink_gbps") = eplb::TopologyConfig{}.nvlink.bandwidth_bytes_per_s / 1e9,
        py::arg("nic_gbps") = eplb::TopologyConfig{}.nic.bandwidth_bytes_per_s / 1e9,
        "The transfer plan and schedule from `old` to `new` (both [layers, slots]): a dict of "
        "column arrays per transfer and per changed layer.");
  m.def("gpu_loads", &GpuLoadsOf, py::arg("load"), py::arg("phy2log"), py::arg("num_gpus"),
        "Tokens per GPU [layers, GPUs] when `load` is split evenly over each expert's replicas.");
  m.def(
      "read_load",
      [](const std::string& path, int num_experts,
         const std::optional<IndexArray>& physical_to_logical_map) {
        std::optional<eplb::Placement> map;
        if (physical_to_logical_map) {
          map = ReadPlacement(*physical_to_logical_map, num_experts, "physical_to_logical_map");
        }
        eplb::LoadReadOptions options;
        options.experts = num_experts;
        options.experts_name = "num_experts";
        options.physical_map = map ? &*map : nullptr;
        std::optional<eplb::Result<eplb::LoadSeries>> series;
        {
          py::gil_scoped_release release;
          series = eplb::ReadLoadSeries(path, options);
        }
        const eplb::LoadSeries s = Take(std::move(*series));
        py::array_t<double> out({static_cast<py::ssize_t>(s.steps.size()),
                                 static_cast<py::ssize_t>(s.layers()),
                                 static_cast<py::ssize_t>(s.experts())});
        double* dst = out.mutable_data();
        for (const eplb::LoadMatrix& step : s.steps)
          dst = std::copy_n(step.data(), step.size(), dst);
        return out;
      },
      py::arg("path"), py::arg("num_experts") = 0, py::arg("physical_to_logical_map") = py::none(),
      "The load recorded in `path` as float64 [steps, layers, experts], in any layout eplb "
      "reads (CSV, JSON, SGLang and vLLM .pt dumps, TensorRT-LLM statistics folders).");
  m.def(
      "balancedness_bound",
      [](const LoadArray& load, int64_t num_replicas, int num_gpus) {
        return eplb::BalancednessUpperBound(SeriesOf(load, 1).Total(),
                                            MakeTopology(num_replicas, num_gpus, 1));
      },
      py::arg("load"), py::arg("num_replicas"), py::arg("num_gpus"),
      "An upper bound on the balancedness any placement of `load` can reach.");
  m.def(
      "run_folder_columns",
      [] {
        // The one table the writers and the readers use (run_folder_fields.cpp), so
        // that help() in Python says what a column is in the same words.
        py::list out;
        for (const eplb::RunFolderFile& file : eplb::RunFolderFiles()) {
          py::list columns;
          for (const eplb::RunFolderColumn& c : file.columns) {
            columns.append(
                py::make_tuple(std::string(c.name), std::string(c.unit), std::string(c.meaning)));
          }
          out.append(py::make_tuple(std::string(file.name), std::string(file.meaning), columns));
        }
        return out;
      },
      "[(file, meaning, [(column, unit, meaning), ...])] for every file of a run folder, in the "
      "order eplb writes them; unit is s, bytes, tokens, ms, 1 (a ratio) or empty (an id).");
  BindVllmParts(m);
  BindFolders(m);
}
