// The one CSV tokeniser every eplb reader uses (load files, traces, run folders).
//
// The dialect eplb reads and writes: comma-separated fields without quoting (no eplb file has a
// field with a comma), lines ending in '\n' or "\r\n", spaces and tabs around a field ignored.
// Numbers are parsed strictly: the whole field, finite, in range.
//
// Thread-safety: a CsvLines is used by one thread; the parse functions are pure.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "eplb/base/status.h"

namespace eplb {

struct CsvOptions {
  bool skip_comments = false;  // lines whose first non-blank character is '#'
  bool skip_blank = true;
};

// The lines of a CSV text, split into fields. `name` (a file path) prefixes errors.
class CsvLines {
 public:
  CsvLines(std::string_view text, std::string name, CsvOptions options = {});

  // The next line that is not skipped; false at the end of the text.
  bool Next(std::vector<std::string_view>& fields);
  // The 1-based number of the line Next returned last.
  int line_number() const { return line_number_; }
  const std::string& name() const { return name_; }

  // Next, then a check that the line equals `header` (names joined by commas).
  Status ExpectHeader(std::string_view header);
  // Next, then a check that the line is one of `headers`; returns which (the error names the
  // first, the current one).
  Result<size_t> ExpectHeaderOf(const std::vector<std::string>& headers);
  // An InvalidArgument "NAME:LINE: what".
  Status Error(std::string_view what) const;
  // OK when `fields` has `expected` entries; otherwise "N fields, expected M".
  Status CheckFieldCount(const std::vector<std::string_view>& fields, size_t expected) const;

 private:
  std::string_view text_;
  std::string name_;
  CsvOptions options_;
  size_t pos_ = 0;
  int line_number_ = 0;
};

// Strict parses: the whole field (after trimming) is the number, and it is finite and fits.
bool ParseCsvDouble(std::string_view field, double& out);
bool ParseCsvInt64(std::string_view field, int64_t& out);
bool ParseCsvInt32(std::string_view field, int32_t& out);

// `s` without leading and trailing spaces, tabs and carriage returns.
std::string_view TrimCsvField(std::string_view s);

}  // namespace eplb
