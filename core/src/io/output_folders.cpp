#include "eplb/io/output_folders.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "eplb/base/csv.h"
#include "eplb/base/excerpt.h"
#include "eplb/formats/json.h"
#include "eplb/io/run_folder.h"

namespace eplb {
namespace {

using Json = nlohmann::ordered_json;
namespace file = folder_file;

// The prefix of a run of several seeds below its policy's or point's folder.
constexpr std::string_view kSeedPrefix = "seed-";

std::string SeedPath(std::string base, std::optional<uint64_t> seed) {
  if (seed) base += fmt::format("/{}{}", kSeedPrefix, *seed);
  return base;
}

Status WriteStudyFiles(const std::string& partial, const StudyFiles& files, const char* json_name,
                       const char* rows_key, const char* csv_name) {
  EPLB_RETURN_IF_ERROR(WriteTextFile(partial + "/" + file::kScenario, files.scenario_yaml));
  EPLB_RETURN_IF_ERROR(WriteTextFile(partial + "/" + csv_name, files.table_csv));
  EPLB_RETURN_IF_ERROR(WriteTextFile(partial + "/" + file::kReport, files.report_html));
  const Json doc{{"tool", ToolVersion()},
                 {"format_version", kFolderFormatVersion},
                 {"scenario", files.scenario_name},
                 {rows_key, files.rows}};
  return WriteTextFile(partial + "/" + json_name, doc.dump(2) + "\n");
}

// `text` as a seed when it is the decimal a writer gives one (no sign, no leading zero).
std::optional<uint64_t> SeedOf(std::string_view text) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string_view::npos) {
    return std::nullopt;
  }
  int64_t seed = 0;
  if (!ParseCsvInt64(std::string(text), seed) || std::to_string(seed) != text) return std::nullopt;
  return static_cast<uint64_t>(seed);
}

// The study folder at DIR of `kind`, its document NAME read and its version checked, with the
// run folders its manifest lists: per first path (LABEL, or points/I), its seeds.
Result<StudyFolder> ReadStudy(const std::string& dir, const char* kind, const char* name,
                              std::map<std::string, std::vector<uint64_t>>& seeds,
                              std::vector<std::string>& plain) {
  EPLB_ASSIGN_OR_RETURN(const FolderManifest manifest, ReadWholeFolder(dir, kind));
  StudyFolder study;
  study.dir = dir;
  const std::string path = dir + "/" + name;
  EPLB_ASSIGN_OR_RETURN(const std::string text, ReadTextFile(path));
  EPLB_RETURN_IF_ERROR(ParseJson(text, path).status());  // its errors, and its depth limit
  study.document = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!study.document.is_object()) {
    return Status::InvalidArgument(fmt::format("{}: expected a JSON object", path));
  }
  // Every study folder eplb wrote says its format: one without is not eplb's document.
  if (!study.document.contains("format_version")) {
    return Status::InvalidArgument(fmt::format(
        "{}: no format_version; eplb writes it in every study document (this eplb writes {})", path,
        kFolderFormatVersion));
  }
  const Json version = study.document["format_version"];
  if (!version.is_number_integer() || version.get<int64_t>() < 0) {
    return Status::InvalidArgument(
        fmt::format("{}: format_version is {}; expected a whole number (this eplb writes {})", path,
                    Excerpt(version.dump()), kFolderFormatVersion));
  }
  if (version.get<int64_t>() > kFolderFormatVersion) {
    return Status::InvalidArgument(fmt::format(
        "{}: format_version {} is newer than this eplb reads ({}); read it with the eplb that "
        "wrote it ({})",
        path, Excerpt(version.dump()), kFolderFormatVersion,
        Excerpt(study.document.value("tool", Json("unknown")).dump())));
  }
  // A run folder is one whose manifest the folder's manifest lists: BASE/manifest.tsv, or
  // BASE/seed-S/manifest.tsv.
  const std::string manifest_name = std::string("/") + kManifestName;
  for (const FolderManifest::File& f : manifest.files) {
    if (f.path.size() <= manifest_name.size() ||
        f.path.compare(f.path.size() - manifest_name.size(), manifest_name.size(), manifest_name) !=
            0) {
      continue;
    }
    const std::string run = f.path.substr(0, f.path.size() - manifest_name.size());
    const size_t slash = run.rfind('/');
    if (slash != std::string::npos &&
        run.compare(slash + 1, kSeedPrefix.size(), kSeedPrefix) == 0) {
      if (auto seed = SeedOf(std::string_view(run).substr(slash + 1 + kSeedPrefix.size()))) {
        seeds[run.substr(0, slash)].push_back(*seed);
        continue;
      }
    }
    plain.push_back(run);
  }
  for (auto& [base, list] : seeds) std::sort(list.begin(), list.end());
  return study;
}

// The document's list of rows (`key`: "policies" or "points"): present and not empty, as eplb
// writes it; a study of nothing is no study.
Result<Json> StudyRows(const StudyFolder& study, const std::string& path, const char* key) {
  const Json rows = study.document.value(key, Json());
  if (!rows.is_array() || rows.empty()) {
    return Status::InvalidArgument(
        fmt::format("{}: {} is {}; expected a non-empty array, one entry per {} the study ran",
                    path, key, rows.is_null() ? std::string("missing") : Excerpt(rows.dump()),
                    std::string_view(key) == "points" ? "point" : "policy"));
  }
  return rows;
}

}  // namespace

std::string ComparisonRunPath(std::string_view label, std::optional<uint64_t> seed) {
  return SeedPath(std::string(label), seed);
}

std::string SweepRunPath(size_t point, std::optional<uint64_t> seed) {
  return SeedPath(fmt::format("{}/{}", file::kSweepPoints, point), seed);
}

Status WriteComparisonFiles(const std::string& partial, const StudyFiles& files) {
  return WriteStudyFiles(partial, files, file::kComparisonJson, "policies", file::kComparisonCsv);
}

Status WriteSweepFiles(const std::string& partial, const StudyFiles& files) {
  return WriteStudyFiles(partial, files, file::kSweepJson, "points", file::kSweepCsv);
}

Result<StudyFolder> ReadComparisonFolder(const std::string& dir) {
  std::map<std::string, std::vector<uint64_t>> seeds;
  std::vector<std::string> plain;
  EPLB_ASSIGN_OR_RETURN(StudyFolder study,
                        ReadStudy(dir, kComparisonFolderKind, file::kComparisonJson, seeds, plain));
  const std::string path = dir + "/" + file::kComparisonJson;
  EPLB_ASSIGN_OR_RETURN(const Json policies, StudyRows(study, path, "policies"));
  for (const Json& row : policies) {
    const Json label = row.is_object() ? row.value("label", Json()) : Json();
    if (!label.is_string() || !IsSafePathComponent(label.get<std::string>())) {
      return Status::InvalidArgument(fmt::format(
          "{}: policy label {} names no folder of the comparison", path, Excerpt(label.dump())));
    }
    const std::string name = label.get<std::string>();
    // Two rows of one label would read one folder as two policies' results.
    if (std::any_of(study.runs.begin(), study.runs.end(),
                    [&](const StudyFolder::Runs& r) { return r.name == name; })) {
      return Status::InvalidArgument(
          fmt::format("{}: policy label '{}' is given twice; each policy has one row", path, name));
    }
    StudyFolder::Runs runs{name, seeds[name], false};
    runs.found = !runs.seeds.empty() || std::find(plain.begin(), plain.end(), name) != plain.end();
    if (!runs.found) {
      return Status::InvalidArgument(
          fmt::format("{}: {} names policy '{}' but {}/ holds no run folder", dir,
                      file::kComparisonJson, name, name));
    }
    study.runs.push_back(std::move(runs));
  }
  return study;
}

Result<StudyFolder> ReadSweepFolder(const std::string& dir) {
  std::map<std::string, std::vector<uint64_t>> seeds;
  std::vector<std::string> plain;
  EPLB_ASSIGN_OR_RETURN(StudyFolder study,
                        ReadStudy(dir, kSweepFolderKind, file::kSweepJson, seeds, plain));
  const std::string path = dir + "/" + file::kSweepJson;
  EPLB_ASSIGN_OR_RETURN(const Json points, StudyRows(study, path, "points"));
  // Each point's runs lie in points/I, and a sweep writes every point's: the document and the
  // folders must describe the same points.
  size_t folders = plain.size();
  for (const auto& [base, list] : seeds) folders += list.empty() ? 0 : 1;
  for (size_t i = 0; i < points.size(); ++i) {
    const std::string base = SweepRunPath(i, std::nullopt);
    StudyFolder::Runs runs{std::to_string(i), seeds[base], false};
    runs.found = !runs.seeds.empty() || std::find(plain.begin(), plain.end(), base) != plain.end();
    if (!runs.found) {
      return Status::InvalidArgument(fmt::format(
          "{}: {} lists {} points, but {}/ holds no run folder (the folder holds {} points' runs)",
          dir, file::kSweepJson, points.size(), base, folders));
    }
    study.runs.push_back(std::move(runs));
  }
  if (folders != points.size()) {
    return Status::InvalidArgument(
        fmt::format("{}: {} lists {} points, but the folder holds run folders of {}", dir,
                    file::kSweepJson, points.size(), folders));
  }
  return study;
}

Status WriteValidationFolder(const std::string& dir, const RunResult& measured,
                             const RunResult& simulated, const std::string& table,
                             const nlohmann::ordered_json& document) {
  return WriteFolderAtomically(dir, kValidationFolderKind, [&](const std::string& p) {
    EPLB_RETURN_IF_ERROR(WriteRunFolder(p + "/" + file::kMeasuredRun, measured));
    EPLB_RETURN_IF_ERROR(WriteRunFolder(p + "/" + file::kSimulatedRun, simulated));
    EPLB_RETURN_IF_ERROR(WriteTextFile(p + "/" + file::kValidationTxt, table));
    return WriteTextFile(p + "/" + file::kValidationJson, document.dump(2) + "\n");
  });
}

Status WritePublishedFolder(const std::string& dir, const std::string& table,
                            const std::string& json) {
  return WriteFolderAtomically(dir, kPublishedFolderKind, [&](const std::string& p) {
    EPLB_RETURN_IF_ERROR(WriteTextFile(p + "/" + file::kPublishedTxt, table));
    return WriteTextFile(p + "/" + file::kPublishedJson, json);
  });
}

}  // namespace eplb
