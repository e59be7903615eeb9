// The one definition of summary.json's fields: SummaryFields and its helpers list each field's
// JSON path and where it lives in RunSummary, in the file's order. The writer builds the JSON
// from them and the reader checks and reads the same list, so a field cannot be written and
// forgotten by the reader, or read under another name.
#include "io/summary_json.h"

#include <initializer_list>
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

// Each field of RunSummary `s` (const or not) as field(path, member, presence), in file order.
template <typename Summary, typename Field>
void SummaryFields(Summary& s, Field&& field) {
  using P = Presence;
  auto& r = s.rearrangements;
  auto& m = s.gpu_memory;
  field(Path{"scenario"}, s.scenario, P::kRequired);
  field(Path{"backend"}, s.backend, P::kRequired);
  field(Path{"steps"}, s.steps, P::kRequired);
  field(Path{"simulated_s"}, s.simulated_s, P::kRequired);
  // Written since statistics have a measured window and latencies; a folder from before has
  // neither: its statistics are over every step.
  field(Path{"measured", "rule"}, s.measured.rule, P::kWithItsObject);
  field(Path{"measured", "from_step"}, s.measured.from_step, P::kWithItsObject);
  field(Path{"measured", "steps"}, s.measured.steps, P::kWithItsObject);
  field(Path{"step_time_s", "mean"}, s.step_time_s.mean, P::kRequired);
  field(Path{"step_time_s", "p50"}, s.step_time_s.p50, P::kRequired);
  field(Path{"step_time_s", "p99"}, s.step_time_s.p99, P::kRequired);
  field(Path{"step_time_s", "max"}, s.step_time_s.max, P::kRequired);
  field(Path{"latency_s", "mean"}, s.latency_s.mean, P::kWithItsObject);
  field(Path{"latency_s", "p50"}, s.latency_s.p50, P::kWithItsObject);
  field(Path{"latency_s", "p99"}, s.latency_s.p99, P::kWithItsObject);
  field(Path{"latency_s", "p999"}, s.latency_s.p999, P::kWithItsObject);
  field(Path{"latency_s", "max"}, s.latency_s.max, P::kWithItsObject);
  field(Path{"latency_s", "worst_step"}, s.latency_s.worst_step, P::kWithItsObject);
  // Decode runs only (RunSummary::decode).
  field(Path{"inter_token_latency_s", "p50"}, s.inter_token_latency_s.p50, P::kWithItsObject);
  field(Path{"inter_token_latency_s", "p99"}, s.inter_token_latency_s.p99, P::kWithItsObject);
  field(Path{"inter_token_latency_s", "p999"}, s.inter_token_latency_s.p999, P::kWithItsObject);
  field(Path{"idle_step_time_s_mean"}, s.idle_step_time_s_mean, P::kRequired);
  field(Path{"slowed_s"}, s.slowed_s, P::kRequired);
  field(Path{"stalled_s"}, s.stalled_s, P::kRequired);
  field(Path{"balancedness", "mean"}, s.balancedness.mean, P::kRequired);
  field(Path{"balancedness", "min"}, s.balancedness.min, P::kRequired);
  field(Path{"imbalance_ratio", "mean"}, s.imbalance_ratio.mean, P::kRequired);
  field(Path{"imbalance_ratio", "max"}, s.imbalance_ratio.max, P::kRequired);
  field(Path{"rearrangements", "started"}, r.started, P::kRequired);
  field(Path{"rearrangements", "completed"}, r.completed, P::kRequired);
  field(Path{"rearrangements", "skipped"}, r.skipped, P::kRequired);
  // Written since the balance gate exists; a folder from before held none.
  field(Path{"rearrangements", "held"}, r.held, P::kAddedLater);
  field(Path{"rearrangements", "makespan_s_mean"}, r.makespan_s_mean, P::kRequired);
  field(Path{"rearrangements", "predicted_makespan_s_mean"}, r.predicted_makespan_s_mean,
        P::kRequired);
  field(Path{"rearrangements", "lower_bound_s_mean"}, r.lower_bound_s_mean, P::kRequired);
  field(Path{"rearrangements", "policy_ms_mean"}, r.policy_ms_mean, P::kRequired);
  // Written since GPU memory is modelled; a folder from before has none.
  field(Path{"gpu_memory", "capacity_bytes"}, m.capacity, P::kWithItsObject);
  field(Path{"gpu_memory", "resident_bytes"}, m.resident, P::kWithItsObject);
  field(Path{"gpu_memory", "dense_weights_bytes"}, m.dense_weights, P::kWithItsObject);
  field(Path{"gpu_memory", "expert_weights_bytes"}, m.expert_weights, P::kWithItsObject);
  field(Path{"gpu_memory", "kv_cache_bytes"}, m.kv_cache, P::kWithItsObject);
  field(Path{"gpu_memory", "reserved_bytes"}, m.reserved, P::kWithItsObject);
  field(Path{"gpu_memory", "staging_budget_bytes"}, m.staging_budget, P::kWithItsObject);
  field(Path{"gpu_memory", "staging_peak_bytes"}, m.staging_peak, P::kWithItsObject);
  field(Path{"gpu_memory", "peak_bytes"}, m.peak, P::kWithItsObject);
  field(Path{"bytes_moved", "nvlink"}, s.bytes_moved_nvlink, P::kRequired);
  field(Path{"bytes_moved", "nic"}, s.bytes_moved_nic, P::kRequired);
  field(Path{"transfers"}, s.transfers, P::kRequired);
  field(Path{"wall_s"}, s.wall_s, P::kRequired);
  field(Path{"peak_rss_bytes"}, s.peak_rss_bytes, P::kRequired);
}

// Each entry of summary.json's "faults" list. The "recovery" object is there for faults that
// change the GPUs (FaultEffect::changes_ranks) and only for them.
template <typename Fault, typename Field>
void FaultFields(Fault& f, Field&& field) {
  using P = Presence;
  field(Path{"kind"}, f.kind, P::kRequired);
  field(Path{"step"}, f.step, P::kRequired);
  field(Path{"until"}, f.until, P::kRequired);
  field(Path{"start_s"}, f.start_s, P::kRequired);
  field(Path{"end_s"}, f.end_s, P::kRequired);
  field(Path{"steps"}, f.steps, P::kRequired);
  field(Path{"step_time_mean_s"}, f.step_time_mean_s, P::kRequired);
  field(Path{"baseline_step_time_mean_s"}, f.baseline_step_time_mean_s, P::kRequired);
  field(Path{"recovery", "recovery_s"}, f.recovery_s, P::kWithItsObject);
  field(Path{"recovery", "bytes_reloaded"}, f.bytes_reloaded, P::kWithItsObject);
  field(Path{"recovery", "bytes_copied"}, f.bytes_copied, P::kWithItsObject);
  field(Path{"recovery", "tokens_lost"}, f.tokens_lost, P::kWithItsObject);
  field(Path{"recovery", "tokens_stalled"}, f.tokens_stalled, P::kWithItsObject);
  field(Path{"recovery", "stalled_s"}, f.stalled_s, P::kWithItsObject);
  field(Path{"recovery", "cancelled_rearrangement"}, f.cancelled_rearrangement, P::kWithItsObject);
  field(Path{"recovery", "serving_gpus"}, f.serving_gpus, P::kWithItsObject);
  field(Path{"recovery", "after_step_time_mean_s"}, f.after_step_time_mean_s, P::kWithItsObject);
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
  Status Get(Path path, T& out, Presence presence) {
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
  const nlohmann::json& root_;
  std::string where_;
};

}  // namespace

Json SummaryJson(const RunSummary& s) {
  Json out = {{"tool", ToolVersion()}, {"format_version", kFolderFormatVersion}};
  SummaryFields(s, [&](Path path, const auto& v, Presence) {
    if (!s.decode && std::string_view(*path.begin()) == "inter_token_latency_s") return;
    Put(out, path, JsonValue(v));
  });
  Json faults = Json::array();
  for (const RunSummary::FaultEffect& f : s.faults) {
    Json j;
    FaultFields(f, [&](Path path, const auto& v, Presence presence) {
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
    EPLB_RETURN_IF_ERROR(r.Get(Path{"format_version"}, format_version, Presence::kRequired));
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
  SummaryFields(s, [&](Path path, auto& v, Presence presence) {
    if (status.ok()) status = r.Get(path, v, presence);
  });
  EPLB_RETURN_IF_ERROR(status);
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
      FaultFields(f, [&](Path path, auto& v, Presence presence) {
        if (status.ok()) status = fr.Get(path, v, presence);
      });
      EPLB_RETURN_IF_ERROR(status);
      f.changes_ranks = faults[i].is_object() && faults[i].contains("recovery");
      s.faults.push_back(std::move(f));
    }
  }
  return s;
}

}  // namespace eplb::run_folder
