#include "eplb/io/figures_file.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "eplb/base/excerpt.h"
#include "eplb/base/file_io.h"
#include "io/yaml_document.h"

namespace eplb {

namespace {

constexpr std::array<const char*, 13> kMeasures = {"dispatch_gbps",
                                                   "combine_gbps",
                                                   "dispatch_us",
                                                   "combine_us",
                                                   "prefill_input_tokens_per_node_s",
                                                   "decode_output_tokens_per_node_s",
                                                   "decode_output_tokens_per_user_s",
                                                   "speedup",
                                                   "imbalance_ratio",
                                                   "gpu_load_std",
                                                   "slot_load_std",
                                                   "slot_imbalance_ratio",
                                                   "rearrangement_stall_s"};

std::string At(const std::string& path, const YAML::Node& n) {
  const YAML::Mark m = n.Mark();
  return m.is_null() ? path : fmt::format("{}:{}:{}", path, m.line + 1, m.column + 1);
}

// One figure's map: every field a scalar, required ones present, no others.
Result<PublishedFigure> ReadFigure(const YAML::Node& node, const std::string& path,
                                   const std::string& dir, size_t index) {
  const std::string where = fmt::format("figures[{}]", index);
  if (!node.IsMap()) {
    return Status::InvalidArgument(
        fmt::format("{}: {} is not a map of fields (id, figure, source, scenario, measure, "
                    "unit, published, ...)",
                    At(path, node), where));
  }
  static const std::set<std::string> kFields = {
      "id",     "figure", "source",    "scenario", "measure", "unit",   "published",
      "tokens", "mode",   "cache_hit", "note",     "set",     "versus", "tolerance_pct"};
  PublishedFigure f;
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar();
    if (!kFields.count(key)) {
      return Status::InvalidArgument(fmt::format("{}: unknown field '{}.{}'; valid fields: {}",
                                                 At(path, kv.first), where, Excerpt(key),
                                                 fmt::join(kFields, ", ")));
    }
    if (key == "set" || key == "versus") {
      if (!kv.second.IsSequence()) {
        return Status::InvalidArgument(
            fmt::format("{}: {}.{} must be a list of key.path=value settings", At(path, kv.second),
                        where, key));
      }
      for (const auto& item : kv.second) {
        if (!item.IsScalar()) {
          return Status::InvalidArgument(
              fmt::format("{}: {}.{} holds a non-text item; each is key.path=value", At(path, item),
                          where, key));
        }
        (key == "set" ? f.overrides : f.versus).push_back(item.Scalar());
      }
      continue;
    }
    if (!kv.second.IsScalar()) {
      return Status::InvalidArgument(
          fmt::format("{}: {}.{} must be a single value", At(path, kv.second), where, key));
    }
  }
  const auto text = [&](const char* key, std::string& out, bool required) -> Status {
    const YAML::Node v = node[key];
    if (!v) {
      return required ? Status::InvalidArgument(
                            fmt::format("{}: {} has no '{}'", At(path, node), where, key))
                      : Status::Ok();
    }
    out = v.Scalar();
    return Status::Ok();
  };
  // Every number within its documented range, and normal: a denormal or one near the largest
  // double turns the error % (or a step's time) into an infinity or a NaN that would be tabled.
  const auto number = [&](const char* key, double& out, double min, double max,
                          bool required) -> Status {
    std::string s;
    EPLB_RETURN_IF_ERROR(text(key, s, required));
    if (s.empty() && !required) return Status::Ok();
    double v = 0;
    if (!YAML::convert<double>::decode(node[key], v) || !std::isfinite(v) || v < min || v > max ||
        (v != 0 && !std::isnormal(v))) {
      return Status::InvalidArgument(
          fmt::format("{}: {}.{} (figure '{}') is '{}'; expected a number from {:.10g} to {:.10g}",
                      At(path, node[key]), where, key, Excerpt(f.id), Excerpt(s), min, max));
    }
    out = v;
    return Status::Ok();
  };
  EPLB_RETURN_IF_ERROR(text("id", f.id, true));
  EPLB_RETURN_IF_ERROR(text("figure", f.figure, true));
  EPLB_RETURN_IF_ERROR(text("source", f.source, true));
  EPLB_RETURN_IF_ERROR(text("scenario", f.scenario, true));
  EPLB_RETURN_IF_ERROR(text("measure", f.measure, true));
  EPLB_RETURN_IF_ERROR(text("unit", f.unit, true));
  EPLB_RETURN_IF_ERROR(text("note", f.note, false));
  EPLB_RETURN_IF_ERROR(
      number("published", f.published, kMinPublished, kMaxPublished, /*required=*/true));
  if (std::find(kMeasures.begin(), kMeasures.end(), f.measure) == kMeasures.end()) {
    return Status::InvalidArgument(fmt::format("{}: {}.measure is '{}'; valid measures: {}",
                                               At(path, node["measure"]), where, Excerpt(f.measure),
                                               fmt::join(kMeasures, ", ")));
  }
  if (f.measure == "speedup" && std::fabs(f.published - 1) < kMinPublishedGain) {
    return Status::InvalidArgument(fmt::format(
        "{}: {}.published (figure '{}') is {}; a speedup's error is on its gain, "
        "published − 1, so it must differ from 1 by at least {:g}",
        At(path, node["published"]), where, Excerpt(f.id), f.published, kMinPublishedGain));
  }
  if ((f.measure == "speedup") != node["versus"].IsDefined()) {
    return Status::InvalidArgument(fmt::format(
        "{}: {} {}; `versus:` (the second set-up's settings) goes with measure speedup alone",
        At(path, node), where,
        f.measure == "speedup" ? "measures a speedup but has no versus:"
                               : "has versus: but measures " + f.measure));
  }
  if (IsAllToAllMeasure(f.measure)) {
    double tokens = 0;
    EPLB_RETURN_IF_ERROR(number("tokens", tokens, 1, 1 << 30, /*required=*/true));
    if (tokens != std::floor(tokens)) {
      return Status::InvalidArgument(
          fmt::format("{}: {}.tokens is {}; expected a whole number of tokens per GPU, 1..2^30",
                      At(path, node["tokens"]), where, tokens));
    }
    f.tokens = static_cast<int>(tokens);
    std::string mode;
    EPLB_RETURN_IF_ERROR(text("mode", mode, true));
    auto m = ParseAllToAllMode(mode);
    if (!m.ok()) {
      return Status::InvalidArgument(
          fmt::format("{}: {}.mode: {}", At(path, node["mode"]), where, m.status().message()));
    }
    f.mode = *m;
  }
  EPLB_RETURN_IF_ERROR(number("cache_hit", f.cache_hit, 0, 1, /*required=*/false));
  EPLB_RETURN_IF_ERROR(
      number("tolerance_pct", f.tolerance_pct, 0, kMaxTolerancePct, /*required=*/false));
  if (f.cache_hit >= 1) {
    return Status::InvalidArgument(fmt::format("{}: {}.cache_hit is {}; it must be below 1",
                                               At(path, node["cache_hit"]), where, f.cache_hit));
  }
  f.scenario = (std::filesystem::path(dir) / f.scenario).string();
  return f;
}

}  // namespace

std::span<const char* const> PublishedMeasures() {
  return kMeasures;
}

bool IsAllToAllMeasure(const std::string& measure) {
  return measure.rfind("dispatch", 0) == 0 || measure.rfind("combine", 0) == 0;
}

Result<std::vector<PublishedFigure>> LoadPublishedFigures(const std::string& path) {
  EPLB_RETURN_IF_ERROR(ExpectFileKind(path, "a figures file", {".yaml", ".yml"}));
  EPLB_ASSIGN_OR_RETURN(const std::string text, ReadTextFile(path, 1 << 20));
  return ParsePublishedFigures(text, path);
}

Result<std::vector<PublishedFigure>> ParsePublishedFigures(const std::string& text,
                                                           const std::string& path) {
  EPLB_ASSIGN_OR_RETURN(YAML::Node root,
                        LoadOneYamlDocument(text, path, "a figures file", {"figures"}));
  if (!root.IsMap() || !root["figures"] || !root["figures"].IsSequence() || root.size() != 1) {
    return Status::InvalidArgument(
        fmt::format("{}: expected one field, 'figures', a list of figures", path));
  }
  const std::string dir = std::filesystem::path(path).parent_path().string();
  std::vector<PublishedFigure> figures;
  std::set<std::string> ids;
  try {
    for (size_t i = 0; i < root["figures"].size(); ++i) {
      EPLB_ASSIGN_OR_RETURN(PublishedFigure f,
                            ReadFigure(root["figures"][i], path, dir.empty() ? "." : dir, i));
      if (!ids.insert(f.id).second) {
        return Status::InvalidArgument(
            fmt::format("{}: figures[{}].id '{}' is given twice; ids name one figure each", path, i,
                        Excerpt(f.id)));
      }
      figures.push_back(std::move(f));
    }
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(
        fmt::format("{}: not a valid figures file: {}", path, YamlReason(e.msg)));
  }
  if (figures.empty()) return Status::InvalidArgument(fmt::format("{}: no figures", path));
  return figures;
}

}  // namespace eplb
