#include "eplb/io/placement_files.h"

#include <filesystem>
#include <map>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "eplb/base/file_io.h"
#include "io/yaml_document.h"

namespace eplb {

Result<Placement> ParseTrtllmPlacement(std::string_view text, const std::string& name,
                                       int num_experts) {
  EPLB_ASSIGN_OR_RETURN(
      YAML::Node root,
      LoadOneYamlDocument(std::string(text), name, "TensorRT-LLM's moe_load_balancer.yaml"));
  const YAML::Node assignments = root.IsMap() ? root["initial_global_assignments"] : YAML::Node();
  if (!assignments.IsMap() || assignments.size() == 0) {
    return Status::InvalidArgument(fmt::format(
        "{}: expected TensorRT-LLM's moe_load_balancer.yaml with initial_global_assignments (a "
        "map from layer number to the expert in each slot)",
        name));
  }
  std::map<int64_t, std::vector<int32_t>> layers;
  for (const auto& item : assignments) {
    int64_t layer = -1;
    try {
      layer = item.first.as<int64_t>();
    } catch (const YAML::Exception&) {
    }
    const int line = item.first.Mark().line + 1;
    if (layer < 0 || layer > (1 << 20)) {
      return Status::InvalidArgument(
          fmt::format("{}:{}: initial_global_assignments has key '{}'; expected a layer number",
                      name, line, item.first.Scalar()));
    }
    if (!item.second.IsSequence() || item.second.size() == 0) {
      return Status::InvalidArgument(fmt::format(
          "{}:{}: initial_global_assignments[{}] is not a list of expert ids", name, line, layer));
    }
    std::vector<int32_t> row;
    for (const auto& v : item.second) {
      int64_t e = -2;
      try {
        e = v.as<int64_t>();
      } catch (const YAML::Exception&) {
      }
      if (e < 0 || e > (1 << 24)) {
        return Status::InvalidArgument(
            fmt::format("{}:{}: initial_global_assignments[{}] holds '{}'; expected expert ids",
                        name, v.Mark().line + 1, layer, v.IsScalar() ? v.Scalar() : "a list"));
      }
      row.push_back(static_cast<int32_t>(e));
    }
    if (!layers.emplace(layer, std::move(row)).second) {
      return Status::InvalidArgument(
          fmt::format("{}:{}: layer {} is given twice", name, line, layer));
    }
  }
  std::vector<std::vector<int32_t>> rows;
  int max_expert = -1;
  for (auto& [layer, row] : layers) {
    for (int32_t e : row) max_expert = std::max(max_expert, e);
    rows.push_back(std::move(row));
  }
  if (root["num_slots"] && root["num_slots"].IsScalar()) {
    int64_t slots = -1;
    try {
      slots = root["num_slots"].as<int64_t>();
    } catch (const YAML::Exception&) {
    }
    if (slots != static_cast<int64_t>(rows[0].size())) {
      return Status::InvalidArgument(fmt::format("{}: num_slots is {} but layer {} lists {} slots",
                                                 name, root["num_slots"].Scalar(),
                                                 layers.begin()->first, rows[0].size()));
    }
  }
  auto placement = Placement::Create(num_experts > 0 ? num_experts : max_expert + 1, rows);
  if (!placement.ok()) return placement.status().WithContext(name + ": ");
  return placement;
}

Result<Placement> ReadAnyPlacementFile(const std::string& path, int num_experts,
                                       RecordedTopology* topology) {
  EPLB_RETURN_IF_ERROR(ExpectFileKind(path, "a placement", {".json", ".yaml", ".yml"}));
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext != ".yaml" && ext != ".yml") return ReadPlacementFile(path, num_experts, topology);
  EPLB_ASSIGN_OR_RETURN(const std::string text, ReadTextFile(path));
  if (topology != nullptr) *topology = {};
  return ParseTrtllmPlacement(text, path, num_experts);
}

}  // namespace eplb
