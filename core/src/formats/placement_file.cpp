#include "eplb/formats/placement_file.h"

#include <iterator>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "eplb/formats/json.h"
#include "eplb/formats/load_file.h"

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

Result<Placement> ReadPlacementFile(const std::string& path, int num_experts,
                                    RecordedTopology* topology) {
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  return ParsePlacementJson(*text, path, num_experts, topology);
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

}  // namespace eplb
