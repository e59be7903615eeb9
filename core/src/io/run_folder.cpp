#include "eplb/io/run_folder.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "eplb/base/excerpt.h"
#include "eplb/base/file_io.h"
#include "eplb/engine/gpu_memory.h"
#include "eplb/formats/json.h"
#include "eplb/io/output_folders.h"
#include "eplb/io/scenario_file.h"
#include "eplb/model/load.h"
#include "io/perfetto_trace.h"
#include "io/run_folder_columns.h"
#include "io/summary_json.h"

namespace eplb {
namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
namespace file = folder_file;

std::string ToolVersion() {
  return "eplb " EPLB_VERSION;
}

namespace {

std::string PlacementsJsonl(const RunResult& run) {
  std::string out;
  const Scenario& s = run.scenario;
  // A recording's initial placement, or vLLM's.
  auto initial = run.initial ? Result<Placement>(*run.initial)
                             : Placement::Initial(s.model.layers, s.model.experts, s.num_slots());
  for (int l = 0; l < s.model.layers; ++l) {
    const auto row = initial->phy2log(l);
    out += Json{{"step", -1},
                {"time_s", 0.0},
                {"layer", l},
                {"phy2log", std::vector<int32_t>(row.begin(), row.end())}}
               .dump() +
           "\n";
  }
  for (const CommitRecord& c : run.commits) {
    out += Json{{"step", c.step}, {"time_s", c.time_s}, {"layer", c.layer}, {"phy2log", c.phy2log}}
               .dump() +
           "\n";
  }
  return out;
}

std::string LoadsJsonl(const RunResult& run) {
  std::string out;
  const int experts = run.scenario.model.experts;
  for (const RearrangementRecord& r : run.rearrangements) {
    Json rows = Json::array();
    for (size_t first = 0; first + experts <= r.window_load.size(); first += experts) {
      rows.push_back(
          std::vector<float>(r.window_load.begin() + static_cast<ptrdiff_t>(first),
                             r.window_load.begin() + static_cast<ptrdiff_t>(first + experts)));
    }
    out += Json{{"step", r.step}, {"time_s", r.start_s}, {"load", rows}}.dump() + "\n";
  }
  return out;
}

// Calls `parse` on each non-empty line of a JSON-lines text; its errors, and malformed JSON,
// come back prefixed with the file and line.
// Fields of a JSON line, checked before conversion: nlohmann's get<int>() of 1e60 or a float of
// 1e300 is undefined behaviour, not an exception.
Result<int64_t> IntField(const nlohmann::json& j, const char* key, int64_t min, int64_t max) {
  if (!j.is_object() || !j.contains(key)) {
    return Status::InvalidArgument(fmt::format("no field '{}'", key));
  }
  const nlohmann::json& v = j[key];
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(max)) ||
      (!v.is_number_unsigned() && (v.get<int64_t>() < min || v.get<int64_t>() > max))) {
    return Status::InvalidArgument(fmt::format("'{}' is {}; expected an integer within {}..{}", key,
                                               Excerpt(v.dump()), min, max));
  }
  return v.get<int64_t>();
}

Result<double> RealField(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) {
    return Status::InvalidArgument(fmt::format("'{}' is missing or not a number", key));
  }
  const double v = j[key].get<double>();
  if (!std::isfinite(v) || v < 0) {
    return Status::InvalidArgument(fmt::format("'{}' is {}; expected a finite time >= 0", key, v));
  }
  return v;
}

Status ForEachJsonLine(const std::string& text, const std::string& path,
                       const std::function<Status(const nlohmann::json&)>& parse) {
  size_t pos = 0;
  for (int line_no = 1; pos < text.size(); ++line_no) {
    const size_t nl = std::min(text.find('\n', pos), text.size());
    const std::string_view line = std::string_view(text).substr(pos, nl - pos);
    pos = nl + 1;
    if (line.empty()) continue;
    auto json = ParseJson(line, path, line_no);
    if (!json.ok()) return json.status();
    // The parsers check each field's presence, kind and range before reading it: no throw.
    EPLB_RETURN_IF_ERROR(parse(*json).WithContext(fmt::format("{}:{}: ", path, line_no)));
  }
  return Status::Ok();
}

Status ReadPlacements(const std::string& path, RunFolder& folder) {
  EPLB_ASSIGN_OR_RETURN(const std::string text, ReadTextFile(path));
  const Scenario& s = folder.run.scenario;
  const int layers = s.model.layers, experts = s.model.experts, slots = s.num_slots();
  folder.initial_phy2log.assign(static_cast<size_t>(layers), {});
  const int64_t max_int = std::numeric_limits<int>::max();
  EPLB_RETURN_IF_ERROR(ForEachJsonLine(text, path, [&](const nlohmann::json& j) -> Status {
    CommitRecord c;
    EPLB_ASSIGN_OR_RETURN(const int64_t step, IntField(j, "step", -1, max_int));
    EPLB_ASSIGN_OR_RETURN(const int64_t layer, IntField(j, "layer", 0, layers - 1));
    EPLB_ASSIGN_OR_RETURN(c.time_s, RealField(j, "time_s"));
    c.step = static_cast<int>(step);
    c.layer = static_cast<int>(layer);
    if (!j.contains("phy2log") || !j["phy2log"].is_array()) {
      return Status::InvalidArgument("'phy2log' is missing or not an array");
    }
    for (const nlohmann::json& e : j["phy2log"]) {
      if (!e.is_number_integer() || e.get<int64_t>() < -1 || e.get<int64_t>() >= experts) {
        return Status::InvalidArgument(
            fmt::format("phy2log holds {}; expert ids are -1..{}", Excerpt(e.dump()), experts - 1));
      }
      c.phy2log.push_back(static_cast<int32_t>(e.get<int64_t>()));
    }
    if (static_cast<int>(c.phy2log.size()) != slots) {
      return Status::InvalidArgument(
          fmt::format("phy2log has {} slots, the scenario {}", c.phy2log.size(), slots));
    }
    if (c.step < 0) {
      folder.initial_phy2log[static_cast<size_t>(c.layer)] = std::move(c.phy2log);
    } else {
      folder.run.commits.push_back(std::move(c));
    }
    return Status::Ok();
  }));
  for (int l = 0; l < layers; ++l) {
    if (folder.initial_phy2log[static_cast<size_t>(l)].empty()) {
      return Status::InvalidArgument(
          fmt::format("{}: no initial placement (step -1) for layer {}", path, l));
    }
  }
  return Status::Ok();
}

// `windows`, when given, receives each line's step and time_s.
Status ReadLoads(const std::string& path, RunFolder& folder,
                 std::vector<RunFolderDocuments::LoadWindow>* windows) {
  EPLB_ASSIGN_OR_RETURN(const std::string text, ReadTextFile(path));
  const int layers = folder.run.scenario.model.layers;
  const int experts = folder.run.scenario.model.experts;
  auto& rearrangements = folder.run.rearrangements;
  size_t index = 0;
  EPLB_RETURN_IF_ERROR(ForEachJsonLine(text, path, [&](const nlohmann::json& j) -> Status {
    EPLB_ASSIGN_OR_RETURN(const int64_t step,
                          IntField(j, "step", 0, std::numeric_limits<int>::max()));
    if (windows != nullptr) {
      EPLB_ASSIGN_OR_RETURN(const double time_s, RealField(j, "time_s"));
      windows->push_back({step, time_s});
    }
    const nlohmann::json* rows = j.contains("load") ? &j["load"] : nullptr;
    if (rows == nullptr || !rows->is_array() || static_cast<int>(rows->size()) != layers ||
        std::any_of(rows->begin(), rows->end(), [&](const nlohmann::json& row) {
          return !row.is_array() || static_cast<int>(row.size()) != experts;
        })) {
      return Status::InvalidArgument(
          fmt::format("load is not {} layers × {} experts", layers, experts));
    }
    std::vector<float> flat_load;
    for (const nlohmann::json& row : *rows) {
      for (const nlohmann::json& v : row) {
        const double x = v.is_number() ? v.get<double>() : -1;
        if (!(x >= 0 && x <= kMaxLoad)) {
          return Status::InvalidArgument(
              fmt::format("a load of {}; loads are within [0, {:g}]", Excerpt(v.dump()), kMaxLoad));
        }
        flat_load.push_back(static_cast<float>(x));
      }
    }
    if (index >= rearrangements.size() || rearrangements[index].step != step) {
      return Status::InvalidArgument(
          fmt::format("the load of a rearrangement at step {} that {} does not have", step,
                      file::kRearrangements));
    }
    rearrangements[index++].window_load = std::move(flat_load);
    return Status::Ok();
  }));
  if (index != rearrangements.size()) {
    return Status::InvalidArgument(fmt::format("{}: {} lines for the {} rearrangements of {}", path,
                                               index, rearrangements.size(),
                                               file::kRearrangements));
  }
  folder.has_loads = true;
  return Status::Ok();
}

// The files agree with summary.json and with each other: each of the files is valid alone, so
// what is left is what only the whole folder can contradict.
Status CheckAgainstSummary(const RunFolder& folder) {
  const RunSummary& s = folder.summary;
  const RunResult& run = folder.run;
  const std::string p = folder.dir + "/";
  const auto differ = [&](const char* name, const char* what, size_t has, int64_t says) {
    return Status::InvalidArgument(
        fmt::format("{}{} has {} {} but {} says {}", p, name, has, what, file::kSummary, says));
  };
  if (static_cast<int64_t>(run.steps.size()) != s.steps) {
    return differ(file::kMetrics, "steps", run.steps.size(), s.steps);
  }
  if (static_cast<int64_t>(run.rearrangements.size()) != s.rearrangements.started) {
    return differ(file::kRearrangements, "rearrangements", run.rearrangements.size(),
                  s.rearrangements.started);
  }
  int64_t planned = 0;
  for (const RearrangementRecord& r : run.rearrangements) {
    planned += r.transfers;
    if (r.step >= s.steps) {
      return Status::InvalidArgument(
          fmt::format("{}{}: a rearrangement at step {} of a run of {} steps", p,
                      file::kRearrangements, r.step, s.steps));
    }
  }
  if (planned != s.transfers) {
    return Status::InvalidArgument(fmt::format("{}{} plans {} transfers but {} says {}", p,
                                               file::kRearrangements, planned, file::kSummary,
                                               s.transfers));
  }
  // A run that ends mid-rearrangement cancels the rest, so fewer may have happened.
  if (static_cast<int64_t>(run.transfers.size()) > s.transfers) {
    return Status::InvalidArgument(fmt::format("{}{} has {} transfers, more than the {} {} says", p,
                                               file::kTransfers, run.transfers.size(), s.transfers,
                                               file::kSummary));
  }
  for (const CommitRecord& c : run.commits) {
    if (c.step >= s.steps) {
      return Status::InvalidArgument(fmt::format("{}{}: a commit at step {} of a run of {} steps",
                                                 p, file::kPlacements, c.step, s.steps));
    }
  }
  return Status::Ok();
}

}  // namespace

Status WriteRunFolder(const std::string& dir, const RunResult& run,
                      const RunFolderOptions& options) {
  std::vector<run_folder::RearrangementRow> rows;
  const std::vector<double> following = FollowingBalancedness(run);
  const int64_t resident = run_folder::ResidentBytes(run.scenario);
  for (size_t i = 0; i < run.rearrangements.size(); ++i) {
    run_folder::RearrangementRow row;
    static_cast<RearrangementRecord&>(row) = run.rearrangements[i];
    row.following_balancedness = following[i];
    row.staging_peak_max_bytes = row.most_staged_bytes();
    row.peak_memory_bytes = resident + row.staging_peak_max_bytes;
    rows.push_back(std::move(row));
  }
  return WriteFolderAtomically(dir, kRunFolderKind, [&](const std::string& partial) {
    const std::vector<std::pair<const char*, std::function<std::string()>>> files = {
        {file::kScenario, [&] { return ScenarioToYaml(run.scenario); }},
        {file::kMetrics, [&] { return run_folder::MetricsCsv(run.steps); }},
        {file::kTransfers, [&] { return run_folder::TransfersCsv(run.transfers); }},
        {file::kRearrangements, [&] { return run_folder::RearrangementsCsv(rows); }},
        {file::kPlacements, [&] { return PlacementsJsonl(run); }},
        {file::kLoads, [&] { return LoadsJsonl(run); }},
        {file::kLayerBalancedness, [&] { return run_folder::LayerBalanceCsv(run.layer_balance); }},
        {file::kGpuMemory, [&] { return run_folder::GpuMemoryCsv(run.rearrangements, resident); }},
        {file::kTrace, [&] { return PerfettoTraceJson(run); }},
        // The summary last: a folder without it was never finished.
        {file::kSummary, [&] { return run_folder::SummaryJson(Summarize(run)).dump(2) + "\n"; }}};
    for (const auto& [name, text] : files) {
      if (!options.trace && std::string_view(name) == file::kTrace) continue;
      EPLB_RETURN_IF_ERROR(WriteTextFile(partial + "/" + name, text()));
    }
    return Status::Ok();
  });
}

namespace {

// ReadRunFolder; `tables`, when given, also receives each CSV table as typed columns, from the
// same parse, in RunFolderFiles' order (the order read below), and `docs` the documents as
// written (ReadRunFolderDocuments).
Result<RunFolder> ReadRunFolder(const std::string& dir, std::vector<RunFolderTable>* tables,
                                RunFolderDocuments* docs) {
  // The next table's slot, or null when tables are not asked for.
  auto next_table = [tables]() -> RunFolderTable* {
    if (tables == nullptr) return nullptr;
    return &tables->emplace_back();
  };
  if (!fs::is_directory(dir)) return Status::NotFound(fmt::format("{}: no such folder", dir));
  const std::string name = fs::path(dir).lexically_normal().filename().string();
  if (name.find(".partial-") != std::string::npos) {
    return Status::InvalidArgument(fmt::format(
        "{}: an unfinished run folder (eplb writes DIR.partial-HOST-PID and renames it to DIR when "
        "complete; this one's process stopped before that)",
        dir));
  }
  // Every file below is then what eplb wrote: listed, whole, and no link to elsewhere.
  const Status whole = ReadWholeFolder(dir, kRunFolderKind).status();
  if (whole.code() == Status::Code::kNotFound) {
    return Status::InvalidArgument(
        fmt::format("{}: not a finished run folder (no {}; eplb run, device-run and validate "
                    "write it last)",
                    dir, kManifestName));
  }
  EPLB_RETURN_IF_ERROR(whole);
  const std::string p = dir + "/";
  RunFolder folder;
  folder.dir = dir;
  EPLB_ASSIGN_OR_RETURN(const std::string summary_text, ReadTextFile(p + file::kSummary));
  EPLB_ASSIGN_OR_RETURN(folder.summary, run_folder::ParseSummary(summary_text, p + file::kSummary));
  if (docs != nullptr) {
    // ParseSummary has checked the text: every field, and JSON whole.
    docs->summary = Json::parse(summary_text, nullptr, /*allow_exceptions=*/false);
    if (docs->summary.is_discarded()) {
      return Status::InvalidArgument(fmt::format("{}{}: not JSON", p, file::kSummary));
    }
    EPLB_ASSIGN_OR_RETURN(docs->scenario_yaml, ReadTextFile(p + file::kScenario));
  }
  RunResult& run = folder.run;
  EPLB_ASSIGN_OR_RETURN(run.scenario, LoadScenarioFile(p + file::kScenario));
  run.backend = folder.summary.backend;
  run.skipped_rearrangements = static_cast<int>(folder.summary.rearrangements.skipped);
  run.held_rearrangements = static_cast<int>(folder.summary.rearrangements.held);
  run.wall_s = folder.summary.wall_s;
  run.peak_rss_bytes = folder.summary.peak_rss_bytes;

  EPLB_ASSIGN_OR_RETURN(const std::string metrics, ReadTextFile(p + file::kMetrics));
  EPLB_ASSIGN_OR_RETURN(run.steps,
                        run_folder::ParseMetricsCsv(metrics, p + file::kMetrics, next_table()));

  // The run's end, which bounds every transfer's (TransferEndLimit): the latest step end, stalls
  // included.
  double run_end_s = 0;
  for (const StepRecord& s : run.steps)
    run_end_s = std::max(run_end_s, s.start_s + s.step_s + s.stalled_s);
  EPLB_ASSIGN_OR_RETURN(const std::string transfers, ReadTextFile(p + file::kTransfers));
  EPLB_ASSIGN_OR_RETURN(run.transfers, run_folder::ParseTransfersCsv(
                                           transfers, p + file::kTransfers,
                                           run.scenario.model.layers, run.scenario.model.experts,
                                           run.scenario.num_gpus(), run_end_s, next_table()));

  EPLB_ASSIGN_OR_RETURN(const std::string rearrangements, ReadTextFile(p + file::kRearrangements));
  EPLB_ASSIGN_OR_RETURN(auto rows, run_folder::ParseRearrangementsCsv(
                                       rearrangements, p + file::kRearrangements, next_table()));
  for (run_folder::RearrangementRow& row : rows) {
    folder.following_balancedness.push_back(row.following_balancedness);
    run.rearrangements.push_back(std::move(static_cast<RearrangementRecord&>(row)));
  }

  EPLB_RETURN_IF_ERROR(ReadPlacements(p + file::kPlacements, folder));
  // Run folders written before loads.jsonl existed have none.
  if (fs::exists(p + file::kLoads)) {
    EPLB_RETURN_IF_ERROR(
        ReadLoads(p + file::kLoads, folder, docs == nullptr ? nullptr : &docs->load_windows));
  }
  EPLB_RETURN_IF_ERROR(CheckAgainstSummary(folder));
  // Run folders written before measured windows: their statistics are over every step, and
  // their latencies come from the steps' times (ParseMetricsCsv).
  if (folder.summary.measured.rule.empty()) {
    run.scenario.run.measure_from = 0;
    MeasureSteps(run, 0, folder.summary);
  }
  // Run folders written before layer_balancedness.csv existed have none; its spans are checked
  // against the steps, which summary.json has vouched for.
  if (fs::exists(p + file::kLayerBalancedness)) {
    EPLB_ASSIGN_OR_RETURN(const std::string spans, ReadTextFile(p + file::kLayerBalancedness));
    EPLB_ASSIGN_OR_RETURN(run.layer_balance,
                          run_folder::ParseLayerBalanceCsv(
                              spans, p + file::kLayerBalancedness, run.scenario.model.layers,
                              static_cast<int>(run.steps.size()), next_table()));
  }
  // Likewise gpu_memory.csv, checked against rearrangements.csv.
  if (fs::exists(p + file::kGpuMemory)) {
    EPLB_ASSIGN_OR_RETURN(const std::string memory, ReadTextFile(p + file::kGpuMemory));
    EPLB_RETURN_IF_ERROR(run_folder::ParseGpuMemoryCsv(
        memory, p + file::kGpuMemory, run.scenario.num_gpus(),
        run_folder::ResidentBytes(run.scenario), run.rearrangements, next_table()));
    // The fullest GPU is the one summary.json names (when it records GPU memory at all).
    int64_t most = 0;
    for (const RearrangementRecord& r : run.rearrangements)
      most = std::max(most, r.most_staged_bytes());
    const auto& memory_summary = folder.summary.gpu_memory;
    if (memory_summary.capacity > 0 && most != memory_summary.staging_peak) {
      return Status::InvalidArgument(
          fmt::format("{}{}: its largest staging_peak_bytes is {} but {} "
                      "gpu_memory.staging_peak_bytes is {}",
                      p, file::kGpuMemory, most, file::kSummary, memory_summary.staging_peak));
    }
  }
  return folder;
}

}  // namespace

Result<RunFolder> ReadRunFolder(const std::string& dir) {
  return ReadRunFolder(dir, nullptr, nullptr);
}

Result<std::vector<RunFolderTable>> ReadRunFolderTables(const std::string& dir) {
  std::vector<RunFolderTable> tables;
  EPLB_RETURN_IF_ERROR(ReadRunFolder(dir, &tables, nullptr).status());
  return tables;
}

Result<RunFolderDocuments> ReadRunFolderDocuments(const std::string& dir) {
  RunFolderDocuments docs;
  EPLB_ASSIGN_OR_RETURN(docs.folder, ReadRunFolder(dir, &docs.tables, &docs));
  return docs;
}

}  // namespace eplb
