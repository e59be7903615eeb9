#include "eplb/formats/load_file.h"

#include "eplb/base/csv.h"
#include "eplb/formats/json.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace eplb {
namespace {

using Rows = std::vector<std::vector<double>>;

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

// One JSON layer (an array of numbers) into `row`.
Status ParseJsonRow(const nlohmann::json& j, const std::string& path, std::vector<double>& row) {
  if (!j.is_array()) {
    return Status::InvalidArgument(
        fmt::format("{} is {}; expected an array of numbers (one per expert)", path, j.dump()));
  }
  row.clear();
  for (size_t e = 0; e < j.size(); ++e) {
    if (!j[e].is_number()) {
      return Status::InvalidArgument(
          fmt::format("{}[{}] is {}; expected a non-negative number", path, e, j[e].dump()));
    }
    row.push_back(j[e].get<double>());
  }
  return Status::Ok();
}

// `layers × experts` or `steps × layers × experts` (summed) under JSON path `path`.
Result<LoadMatrix> FromJsonArray(const nlohmann::json& j, const std::string& path,
                                 const std::string& name) {
  const std::string where = name + ": ";
  if (!j.is_array() || j.empty()) {
    return Status::InvalidArgument(fmt::format("{}{} is {}; expected a non-empty array of layers",
                                               where, path, j.dump().substr(0, 80)));
  }
  const bool stepped = j[0].is_array() && !j[0].empty() && j[0][0].is_array();
  Rows sum;
  std::vector<double> row;
  const size_t steps = stepped ? j.size() : 1;
  for (size_t s = 0; s < steps; ++s) {
    const nlohmann::json& layers = stepped ? j[s] : j;
    const std::string lpath = stepped ? fmt::format("{}[{}]", path, s) : path;
    if (!layers.is_array()) {
      return Status::InvalidArgument(
          fmt::format("{}{} is not an array; expected layers × experts", where, lpath));
    }
    if (s > 0 && layers.size() != sum.size()) {
      return Status::InvalidArgument(fmt::format("{}{} has {} layers but {}[0] has {}", where,
                                                 lpath, layers.size(), path, sum.size()));
    }
    if (s == 0) sum.resize(layers.size());
    for (size_t l = 0; l < layers.size(); ++l) {
      const std::string rpath = fmt::format("{}[{}]", lpath, l);
      Status st = ParseJsonRow(layers[l], rpath, row);
      if (!st.ok()) return st.WithContext(where);
      const size_t want = (s == 0 && l == 0) ? row.size() : sum[0].size();
      if (row.size() != want) {
        return Status::InvalidArgument(fmt::format(
            "{}{} has {} experts but the first layer has {}; every layer needs the same count",
            where, rpath, row.size(), want));
      }
      if (s == 0) {
        sum[l] = row;
      } else {
        for (size_t e = 0; e < row.size(); ++e) sum[l][e] += row[e];
      }
    }
  }
  return FromRows(sum, where);
}

}  // namespace

Result<LoadMatrix> ParseLoadCsv(std::string_view text, const std::string& name) {
  Rows rows;
  CsvLines csv(text, name, {.skip_comments = true});
  std::vector<std::string_view> fields;
  while (csv.Next(fields)) {
    std::vector<double> row;
    for (size_t column = 1; column <= fields.size(); ++column) {
      const std::string_view field = fields[column - 1];
      double v = 0;
      if (!ParseCsvDouble(field, v)) {
        return csv.Error(
            fmt::format("field {} is '{}'; expected a non-negative number", column, field));
      }
      if (v < 0) {
        return csv.Error(
            fmt::format("field {} is {}; loads must be finite and non-negative", column, field));
      }
      row.push_back(v);
    }
    if (!rows.empty() && row.size() != rows[0].size()) {
      return csv.Error(fmt::format(
          "{} experts on this line but {} on the first layer's line; every layer needs the "
          "same count",
          row.size(), rows[0].size()));
    }
    rows.push_back(std::move(row));
  }
  return FromRows(rows, name + ": ");
}

Result<LoadMatrix> ParseLoadJson(std::string_view text, const std::string& name) {
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

Result<LoadMatrix> ReadLoadFile(const std::string& path) {
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  const std::string_view body = Trim(*text);
  if (body.empty())
    return Status::InvalidArgument(path + ": the file is empty; expected a load matrix");
  if (body.front() == '[' || body.front() == '{') return ParseLoadJson(body, path);
  return ParseLoadCsv(*text, path);
}

}  // namespace eplb
