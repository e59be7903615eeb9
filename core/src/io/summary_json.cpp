// The one definition of summary.json's fields: SummaryFields and its helpers list each field's
// JSON path and where it lives in RunSummary, in the file's order. The writer builds the JSON
// from them and the reader checks and reads the same list, so a field cannot be written and
// forgotten by the reader, or read under another name.
#include "io/summary_json.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <string_view>
#include <type_traits>

#include <fmt/format.h>

#include "eplb/base/excerpt.h"
#include "eplb/formats/json.h"

namespace eplb::run_folder {
namespace {

using Json = nlohmann::ordered_json;
using Path = std::initializer_list<const char*>;

// Whether a reader must find a field. Fields added after folders were first written are
// optional: alone (kAddedLater), or with the object that holds them (kWithItsObject: when the
// object is there, all of its fields must be).
enum class Presence { kRequired, kAddedLater, kWithItsObject };

// The values a numeric field may hold, and how its error says so. Every number is finite, and an
// integer field within its type (RunSummary's int, int64 or bool, written 0 or 1). Each field's
// range is what eplb writes (Summarize): a reader that took more would show a balancedness of 5,
// a negative time, or a count cast to garbage. Text fields take any text (kAny).
struct Range {
  double min, max;
  const char* valid;  // what the error says is valid
};
constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr Range kAny{-kInfinity, kInfinity, "expected a finite number"};
// Times, counts, bytes and ratios of loads.
constexpr Range kNotNegative{0, kInfinity, "it is never negative"};
// A mean load over the largest (balancedness): 1 is perfect balance.
constexpr Range kBalancedness{0, 1, "a balancedness is within [0, 1]"};
// recovery_s: −1 when the recovery did not end within the run.
constexpr Range kRecoveryTime{-1, kInfinity,
                              "expected -1 (not within the run) or a time, never negative"};
// Sums and means of times and loads come out a few ulps past their bound (a mean of equal loads
// above their maximum, "−0" as −1e−17); the writer prints them at full precision, so the reader
// takes that much: eplb never writes a folder it refuses.
constexpr double kRounding = 1e-9;

// Each field of RunSummary `s` (const or not) as field(path, member, presence, range), in file
// order; the range is the field's valid values, checked by the reader (Range).
template <typename Summary, typename Field>
void SummaryFields(Summary& s, Field&& field) {
  using P = Presence;
  auto& r = s.rearrangements;
  auto& m = s.gpu_memory;
  field(Path{"scenario"}, s.scenario, P::kRequired, kAny);
  field(Path{"backend"}, s.backend, P::kRequired, kAny);
  field(Path{"steps"}, s.steps, P::kRequired, kNotNegative);
  field(Path{"simulated_s"}, s.simulated_s, P::kRequired, kNotNegative);
  // Written since statistics have a measured window and latencies; a folder from before has
  // neither: its statistics are over every step.
  field(Path{"measured", "rule"}, s.measured.rule, P::kWithItsObject, kAny);
  field(Path{"measured", "from_step"}, s.measured.from_step, P::kWithItsObject, kNotNegative);
  field(Path{"measured", "steps"}, s.measured.steps, P::kWithItsObject, kNotNegative);
  field(Path{"step_time_s", "mean"}, s.step_time_s.mean, P::kRequired, kNotNegative);
  field(Path{"step_time_s", "p50"}, s.step_time_s.p50, P::kRequired, kNotNegative);
  field(Path{"step_time_s", "p99"}, s.step_time_s.p99, P::kRequired, kNotNegative);
  field(Path{"step_time_s", "max"}, s.step_time_s.max, P::kRequired, kNotNegative);
  field(Path{"latency_s", "mean"}, s.latency_s.mean, P::kWithItsObject, kNotNegative);
  field(Path{"latency_s", "p50"}, s.latency_s.p50, P::kWithItsObject, kNotNegative);
  field(Path{"latency_s", "p99"}, s.latency_s.p99, P::kWithItsObject, kNotNegative);
  field(Path{"latency_s", "p999"}, s.latency_s.p999, P::kWithItsObject, kNotNegative);
  field(Path{"latency_s", "max"}, s.latency_s.max, P::kWithItsObject, kNotNegative);
  field(Path{"latency_s", "worst_step"}, s.latency_s.worst_step, P::kWithItsObject, kNotNegative);
  // Decode runs only (RunSummary::decode).
  field(Path{"inter_token_latency_s", "p50"}, s.inter_token_latency_s.p50, P::kWithItsObject,
        kNotNegative);
  field(Path{"inter_token_latency_s", "p99"}, s.inter_token_latency_s.p99, P::kWithItsObject,
        kNotNegative);
  field(Path{"inter_token_latency_s", "p999"}, s.inter_token_latency_s.p999, P::kWithItsObject,
        kNotNegative);
  field(Path{"idle_step_time_s_mean"}, s.idle_step_time_s_mean, P::kRequired, kNotNegative);
  field(Path{"slowed_s"}, s.slowed_s, P::kRequired, kNotNegative);
  field(Path{"stalled_s"}, s.stalled_s, P::kRequired, kNotNegative);
  field(Path{"balancedness", "mean"}, s.balancedness.mean, P::kRequired, kBalancedness);
  field(Path{"balancedness", "min"}, s.balancedness.min, P::kRequired, kBalancedness);
  field(Path{"imbalance_ratio", "mean"}, s.imbalance_ratio.mean, P::kRequired, kNotNegative);
  field(Path{"imbalance_ratio", "max"}, s.imbalance_ratio.max, P::kRequired, kNotNegative);
  field(Path{"rearrangements", "started"}, r.started, P::kRequired, kNotNegative);
  field(Path{"rearrangements", "completed"}, r.completed, P::kRequired, kNotNegative);
  field(Path{"rearrangements", "skipped"}, r.skipped, P::kRequired, kNotNegative);
  // Written since the balance gate exists; a folder from before held none.
  field(Path{"rearrangements", "held"}, r.held, P::kAddedLater, kNotNegative);
  field(Path{"rearrangements", "makespan_s_mean"}, r.makespan_s_mean, P::kRequired, kNotNegative);
  field(Path{"rearrangements", "predicted_makespan_s_mean"}, r.predicted_makespan_s_mean,
        P::kRequired, kNotNegative);
  field(Path{"rearrangements", "lower_bound_s_mean"}, r.lower_bound_s_mean, P::kRequired,
        kNotNegative);
  field(Path{"rearrangements", "policy_ms_mean"}, r.policy_ms_mean, P::kRequired, kNotNegative);
  // Written since the engines' orchestration is priced (migration.engine); a folder from before
  // paid none.
  auto& e = r.engine_s_mean;
  field(Path{"rearrangements", "engine_s_mean", "once"}, e.once, P::kWithItsObject, kNotNegative);
  field(Path{"rearrangements", "engine_s_mean", "planning"}, e.planning, P::kWithItsObject,
        kNotNegative);
  field(Path{"rearrangements", "engine_s_mean", "transfer"}, e.transfer, P::kWithItsObject,
        kNotNegative);
  field(Path{"rearrangements", "engine_s_mean", "barrier"}, e.barrier, P::kWithItsObject,
        kNotNegative);
  field(Path{"rearrangements", "engine_s_mean", "polling"}, e.polling, P::kWithItsObject,
        kNotNegative);
  field(Path{"rearrangements", "engine_s_mean", "writeback"}, e.writeback, P::kWithItsObject,
        kNotNegative);
  // Written since GPU memory is modelled; a folder from before has none.
  field(Path{"gpu_memory", "capacity_bytes"}, m.capacity, P::kWithItsObject, kNotNegative);
  field(Path{"gpu_memory", "resident_bytes"}, m.resident, P::kWithItsObject, kNotNegative);
  field(Path{"gpu_memory", "dense_weights_bytes"}, m.dense_weights, P::kWithItsObject,
        kNotNegative);
  field(Path{"gpu_memory", "expert_weights_bytes"}, m.expert_weights, P::kWithItsObject,
        kNotNegative);
  field(Path{"gpu_memory", "kv_cache_bytes"}, m.kv_cache, P::kWithItsObject, kNotNegative);
  field(Path{"gpu_memory", "reserved_bytes"}, m.reserved, P::kWithItsObject, kNotNegative);
  // The headroom when no budget is set: negative for a scenario whose model does not fit, which
  // only a run that skipped CheckGpuMemory (a test's loop) writes.
  field(Path{"gpu_memory", "staging_budget_bytes"}, m.staging_budget, P::kWithItsObject, kAny);
  field(Path{"gpu_memory", "staging_peak_bytes"}, m.staging_peak, P::kWithItsObject, kNotNegative);
  field(Path{"gpu_memory", "peak_bytes"}, m.peak, P::kWithItsObject, kNotNegative);
  field(Path{"bytes_moved", "nvlink"}, s.bytes_moved_nvlink, P::kRequired, kNotNegative);
  field(Path{"bytes_moved", "nic"}, s.bytes_moved_nic, P::kRequired, kNotNegative);
  field(Path{"transfers"}, s.transfers, P::kRequired, kNotNegative);
  field(Path{"wall_s"}, s.wall_s, P::kRequired, kNotNegative);
  field(Path{"peak_rss_bytes"}, s.peak_rss_bytes, P::kRequired, kNotNegative);
}

// Each entry of summary.json's "faults" list. The "recovery" object is there for faults that
// change the GPUs (FaultEffect::changes_ranks) and only for them.
template <typename Fault, typename Field>
void FaultFields(Fault& f, Field&& field) {
  using P = Presence;
  field(Path{"kind"}, f.kind, P::kRequired, kAny);
  field(Path{"step"}, f.step, P::kRequired, kNotNegative);
  field(Path{"until"}, f.until, P::kRequired, kNotNegative);
  field(Path{"start_s"}, f.start_s, P::kRequired, kNotNegative);
  field(Path{"end_s"}, f.end_s, P::kRequired, kNotNegative);
  field(Path{"steps"}, f.steps, P::kRequired, kNotNegative);
  field(Path{"step_time_mean_s"}, f.step_time_mean_s, P::kRequired, kNotNegative);
  field(Path{"baseline_step_time_mean_s"}, f.baseline_step_time_mean_s, P::kRequired, kNotNegative);
  field(Path{"recovery", "recovery_s"}, f.recovery_s, P::kWithItsObject, kRecoveryTime);
  field(Path{"recovery", "bytes_reloaded"}, f.bytes_reloaded, P::kWithItsObject, kNotNegative);
  field(Path{"recovery", "bytes_copied"}, f.bytes_copied, P::kWithItsObject, kNotNegative);
  field(Path{"recovery", "tokens_lost"}, f.tokens_lost, P::kWithItsObject, kNotNegative);
  field(Path{"recovery", "tokens_stalled"}, f.tokens_stalled, P::kWithItsObject, kNotNegative);
  field(Path{"recovery", "stalled_s"}, f.stalled_s, P::kWithItsObject, kNotNegative);
  // A bool: 0 or 1 by its type.
  field(Path{"recovery", "cancelled_rearrangement"}, f.cancelled_rearrangement, P::kWithItsObject,
        kAny);
  field(Path{"recovery", "serving_gpus"}, f.serving_gpus, P::kWithItsObject, kNotNegative);
  field(Path{"recovery", "after_step_time_mean_s"}, f.after_step_time_mean_s, P::kWithItsObject,
        kNotNegative);
}

// Booleans are written as 0 or 1.
template <typename T>
auto JsonValue(const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? 1 : 0;
  } else {
    return v;
  }
}

void Put(Json& root, Path path, const Json& value) {
  Json* j = &root;
  for (const char* key : path) j = &(*j)[key];
  *j = value;
}

// Reads fields by their JSON path; a missing or mistyped one is named by it.
class FieldReader {
 public:
  FieldReader(const nlohmann::json& root, std::string where)
      : root_(root), where_(std::move(where)) {}

  // The object holding `path`'s last key, or null when some key on the way is missing.
  const nlohmann::json* Parent(Path path) const {
    const nlohmann::json* j = &root_;
    size_t depth = 0;
    for (const char* key : path) {
      if (++depth == path.size()) break;
      if (!j->is_object() || !j->contains(key)) return nullptr;
      j = &(*j)[key];
    }
    return j;
  }

  template <typename T>
  Status Get(Path path, T& out, Presence presence, const Range& range) {
    const nlohmann::json* parent = Parent(path);
    const char* last = *(path.end() - 1);
    const bool there = parent != nullptr && parent->is_object() && parent->contains(last);
    if (!there) {
      if (presence == Presence::kAddedLater) return Status::Ok();
      if (presence == Presence::kWithItsObject && parent == nullptr) return Status::Ok();
    }
    std::string name;
    for (const char* key : path) name += name.empty() ? key : std::string(".") + key;
    if (!there) {
      return Status::InvalidArgument(fmt::format("{}: field '{}' is missing", where_, name));
    }
    const nlohmann::json& j = (*parent)[last];
    constexpr bool kBool = std::is_same_v<T, bool>;
    const bool fits = std::is_same_v<T, std::string> ? j.is_string()
                      : std::is_floating_point_v<T>  ? j.is_number()
                                                     : j.is_number_integer();
    if (!fits) {
      return Status::InvalidArgument(fmt::format("{}: field '{}' is {}; expected {}", where_, name,
                                                 Excerpt(j.dump()), ExpectedKind<T>()));
    }
    if constexpr (!std::is_same_v<T, std::string>) {
      EPLB_RETURN_IF_ERROR(InRange<T>(j, name, range));
    }
    if constexpr (kBool) {
      out = j.get<int64_t>() != 0;
    } else {
      out = j.get<T>();
    }
    return Status::Ok();
  }

 private:
  template <typename T>
  static const char* ExpectedKind() {
    if constexpr (std::is_same_v<T, std::string>) return "a string";
    if constexpr (std::is_floating_point_v<T>) return "a number";
    return "an integer";
  }
  // OK when the number `j` is finite, within `range`, and (an integer) within T: checked on the
  // JSON's own value, before any conversion could wrap or truncate it (2^63 as int64, 1e10 as
  // int, 5 as a bool).
  template <typename T>
  Status InRange(const nlohmann::json& j, const std::string& name, const Range& range) const {
    // long double holds every int64 and uint64 exactly (x86's 64-bit mantissa, or binary128).
    const long double v = j.is_number_unsigned()  ? static_cast<long double>(j.get<uint64_t>())
                          : j.is_number_integer() ? static_cast<long double>(j.get<int64_t>())
                                                  : static_cast<long double>(j.get<double>());
    const auto refuse = [&](const std::string& valid) {
      // A number too large for a double (1e400) was read as inf, which dump() writes as null.
      const std::string value =
          std::isfinite(v) ? Excerpt(j.dump()) : fmt::format("{}", static_cast<double>(v));
      return Status::InvalidArgument(
          fmt::format("{}: field '{}' is {}; {}", where_, name, value, valid));
    };
    if (!std::isfinite(v)) return refuse(kAny.valid);
    if constexpr (std::is_integral_v<T>) {
      const long double lo = std::max<long double>(range.min, std::numeric_limits<T>::lowest());
      const long double hi = std::min<long double>(range.max, std::numeric_limits<T>::max());
      if (v < lo || v > hi) {
        // The field's own range says it, unless the type is what bounds it.
        if (v >= range.min && v <= range.max) {
          return refuse(fmt::format("expected an integer within [{}, {}]", static_cast<int64_t>(lo),
                                    static_cast<uint64_t>(hi)));
        }
        return refuse(range.valid);
      }
    } else {
      if (v < range.min - kRounding || v > range.max + kRounding) return refuse(range.valid);
    }
    return Status::Ok();
  }

  const nlohmann::json& root_;
  std::string where_;
};

}  // namespace

Json SummaryJson(const RunSummary& s) {
  Json out = {{"tool", ToolVersion()}, {"format_version", kFolderFormatVersion}};
  SummaryFields(s, [&](Path path, const auto& v, Presence, const Range&) {
    if (!s.decode && std::string_view(*path.begin()) == "inter_token_latency_s") return;
    Put(out, path, JsonValue(v));
  });
  Json faults = Json::array();
  for (const RunSummary::FaultEffect& f : s.faults) {
    Json j;
    FaultFields(f, [&](Path path, const auto& v, Presence presence, const Range&) {
      if (presence == Presence::kWithItsObject && !f.changes_ranks) return;
      Put(j, path, JsonValue(v));
    });
    faults.push_back(std::move(j));
  }
  out["faults"] = std::move(faults);
  return out;
}

Result<RunSummary> ParseSummary(const std::string& text, const std::string& file) {
  EPLB_ASSIGN_OR_RETURN(const nlohmann::json root, ParseJson(text, file));
  FieldReader r(root, file);
  int format_version = 0;
  if (root.contains("format_version")) {
    EPLB_RETURN_IF_ERROR(r.Get(Path{"format_version"}, format_version, Presence::kRequired, kAny));
    if (format_version > kFolderFormatVersion) {
      return Status::InvalidArgument(fmt::format(
          "{}: format_version is {}, written by a later eplb ({}); this one ({}) reads formats "
          "up to {}",
          file, format_version, root.value("tool", std::string("unnamed")), ToolVersion(),
          kFolderFormatVersion));
    }
  }
  RunSummary s;
  Status status;
  SummaryFields(s, [&](Path path, auto& v, Presence presence, const Range& range) {
    if (status.ok()) status = r.Get(path, v, presence, range);
  });
  EPLB_RETURN_IF_ERROR(status);
  // The least of the measured steps' balancedness is never above their mean.
  if (s.balancedness.min > s.balancedness.mean + kRounding) {
    return Status::InvalidArgument(fmt::format(
        "{}: field 'balancedness.min' is {}, above field 'balancedness.mean' ({}); the least "
        "step's balancedness is at most their mean",
        file, s.balancedness.min, s.balancedness.mean));
  }
  s.decode = root.contains("inter_token_latency_s");
  if (!root.contains("measured")) s.measured.rule = "";  // before windows: every step
  // Written since faults exist; a folder from before has none.
  if (root.contains("faults")) {
    const nlohmann::json& faults = root["faults"];
    if (!faults.is_array()) {
      return Status::InvalidArgument(
          fmt::format("{}: field 'faults' is {}; expected a list", file, faults.dump()));
    }
    for (size_t i = 0; i < faults.size(); ++i) {
      FieldReader fr(faults[i], fmt::format("{}: faults[{}]", file, i));
      RunSummary::FaultEffect f;
      FaultFields(f, [&](Path path, auto& v, Presence presence, const Range& range) {
        if (status.ok()) status = fr.Get(path, v, presence, range);
      });
      EPLB_RETURN_IF_ERROR(status);
      f.changes_ranks = faults[i].is_object() && faults[i].contains("recovery");
      s.faults.push_back(std::move(f));
    }
  }
  return s;
}

}  // namespace eplb::run_folder
