#include "eplb/io/scenario_file.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "eplb/engine/hardware.h"
#include "eplb/formats/load_file.h"
#include "eplb/policy/policy.h"

namespace eplb {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Field ranges (scenarios/README.md). Each bounds what is derived from it: byte counts in int64,
// times finite, the simulator's rates and the run's memory (also checked whole, before a run:
// engine/scenario.h).
constexpr int kMaxGpus = 65536;                        // nodes × gpus_per_node
constexpr int64_t kMaxExpertBytes = int64_t{1} << 40;  // 1 TiB per expert
constexpr int kMaxExperts = 1 << 20;
constexpr double kMaxGbps = 1e6;          // 1 PB/s: any link, with room to spare
constexpr double kMaxMicroseconds = 1e9;  // 1000 s for a latency or a step's part

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
        return fmt::format("{} (--set {}): ", source_, o);
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

bool PlainDecimal(const std::string& s) {
  size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  if (i == s.size()) return false;
  if (s[i] == '0' && i + 1 < s.size()) return false;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return true;
}

// "at least 0", "above 0", "within [0, 1]", "above 0 and at most 1".
std::string Range(double min, double max, bool positive) {
  if (max == kInf) return fmt::format("{} {}", positive ? "above" : "at least", min);
  if (positive) return fmt::format("above {} and at most {}", min, max);
  return fmt::format("within [{}, {}]", min, max);
}

std::string Show(const YAML::Node& n) {
  if (n.IsScalar()) return "'" + n.Scalar() + "'";
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
                          fmt::format("{} is '{}'; valid values: {}", Name(key), n.Scalar(),
                                      fmt::join(allowed, ", ")));
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
        return reader_.Fail(kv.first, Name(key),
                            fmt::format("unknown field '{}'; valid fields here: {}", Name(key),
                                        fmt::join(valid, ", ")));
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

void ReadLink(MapReader m, LinkConfig& link) {
  m.Double("bandwidth_gbps", link.bandwidth_gbps, 0, kMaxGbps, true);
  m.Double("latency_us", link.latency_us, 0, kMaxMicroseconds);
  m.Double("efficiency", link.efficiency, 0, 1, true);
  m.Finish();
}

// Refuses what YAML would read silently in a way the author did not mean: a key given twice
// (yaml-cpp keeps the first). Also bounds the work on aliases that multiply a small text.
Status CheckKeys(const YAML::Node& node, const std::string& source, size_t& visited,
                 int depth = 0) {
  if (++visited > 1000000) {
    return Status::InvalidArgument(
        fmt::format("{}: more than a million YAML nodes (aliases?); a scenario is a page", source));
  }
  // A scenario nests 3 levels; an alias inside its own anchor (&a [*a]) nests forever.
  if (depth > 64) {
    const YAML::Mark m = node.Mark();
    return Status::InvalidArgument(
        fmt::format("{}:{}:{}: nested more than 64 deep (an alias inside its own anchor?)", source,
                    m.line + 1, m.column + 1));
  }
  if (node.IsMap()) {
    std::map<std::string, YAML::Mark> keys;
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) {
        const YAML::Mark m = kv.first.Mark();
        return Status::InvalidArgument(fmt::format("{}:{}:{}: a key is {}; keys are field names",
                                                   source, m.line + 1, m.column + 1,
                                                   Show(kv.first)));
      }
      {
        const auto [it, fresh] = keys.emplace(kv.first.Scalar(), kv.first.Mark());
        if (!fresh) {
          const YAML::Mark m = kv.first.Mark();
          return Status::InvalidArgument(fmt::format(
              "{}:{}:{}: '{}' is given twice (also at line {}); give each field once", source,
              m.line + 1, m.column + 1, kv.first.Scalar(), it->second.line + 1));
        }
      }
      EPLB_RETURN_IF_ERROR(CheckKeys(kv.second, source, visited, depth + 1));
    }
  } else if (node.IsSequence()) {
    for (const auto& item : node) EPLB_RETURN_IF_ERROR(CheckKeys(item, source, visited, depth + 1));
  }
  return Status::Ok();
}

// Where a scenario's text has content, by lines (1-based; 0: none). A document marker ("---",
// or anything after "...") can only stand at column 0, where no block scalar's content can, so a
// scan finds a second document without yaml-cpp (0.7's LoadAll, which would count documents,
// loops forever allocating on a text as small as ",": found by fuzzing).
struct TextShape {
  int first_content = 0;    // the first line with more than blanks, a comment or a marker
  int second_document = 0;  // the first line of a second document
};
TextShape ScanDocuments(const std::string& text) {
  TextShape shape;
  bool started = false, ended = false;
  int line_no = 0;
  for (size_t pos = 0; pos < text.size() && shape.second_document == 0;) {
    const size_t nl = std::min(text.find('\n', pos), text.size());
    const std::string_view line = std::string_view(text).substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    const auto marker = [&](std::string_view m) {
      return line.substr(0, 3) == m &&
             (line.size() == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r');
    };
    const size_t first = line.find_first_not_of(" \t\r");
    if (marker("---")) {
      if (started || ended) shape.second_document = line_no;
      started = true;  // the first document's explicit start
    } else if (marker("...")) {
      ended = true;
    } else if (first != std::string_view::npos && line[first] != '#') {
      if (ended) shape.second_document = line_no;
      started = true;
      if (shape.first_content == 0) shape.first_content = line_no;
    }
  }
  return shape;
}

// The one YAML document of a scenario: a second one is an error, and so is none (an empty file)
// when `require_document`; otherwise none is an empty map (the defaults).
Result<YAML::Node> LoadOneDocument(const std::string& text, const std::string& source,
                                   bool require_document) {
  const TextShape shape = ScanDocuments(text);
  if (shape.second_document > 0) {
    return Status::InvalidArgument(
        fmt::format("{}:{}: a second YAML document; a scenario file holds one (remove the '---')",
                    source, shape.second_document));
  }
  YAML::Node doc;
  try {
    doc = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    // yaml-cpp stops at 2,000 levels of nesting with the message "bad file".
    const std::string why = e.msg == "bad file" ? "nested too deep" : e.msg;
    return Status::InvalidArgument(fmt::format("{}:{}:{}: not valid YAML: {}", source,
                                               e.mark.line + 1, e.mark.column + 1, why));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(fmt::format("{}: not valid YAML: {}", source, e.msg));
  }
  if (!doc || doc.IsNull()) {
    if (shape.first_content > 0) {
      // yaml-cpp reads some invalid text (a stray ',') as nothing at all.
      return Status::InvalidArgument(
          fmt::format("{}:{}: not valid YAML here: it reads as nothing (null), not a map of fields",
                      source, shape.first_content));
    }
    if (!require_document) return YAML::Node(YAML::NodeType::Map);
    return Status::InvalidArgument(fmt::format(
        "{}: no scenario in it (the file is empty or only comments); give at least the fields "
        "that differ from the built-in default (scenarios/README.md), or give no file to run the "
        "default",
        source));
  }
  size_t visited = 0;
  EPLB_RETURN_IF_ERROR(CheckKeys(doc, source, visited));
  return doc;
}

// `into` with every field of `from` set: maps merge key by key, anything else replaces.
void Merge(YAML::Node into, const YAML::Node& from) {
  for (const auto& kv : from) {
    const std::string key = kv.first.Scalar();
    YAML::Node existing = into[key];
    if (kv.second.IsMap() && existing.IsMap()) {
      Merge(existing, kv.second);
    } else {
      into[key] = kv.second;
    }
  }
}

// One entry of `faults:`; each kind reads only its own fields, so a field of another kind is
// reported as unknown with the kind's valid ones.
void ReadFault(const YAML::Node& node, size_t index, Scenario& s, Reader& r) {
  const std::string path = fmt::format("faults[{}]", index);
  r.Remember(path, node);  // where later checks of the whole fault point
  MapReader m(node, path, r);
  std::string kind;
  m.String("kind", kind, {"straggler", "link_degraded", "gpu_lost", "node_lost", "scale"});
  if (kind.empty()) {
    if (r.status().ok()) {
      r.Fail(node, path,
             path + " has no kind (straggler, link_degraded, gpu_lost, node_lost or scale)");
    }
    return;
  }
  FaultSpec f;
  f.kind = kind == "straggler"       ? FaultKind::kStraggler
           : kind == "link_degraded" ? FaultKind::kLinkDegraded
           : kind == "gpu_lost"      ? FaultKind::kGpuLost
           : kind == "node_lost"     ? FaultKind::kNodeLost
                                     : FaultKind::kScale;
  f.until = std::numeric_limits<int>::max();
  m.Int("step", f.step, 0);
  // Losses are for good and a scale holds until the next: only slowdowns end.
  const bool slowdown = f.kind == FaultKind::kStraggler || f.kind == FaultKind::kLinkDegraded;
  if (slowdown) m.Int("until", f.until, 1);
  if (f.kind != FaultKind::kNodeLost && f.kind != FaultKind::kScale)
    m.Int("rank", f.rank, 0, kMaxGpus - 1);
  if (f.kind == FaultKind::kLinkDegraded || f.kind == FaultKind::kNodeLost)
    m.Int("node", f.node, 0, kMaxGpus - 1);
  if (f.kind == FaultKind::kLinkDegraded) {
    std::string link = "nic";
    m.String("link", link, {"nvlink", "nic"});
    f.link = link == "nvlink" ? LinkClass::kNvlink : LinkClass::kNic;
  }
  if (slowdown) m.Double("factor", f.factor, 1);
  if (f.kind == FaultKind::kScale) m.Int("gpus", f.gpus, 1, kMaxGpus);
  m.Finish();
  if (!r.status().ok()) return;
  if (f.until <= f.step) {
    r.FailAt(path + ".until", fmt::format("{}.until is {}; it must be after {}.step ({})", path,
                                          f.until, path, f.step));
  } else if ((f.kind == FaultKind::kStraggler || f.kind == FaultKind::kGpuLost) && f.rank < 0) {
    r.Fail(node, path, fmt::format("{} ({}) needs the rank it hits", path, kind));
  } else if (f.kind == FaultKind::kNodeLost && f.node < 0) {
    r.Fail(node, path, fmt::format("{} (node_lost) needs the node it loses", path));
  } else if (f.kind == FaultKind::kScale && f.gpus == 0) {
    r.Fail(node, path, fmt::format("{} (scale) needs gpus, the GPUs serving from then on", path));
  } else if (f.kind == FaultKind::kLinkDegraded && (f.rank < 0) == (f.node < 0)) {
    r.Fail(node, path,
           fmt::format("{} (link_degraded) needs either a rank or a node, not both", path));
  } else if (f.rank >= s.num_gpus()) {
    r.FailAt(path + ".rank", fmt::format("{}.rank is {}; the cluster's ranks are 0..{}", path,
                                         f.rank, s.num_gpus() - 1));
  } else if (f.node >= s.cluster.nodes) {
    r.FailAt(path + ".node", fmt::format("{}.node is {}; the cluster's nodes are 0..{}", path,
                                         f.node, s.cluster.nodes - 1));
  } else if (f.gpus > s.num_gpus()) {
    r.FailAt(path + ".gpus",
             fmt::format("{}.gpus is {}; the cluster has 1..{} GPUs", path, f.gpus, s.num_gpus()));
  }
  s.faults.push_back(f);
}

// Faults that change the serving GPUs need a policy that places around the others, and every
// set of GPUs the run goes through must keep a slot per expert.
void ValidateRankChanges(const Scenario& s, Reader& r) {
  const int gpus = s.num_gpus(), per = s.num_slots() / gpus, gpn = s.cluster.gpus_per_node;
  if (s.initial_gpus() * per < s.model.experts) {
    r.FailAt("cluster.initial_gpus",
             fmt::format("cluster.initial_gpus is {}: {} GPUs × {} slots cannot hold {} experts",
                         s.cluster.initial_gpus, s.initial_gpus(), per, s.model.experts));
    return;
  }
  std::vector<size_t> order;
  for (size_t i = 0; i < s.faults.size(); ++i) {
    if (s.faults[i].changes_ranks()) order.push_back(i);
  }
  const bool needed = !order.empty() || s.initial_gpus() < gpus;
  if (!needed) return;
  if (!PolicyHonoursLostRanks(s.eplb.policy)) {
    r.FailAt(order.empty() ? "cluster.initial_gpus" : fmt::format("faults[{}]", order.front()),
             fmt::format("eplb.policy is '{}', which cannot place around lost or idle GPUs; the "
                         "policies that can: {}",
                         s.eplb.policy, fmt::join(PoliciesHonouringLostRanks(), ", ")));
    return;
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return s.faults[a].step < s.faults[b].step; });
  std::vector<bool> lost(static_cast<size_t>(gpus), false);
  int serving = s.initial_gpus();
  for (size_t i : order) {
    const FaultSpec& f = s.faults[i];
    if (f.kind == FaultKind::kScale) serving = f.gpus;
    if (f.kind == FaultKind::kGpuLost) lost[static_cast<size_t>(f.rank)] = true;
    if (f.kind == FaultKind::kNodeLost) {
      for (int g = f.node * gpn; g < (f.node + 1) * gpn; ++g) lost[static_cast<size_t>(g)] = true;
    }
    int live = 0;
    for (int g = 0; g < serving; ++g) live += lost[static_cast<size_t>(g)] ? 0 : 1;
    if (live * per < s.model.experts) {
      r.FailAt(fmt::format("faults[{}]", i),
               fmt::format("faults[{}] ({} at step {}) leaves {} live GPUs × {} slots for {} "
                           "experts; every expert needs a slot",
                           i, FaultKindName(f.kind), f.step, live, per, s.model.experts));
      return;
    }
  }
}

Status ApplyOverride(YAML::Node& root, const std::string& setting, Reader& reader) {
  const size_t eq = setting.find('=');
  if (eq == std::string::npos || eq == 0) {
    return Status::InvalidArgument(fmt::format("--set '{}': expected key.path=value", setting));
  }
  const std::string path = setting.substr(0, eq);
  YAML::Node value;
  try {
    value = YAML::Load(setting.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(
        fmt::format("--set '{}': the value is not valid YAML: {}", setting, e.msg));
  }
  size_t visited = 0;
  EPLB_RETURN_IF_ERROR(CheckKeys(value, "--set '" + setting + "'", visited));
  std::vector<std::string> parts;
  std::stringstream ss(path);
  for (std::string part; std::getline(ss, part, '.');) parts.push_back(part);
  YAML::Node cur = root;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (cur[parts[i]] && !cur[parts[i]].IsMap()) {
      return Status::InvalidArgument(
          fmt::format("--set '{}': '{}' is not a map of fields", setting, parts[i]));
    }
    YAML::Node next = cur[parts[i]];
    cur.reset(next);
  }
  // A map sets the fields it names and keeps the others: --set 'model={layers: 2}'.
  YAML::Node target = cur[parts.back()];
  if (value.IsMap() && target.IsMap()) {
    Merge(target, value);
  } else {
    cur[parts.back()] = value;
  }
  reader.Overridden(path);
  return Status::Ok();
}

void Validate(Scenario& s, Reader& r) {
  const ModelSpec& m = s.model;
  if (int64_t{s.cluster.nodes} * s.cluster.gpus_per_node > kMaxGpus) {
    r.FailAt("cluster.nodes",
             fmt::format("cluster.nodes × cluster.gpus_per_node is {} × {} = {} GPUs; eplb "
                         "models at most {}",
                         s.cluster.nodes, s.cluster.gpus_per_node,
                         int64_t{s.cluster.nodes} * s.cluster.gpus_per_node, kMaxGpus));
    return;
  }
  // Every byte count of a run (a layer, a rearrangement, all of them) must fit an int64.
  const double all_bytes = double(m.layers) * s.num_slots() * double(m.expert_bytes);
  if (all_bytes > 4e18) {
    r.FailAt("model.expert_bytes",
             fmt::format("model.layers × slots × model.expert_bytes is {} × {} × {} = {:.3g} "
                         "bytes, beyond what eplb counts (4e18); lower model.expert_bytes",
                         m.layers, s.num_slots(), m.expert_bytes, all_bytes));
  }
  if (m.experts % m.groups != 0) {
    r.FailAt("model.groups", fmt::format("model.groups is {}; it must divide model.experts ({})",
                                         m.groups, m.experts));
  }
  if (m.top_k > m.experts) {
    r.FailAt("model.top_k", fmt::format("model.top_k is {}; it must be at most model.experts ({})",
                                        m.top_k, m.experts));
  }
  const int gpus = s.num_gpus();
  if (s.num_slots() % gpus != 0) {
    const int next = (s.num_slots() + gpus - 1) / gpus * gpus - m.experts;
    r.FailAt(
        "eplb.num_redundant_experts",
        fmt::format("eplb.num_redundant_experts is {}: {} experts + {} redundant = {} slots do not "
                    "divide over {} GPUs; valid values are {} plus multiples of {}",
                    s.eplb.num_redundant_experts, m.experts, s.eplb.num_redundant_experts,
                    s.num_slots(), gpus, next, gpus));
  }
  if (!MakePolicy(s.eplb.policy).ok()) {
    r.FailAt("eplb.policy", fmt::format("eplb.policy is '{}'; {}", s.eplb.policy,
                                        MakePolicy(s.eplb.policy).status().message()));
  }
  if (s.workload.kind == "trace" && s.workload.trace.empty()) {
    r.FailAt("workload.kind", "workload.kind is 'trace' but workload.trace names no file");
  }
  if (s.cluster.initial_gpus > gpus) {
    r.FailAt("cluster.initial_gpus",
             fmt::format("cluster.initial_gpus is {}; the cluster has 1..{} GPUs (0: all)",
                         s.cluster.initial_gpus, gpus));
  } else if (r.status().ok()) {
    ValidateRankChanges(s, r);
  }
}

Result<Scenario> ParseScenarioChecked(const std::string& text, const std::string& source,
                                      const std::vector<std::string>& overrides,
                                      bool require_document);

// yaml-cpp reports some misuse by exception; none may escape as a crash.
Result<Scenario> ParseScenarioText(const std::string& text, const std::string& source,
                                   const std::vector<std::string>& overrides,
                                   bool require_document) {
  try {
    return ParseScenarioChecked(text, source, overrides, require_document);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(fmt::format("{}:{}:{}: not a valid scenario: {}", source,
                                               e.mark.line + 1, e.mark.column + 1, e.msg));
  }
}

Result<Scenario> ParseScenarioChecked(const std::string& text, const std::string& source,
                                      const std::vector<std::string>& overrides,
                                      bool require_document) {
  EPLB_ASSIGN_OR_RETURN(YAML::Node root, LoadOneDocument(text, source, require_document));
  if (!root.IsMap()) {
    return Status::InvalidArgument(
        fmt::format("{}:1:1: the file is {}; a scenario is a map of fields (model:, cluster:, ...)",
                    source, Show(root)));
  }
  Reader r(source);
  for (const std::string& o : overrides) EPLB_RETURN_IF_ERROR(ApplyOverride(root, o, r));

  Scenario s;
  s.source = source;
  MapReader top(root, "", r);
  top.String("name", s.name);
  {
    MapReader m = top.Sub("model");
    m.Int("layers", s.model.layers, 1, 100000);
    m.Int("experts", s.model.experts, 1, kMaxExperts);
    m.Int("groups", s.model.groups, 1, kMaxExperts);
    m.Int("top_k", s.model.top_k, 1, kMaxExperts);
    m.Int("hidden", s.model.hidden, 1, 1 << 20);
    m.Int64("expert_bytes", s.model.expert_bytes, 1, kMaxExpertBytes);
    m.Int("activation_bytes", s.model.activation_bytes, 1, 8);
    m.Int("combine_bytes", s.model.combine_bytes, 0, 8);
    m.Int("topk_groups", s.model.topk_groups, 0, kMaxExperts);
    m.Int("intermediate", s.model.intermediate, 1, 1 << 24);
    m.Double("dense_params", s.model.dense_params, 0, 1e15);
    m.Double("kv_bytes_per_token", s.model.kv_bytes_per_token, 0, 1e12);
    m.Double("attention_flops_per_kv", s.model.attention_flops_per_kv, 0, 1e15);
    m.Finish();
  }
  {
    MapReader c = top.Sub("cluster");
    c.Int("nodes", s.cluster.nodes, 1, kMaxGpus);
    c.Int("gpus_per_node", s.cluster.gpus_per_node, 1, 1024);
    ReadLink(c.Sub("nvlink"), s.cluster.nvlink);
    ReadLink(c.Sub("nic"), s.cluster.nic);
    c.Double("pcie_gbps", s.cluster.pcie_gbps, 0, kMaxGbps, true);
    c.Double("hbm_gbps", s.cluster.hbm_gbps, 0, kMaxGbps, true);
    c.Double("nvswitch_gbps", s.cluster.nvswitch_gbps, 0, kMaxGbps);
    c.Double("fabric_oversubscription", s.cluster.fabric_oversubscription, 1, 1000);
    std::string backup = s.cluster.backup == ClusterSpec::Backup::kHost ? "host" : "storage";
    c.String("backup", backup, {"host", "storage"});
    s.cluster.backup =
        backup == "host" ? ClusterSpec::Backup::kHost : ClusterSpec::Backup::kStorage;
    c.Double("host_read_gbps", s.cluster.host_read_gbps, 0, kMaxGbps, true);
    c.Double("host_read_latency_us", s.cluster.host_read_latency_us, 0, 1e9);
    c.Double("storage_read_gbps", s.cluster.storage_read_gbps, 0, kMaxGbps, true);
    c.Double("storage_read_latency_us", s.cluster.storage_read_latency_us, 0, 1e9);
    c.Int("initial_gpus", s.cluster.initial_gpus, 0, kMaxGpus);
    c.Finish();
  }
  {
    MapReader c = top.Sub("compute");
    ComputeSpec& k = s.compute;
    std::string model = ComputeModelName(k.model), a2a = AllToAllModeName(k.all_to_all),
                stage = InferenceStageName(k.stage);
    c.String("model", model, {"simple", "roofline"});
    k.model = *ParseComputeModel(model);
    c.Double("attention_us", k.attention_us, 0, kMaxMicroseconds);
    c.Double("layer_fixed_us", k.layer_fixed_us, 0, kMaxMicroseconds);
    c.Double("per_token_us", k.per_token_us, 0, 1000);
    c.String("gpu", k.gpu, GpuPresetNames());
    c.Double("flops_efficiency", k.flops_efficiency, 0, 1, true);
    c.Double("hbm_efficiency", k.hbm_efficiency, 0, 1, true);
    c.Int("gemm_bytes", k.gemm_bytes, 1, 2);
    c.String("stage", stage, {"prefill", "decode"});
    k.stage = *ParseInferenceStage(stage);
    c.Double("kv_length", k.kv_length, 0, 1e9);
    c.String("all_to_all", a2a, {"bulk", "normal", "low-latency"});
    k.all_to_all = *ParseAllToAllMode(a2a);
    c.Int("micro_batches", k.micro_batches, 1, 2);
    c.Double("normal_nvlink_efficiency", k.normal_nvlink_efficiency, 0, 1, true);
    c.Double("low_latency_overhead_us", k.low_latency_overhead_us, 0, kMaxMicroseconds);
    c.Finish();
  }
  {
    MapReader w = top.Sub("workload");
    w.String("kind", s.workload.kind, {"generator", "trace"});
    w.Int("tokens_per_step", s.workload.tokens_per_step, 1, 1 << 30);
    w.String("popularity", s.workload.popularity, {"lognormal", "zipf"});
    w.Double("sigma", s.workload.sigma, 0, 20);
    w.Double("zipf_s", s.workload.zipf_s, 0, 20);
    w.Double("drift", s.workload.drift, 0, 1);
    w.Bool("noise", s.workload.noise);
    w.String("trace", s.workload.trace);
    const YAML::Node phases = w.Take("phases");
    if (phases && !phases.IsNull()) {
      if (!phases.IsSequence()) {
        r.Fail(phases, "workload.phases",
               fmt::format("workload.phases is {}; expected a list of {{step, shuffle}}",
                           Show(phases)));
      } else {
        for (size_t i = 0; i < phases.size(); ++i) {
          PhaseChange p;
          MapReader pm(phases[i], fmt::format("workload.phases[{}]", i), r);
          pm.Int("step", p.step, 0, std::numeric_limits<int>::max());
          pm.Double("shuffle", p.shuffle, 0, 1);
          pm.Finish();
          s.workload.phases.push_back(p);
        }
      }
    }
    w.Finish();
  }
  {
    MapReader e = top.Sub("eplb");
    e.Int("window_size", s.eplb.window_size, 1, 1 << 20);
    e.Int("step_interval", s.eplb.step_interval, 1);
    e.Int("num_redundant_experts", s.eplb.num_redundant_experts, 0, kMaxExperts);
    e.String("policy", s.eplb.policy);
    e.Bool("use_async", s.eplb.use_async);
    e.Int("layers_per_step", s.eplb.layers_per_step, 1, 100000);
    e.Int("staging_layers", s.eplb.staging_layers, 1, 100000);
    std::string rule = SenderRuleName(s.eplb.sender_rule),
                sched = ScheduleStrategyName(s.eplb.schedule);
    e.String("sender_rule", rule, {"vllm", "local"});
    e.String("schedule", sched, {"single-batch", "greedy-pairs", "best"});
    s.eplb.sender_rule = *ParseSenderRule(rule);
    s.eplb.schedule = *ParseScheduleStrategy(sched);
    e.Bool("preserve_slots", s.eplb.preserve_slots);
    e.Double("migration_weight", s.eplb.migration_weight, 0, 1e9);
    e.Int("max_moves_per_layer", s.eplb.max_moves_per_layer, 0, kMaxExperts);
    std::string lost = s.eplb.lost_tokens == EplbSpec::LostTokens::kDrop ? "drop" : "wait";
    e.String("lost_tokens", lost, {"drop", "wait"});
    s.eplb.lost_tokens = lost == "drop" ? EplbSpec::LostTokens::kDrop : EplbSpec::LostTokens::kWait;
    e.Finish();
  }
  {
    const YAML::Node faults = top.Take("faults");
    if (faults && !faults.IsNull()) {
      if (!faults.IsSequence()) {
        r.Fail(faults, "faults",
               fmt::format("faults is {}; expected a list of {{kind, step, until, ...}}",
                           Show(faults)));
      } else {
        for (size_t i = 0; i < faults.size(); ++i) ReadFault(faults[i], i, s, r);
      }
    }
  }
  {
    MapReader run = top.Sub("run");
    run.Int("steps", s.run.steps, 1);
    run.Uint64("seed", s.run.seed);
    run.Finish();
  }
  top.Finish();
  if (r.status().ok()) Validate(s, r);
  if (!r.status().ok()) return r.status();
  return s;
}

}  // namespace

Result<Scenario> ParseScenario(const std::string& text, const std::string& source,
                               const std::vector<std::string>& overrides) {
  return ParseScenarioText(text, source, overrides, /*require_document=*/false);
}

Result<Scenario> LoadScenarioFile(const std::string& path,
                                  const std::vector<std::string>& overrides) {
  // A scenario is a page of YAML; a larger file is a wrong path.
  auto text = ReadTextFile(path, 16 << 20);
  if (!text.ok()) return text.status();
  auto s = ParseScenarioText(*text, path, overrides, /*require_document=*/true);
  if (!s.ok()) return s;
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  s->base_dir = dir.empty() ? std::filesystem::path(".") : dir;
  return s;
}

namespace {

// A real as its shortest text that reads back to the same double ("0.8", not yaml-cpp's
// "0.80000000000000004"), so a resolved scenario reads as it was written.
std::string Shortest(double value) {
  // fmt writes 1.56e10 as "15600000000"; large counts read better with their exponent.
  if (std::fabs(value) >= 1e9) {
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
    return std::string(buf, r.ptr);
  }
  return fmt::format("{}", value);
}

}  // namespace

std::string ScenarioToYaml(const Scenario& s) {
  YAML::Emitter out;
  auto link = [&](const char* name, const LinkConfig& l) {
    out << YAML::Key << name << YAML::Value << YAML::BeginMap << YAML::Key << "bandwidth_gbps"
        << YAML::Value << Shortest(l.bandwidth_gbps) << YAML::Key << "latency_us" << YAML::Value
        << Shortest(l.latency_us) << YAML::Key << "efficiency" << YAML::Value
        << Shortest(l.efficiency) << YAML::EndMap;
  };
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << s.name;
  out << YAML::Key << "model" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "layers" << YAML::Value << s.model.layers << YAML::Key << "experts"
      << YAML::Value << s.model.experts << YAML::Key << "groups" << YAML::Value << s.model.groups
      << YAML::Key << "top_k" << YAML::Value << s.model.top_k << YAML::Key << "hidden"
      << YAML::Value << s.model.hidden << YAML::Key << "expert_bytes" << YAML::Value
      << static_cast<long long>(s.model.expert_bytes) << YAML::Key << "activation_bytes"
      << YAML::Value << s.model.activation_bytes << YAML::Key << "combine_bytes" << YAML::Value
      << s.model.combine_bytes << YAML::Key << "topk_groups" << YAML::Value << s.model.topk_groups
      << YAML::Key << "intermediate" << YAML::Value << s.model.intermediate << YAML::Key
      << "dense_params" << YAML::Value << Shortest(s.model.dense_params) << YAML::Key
      << "kv_bytes_per_token" << YAML::Value << Shortest(s.model.kv_bytes_per_token) << YAML::Key
      << "attention_flops_per_kv" << YAML::Value << Shortest(s.model.attention_flops_per_kv)
      << YAML::EndMap;
  out << YAML::Key << "cluster" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "nodes" << YAML::Value << s.cluster.nodes << YAML::Key << "gpus_per_node"
      << YAML::Value << s.cluster.gpus_per_node;
  link("nvlink", s.cluster.nvlink);
  link("nic", s.cluster.nic);
  out << YAML::Key << "pcie_gbps" << YAML::Value << Shortest(s.cluster.pcie_gbps) << YAML::Key
      << "hbm_gbps" << YAML::Value << Shortest(s.cluster.hbm_gbps) << YAML::Key << "nvswitch_gbps"
      << YAML::Value << Shortest(s.cluster.nvswitch_gbps) << YAML::Key << "fabric_oversubscription"
      << YAML::Value << Shortest(s.cluster.fabric_oversubscription) << YAML::Key << "backup"
      << YAML::Value << (s.cluster.backup == ClusterSpec::Backup::kHost ? "host" : "storage")
      << YAML::Key << "host_read_gbps" << YAML::Value << Shortest(s.cluster.host_read_gbps)
      << YAML::Key << "host_read_latency_us" << YAML::Value
      << Shortest(s.cluster.host_read_latency_us) << YAML::Key << "storage_read_gbps" << YAML::Value
      << Shortest(s.cluster.storage_read_gbps) << YAML::Key << "storage_read_latency_us"
      << YAML::Value << Shortest(s.cluster.storage_read_latency_us) << YAML::Key << "initial_gpus"
      << YAML::Value << s.cluster.initial_gpus << YAML::EndMap;
  const ComputeSpec& k = s.compute;
  out << YAML::Key << "compute" << YAML::Value << YAML::BeginMap << YAML::Key << "model"
      << YAML::Value << ComputeModelName(k.model) << YAML::Key << "attention_us" << YAML::Value
      << Shortest(k.attention_us) << YAML::Key << "layer_fixed_us" << YAML::Value
      << Shortest(k.layer_fixed_us) << YAML::Key << "per_token_us" << YAML::Value
      << Shortest(k.per_token_us) << YAML::Key << "gpu" << YAML::Value << k.gpu << YAML::Key
      << "flops_efficiency" << YAML::Value << Shortest(k.flops_efficiency) << YAML::Key
      << "hbm_efficiency" << YAML::Value << Shortest(k.hbm_efficiency) << YAML::Key << "gemm_bytes"
      << YAML::Value << k.gemm_bytes << YAML::Key << "stage" << YAML::Value
      << InferenceStageName(k.stage) << YAML::Key << "kv_length" << YAML::Value
      << Shortest(k.kv_length) << YAML::Key << "all_to_all" << YAML::Value
      << AllToAllModeName(k.all_to_all) << YAML::Key << "micro_batches" << YAML::Value
      << k.micro_batches << YAML::Key << "normal_nvlink_efficiency" << YAML::Value
      << Shortest(k.normal_nvlink_efficiency) << YAML::Key << "low_latency_overhead_us"
      << YAML::Value << Shortest(k.low_latency_overhead_us) << YAML::EndMap;
  out << YAML::Key << "workload" << YAML::Value << YAML::BeginMap << YAML::Key << "kind"
      << YAML::Value << s.workload.kind << YAML::Key << "tokens_per_step" << YAML::Value
      << s.workload.tokens_per_step << YAML::Key << "popularity" << YAML::Value
      << s.workload.popularity << YAML::Key << "sigma" << YAML::Value << Shortest(s.workload.sigma)
      << YAML::Key << "zipf_s" << YAML::Value << Shortest(s.workload.zipf_s) << YAML::Key << "drift"
      << YAML::Value << Shortest(s.workload.drift) << YAML::Key << "noise" << YAML::Value
      << s.workload.noise;
  out << YAML::Key << "phases" << YAML::Value << YAML::BeginSeq;
  for (const PhaseChange& p : s.workload.phases) {
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "step" << YAML::Value << p.step << YAML::Key
        << "shuffle" << YAML::Value << Shortest(p.shuffle) << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::Key << "trace" << YAML::Value << s.workload.trace << YAML::EndMap;
  out << YAML::Key << "eplb" << YAML::Value << YAML::BeginMap << YAML::Key << "window_size"
      << YAML::Value << s.eplb.window_size << YAML::Key << "step_interval" << YAML::Value
      << s.eplb.step_interval << YAML::Key << "num_redundant_experts" << YAML::Value
      << s.eplb.num_redundant_experts << YAML::Key << "policy" << YAML::Value << s.eplb.policy
      << YAML::Key << "use_async" << YAML::Value << s.eplb.use_async << YAML::Key
      << "layers_per_step" << YAML::Value << s.eplb.layers_per_step << YAML::Key << "staging_layers"
      << YAML::Value << s.eplb.staging_layers << YAML::Key << "sender_rule" << YAML::Value
      << SenderRuleName(s.eplb.sender_rule) << YAML::Key << "schedule" << YAML::Value
      << ScheduleStrategyName(s.eplb.schedule) << YAML::Key << "preserve_slots" << YAML::Value
      << s.eplb.preserve_slots << YAML::Key << "migration_weight" << YAML::Value
      << Shortest(s.eplb.migration_weight) << YAML::Key << "max_moves_per_layer" << YAML::Value
      << s.eplb.max_moves_per_layer << YAML::Key << "lost_tokens" << YAML::Value
      << (s.eplb.lost_tokens == EplbSpec::LostTokens::kDrop ? "drop" : "wait") << YAML::EndMap;
  out << YAML::Key << "faults" << YAML::Value << YAML::BeginSeq;
  for (const FaultSpec& f : s.faults) {
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "kind" << YAML::Value
        << FaultKindName(f.kind) << YAML::Key << "step" << YAML::Value << f.step;
    if (f.until != std::numeric_limits<int>::max())
      out << YAML::Key << "until" << YAML::Value << f.until;
    if (f.rank >= 0) out << YAML::Key << "rank" << YAML::Value << f.rank;
    if (f.node >= 0) out << YAML::Key << "node" << YAML::Value << f.node;
    if (f.kind == FaultKind::kLinkDegraded) {
      out << YAML::Key << "link" << YAML::Value
          << (f.link == LinkClass::kNvlink ? "nvlink" : "nic");
    }
    if (f.kind == FaultKind::kScale) out << YAML::Key << "gpus" << YAML::Value << f.gpus;
    if (f.kind == FaultKind::kStraggler || f.kind == FaultKind::kLinkDegraded)
      out << YAML::Key << "factor" << YAML::Value << Shortest(f.factor);
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "run" << YAML::Value << YAML::BeginMap << YAML::Key << "steps" << YAML::Value
      << s.run.steps << YAML::Key << "seed" << YAML::Value
      << static_cast<unsigned long long>(s.run.seed) << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

Result<Scenario> WithFault(const Scenario& scenario, const FaultSpec& fault) {
  Scenario with = scenario;
  with.faults.push_back(fault);
  // Through the text, so that the one validation applies.
  auto parsed = ParseScenario(ScenarioToYaml(with), scenario.source);
  if (!parsed.ok()) return parsed.status();
  parsed->base_dir = scenario.base_dir;
  return parsed;
}

}  // namespace eplb
