// The parts of DeepSeek's policy that vLLM's DefaultEplbPolicy lets its callers use one by one
// (balanced_packing, replicate_experts, rebalance_experts_hierarchical, preserve_intragpu_slots),
// bound for python/eplb/vllm.py. Weights come in as C-contiguous float32, as the reference
// computes; every index goes out as int64. Bad shapes and values raise ValueError.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "eplb/model/slot_preservation.h"
#include "eplb/policy/deepseek.h"

namespace py = pybind11;

namespace eplb::python {
namespace {

using WeightArray = py::array_t<float, py::array::c_style | py::array::forcecast>;
using IndexArray = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;

template <typename T>
T Take(std::optional<Result<T>> result) {
  if (!result->ok()) throw py::value_error(result->status().message());
  return std::move(*result).value();
}

void RequireMatrix(const py::array& array, const char* what, const char* shape) {
  if (array.ndim() != 2) {
    throw py::value_error(
        fmt::format("{} has {} dimensions; expected {}", what, array.ndim(), shape));
  }
  if (array.shape(0) < 1 || array.shape(0) > INT32_MAX || array.shape(1) > INT32_MAX) {
    throw py::value_error(fmt::format("{} has shape ({}, {}); expected {} with at least one row",
                                      what, array.shape(0), array.shape(1), shape));
  }
}

py::array_t<int64_t> Matrix(const std::vector<int32_t>& values, py::ssize_t rows) {
  py::array_t<int64_t> out({rows, static_cast<py::ssize_t>(values.size()) / rows});
  std::copy(values.begin(), values.end(), out.mutable_data());
  return out;
}

std::span<const float> Values(const WeightArray& weight) {
  return {weight.data(), static_cast<size_t>(weight.size())};
}

}  // namespace

void BindVllmParts(py::module_& m) {
  m.def(
      "balanced_packing",
      [](const WeightArray& weight, int num_packs) {
        RequireMatrix(weight, "weight", "[rows, items]");
        std::optional<Result<DeepSeekPacking>> packing;
        {
          py::gil_scoped_release release;
          packing =
              DeepSeekBalancedPacking(Values(weight), static_cast<int>(weight.shape(0)), num_packs);
        }
        const DeepSeekPacking p = Take(std::move(packing));
        return py::make_tuple(Matrix(p.pack_index, weight.shape(0)),
                              Matrix(p.rank_in_pack, weight.shape(0)));
      },
      py::arg("weight"), py::arg("num_packs"),
      "DeepSeek's balanced_packing row by row: (pack_index, rank_in_pack), each [rows, items].");
  m.def(
      "replicate_experts",
      [](const WeightArray& weight, int num_phy) {
        RequireMatrix(weight, "weight", "[rows, experts]");
        std::optional<Result<DeepSeekReplication>> replication;
        {
          py::gil_scoped_release release;
          replication =
              DeepSeekReplicateExperts(Values(weight), static_cast<int>(weight.shape(0)), num_phy);
        }
        const DeepSeekReplication r = Take(std::move(replication));
        const py::ssize_t rows = weight.shape(0);
        return py::make_tuple(Matrix(r.phy2log, rows), Matrix(r.rank, rows),
                              Matrix(r.logcnt, rows));
      },
      py::arg("weight"), py::arg("num_phy"),
      "DeepSeek's replicate_experts row by row: (phy2log [rows, num_phy], replica rank [rows, "
      "num_phy], logcnt [rows, experts]).");
  m.def(
      "deepseek_ranked",
      [](const WeightArray& weight, int num_replicas, int num_groups, int num_nodes, int num_gpus) {
        RequireMatrix(weight, "weight", "[layers, num_logical_experts]");
        const LoadMatrix load =
            Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
                weight.data(), weight.shape(0), weight.shape(1))
                .cast<double>();
        std::optional<Result<RankedPlacement>> ranked;
        {
          py::gil_scoped_release release;
          ranked = RebalanceDeepSeekRanked(load, num_replicas, num_groups, num_nodes, num_gpus);
        }
        const RankedPlacement r = Take(std::move(ranked));
        const py::ssize_t layers = weight.shape(0);
        std::vector<int32_t> logcnt;
        logcnt.reserve(static_cast<size_t>(layers * weight.shape(1)));
        for (int l = 0; l < r.placement.num_layers(); ++l) {
          for (int e = 0; e < r.placement.num_experts(); ++e)
            logcnt.push_back(static_cast<int32_t>(r.placement.replicas(l, e).size()));
        }
        return py::make_tuple(Matrix(r.placement.phy2log_flat(), layers),
                              Matrix(r.replica_rank, layers), Matrix(logcnt, layers));
      },
      py::arg("weight"), py::arg("num_replicas"), py::arg("num_groups"), py::arg("num_nodes"),
      py::arg("num_gpus"),
      "DeepSeek's policy with each slot's replica rank: (phy2log, replica rank) [layers, "
      "num_replicas] and logcnt [layers, experts]; the global policy when groups % nodes != 0.");
  m.def(
      "preserve_slots",
      [](const IndexArray& old_phy2log, const IndexArray& new_phy2log, int slots_per_gpu) {
        RequireMatrix(new_phy2log, "phy2log", "[layers, slots]");
        if (old_phy2log.ndim() != 2 || old_phy2log.shape(0) != new_phy2log.shape(0) ||
            old_phy2log.shape(1) != new_phy2log.shape(1)) {
          std::vector<py::ssize_t> shape(old_phy2log.shape(),
                                         old_phy2log.shape() + old_phy2log.ndim());
          throw py::value_error(
              fmt::format("old_phy2log has shape ({}); it must be phy2log's, ({}, {})",
                          fmt::join(shape, ", "), new_phy2log.shape(0), new_phy2log.shape(1)));
        }
        const size_t slots = static_cast<size_t>(new_phy2log.shape(1));
        if (slots_per_gpu < 1 || slots % static_cast<size_t>(slots_per_gpu) != 0) {
          throw py::value_error(
              fmt::format("slots_per_gpu is {}; it must be a positive divisor of the {} slots",
                          slots_per_gpu, slots));
        }
        py::array_t<int64_t> source({new_phy2log.shape(0), new_phy2log.shape(1)});
        int64_t* out = source.mutable_data();
        {
          py::gil_scoped_release release;
          for (py::ssize_t l = 0; l < new_phy2log.shape(0); ++l) {
            const size_t first = static_cast<size_t>(l) * slots;
            PreserveSlotsInRow({old_phy2log.data() + first, slots},
                               {new_phy2log.data() + first, slots}, slots_per_gpu,
                               {out + first, slots});
          }
        }
        return source;
      },
      py::arg("old_phy2log"), py::arg("phy2log"), py::arg("slots_per_gpu"),
      "Slot preservation as positions: the preserved row l is phy2log[l, source[l]].");
}

}  // namespace eplb::python
