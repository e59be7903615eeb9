#include "eplb/io/placement_files.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include "eplb/base/excerpt.h"
#include "eplb/base/file_io.h"
#include "eplb/formats/json.h"
#include "io/yaml_document.h"

namespace eplb {

Result<Placement> ParsePlacementJson(std::string_view text, const std::string& name,
                                     int num_experts, RecordedTopology* topology) {
  EPLB_ASSIGN_OR_RETURN(const nlohmann::json j, ParseJson(text, name));
  // The engines' name for the same map (vLLM's and SGLang's expert-location state, SGLang's
  // --init-expert-location files).
  const bool ours = j.is_object() && j.contains("phy2log");
  const bool engines = j.is_object() && j.contains("physical_to_logical_map");
  if (!ours && !engines) {
    return Status::InvalidArgument(fmt::format(
        "{}: expected a JSON object with key 'phy2log' or 'physical_to_logical_map' (layers × "
        "slots)",
        name));
  }
  if (ours && engines) {
    return Status::InvalidArgument(
        fmt::format("{}: both 'phy2log' and 'physical_to_logical_map' are given; keep one", name));
  }
  const char* key = ours ? "phy2log" : "physical_to_logical_map";
  const auto& rows = j[key];
  if (!rows.is_array() || rows.empty()) {
    return Status::InvalidArgument(fmt::format("{}: {} is {}; expected a non-empty array of layers",
                                               name, key, QuoteJson(rows)));
  }
  std::vector<std::vector<int32_t>> phy2log(rows.size());
  int max_expert = -1;
  for (size_t l = 0; l < rows.size(); ++l) {
    if (!rows[l].is_array() || rows[l].empty()) {
      return Status::InvalidArgument(
          fmt::format("{}: {}[{}] is {}; expected a non-empty array of expert ids", name, key, l,
                      QuoteJson(rows[l])));
    }
    for (size_t s = 0; s < rows[l].size(); ++s) {
      const auto& v = rows[l][s];
      if (!v.is_number_integer() || v.get<int64_t>() < -1 || v.get<int64_t>() > (1 << 24)) {
        return Status::InvalidArgument(
            fmt::format("{}: {}[{}][{}] is {}; expected an expert id (-1 for an empty slot)", name,
                        key, l, s, QuoteJson(v)));
      }
      phy2log[l].push_back(v.get<int32_t>());
      max_expert = std::max(max_expert, phy2log[l].back());
    }
  }
  if (num_experts <= 0 && j.contains("num_experts")) {
    if (!j["num_experts"].is_number_integer() || j["num_experts"].get<int64_t>() < 1 ||
        j["num_experts"].get<int64_t>() > (1 << 24)) {
      return Status::InvalidArgument(
          fmt::format("{}: num_experts is {}; expected an integer within 1..{}", name,
                      QuoteJson(j["num_experts"]), 1 << 24));
    }
    num_experts = j["num_experts"].get<int>();
  }
  if (num_experts <= 0) num_experts = max_expert + 1;
  auto placement = Placement::Create(num_experts, phy2log);
  if (!placement.ok()) return placement.status().WithContext(name + ": ");
  RecordedTopology recorded;
  for (auto [field, out] :
       {std::pair{"num_gpus", &recorded.gpus}, {"num_nodes", &recorded.nodes}}) {
    if (!j.contains(field)) continue;
    const auto& v = j[field];
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > (1 << 20)) {
      return Status::InvalidArgument(fmt::format("{}: {} is {}; expected an integer within 1..{}",
                                                 name, field, QuoteJson(v), 1 << 20));
    }
    *out = v.get<int>();
  }
  if (recorded.gpus > 0 && placement->num_slots() % recorded.gpus != 0) {
    return Status::InvalidArgument(
        fmt::format("{}: {} slots per layer do not divide over num_gpus {}", name,
                    placement->num_slots(), recorded.gpus));
  }
  if (recorded.gpus > 0 && recorded.nodes > 0 && recorded.gpus % recorded.nodes != 0) {
    return Status::InvalidArgument(fmt::format("{}: num_gpus {} is not a multiple of num_nodes {}",
                                               name, recorded.gpus, recorded.nodes));
  }
  if (topology != nullptr) *topology = recorded;
  return placement;
}

void AppendPlacementJsonMembers(std::string& out, const Placement& placement,
                                const RecordedTopology& topology) {
  const int width = placement.max_logcnt(), layers = placement.num_layers();
  auto inserter = std::back_inserter(out);
  // Each row as [a,b,c]: the slots in order, or an expert's slots padded to `width`.
  const auto row = [&](auto values, int padded_to) {
    out += '[';
    int n = 0;
    for (const auto v : values) {
      if (n++ > 0) out += ',';
      fmt::format_to(inserter, "{}", v);
    }
    for (; n < padded_to; ++n) out += n > 0 ? ",-1" : "-1";  // kEmptySlot
    out += ']';
  };
  out += "\"phy2log\":[";
  for (int layer = 0; layer < layers; ++layer) {
    if (layer > 0) out += ',';
    row(placement.phy2log(layer), 0);
  }
  out += "],\"log2phy\":[";
  for (int layer = 0; layer < layers; ++layer) {
    out += layer > 0 ? ",[" : "[";
    for (int e = 0; e < placement.num_experts(); ++e) {
      if (e > 0) out += ',';
      row(placement.replicas(layer, e), width);
    }
    out += ']';
  }
  out += "],\"logcnt\":[";
  for (int layer = 0; layer < layers; ++layer) {
    out += layer > 0 ? ",[" : "[";
    for (int e = 0; e < placement.num_experts(); ++e) {
      if (e > 0) out += ',';
      fmt::format_to(inserter, "{}", placement.logcnt(layer, e));
    }
    out += ']';
  }
  out += ']';
  if (topology.gpus > 0) fmt::format_to(inserter, ",\"num_gpus\":{}", topology.gpus);
  if (topology.nodes > 0) fmt::format_to(inserter, ",\"num_nodes\":{}", topology.nodes);
}

Result<Placement> ParseTrtllmPlacement(std::string_view text, const std::string& name,
                                       int num_experts) {
  EPLB_ASSIGN_OR_RETURN(
      YAML::Node root,
      LoadOneYamlDocument(std::string(text), name, "TensorRT-LLM's moe_load_balancer.yaml",
                          {"initial_global_assignments"}));
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
          fmt::format("{}:{}: initial_global_assignments has key {}; expected a layer number", name,
                      line, QuoteInput(item.first.Scalar())));
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
        return Status::InvalidArgument(fmt::format(
            "{}:{}: initial_global_assignments[{}] holds {}; expected expert ids", name,
            v.Mark().line + 1, layer, v.IsScalar() ? QuoteInput(v.Scalar()) : "a list"));
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
                                                 name, Excerpt(root["num_slots"].Scalar()),
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
  // The format is the file's: a link is read as what it links to (ExpectFileKind checked both).
  std::error_code ec;
  const std::filesystem::path real = std::filesystem::canonical(path, ec);
  std::string ext = (ec ? std::filesystem::path(path) : real).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  EPLB_ASSIGN_OR_RETURN(const std::string text, ReadTextFile(path));
  if (ext != ".yaml" && ext != ".yml") return ParsePlacementJson(text, path, num_experts, topology);
  if (topology != nullptr) *topology = {};
  return ParseTrtllmPlacement(text, path, num_experts);
}

std::string EnginePlacementFile(EngineFormat format, const Placement& placement, int first_layer) {
  if (format == EngineFormat::kTrtllm) {
    YAML::Emitter out;
    out << YAML::BeginMap << YAML::Key << "initial_global_assignments" << YAML::Value
        << YAML::BeginMap;
    for (int l = 0; l < placement.num_layers(); ++l) {
      out << YAML::Key << first_layer + l << YAML::Value << YAML::Flow << YAML::BeginSeq;
      for (int32_t expert : placement.phy2log(l)) out << expert;
      out << YAML::EndSeq;
    }
    out << YAML::EndMap << YAML::Key << "num_slots" << YAML::Value << placement.num_slots()
        << YAML::Key << "layer_updates_per_iter" << YAML::Value << 0 << YAML::EndMap;
    return std::string(out.c_str()) + "\n";
  }
  std::vector<std::vector<int32_t>> rows;
  for (int l = 0; l < placement.num_layers(); ++l) {
    rows.emplace_back(placement.phy2log(l).begin(), placement.phy2log(l).end());
  }
  nlohmann::ordered_json out;
  out["physical_to_logical_map"] = rows;
  if (format == EngineFormat::kVllm) {
    const int width = placement.num_slots() - placement.num_experts() + 1;
    nlohmann::ordered_json log2phy = nlohmann::ordered_json::array(),
                           count = nlohmann::ordered_json::array();
    for (int l = 0; l < placement.num_layers(); ++l) {
      nlohmann::ordered_json layer = nlohmann::ordered_json::array(),
                             counts = nlohmann::ordered_json::array();
      for (int e = 0; e < placement.num_experts(); ++e) {
        const auto slots = placement.replicas(l, e);
        std::vector<int32_t> row(slots.begin(), slots.end());
        row.resize(static_cast<size_t>(width), -1);
        layer.push_back(row);
        counts.push_back(slots.size());
      }
      log2phy.push_back(std::move(layer));
      count.push_back(std::move(counts));
    }
    out["logical_to_physical_map"] = std::move(log2phy);
    out["logical_replica_count"] = std::move(count);
  }
  return out.dump() + "\n";
}

}  // namespace eplb
