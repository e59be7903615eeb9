#include "run_data.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "eplb/formats/load_file.h"
#include "eplb/engine/scenario.h"
#include "eplb/io/scenario_file.h"

namespace eplb::viewer {
namespace {

namespace fs = std::filesystem;

// A CSV file with a known header, field by field, naming file and line in every error.
class CsvReader {
 public:
  CsvReader(std::string path, std::string text) : path_(std::move(path)), text_(std::move(text)) {}

  Status ExpectHeader(std::string_view header) {
    std::string_view line;
    if (!NextLine(line) || line != header) {
      return Error(fmt::format("the header should be '{}'", header));
    }
    return Status::Ok();
  }
  // The next line's fields; false at the end.
  bool Next(std::vector<std::string_view>& fields) {
    std::string_view line;
    do {
      if (!NextLine(line)) return false;
    } while (line.empty());
    fields.clear();
    size_t start = 0;
    while (true) {
      const size_t comma = line.find(',', start);
      fields.push_back(line.substr(start, comma - start));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    return true;
  }
  Status Error(const std::string& what) const {
    return Status::InvalidArgument(fmt::format("{}:{}: {}", path_, line_no_, what));
  }
  template <typename T>
  Status Number(std::string_view field, const char* name, T& out) const {
    if constexpr (std::is_floating_point_v<T>) {
      const std::string s(field);
      char* end = nullptr;
      out = static_cast<T>(std::strtod(s.c_str(), &end));
      if (s.empty() || *end != '\0') return Error(fmt::format("{} '{}' is not a number", name, s));
    } else {
      const auto r = std::from_chars(field.data(), field.data() + field.size(), out);
      if (r.ec != std::errc() || r.ptr != field.data() + field.size()) {
        return Error(fmt::format("{} '{}' is not an integer", name, field));
      }
    }
    return Status::Ok();
  }

 private:
  bool NextLine(std::string_view& line) {
    if (pos_ >= text_.size()) return false;
    const size_t nl = text_.find('\n', pos_);
    const size_t end = nl == std::string::npos ? text_.size() : nl;
    line = std::string_view(text_).substr(pos_, end - pos_);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    pos_ = end + 1;
    ++line_no_;
    return true;
  }
  std::string path_, text_;
  size_t pos_ = 0;
  int line_no_ = 0;
};

Result<CsvReader> OpenCsv(const std::string& path, std::string_view header) {
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  CsvReader csv(path, std::move(text).value());
  EPLB_RETURN_IF_ERROR(csv.ExpectHeader(header));
  return csv;
}

// Calls `parse` on each non-empty line of a JSON-lines file; its errors, and malformed JSON,
// come back prefixed with the file and line.
Status ForEachJsonLine(const std::string& path,
                       const std::function<Status(const nlohmann::json&)>& parse) {
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  size_t pos = 0;
  for (int line_no = 1; pos < text->size(); ++line_no) {
    const size_t nl = std::min(text->find('\n', pos), text->size());
    const std::string_view line = std::string_view(*text).substr(pos, nl - pos);
    pos = nl + 1;
    if (line.empty()) continue;
    Status status;
    try {
      status = parse(nlohmann::json::parse(line));
    } catch (const std::exception& e) {
      status = Status::InvalidArgument(e.what());
    }
    EPLB_RETURN_IF_ERROR(status.WithContext(fmt::format("{}:{}: ", path, line_no)));
  }
  return Status::Ok();
}

Status CheckFields(const CsvReader& csv, const std::vector<std::string_view>& f, size_t n) {
  if (f.size() == n) return Status::Ok();
  return csv.Error(fmt::format("{} fields, expected {}", f.size(), n));
}

}  // namespace

Result<std::shared_ptr<const RunData>> RunData::Load(const std::string& dir) {
  if (!fs::is_directory(dir)) {
    return Status::NotFound(fmt::format("{}: no such folder", dir));
  }
  if (!fs::exists(fs::path(dir) / "summary.json")) {
    return Status::InvalidArgument(fmt::format(
        "{}: not a finished run folder (no summary.json; eplb run and eplb device-run write it "
        "last)",
        dir));
  }
  auto run = std::make_shared<RunData>();
  run->dir_ = dir;
  const std::string p = dir + "/";

  auto scenario = LoadScenarioFile(p + "scenario.yaml");
  if (!scenario.ok()) return scenario.status();
  run->name_ = scenario->name;
  run->layers_ = scenario->model.layers;
  run->experts_ = scenario->model.experts;
  run->nodes_ = scenario->cluster.nodes;
  run->gpus_per_node_ = scenario->cluster.gpus_per_node;
  run->slots_per_gpu_ = scenario->num_slots() / scenario->num_gpus();

  auto summary_text = ReadTextFile(p + "summary.json");
  if (!summary_text.ok()) return summary_text.status();
  try {
    const auto summary = nlohmann::json::parse(*summary_text);
    run->backend_ = summary.value("backend", "");
  } catch (const std::exception& e) {
    return Status::InvalidArgument(fmt::format("{}summary.json: {}", p, e.what()));
  }

  std::vector<std::string_view> f;
  {
    auto csv = OpenCsv(p + "metrics.csv",
                       "step,time_s,step_s,idle_step_s,balancedness,imbalance_ratio,"
                       "bytes_in_flight,stalled_s");
    if (!csv.ok()) return csv.status();
    while (csv->Next(f)) {
      EPLB_RETURN_IF_ERROR(CheckFields(*csv, f, 8));
      double start = 0, step = 0, balance = 0, stalled = 0;
      EPLB_RETURN_IF_ERROR(csv->Number(f[1], "time_s", start));
      EPLB_RETURN_IF_ERROR(csv->Number(f[2], "step_s", step));
      EPLB_RETURN_IF_ERROR(csv->Number(f[4], "balancedness", balance));
      EPLB_RETURN_IF_ERROR(csv->Number(f[7], "stalled_s", stalled));
      run->step_start_s_.push_back(start);
      run->step_s_.push_back(step + stalled);
      run->balancedness_.push_back(balance);
    }
    if (run->step_start_s_.empty()) return csv->Error("no steps");
  }
  {
    auto csv =
        OpenCsv(p + "transfers.csv", "layer,expert,src_rank,dst_rank,bytes,link,start_s,end_s");
    if (!csv.ok()) return csv.status();
    while (csv->Next(f)) {
      EPLB_RETURN_IF_ERROR(CheckFields(*csv, f, 8));
      TransferRow t{};
      EPLB_RETURN_IF_ERROR(csv->Number(f[0], "layer", t.layer));
      EPLB_RETURN_IF_ERROR(csv->Number(f[1], "expert", t.expert));
      EPLB_RETURN_IF_ERROR(csv->Number(f[2], "src_rank", t.src_rank));
      EPLB_RETURN_IF_ERROR(csv->Number(f[3], "dst_rank", t.dst_rank));
      EPLB_RETURN_IF_ERROR(csv->Number(f[4], "bytes", t.bytes));
      if (f[5] != "nvlink" && f[5] != "nic") {
        return csv->Error(fmt::format("link '{}': valid values are nvlink, nic", f[5]));
      }
      t.nic = f[5] == "nic";
      EPLB_RETURN_IF_ERROR(csv->Number(f[6], "start_s", t.start_s));
      EPLB_RETURN_IF_ERROR(csv->Number(f[7], "end_s", t.end_s));
      if (t.layer < 0 || t.layer >= run->layers_ || t.src_rank < 0 || t.src_rank >= run->gpus() ||
          t.dst_rank < 0 || t.dst_rank >= run->gpus()) {
        return csv->Error(
            fmt::format("layer {} / ranks {} -> {} outside the scenario's {} layers "
                        "and {} GPUs",
                        t.layer, t.src_rank, t.dst_rank, run->layers_, run->gpus()));
      }
      run->longest_transfer_s_ = std::max(run->longest_transfer_s_, t.end_s - t.start_s);
      run->transfers_.push_back(t);
    }
    std::stable_sort(
        run->transfers_.begin(), run->transfers_.end(),
        [](const TransferRow& a, const TransferRow& b) { return a.start_s < b.start_s; });
  }
  {
    auto csv = OpenCsv(p + "rearrangements.csv",
                       "step,start_s,end_s,layers,transfers,bytes_nvlink,bytes_nic,"
                       "predicted_makespan_s,lower_bound_s,policy_ms,window_balancedness_before,"
                       "window_balancedness_after,window_balancedness_bound,"
                       "following_balancedness");
    if (!csv.ok()) return csv.status();
    while (csv->Next(f)) {
      EPLB_RETURN_IF_ERROR(CheckFields(*csv, f, 14));
      RearrangementRow r{};
      EPLB_RETURN_IF_ERROR(csv->Number(f[0], "step", r.step));
      EPLB_RETURN_IF_ERROR(csv->Number(f[1], "start_s", r.start_s));
      EPLB_RETURN_IF_ERROR(csv->Number(f[2], "end_s", r.end_s));
      run->rearrangements_.push_back(r);
    }
  }
  {
    run->initial_row_.assign(static_cast<size_t>(run->layers_), -1);
    run->layer_commits_.assign(static_cast<size_t>(run->layers_), {});
    EPLB_RETURN_IF_ERROR(ForEachJsonLine(p + "placements.jsonl", [&](const nlohmann::json& j) {
      const int step = j.at("step").get<int>(), layer = j.at("layer").get<int>();
      auto row = j.at("phy2log").get<std::vector<int32_t>>();
      if (layer < 0 || layer >= run->layers_) {
        return Status::InvalidArgument(
            fmt::format("layer {} is outside 0..{}", layer, run->layers_ - 1));
      }
      if (static_cast<int>(row.size()) != run->num_slots()) {
        return Status::InvalidArgument(
            fmt::format("phy2log has {} slots, the scenario {}", row.size(), run->num_slots()));
      }
      for (int32_t e : row) {
        if (e < -1 || e >= run->experts_) {
          return Status::InvalidArgument(
              fmt::format("expert {} is outside -1..{}", e, run->experts_ - 1));
        }
      }
      run->rows_.push_back(std::move(row));
      const int index = static_cast<int>(run->rows_.size()) - 1;
      if (step < 0) {
        run->initial_row_[layer] = index;
      } else {
        const CommitRow c{step, j.at("time_s").get<double>(), layer, index};
        run->layer_commits_[layer].push_back(c);
        run->commits_.push_back(c);
      }
      return Status::Ok();
    }));
    for (int l = 0; l < run->layers_; ++l) {
      if (run->initial_row_[l] < 0) {
        return Status::InvalidArgument(
            fmt::format("{}placements.jsonl: no initial placement (step -1) for layer {}", p, l));
      }
    }
  }
  // Runs written before loads.jsonl existed show expert colours only.
  if (fs::exists(p + "loads.jsonl")) {
    EPLB_RETURN_IF_ERROR(ForEachJsonLine(p + "loads.jsonl", [&](const nlohmann::json& j) {
      LoadSnapshot s{j.at("step").get<int>(), j.at("load").get<std::vector<std::vector<float>>>()};
      if (static_cast<int>(s.load.size()) != run->layers_ ||
          (!s.load.empty() && static_cast<int>(s.load[0].size()) != run->experts_)) {
        return Status::InvalidArgument(
            fmt::format("load is not {} layers × {} experts", run->layers_, run->experts_));
      }
      run->loads_.push_back(std::move(s));
      return Status::Ok();
    }));
  }
  return std::shared_ptr<const RunData>(std::move(run));
}

int RunData::StepAt(double t) const {
  const auto it = std::upper_bound(step_start_s_.begin(), step_start_s_.end(), t);
  if (it == step_start_s_.begin()) return 0;
  return static_cast<int>(it - step_start_s_.begin()) - 1;
}

std::vector<int> RunData::TransfersIn(double t0, double t1) const {
  std::vector<int> out;
  // A transfer overlapping [t0, t1] starts after t0 − longest and before t1.
  const auto first =
      std::lower_bound(transfers_.begin(), transfers_.end(), t0 - longest_transfer_s_,
                       [](const TransferRow& t, double v) { return t.start_s < v; });
  for (auto it = first; it != transfers_.end() && it->start_s <= t1; ++it) {
    if (it->end_s >= t0) out.push_back(static_cast<int>(it - transfers_.begin()));
  }
  return out;
}

const std::vector<int32_t>& RunData::PlacementAt(int layer, int step) const {
  const auto& commits = layer_commits_[layer];
  const auto it = std::upper_bound(commits.begin(), commits.end(), step,
                                   [](int s, const CommitRow& c) { return s < c.step; });
  if (it == commits.begin()) return rows_[initial_row_[layer]];
  return rows_[std::prev(it)->row];
}

std::vector<float> RunData::LoadAt(int layer, int step) const {
  if (loads_.empty()) return {};
  const LoadSnapshot* chosen = &loads_.front();
  for (const LoadSnapshot& s : loads_) {
    if (s.step <= step) chosen = &s;
  }
  return chosen->load[layer];
}

}  // namespace eplb::viewer
