// The strict YAML field readers behind scenario files, which the scenario schema
// (scenario_schema_fields.cpp: every field's range and names) and the faults reader
// (scenario_faults.cpp) drive: where each field was, and the first error with the file, line,
// column and field. Internal to the io layer.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "eplb/base/excerpt.h"
#include "eplb/base/status.h"
#include "eplb/engine/scenario.h"

namespace eplb::scenario_fields {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Field ranges (scenarios/README.md). Each bounds what is derived from it: byte counts in int64,
// times finite, the simulator's rates and the run's memory (also checked whole, before a run:
// engine/scenario.h).
constexpr double kMaxSlowdown = 1000;  // a fault's factor
constexpr int kMaxGpus = 65536;        // nodes × gpus_per_node
constexpr int kMaxExperts = 1 << 20;
constexpr double kMaxGbps = 1e6;          // 1 PB/s: any link, with room to spare
constexpr double kMaxMicroseconds = 1e9;  // 1000 s for a latency or a step's part
constexpr double kMaxMemoryGb = 1e6;      // 1 PB: any GPU's memory, with room to spare

// Reads YAML maps strictly: remembers where each field was, and reports the first error with
// the file, line, column and field.
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  // A field set with --set (or inside one) has no place in the file: name the setting.
  std::string Where(const YAML::Node& node, const std::string& path) const {
    for (const std::string& o : overridden_) {
      const bool inside = path == o || path.rfind(o + ".", 0) == 0 || path.rfind(o + "[", 0) == 0;
      const bool created_by_it = !path.empty() && o.rfind(path + ".", 0) == 0;
      if (inside || created_by_it) {
        return fmt::format("{} (--set {}): ", source_, Excerpt(o));
      }
    }
    const YAML::Mark m = node.Mark();
    if (m.is_null() || m.line < 0) return source_ + ": ";
    return fmt::format("{}:{}:{}: ", source_, m.line + 1, m.column + 1);
  }
  void Fail(const YAML::Node& node, const std::string& path, const std::string& message) {
    if (status_.ok()) status_ = Status::InvalidArgument(Where(node, path) + message);
  }
  void Overridden(const std::string& path) { overridden_.push_back(path); }
  void FailAt(const std::string& path, const std::string& message) {
    if (!status_.ok()) return;
    const auto it = where_.find(path);
    status_ = Status::InvalidArgument((it != where_.end() ? it->second : source_ + ": ") + message);
  }
  void Remember(const std::string& path, const YAML::Node& node) {
    where_[path] = Where(node, path);
  }
  const Status& status() const { return status_; }

 private:
  std::string source_;
  Status status_;
  std::map<std::string, std::string> where_;
  std::vector<std::string> overridden_;
};

inline bool PlainDecimal(const std::string& s) {
  size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  if (i == s.size()) return false;
  if (s[i] == '0' && i + 1 < s.size()) return false;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return true;
}

// "at least 0", "above 0", "within [0, 1]", "above 0 and at most 1".
inline std::string Range(double min, double max, bool positive) {
  if (max == kInf) return fmt::format("{} {}", positive ? "above" : "at least", min);
  if (positive) return fmt::format("above {} and at most {}", min, max);
  return fmt::format("within [{}, {}]", min, max);
}

inline std::string Show(const YAML::Node& n) {
  if (n.IsScalar()) return fmt::format("'{}'", Excerpt(n.Scalar()));
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a map";
  return "empty";
}

class MapReader {
 public:
  MapReader(const YAML::Node& node, std::string path, Reader& reader)
      : node_(node), path_(std::move(path)), reader_(reader) {
    if (node_ && !node_.IsNull() && !node_.IsMap()) {
      reader_.Fail(node_, Name(""),
                   fmt::format("{} is {}; expected a map of fields", Name(""), Show(node_)));
      node_ = YAML::Node(YAML::NodeType::Undefined);
    }
  }

  void Int(const char* key, int& out, int min, int max = std::numeric_limits<int>::max()) {
    int64_t v = out;
    Int64(key, v, min, max);
    out = static_cast<int>(v);
  }
  void Int64(const char* key, int64_t& out, int64_t min,
             int64_t max = std::numeric_limits<int64_t>::max()) {
    const YAML::Node n = Take(key);
    if (!n) return;
    long long v = 0;
    if (!n.IsScalar() || !YAML::convert<long long>::decode(n, v)) {
      return reader_.Fail(n, Name(key),
                          fmt::format("{} is {}; expected an integer", Name(key), Show(n)));
    }
    if (!PlainDecimal(n.Scalar())) {
      // YAML 1.1 reads 010 as 8 and 0x10 as 16; a scenario means what it looks like, or fails.
      return reader_.Fail(n, Name(key),
                          fmt::format("{} is {}; write integers in plain decimal (no leading 0, "
                                      "0x or 0o: YAML would read '010' as 8)",
                                      Name(key), Show(n)));
    }
    if (v < min || v > max) {
      return reader_.Fail(
          n, Name(key),
          max == std::numeric_limits<int64_t>::max()
              ? fmt::format("{} is {}; it must be at least {}", Name(key), v, min)
              : fmt::format("{} is {}; valid values are {}..{}", Name(key), v, min, max));
    }
    out = v;
  }
  void Uint64(const char* key, uint64_t& out) {
    int64_t v = static_cast<int64_t>(out & 0x7fffffffffffffffULL);
    Int64(key, v, 0);
    out = static_cast<uint64_t>(v);
  }
  // A number in [min, max]; with `positive`, strictly above min.
  void Double(const char* key, double& out, double min, double max = kInf, bool positive = false) {
    const YAML::Node n = Take(key);
    if (!n) return;
    double v = 0;
    if (!n.IsScalar() || !YAML::convert<double>::decode(n, v) || !std::isfinite(v)) {
      return reader_.Fail(n, Name(key),
                          fmt::format("{} is {}; expected a number", Name(key), Show(n)));
    }
    if (v < min || v > max || (positive && v <= min)) {
      return reader_.Fail(
          n, Name(key),
          fmt::format("{} is {}; it must be {}", Name(key), v, Range(min, max, positive)));
    }
    // A subnormal number has lost its precision, and every time divided by it overflows.
    if (v != 0 && !std::isnormal(v)) {
      return reader_.Fail(
          n, Name(key),
          fmt::format("{} is {}, below the smallest normal number ({:g}); it must be {}a normal "
                      "number {}",
                      Name(key), v, std::numeric_limits<double>::min(),
                      positive || min > 0 ? "" : "0 or ", Range(min, max, positive)));
    }
    out = v;
  }
  void Bool(const char* key, bool& out) {
    const YAML::Node n = Take(key);
    if (!n) return;
    if (!n.IsScalar() || !YAML::convert<bool>::decode(n, out)) {
      reader_.Fail(n, Name(key),
                   fmt::format("{} is {}; expected true or false", Name(key), Show(n)));
    }
  }
  void String(const char* key, std::string& out, const std::vector<std::string>& allowed = {}) {
    const YAML::Node n = Take(key);
    if (!n) return;
    if (!n.IsScalar())
      return reader_.Fail(n, Name(key),
                          fmt::format("{} is {}; expected a string", Name(key), Show(n)));
    if (!allowed.empty() &&
        std::find(allowed.begin(), allowed.end(), n.Scalar()) == allowed.end()) {
      return reader_.Fail(n, Name(key),
                          fmt::format("{} is '{}'; valid values: {}", Name(key),
                                      Excerpt(n.Scalar()), fmt::join(allowed, ", ")));
    }
    out = n.Scalar();
  }
  MapReader Sub(const char* key) { return MapReader(Take(key), Name(key), reader_); }
  YAML::Node Take(const char* key) {
    seen_.insert(key);
    // A default YAML::Node is a defined null; "absent" is the Undefined type.
    if (!node_ || !node_.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
    // Through a const reference: yaml-cpp's non-const operator[] inserts missing keys.
    const YAML::Node& map = node_;
    const YAML::Node n = map[key];
    if (n) reader_.Remember(Name(key), n);
    return n;
  }
  // Reports the first key that no reader asked for.
  void Finish() {
    if (!node_ || !node_.IsMap()) return;
    for (const auto& kv : node_) {
      const std::string key = kv.first.as<std::string>();
      if (!seen_.count(key)) {
        std::vector<std::string> valid(seen_.begin(), seen_.end());
        // The path is eplb's (known fields); the key is input: 32 printable bytes at most.
        return reader_.Fail(
            kv.first, Name(key),
            fmt::format("unknown field '{}{}'; valid fields here: {}",
                        path_.empty() ? "" : path_ + ".", Excerpt(key), fmt::join(valid, ", ")));
      }
    }
  }
  std::string Name(const std::string& key) const {
    if (path_.empty()) return key;
    return key.empty() ? path_ : path_ + "." + key;
  }

 private:
  YAML::Node node_;
  std::string path_;
  Reader& reader_;
  std::set<std::string> seen_;
};

// One entry of `faults:`, added to `s.faults` (scenario_faults.cpp).
void ReadFault(const YAML::Node& node, size_t index, Scenario& s, Reader& r);
// Faults that change the serving GPUs need a policy that places around the others, and every
// set of GPUs the run goes through must keep a slot per expert.
void ValidateRankChanges(const Scenario& s, Reader& r);
// Two slowdowns of one kind on one target over overlapping steps (they would compound silently).
void ValidateFaultOverlaps(const Scenario& s, Reader& r);

}  // namespace eplb::scenario_fields
