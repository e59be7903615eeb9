// Every folder eplb writes, defined once, as LevelDB's filename.h defines its files: each kind
// (the word its manifest names it by), the names of its files, where a study's runs lie in it,
// and its one writer and one reader. The commands, the viewer and the Python package reach a
// folder only through this module and io/run_folder.h (which defines what a run folder's files
// hold); no other code spells a folder kind or an output file's name.
//
//   run         eplb run, device-run       io/run_folder.h: WriteRunFolder, ReadRunFolder
//     scenario.yaml summary.json metrics.csv transfers.csv rearrangements.csv placements.jsonl
//     loads.jsonl layer_balancedness.csv gpu_memory.csv trace.json
//   comparison  eplb compare               studies/studies.h writes; ReadComparisonFolder
//     POLICY/ or POLICY/seed-S/ (run folders), comparison.json, comparison.csv, scenario.yaml,
//     report.html, figures/ (reports/report.h: WriteFigures)
//   sweep       eplb sweep                 studies/studies.h writes; ReadSweepFolder
//     points/I/ or points/I/seed-S/ (run folders), sweep.json, sweep.csv, scenario.yaml,
//     report.html, figures/
//   validation  eplb validate              WriteValidationFolder
//     measured/ simulated/ (run folders), validation.json, validation.txt
//   published   eplb validate --published  WritePublishedFolder
//     published.json, published.txt
//
// Every folder is written whole or not at all (base/file_io.h WriteFolderAtomically), its
// manifest.tsv last; every reader checks it whole first (ReadWholeFolder).
//
// Thread-safety: pure functions over values and files.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "eplb/base/file_io.h"
#include "eplb/base/status.h"
#include "eplb/engine/run_result.h"

namespace eplb {

// The folder kinds: the 'kind' line of a folder's manifest (base/file_io.h).
inline constexpr const char* kRunFolderKind = "run";
inline constexpr const char* kComparisonFolderKind = "comparison";
inline constexpr const char* kSweepFolderKind = "sweep";
inline constexpr const char* kValidationFolderKind = "validation";
inline constexpr const char* kPublishedFolderKind = "published";

// The files of the folders, relative to the folder.
namespace folder_file {
// A run folder's (io/run_folder.h says what each holds); scenario.yaml is also a comparison's
// and a sweep's, their base scenario.
inline constexpr const char* kScenario = "scenario.yaml";
inline constexpr const char* kSummary = "summary.json";
inline constexpr const char* kMetrics = "metrics.csv";
inline constexpr const char* kTransfers = "transfers.csv";
inline constexpr const char* kRearrangements = "rearrangements.csv";
inline constexpr const char* kPlacements = "placements.jsonl";
inline constexpr const char* kLoads = "loads.jsonl";
inline constexpr const char* kLayerBalancedness = "layer_balancedness.csv";
inline constexpr const char* kGpuMemory = "gpu_memory.csv";
inline constexpr const char* kTrace = "trace.json";
// A comparison's and a sweep's.
inline constexpr const char* kComparisonJson = "comparison.json";
inline constexpr const char* kComparisonCsv = "comparison.csv";
inline constexpr const char* kSweepJson = "sweep.json";
inline constexpr const char* kSweepCsv = "sweep.csv";
inline constexpr const char* kReport = "report.html";
inline constexpr const char* kFigures = "figures";     // the report's charts as SVG files
inline constexpr const char* kSweepPoints = "points";  // the sweep's run folders: SweepRunPath
// A validation's.
inline constexpr const char* kMeasuredRun = "measured";
inline constexpr const char* kSimulatedRun = "simulated";
inline constexpr const char* kValidationJson = "validation.json";
inline constexpr const char* kValidationTxt = "validation.txt";
// A published-figures folder's.
inline constexpr const char* kPublishedJson = "published.json";
inline constexpr const char* kPublishedTxt = "published.txt";
}  // namespace folder_file

// Where a study's runs lie in its folder: a comparison's policy LABEL ran once at LABEL, or once
// per seed at LABEL/seed-S; a sweep's point I at points/I, or points/I/seed-S.
std::string ComparisonRunPath(std::string_view label, std::optional<uint64_t> seed);
std::string SweepRunPath(size_t point, std::optional<uint64_t> seed);

// The files of a comparison or a sweep beside its runs (the figures are the report's to write:
// reports/report.h WriteFigures).
struct StudyFiles {
  std::string scenario_name;
  std::string scenario_yaml;                 // the base scenario, resolved
  std::vector<nlohmann::ordered_json> rows;  // comparison.json's "policies", sweep.json's "points"
  std::string table_csv;                     // comparison.csv, sweep.csv
  std::string report_html;
};

// Writes a comparison's (sweep's) files into PARTIAL, the folder WriteFolderAtomically fills:
// comparison.json (sweep.json) holds "tool", "format_version", "scenario" and the rows.
Status WriteComparisonFiles(const std::string& partial, const StudyFiles& files);
Status WriteSweepFiles(const std::string& partial, const StudyFiles& files);

// A comparison or sweep folder read back, checked whole (ReadWholeFolder) and its document's
// format version one this eplb reads.
// NOLINTNEXTLINE(bugprone-exception-escape): nlohmann's json may throw where it is made.
struct StudyFolder {
  std::string dir;
  nlohmann::ordered_json document;  // comparison.json or sweep.json, as written
  // Per policy (comparison.json's "label") or point (sweep.json's "point", from 0), in the
  // document's order, its runs as the manifest lists them (never by listing the folder): `found`
  // when its folder holds a run, `seeds` those of its runs at .../seed-S (empty: it ran once, at
  // ComparisonRunPath or SweepRunPath with no seed). A comparison whose policy has no run is
  // refused, and so is a sweep whose points and run folders differ.
  struct Runs {
    std::string name;  // the label, or the point's index
    std::vector<uint64_t> seeds;
    bool found = false;
  };
  std::vector<Runs> runs;
};
Result<StudyFolder> ReadComparisonFolder(const std::string& dir);
Result<StudyFolder> ReadSweepFolder(const std::string& dir);

// A validation folder: the device run, the simulation of it, and their comparison
// (usecases/validation.h), written at DIR whole.
Status WriteValidationFolder(const std::string& dir, const RunResult& measured,
                             const RunResult& simulated, const std::string& table,
                             const nlohmann::ordered_json& document);
// The published figures against the simulator (usecases/published.h), written at DIR whole.
Status WritePublishedFolder(const std::string& dir, const std::string& table,
                            const std::string& json);

}  // namespace eplb
