// TensorRT-LLM's recording of expert load: its statistics folder (EXPERT_STATISTIC_PATH).
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "eplb/base/excerpt.h"
#include "eplb/formats/json.h"
#include "eplb/formats/load_file.h"
#include "eplb/formats/safetensors.h"

namespace fs = std::filesystem;

namespace eplb {

Result<LoadSeries> ReadTrtllmStatistics(const std::string& folder) {
  const fs::path dir(folder);
  const std::string meta_path = (dir / "meta_info.json").string();
  EPLB_ASSIGN_OR_RETURN(const std::string meta_text, ReadTextFile(meta_path));
  EPLB_ASSIGN_OR_RETURN(const nlohmann::json meta, ParseJson(meta_text, meta_path));
  if (!meta.is_object() || !meta.contains("num_experts") ||
      !meta["num_experts"].is_number_unsigned() || meta["num_experts"].get<uint64_t>() < 1 ||
      meta["num_experts"].get<uint64_t>() > (1 << 24)) {
    return Status::InvalidArgument(fmt::format(
        "{}: num_experts is {}; expected TensorRT-LLM's meta_info.json with num_experts within "
        "1..{}",
        meta_path,
        meta.is_object() && meta.contains("num_experts") ? Excerpt(meta["num_experts"].dump())
                                                         : "missing",
        1 << 24));
  }
  const int64_t experts = meta["num_experts"].get<int64_t>();

  std::vector<fs::path> rank_files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("rank") && name.ends_with(".safetensors")) rank_files.push_back(entry);
  }
  if (ec) return Status::IoError(fmt::format("{}: cannot list: {}", folder, ec.message()));
  if (rank_files.empty()) {
    return Status::InvalidArgument(
        folder +
        ": no rank*.safetensors files beside meta_info.json; expected TensorRT-LLM's "
        "statistics (EXPERT_STATISTIC_PATH)");
  }
  std::sort(rank_files.begin(), rank_files.end());

  // (iteration, layer) → counts summed over ranks.
  std::map<std::pair<int64_t, int64_t>, std::vector<double>> counts;
  for (const fs::path& file : rank_files) {
    EPLB_ASSIGN_OR_RETURN(const std::string bytes, ReadTextFile(file.string()));
    EPLB_ASSIGN_OR_RETURN(auto tensors, ParseSafetensors(bytes, file.string()));
    for (auto& [key, t] : tensors) {
      int64_t iter = -1, layer = -1;
      char tail = 0;
      if (std::sscanf(key.c_str(), "%ld_%ld%c", &iter, &layer, &tail) != 2 || iter < 0 ||
          layer < 0) {
        return Status::InvalidArgument(fmt::format(
            "{}: tensor '{}' is not named ITERATION_LAYER (e.g. '100_3'), as TensorRT-LLM names "
            "its statistics",
            file.string(), Excerpt(key)));
      }
      if (t.dtype == "BOOL") {
        return Status::InvalidArgument(
            fmt::format("{}: tensor '{}' is BOOL; expected counts of tokens (integers or floats)",
                        file.string(), Excerpt(key)));
      }
      if (t.shape.size() != 1) {
        // A [2, experts/2] tensor has as many values as experts, but is not a layer's counts.
        return Status::InvalidArgument(fmt::format(
            "{}: tensor '{}' has {} dimensions; a layer's counts are one [num_experts] vector",
            file.string(), Excerpt(key), t.shape.size()));
      }
      if (t.values.size() != static_cast<size_t>(experts)) {
        return Status::InvalidArgument(
            fmt::format("{}: tensor '{}' has {} values but meta_info.json's num_experts is {}",
                        file.string(), Excerpt(key), t.values.size(), experts));
      }
      // Each rank's count is checked before the ranks are summed, where -7 on one rank beside
      // +10 on another would sum to an acceptable 3.
      for (size_t e = 0; e < t.values.size(); ++e) {
        if (const double c = t.values[e]; !(c >= 0 && c <= kMaxLoad)) {
          return Status::InvalidArgument(
              fmt::format("{}: tensor '{}' counts {} for expert {}; counts must be finite, "
                          "non-negative and at most {:g} tokens",
                          file.string(), Excerpt(key), c, e, kMaxLoad));
        }
      }
      auto [it, fresh] = counts.try_emplace({iter, layer}, std::move(t.values));
      if (!fresh) {
        for (int64_t e = 0; e < experts; ++e) it->second[e] += t.values[e];
      }
    }
  }
  if (counts.empty()) return Status::InvalidArgument(folder + ": the rank files hold no tensors");
  std::set<int64_t> iters, layers;
  for (const auto& [key, v] : counts) {
    iters.insert(key.first);
    layers.insert(key.second);
  }
  const size_t step_bytes = layers.size() * static_cast<size_t>(experts) * sizeof(double);
  if (iters.size() * step_bytes > static_cast<size_t>(kMaxSeriesBytes)) {
    return Status::InvalidArgument(fmt::format(
        "{}: {} iterations of {} layers × {} experts would take over {}; keep fewer iterations",
        folder, iters.size(), layers.size(), experts, FormatBytes(kMaxSeriesBytes)));
  }
  LoadSeries series;
  for (int64_t iter : iters) {
    LoadMatrix m(static_cast<Eigen::Index>(layers.size()), experts);
    int row = 0;
    for (int64_t layer : layers) {
      auto it = counts.find({iter, layer});
      if (it == counts.end()) {
        return Status::InvalidArgument(fmt::format(
            "{}: iteration {} has no counts for layer {}; every iteration needs every layer",
            folder, iter, layer));
      }
      for (int64_t e = 0; e < experts; ++e) m(row, e) = it->second[e];
      ++row;
    }
    Status ok = ValidateLoad(m);
    if (!ok.ok()) return ok.WithContext(fmt::format("{}: iteration {}: ", folder, iter));
    series.steps.push_back(std::move(m));
  }
  return series;
}

}  // namespace eplb
