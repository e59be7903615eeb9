#include "eplb/base/csv.h"

#include <charconv>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace eplb {

std::string_view TrimCsvField(std::string_view s) {
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  return s;
}

CsvLines::CsvLines(std::string_view text, std::string name, CsvOptions options)
    : text_(text), name_(std::move(name)), options_(options) {}

bool CsvLines::Next(std::vector<std::string_view>& fields) {
  while (pos_ < text_.size()) {
    const size_t nl = text_.find('\n', pos_);
    const size_t end = nl == std::string_view::npos ? text_.size() : nl;
    const std::string_view line = TrimCsvField(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    ++line_number_;
    if (options_.skip_blank && line.empty()) continue;
    if (options_.skip_comments && !line.empty() && line.front() == '#') continue;
    fields.clear();
    size_t start = 0;
    while (true) {
      const size_t comma = line.find(',', start);
      fields.push_back(TrimCsvField(line.substr(start, comma - start)));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    return true;
  }
  return false;
}

Status CsvLines::ExpectHeader(std::string_view header) {
  return ExpectHeaderOf({std::string(header)}).status();
}

Result<size_t> CsvLines::ExpectHeaderOf(const std::vector<std::string>& headers) {
  std::vector<std::string_view> fields;
  const bool any = Next(fields);
  std::string line;
  for (size_t i = 0; any && i < fields.size(); ++i) {
    if (i > 0) line += ',';
    line += fields[i];
  }
  for (size_t i = 0; any && i < headers.size(); ++i) {
    if (line == headers[i]) return i;
  }
  if (!any) line_number_ = std::max(line_number_, 1);
  return Error(fmt::format("the header should be '{}'", headers.front()));
}

Status CsvLines::Error(std::string_view what) const {
  return Status::InvalidArgument(fmt::format("{}:{}: {}", name_, line_number_, what));
}

Status CsvLines::CheckFieldCount(const std::vector<std::string_view>& fields,
                                 size_t expected) const {
  if (fields.size() == expected) return Status::Ok();
  return Error(fmt::format("{} fields, expected {}", fields.size(), expected));
}

bool ParseCsvDouble(std::string_view field, double& out) {
  field = TrimCsvField(field);
  if (!field.empty() && field.front() == '+') field.remove_prefix(1);
  double v = 0;
  const auto [ptr, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
  if (field.empty() || ec != std::errc() || ptr != field.data() + field.size() ||
      !std::isfinite(v)) {
    return false;
  }
  out = v;
  return true;
}

bool ParseCsvInt64(std::string_view field, int64_t& out) {
  field = TrimCsvField(field);
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
  if (field.empty() || ec != std::errc() || ptr != field.data() + field.size()) return false;
  out = v;
  return true;
}

bool ParseCsvInt32(std::string_view field, int32_t& out) {
  int64_t v = 0;
  if (!ParseCsvInt64(field, v) || v < std::numeric_limits<int32_t>::min() ||
      v > std::numeric_limits<int32_t>::max()) {
    return false;
  }
  out = static_cast<int32_t>(v);
  return true;
}

}  // namespace eplb
