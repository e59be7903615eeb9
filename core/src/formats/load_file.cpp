// eplb's own load layouts (CSV wide and long, JSON) and what every reader shares: the shape
// checks, the physical-to-logical fold and the choice of reader by what a path is.
#include "eplb/formats/load_file.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "eplb/base/csv.h"
#include "eplb/base/excerpt.h"
#include "eplb/formats/json.h"

namespace eplb {
namespace {

using Rows = std::vector<std::vector<double>>;

size_t StepBytes(size_t layers, size_t experts) {
  return std::max<size_t>(1, layers * experts * sizeof(double));
}

Status TooManySteps(const std::string& where, size_t layers, size_t experts) {
  return Status::InvalidArgument(
      fmt::format("{}more than {} steps of {} × {} loads would take over {}; shorten the recording",
                  where, static_cast<size_t>(kMaxSeriesBytes) / StepBytes(layers, experts), layers,
                  experts, FormatBytes(kMaxSeriesBytes)));
}

Result<LoadMatrix> FromRows(const Rows& rows, const std::string& where) {
  if (rows.empty()) return Status::InvalidArgument(where + "no layers of load found");
  LoadMatrix m(static_cast<Eigen::Index>(rows.size()), static_cast<Eigen::Index>(rows[0].size()));
  for (size_t l = 0; l < rows.size(); ++l) {
    for (size_t e = 0; e < rows[l].size(); ++e)
      m(static_cast<Eigen::Index>(l), static_cast<Eigen::Index>(e)) = rows[l][e];
  }
  Status s = ValidateLoad(m);
  if (!s.ok()) return s.WithContext(where);
  return m;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::strchr(" \t\r\n", s.front())) s.remove_prefix(1);
  while (!s.empty() && std::strchr(" \t\r\n", s.back())) s.remove_suffix(1);
  return s;
}

// What an error says a JSON value is: quoted (base/excerpt.h) once the file is recognised as a
// load (a first layer of numbers read), and only its type before, so that a wrong file is never
// echoed.
std::string ShowJson(const nlohmann::json& j, bool recognised) {
  if (recognised) return QuoteJson(j);
  return fmt::format("a JSON {} (not quoted: no layer of numbers came before it)", j.type_name());
}

// One JSON layer (an array of numbers) into `row`.
Status ParseJsonRow(const nlohmann::json& j, const std::string& path, std::vector<double>& row,
                    bool recognised) {
  if (!j.is_array()) {
    return Status::InvalidArgument(fmt::format(
        "{} is {}; expected an array of numbers (one per expert)", path, ShowJson(j, recognised)));
  }
  row.clear();
  for (size_t e = 0; e < j.size(); ++e) {
    if (!j[e].is_number()) {
      return Status::InvalidArgument(fmt::format("{}[{}] is {}; expected a non-negative number",
                                                 path, e, ShowJson(j[e], recognised)));
    }
    row.push_back(j[e].get<double>());
  }
  return Status::Ok();
}

// `layers × experts` (one step) or `steps × layers × experts` under JSON path `path`.
Result<LoadSeries> FromJsonArray(const nlohmann::json& j, const std::string& path,
                                 const std::string& name) {
  const std::string where = name + ": ";
  if (!j.is_array() || j.empty()) {
    return Status::InvalidArgument(fmt::format("{}{} is {}; expected a non-empty array of layers",
                                               where, path, ShowJson(j, false)));
  }
  const bool stepped = j[0].is_array() && !j[0].empty() && j[0][0].is_array();
  LoadSeries series;
  Rows rows;
  std::vector<double> row;
  const size_t steps = stepped ? j.size() : 1;
  for (size_t s = 0; s < steps; ++s) {
    const nlohmann::json& layers = stepped ? j[s] : j;
    const std::string lpath = stepped ? fmt::format("{}[{}]", path, s) : path;
    if (!layers.is_array() || layers.empty()) {
      return Status::InvalidArgument(fmt::format("{}{} is {}; expected layers × experts", where,
                                                 lpath, ShowJson(layers, s > 0)));
    }
    if (s > 0 && layers.size() != static_cast<size_t>(series.layers())) {
      return Status::InvalidArgument(fmt::format("{}{} has {} layers but {}[0] has {}", where,
                                                 lpath, layers.size(), path, series.layers()));
    }
    rows.assign(layers.size(), {});
    for (size_t l = 0; l < layers.size(); ++l) {
      const std::string rpath = fmt::format("{}[{}]", lpath, l);
      Status st = ParseJsonRow(layers[l], rpath, row, /*recognised=*/s > 0 || l > 0);
      if (!st.ok()) return st.WithContext(where);
      const size_t want =
          l == 0 && s == 0 ? row.size() : (l == 0 ? series.experts() : rows[0].size());
      if (row.size() != want) {
        return Status::InvalidArgument(fmt::format(
            "{}{} has {} experts but the first layer has {}; every layer needs the same count",
            where, rpath, row.size(), want));
      }
      rows[l] = row;
    }
    auto m = FromRows(rows, stepped ? fmt::format("{}{}: ", where, lpath) : where);
    if (!m.ok()) return m.status();
    series.steps.push_back(std::move(m).value());
  }
  return series;
}

// The names pandas and people give index columns.
bool IsIndexColumn(std::string_view name) {
  return name.empty() || name == "step" || name == "layer" || name == "index" ||
         name == "Unnamed: 0";
}

// CSV long format: a header naming step (optional), layer, expert and tokens.
Result<LoadSeries> ParseLongCsv(CsvLines& csv, const std::vector<std::string_view>& header) {
  int col_step = -1, col_layer = -1, col_expert = -1, col_tokens = -1;
  for (size_t c = 0; c < header.size(); ++c) {
    int* slot = header[c] == "step"     ? &col_step
                : header[c] == "layer"  ? &col_layer
                : header[c] == "expert" ? &col_expert
                : header[c] == "tokens" ? &col_tokens
                                        : nullptr;
    if (slot == nullptr || *slot >= 0) {
      return csv.Error(fmt::format(
          "the header's field {} is {}; the long format's header names step (optional), layer, "
          "expert and tokens, once each",
          c + 1, QuoteInput(header[c])));
    }
    *slot = static_cast<int>(c);
  }
  if (col_layer < 0 || col_expert < 0 || col_tokens < 0) {
    return csv.Error("the long format's header needs layer, expert and tokens (and may add step)");
  }
  struct Cell {
    int64_t step, layer, expert;
    double tokens;
    int line;
  };
  std::vector<Cell> cells;
  int64_t layers = 0, experts = 0;
  std::vector<std::string_view> f;
  while (csv.Next(f)) {
    EPLB_RETURN_IF_ERROR(csv.CheckFieldCount(f, header.size()));
    Cell c{0, 0, 0, 0, csv.line_number()};
    if ((col_step >= 0 && !ParseCsvInt64(f[col_step], c.step)) ||
        !ParseCsvInt64(f[col_layer], c.layer) || !ParseCsvInt64(f[col_expert], c.expert) ||
        !ParseCsvDouble(f[col_tokens], c.tokens)) {
      return csv.Error(
          fmt::format("{}; expected integers for step, layer and expert and a "
                      "number of tokens",
                      QuoteInput(fmt::format("{}", fmt::join(f, ",")))));
    }
    if (c.step < 0 || c.layer < 0 || c.layer >= (1 << 20) || c.expert < 0 ||
        c.expert >= (1 << 24) || !(c.tokens >= 0) || c.tokens > kMaxLoad) {
      return csv.Error(fmt::format(
          "step {}, layer {}, expert {}, tokens {}; step, layer and expert count from 0 (layers "
          "below {}, experts below {}) and tokens are within [0, {:g}]",
          c.step, c.layer, c.expert, c.tokens, 1 << 20, 1 << 24, kMaxLoad));
    }
    layers = std::max(layers, c.layer + 1);
    experts = std::max(experts, c.expert + 1);
    cells.push_back(c);
  }
  if (cells.empty()) return Status::InvalidArgument(csv.name() + ": no load found");
  std::map<int64_t, size_t> index_of_step;
  for (const Cell& c : cells) index_of_step.emplace(c.step, 0);
  if (index_of_step.size() * StepBytes(layers, experts) > static_cast<size_t>(kMaxSeriesBytes))
    return TooManySteps(csv.name() + ": ", layers, experts);
  LoadSeries series;
  for (auto& [step, index] : index_of_step) {
    index = series.steps.size();
    series.steps.emplace_back(LoadMatrix::Zero(layers, experts));
  }
  // Each cell once: a key given twice is a concatenation or an export gone wrong more often than
  // a count meant to be summed, and summing it would hide that.
  std::vector<int> line_of(static_cast<size_t>(layers * experts) * series.steps.size(), 0);
  for (const Cell& c : cells) {
    const size_t step = index_of_step[c.step];
    int& seen = line_of[(step * static_cast<size_t>(layers) + static_cast<size_t>(c.layer)) *
                            static_cast<size_t>(experts) +
                        static_cast<size_t>(c.expert)];
    if (seen > 0) {
      return Status::InvalidArgument(fmt::format(
          "{}:{}: step {}, layer {}, expert {} is given again (first at line {}); give each "
          "cell once",
          csv.name(), c.line, c.step, c.layer, c.expert, seen));
    }
    seen = c.line;
    series.steps[step](c.layer, c.expert) = c.tokens;
  }
  return series;
}

}  // namespace

LoadMatrix LoadSeries::Total() const {
  LoadMatrix sum = steps.empty() ? LoadMatrix() : steps[0];
  for (size_t s = 1; s < steps.size(); ++s) sum += steps[s];
  return sum.cwiseMin(kMaxLoad);
}

int64_t LoadSeries::StepsPerChunk(int64_t steps, int max_chunks) {
  const int64_t chunks = std::max(1, max_chunks);
  return std::max<int64_t>(1, (steps + chunks - 1) / chunks);
}

std::vector<LoadMatrix> LoadSeries::Chunks(int max_chunks) const {
  const size_t n = steps.size();
  const auto per_chunk = static_cast<size_t>(StepsPerChunk(static_cast<int64_t>(n), max_chunks));
  std::vector<LoadMatrix> chunks;
  for (size_t first = 0; first < n; first += per_chunk) {
    LoadMatrix chunk = steps[first];
    for (size_t t = first + 1; t < std::min(n, first + per_chunk); ++t) chunk += steps[t];
    chunks.emplace_back(chunk.cwiseMin(kMaxLoad));
  }
  return chunks;
}

Result<LoadSeries> ParseLoadCsvSeries(std::string_view text, const std::string& name) {
  CsvLines csv(text, name, {.skip_comments = true});
  std::vector<std::string_view> fields;
  if (!csv.Next(fields)) return Status::InvalidArgument(name + ": no layers of load found");

  // A header row is a first line with a name in it, or with an empty first field (pandas'
  // unnamed index column over numbered columns: ",0,1,2"). The line of a bad number is read as
  // data, and refused there.
  std::optional<std::vector<std::string_view>> header;
  for (std::string_view f : fields) {
    double v;
    // A field that starts like a number ("100junk", "-3x") is a bad number, not a name.
    const bool numberlike =
        !f.empty() && (std::isdigit(static_cast<unsigned char>(f[0])) ||
                       (f.size() > 1 && (f[0] == '-' || f[0] == '+' || f[0] == '.') &&
                        std::isdigit(static_cast<unsigned char>(f[1]))));
    const bool named = !f.empty() && !numberlike && !ParseCsvDouble(f, v);
    if (named || (fields.size() > 1 && fields[0].empty())) {
      header = fields;
      break;
    }
  }
  size_t index_columns = 0;
  int step_column = -1, layer_column = -1;
  if (header) {
    const auto& h = *header;
    if (std::find(h.begin(), h.end(), "expert") != h.end() &&
        std::find(h.begin(), h.end(), "tokens") != h.end())
      return ParseLongCsv(csv, h);
    while (index_columns < h.size() && IsIndexColumn(h[index_columns])) {
      if (h[index_columns] == "step") step_column = static_cast<int>(index_columns);
      if (h[index_columns] == "layer") layer_column = static_cast<int>(index_columns);
      ++index_columns;
    }
    if (index_columns == h.size()) {
      return csv.Error("the header names only index columns; expected a column per expert");
    }
    if (!csv.Next(fields)) return Status::InvalidArgument(name + ": no layers of load found");
  }

  LoadSeries series;
  Rows rows;
  int64_t current_step = 0;
  const size_t width = header ? header->size() : fields.size();
  auto finish_step = [&]() -> Status {
    if (rows.empty()) return Status::Ok();
    if (!series.steps.empty() && rows.size() != static_cast<size_t>(series.layers())) {
      return csv.Error(fmt::format("step {} has {} layers but the first step has {}", current_step,
                                   rows.size(), series.layers()));
    }
    if ((series.steps.size() + 1) * StepBytes(rows.size(), rows[0].size()) >
        static_cast<size_t>(kMaxSeriesBytes))
      return TooManySteps(name + ": ", rows.size(), rows[0].size());
    auto m = FromRows(rows, name + ": ");
    if (!m.ok()) return m.status();
    series.steps.push_back(std::move(m).value());
    rows.clear();
    return Status::Ok();
  };
  do {
    if (fields.size() != width) {
      if (header) {
        return csv.Error(
            fmt::format("{} fields on this line but {} in the header", fields.size(), width));
      }
      return csv.Error(fmt::format(
          "{} experts on this line but {} on the first layer's line; every layer needs the same "
          "count",
          fields.size(), width));
    }
    // Until a first row of numbers is read, or a header naming a step or layer column, the file
    // is not recognised as a load: an error quotes nothing of it but an empty field
    // (base/excerpt.h), so a .env saved as creds.csv is never echoed.
    const bool recognised =
        !rows.empty() || !series.steps.empty() || step_column >= 0 || layer_column >= 0;
    const auto show = [&](std::string_view field) {
      return recognised || field.empty()
                 ? QuoteInput(field)
                 : std::string("not a number (not quoted: no row of numbers came before)");
    };
    int64_t step = current_step;
    if (step_column >= 0 && !ParseCsvInt64(fields[step_column], step)) {
      return csv.Error(fmt::format("field {} (step) is {}; expected an integer", step_column + 1,
                                   show(fields[step_column])));
    }
    if (step != current_step) {
      EPLB_RETURN_IF_ERROR(finish_step());
      current_step = step;
    }
    if (layer_column >= 0) {
      int64_t given = 0;
      const int64_t want = static_cast<int64_t>(rows.size());
      if (!ParseCsvInt64(fields[layer_column], given) || given != want) {
        return csv.Error(fmt::format(
            "field {} (layer) is {}; expected {} (layers count 0, 1, ... within each step)",
            layer_column + 1, show(fields[layer_column]), want));
      }
    }
    std::vector<double> row;
    for (size_t column = index_columns + 1; column <= fields.size(); ++column) {
      const std::string_view field = fields[column - 1];
      double v = 0;
      if (!ParseCsvDouble(field, v)) {
        return csv.Error(
            fmt::format("field {} is {}; expected a non-negative number", column, show(field)));
      }
      if (v < 0) {
        return csv.Error(fmt::format("field {} is {}; loads must be finite and non-negative",
                                     column, Excerpt(field)));
      }
      row.push_back(v);
    }
    rows.push_back(std::move(row));
  } while (csv.Next(fields));
  EPLB_RETURN_IF_ERROR(finish_step());
  return series;
}

Result<LoadSeries> ParseLoadJsonSeries(std::string_view text, const std::string& name) {
  EPLB_ASSIGN_OR_RETURN(const nlohmann::json j, ParseJson(text, name));
  if (j.is_array()) return FromJsonArray(j, "load", name);
  if (j.is_object()) {
    for (const char* key : {"load", "logical_count", "steps"}) {
      if (j.contains(key)) return FromJsonArray(j[key], key, name);
    }
    return Status::InvalidArgument(fmt::format(
        "{}: the JSON object has none of the keys 'load', 'logical_count' or 'steps'", name));
  }
  return Status::InvalidArgument(
      fmt::format("{}: expected a JSON array of layers or an object with 'load'", name));
}

Result<LoadMatrix> ParseLoadCsv(std::string_view text, const std::string& name) {
  EPLB_ASSIGN_OR_RETURN(LoadSeries s, ParseLoadCsvSeries(text, name));
  return s.Total();
}

Result<LoadMatrix> ParseLoadJson(std::string_view text, const std::string& name) {
  EPLB_ASSIGN_OR_RETURN(LoadSeries s, ParseLoadJsonSeries(text, name));
  return s.Total();
}

Result<LoadSeries> FoldPhysicalLoad(const LoadSeries& series, const Placement& map,
                                    const std::string& name) {
  if (series.experts() != map.num_slots() || series.layers() != map.num_layers()) {
    return Status::InvalidArgument(fmt::format(
        "{}: the load has {} layers × {} columns but the physical-to-logical map has {} layers × "
        "{} slots; a per-slot load needs one column per slot",
        name, series.layers(), series.experts(), map.num_layers(), map.num_slots()));
  }
  LoadSeries out;
  for (size_t step_index = 0; step_index < series.steps.size(); ++step_index) {
    const LoadMatrix& step = series.steps[step_index];
    LoadMatrix logical = LoadMatrix::Zero(step.rows(), map.num_experts());
    for (int l = 0; l < map.num_layers(); ++l) {
      const auto row = map.phy2log(l);
      for (int s = 0; s < map.num_slots(); ++s) {
        // Each slot's count is checked before replicas of one expert are added, where -7 beside
        // +10 would fold to an acceptable 3 (and 1e300 beside -1e300 to 0).
        if (const double c = step(l, s); !(c >= 0 && c <= kMaxLoad)) {
          return Status::InvalidArgument(
              fmt::format("{}: step {}, layer {}, slot {} counts {}; counts must be finite, "
                          "non-negative and at most {:g} tokens",
                          name, step_index, l, s, c, kMaxLoad));
        }
        if (row[s] >= 0) {
          logical(l, row[s]) += step(l, s);
        } else if (step(l, s) > 0) {
          return Status::InvalidArgument(fmt::format(
              "{}: layer {}, slot {} is empty in the physical-to-logical map but has load {:g}",
              name, l, s, step(l, s)));
        }
      }
    }
    out.steps.emplace_back(logical.cwiseMin(kMaxLoad));
  }
  return out;
}

Result<LoadSeries> ReadLoadSeries(const std::string& path, const LoadReadOptions& options) {
  std::error_code ec;
  Result<LoadSeries> series = Status::Internal("unread");
  if (std::filesystem::is_directory(path, ec)) {
    bool has_dumps = false;
    for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
      has_dumps = has_dumps || entry.path().extension() == ".pt";
    }
    if (std::filesystem::exists(std::filesystem::path(path) / "meta_info.json", ec)) {
      series = ReadTrtllmStatistics(path);
    } else if (has_dumps) {
      series = ReadTorchDump(path);
    } else {
      return Status::InvalidArgument(
          path +
          " is a folder with neither TensorRT-LLM's meta_info.json nor .pt dumps; expected "
          "a load file or one of those folders");
    }
  } else {
    EPLB_RETURN_IF_ERROR(ExpectFileKind(path, "a load", {".csv", ".txt", ".json", ".pt", ".pth"}));
    auto text = ReadTextFile(path);
    if (!text.ok()) return text.status();
    const std::string_view body = Trim(*text);
    if (body.empty()) {
      return Status::InvalidArgument(path + ": the file is empty; expected a load matrix");
    }
    const std::string ext = std::filesystem::path(path).extension().string();
    if (text->starts_with("PK\x03\x04") || ext == ".pt" || ext == ".pth") {
      series = ReadTorchDump(path);  // torch.save writes a zip archive
    } else if (body.front() == '[' || body.front() == '{') {
      series = ParseLoadJsonSeries(body, path);
    } else {
      series = ParseLoadCsvSeries(*text, path);
    }
  }
  if (!series.ok()) return series.status();
  if (options.physical_map != nullptr) {
    EPLB_ASSIGN_OR_RETURN(series, FoldPhysicalLoad(*series, *options.physical_map, path));
  }
  if (options.experts > 0 && series->experts() != options.experts) {
    return Status::InvalidArgument(fmt::format(
        "{}: the load has {} experts per layer but {} is {}{}", path, series->experts(),
        options.experts_name, options.experts,
        options.physical_map == nullptr && series->experts() > options.experts
            ? "; a load counted per physical slot (vLLM's windows) needs the placement that "
              "maps slots to experts"
            : ""));
  }
  if (options.layers > 0 && series->layers() != options.layers) {
    return Status::InvalidArgument(fmt::format("{}: the load has {} layers but {} is {}", path,
                                               series->layers(), options.layers_name,
                                               options.layers));
  }
  return series;
}

Result<LoadMatrix> ReadLoadFile(const std::string& path, const LoadReadOptions& options) {
  EPLB_ASSIGN_OR_RETURN(LoadSeries s, ReadLoadSeries(path, options));
  return s.Total();
}

}  // namespace eplb
