#include "eplb/io/recorded_placements.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "eplb/base/excerpt.h"
#include "eplb/base/file_io.h"
#include "eplb/formats/json.h"
#include "eplb/formats/torch_dump.h"
#include "eplb/io/output_folders.h"
#include "eplb/io/placement_files.h"
#include "eplb/io/run_folder.h"

namespace eplb {
namespace {

namespace fs = std::filesystem;

constexpr const char* kForms =
    "a run folder or its placements.jsonl; JSON lines or a JSON array of {\"step\": N, "
    "\"phy2log\": [[...] per layer]}; or one placement (eplb's {\"phy2log\": ...}, SGLang's "
    "--init-expert-location or vLLM's {\"physical_to_logical_map\": ...}, a [layers][slots] "
    "map, TensorRT-LLM's .yaml)";

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::vector<std::vector<int32_t>> Rows(const Placement& p) {
  std::vector<std::vector<int32_t>> rows;
  for (int l = 0; l < p.num_layers(); ++l)
    rows.emplace_back(p.phy2log(l).begin(), p.phy2log(l).end());
  return rows;
}

// A [layers][slots] array of expert ids; `field` names it in errors ("phy2log").
Result<std::vector<std::vector<int32_t>>> ParseMap(const nlohmann::json& rows,
                                                   const std::string& where,
                                                   const std::string& field) {
  if (!rows.is_array() || rows.empty()) {
    return Status::InvalidArgument(fmt::format(
        "{}: {} is {}; expected a non-empty array of layers, each an array of the logical "
        "expert in every slot (-1 for an empty slot)",
        where, field, QuoteJson(rows)));
  }
  std::vector<std::vector<int32_t>> out(rows.size());
  for (size_t l = 0; l < rows.size(); ++l) {
    if (!rows[l].is_array()) {
      return Status::InvalidArgument(
          fmt::format("{}: {}[{}] is {}; expected an array of expert ids", where, field, l,
                      QuoteJson(rows[l])));
    }
    for (size_t s = 0; s < rows[l].size(); ++s) {
      const nlohmann::json& v = rows[l][s];
      if (!v.is_number_integer() || v.get<int64_t>() < -1 || v.get<int64_t>() > (1 << 24)) {
        return Status::InvalidArgument(
            fmt::format("{}: {}[{}][{}] is {}; expected an expert id (-1 for an empty slot)", where,
                        field, l, s, QuoteJson(v)));
      }
      out[l].push_back(static_cast<int32_t>(v.get<int64_t>()));
    }
  }
  return out;
}

// Whether `j` looks like an entry of a sequence: an object with a step and a map.
bool IsEntry(const nlohmann::json& j) {
  return j.is_object() && j.contains("step") &&
         (j.contains("phy2log") || j.contains("physical_to_logical_map"));
}

Result<RecordedEntry> ParseEntry(const nlohmann::json& j, const std::string& where) {
  for (const auto& [key, value] : j.items()) {
    if (key != "step" && key != "phy2log" && key != "physical_to_logical_map" && key != "time_s") {
      return Status::InvalidArgument(
          fmt::format("{}: unknown field {}; an entry holds \"step\" and \"phy2log\" (or "
                      "\"physical_to_logical_map\"), and may hold \"time_s\"",
                      where, QuoteInput(key)));
    }
  }
  if (j.contains("phy2log") && j.contains("physical_to_logical_map")) {
    return Status::InvalidArgument(fmt::format(
        "{}: both \"phy2log\" and \"physical_to_logical_map\" are given; keep one", where));
  }
  const nlohmann::json& step = j["step"];
  if (!step.is_number_integer() || step.get<int64_t>() < -1 ||
      step.get<int64_t>() > std::numeric_limits<int>::max()) {
    return Status::InvalidArgument(fmt::format(
        "{}: step is {}; expected an integer: the step after which the rearrangement to the "
        "placement starts (0, 1, ...), or -1 for the placement the run starts from",
        where, QuoteJson(step)));
  }
  RecordedEntry e;
  e.step = static_cast<int>(step.get<int64_t>());
  e.where = where;
  const char* key = j.contains("phy2log") ? "phy2log" : "physical_to_logical_map";
  EPLB_ASSIGN_OR_RETURN(e.phy2log, ParseMap(j[key], where, key));
  return e;
}

// Every rearrangement the folder's policy made, with the placement its commits reached.
Result<Recording> FromRunFolder(const std::string& dir, const std::string& path, std::string name) {
  auto read = ReadRunFolder(dir);
  if (!read.ok()) {
    return read.status().WithContext(
        fmt::format("{}: a run folder's placements are read with the whole folder: ", path));
  }
  const RunResult& run = read->run;
  const Scenario& s = run.scenario;
  Recording rec;
  rec.name = std::move(name);
  rec.path = path;
  rec.gpus = s.num_gpus();
  rec.nodes = s.cluster.nodes;
  std::vector<std::vector<int32_t>> current = read->initial_phy2log;
  const auto vllm = Placement::Initial(s.model.layers, s.model.experts, s.num_slots());
  if (!vllm.ok() || Rows(*vllm) != current) {
    rec.entries.push_back({-1, current, fmt::format("{} (initial placement)", dir), true});
  }
  size_t c = 0;
  const auto& rs = run.rearrangements;
  for (size_t i = 0; i < rs.size(); ++i) {
    const RearrangementRecord& r = rs[i];
    // Its commits: every changed layer's, or, cancelled, those before the next one began.
    const int next_step = i + 1 < rs.size() ? rs[i + 1].step : std::numeric_limits<int>::max();
    int taken = 0;
    while (c < run.commits.size() && taken < r.layers &&
           (!r.cancelled || run.commits[c].step < next_step)) {
      const CommitRecord& commit = run.commits[c++];
      current[static_cast<size_t>(commit.layer)] = commit.phy2log;
      ++taken;
    }
    if (!r.cancelled && taken < r.layers) {
      return Status::InvalidArgument(
          fmt::format("{}: rearrangement {} (step {}) changed {} layers (rearrangements.csv) but "
                      "placements.jsonl has {} commits for it",
                      dir, i + 1, r.step, r.layers, taken));
    }
    // A repair is forced by the loop, never asked of the policy: its commits only.
    if (r.reason == RearrangeReason::kRecovery && s.eplb.recovery == EplbSpec::Recovery::kRepair) {
      continue;
    }
    rec.entries.push_back({r.step, current,
                           fmt::format("{} (rearrangement {}, {} at step {})", dir, i + 1,
                                       RearrangeReasonName(r.reason), r.step),
                           r.reason == RearrangeReason::kInterval});
  }
  if (rec.entries.empty()) {
    return Status::InvalidArgument(fmt::format(
        "{}: the run made no rearrangement and started from vLLM's placement: nothing to "
        "replay",
        dir));
  }
  return rec;
}

}  // namespace

Result<Recording> ParseRecording(std::string_view text, const std::string& path, std::string name) {
  Recording rec;
  rec.name = std::move(name);
  rec.path = path;
  // Whole-text JSON first: a sequence array, or one placement.
  auto whole = ParseJson(text, path);
  if (whole.ok()) {
    const nlohmann::json& j = *whole;
    if (j.is_object() && j.contains("layer") && j.contains("time_s")) {
      return Status::InvalidArgument(fmt::format(
          "{}: a run folder's placements.jsonl line (one layer's commit); give the run folder, "
          "whose rearrangements.csv says at which step each placement was decided",
          path));
    }
    if (IsEntry(j)) {
      // JSON lines of one line are named as JSON lines are.
      const size_t first = text.find_first_not_of(" \t\r\n");
      const size_t last = text.find_last_not_of(" \t\r\n");
      const std::string where =
          text.substr(first, last - first).find('\n') == std::string_view::npos
              ? fmt::format("{} line {}", path,
                            1 + std::count(text.begin(), text.begin() + first, '\n'))
              : path;
      EPLB_ASSIGN_OR_RETURN(RecordedEntry e, ParseEntry(j, where));
      rec.entries.push_back(std::move(e));
      return rec;
    }
    if (j.is_object() && (j.contains("phy2log") || j.contains("physical_to_logical_map"))) {
      // One placement (eplb's, SGLang's, vLLM's): the run starts from it.
      RecordedTopology made_for;
      EPLB_ASSIGN_OR_RETURN(const Placement p, ParsePlacementJson(text, path, 0, &made_for));
      rec.entries.push_back({-1, Rows(p), path, true});
      rec.gpus = made_for.gpus;
      rec.nodes = made_for.nodes;
      return rec;
    }
    if (j.is_object() && j.contains("logical_count")) {
      return Status::InvalidArgument(fmt::format(
          "{}: SGLang's logical_count form is a load, which SGLang places with its own "
          "algorithm when it starts; eplb replays placements: give its "
          "physical_to_logical_map (SGLang logs it, and `eplb rebalance --format sglang` "
          "writes one), or run the load with a policy",
          path));
    }
    if (j.is_array() && !j.empty() && j[0].is_object()) {
      for (size_t i = 0; i < j.size(); ++i) {
        const std::string where = fmt::format("{} entry {}", path, i);
        if (!IsEntry(j[i])) {
          return Status::InvalidArgument(
              fmt::format("{}: expected an object with \"step\" and \"phy2log\"", where));
        }
        EPLB_ASSIGN_OR_RETURN(RecordedEntry e, ParseEntry(j[i], where));
        rec.entries.push_back(std::move(e));
      }
      return rec;
    }
    if (j.is_array() && !j.empty() && j[0].is_array() &&
        std::all_of(j.begin(), j.end(), [](const nlohmann::json& row) {
          return row.is_array() && !row.empty() && row[0].is_number_integer();
        })) {
      // vLLM's physical_to_logical_map as a bare [layers][slots] array: the run starts from it.
      EPLB_ASSIGN_OR_RETURN(auto rows, ParseMap(j, path, "the map"));
      rec.entries.push_back({-1, std::move(rows), path, true});
      return rec;
    }
    return Status::InvalidArgument(
        fmt::format("{}: JSON that holds no recorded placements; expected {}", path, kForms));
  }
  // JSON lines: an entry per non-empty line (a file of no JSON fails at its first line).
  size_t start = 0;
  int line = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    ++line;
    const std::string_view l = text.substr(start, end - start);
    start = end + 1;
    if (l.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    EPLB_ASSIGN_OR_RETURN(const nlohmann::json j, ParseJson(l, path, line));
    const std::string where = fmt::format("{} line {}", path, line);
    if (j.is_object() && j.contains("layer") && j.contains("time_s")) {
      return Status::InvalidArgument(fmt::format(
          "{}: a run folder's placements.jsonl (one line per layer's commit), outside a "
          "finished run folder; give the run folder, whose rearrangements.csv says at which "
          "step each placement was decided",
          where));
    }
    if (!IsEntry(j)) {
      return Status::InvalidArgument(fmt::format(
          "{}: expected an object with \"step\" and \"phy2log\" ([[...] per layer]); the file "
          "holds one of {}",
          where, kForms));
    }
    EPLB_ASSIGN_OR_RETURN(RecordedEntry e, ParseEntry(j, where));
    rec.entries.push_back(std::move(e));
  }
  if (rec.entries.empty()) {
    return Status::InvalidArgument(fmt::format("{}: no placements recorded", path));
  }
  return rec;
}

Result<Recording> ReadRecording(const std::string& path, std::string name) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return FromRunFolder(path, path, std::move(name));
  const std::string file = fs::path(path).filename().string();
  if (file == folder_file::kPlacements) {
    const fs::path dir = fs::path(path).parent_path();
    const std::string folder = dir.empty() ? "." : dir.string();
    if (fs::exists(fs::path(folder) / kManifestName, ec)) {
      return FromRunFolder(folder, path, std::move(name));
    }
  }
  const std::string ext = Lower(fs::path(path).extension().string());
  EPLB_RETURN_IF_ERROR(ExpectFileKind(path, "recorded placements (or a run folder)",
                                      {".json", ".jsonl", ".yaml", ".yml", ".pt"}));
  if (ext == ".pt") {
    // SGLang's --init-expert-location as torch.save wrote it: read as data, no code run.
    EPLB_ASSIGN_OR_RETURN(auto rows, ReadTorchPlacementMap(path));
    Recording rec;
    rec.name = std::move(name);
    rec.path = path;
    rec.entries.push_back({-1, std::move(rows), path, true});
    return rec;
  }
  if (ext == ".yaml" || ext == ".yml") {
    RecordedTopology made_for;
    EPLB_ASSIGN_OR_RETURN(const Placement p, ReadAnyPlacementFile(path, 0, &made_for));
    Recording rec;
    rec.name = std::move(name);
    rec.path = path;
    rec.gpus = made_for.gpus;
    rec.nodes = made_for.nodes;
    rec.entries.push_back({-1, Rows(p), path, true});
    return rec;
  }
  EPLB_ASSIGN_OR_RETURN(const std::string text, ReadTextFile(path));
  return ParseRecording(text, path, std::move(name));
}

}  // namespace eplb
