// Reading eplb's folders from Python: a run folder, a comparison and a sweep, each checked whole
// by the C++ reader (io/run_folder.h, io/output_folders.h), with each CSV table as typed numpy
// columns and each JSON document as Python values, so that the package never opens or parses a
// file of a folder itself nor guesses its types.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "eplb/base/file_io.h"
#include "eplb/io/output_folders.h"
#include "eplb/io/run_folder.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace eplb::python {
namespace {

template <typename T>
py::array_t<T> NumpyOf(const std::vector<T>& values) {
  py::array_t<T> out(static_cast<py::ssize_t>(values.size()));
  std::copy(values.begin(), values.end(), out.mutable_data());
  return out;
}

py::object ColumnArray(const RunFolderTable::Column& column) {
  using Kind = RunFolderTable::Column::Kind;
  switch (column.kind) {
    case Kind::kInteger:
      return NumpyOf(column.integers);
    case Kind::kReal:
      return NumpyOf(column.reals);
    case Kind::kText:
      break;
  }
  py::list texts;
  for (const std::string& t : column.texts) texts.append(py::str(t));
  return py::module_::import("numpy").attr("array")(texts, "dtype"_a = "str");
}

// A JSON value as Python's json module reads it: objects as dicts in the document's order,
// integers as int, reals as float.
py::object PythonOf(const nlohmann::ordered_json& j) {
  using V = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case V::null:
    case V::discarded:
      return py::none();
    case V::boolean:
      return py::bool_(j.get<bool>());
    case V::number_integer:
      return py::int_(j.get<int64_t>());
    case V::number_unsigned:
      return py::int_(j.get<uint64_t>());
    case V::number_float:
      return py::float_(j.get<double>());
    case V::string:
      return py::str(j.get_ref<const std::string&>());
    case V::array: {
      py::list out;
      for (const auto& e : j) out.append(PythonOf(e));
      return out;
    }
    case V::object: {
      py::dict out;
      for (auto it = j.begin(); it != j.end(); ++it) out[py::str(it.key())] = PythonOf(*it);
      return out;
    }
    case V::binary:
      break;
  }
  return py::none();
}

template <typename T, typename F>
T Released(F read) {
  std::optional<T> out;
  {
    py::gil_scoped_release release;
    out = read();
  }
  if (!(*out).ok()) throw py::value_error((*out).status().message());
  return std::move(*out);
}

py::dict TablesOf(const std::vector<RunFolderTable>& tables) {
  py::dict out;
  for (const RunFolderTable& table : tables) {
    py::dict columns;  // in the file's order: dicts keep insertion order
    for (const RunFolderTable::Column& column : table.columns)
      columns[py::str(std::string(column.name))] = ColumnArray(column);
    std::string name(table.file);
    out[py::str(name.substr(0, name.rfind('.')))] = columns;  // "metrics", without ".csv"
  }
  return out;
}

// A comparison or sweep as Python takes it: {"document": comparison.json or sweep.json,
// "runs": [(name, found, [seeds])]}.
py::dict StudyOf(const StudyFolder& study) {
  py::list runs;
  for (const StudyFolder::Runs& r : study.runs) {
    py::list seeds;
    for (const uint64_t s : r.seeds) seeds.append(py::int_(s));
    runs.append(py::make_tuple(r.name, r.found, seeds));
  }
  py::dict out;
  out["document"] = PythonOf(study.document);
  out["runs"] = runs;
  return out;
}

std::optional<uint64_t> SeedOf(const py::object& seed) {
  if (seed.is_none()) return std::nullopt;
  return seed.cast<uint64_t>();
}

// The manifest of the eplb `kind` folder at `dir` (any kind when empty), checked whole by the
// C++ readers' own check (ReadWholeFolder), so that Python refuses exactly what they refuse.
FolderManifest CheckedManifest(const std::string& dir, const std::string& kind) {
  std::optional<Result<FolderManifest>> manifest;
  {
    py::gil_scoped_release release;
    manifest = ReadWholeFolder(dir, kind);
  }
  if (!manifest->ok()) throw py::value_error(manifest->status().message());
  return std::move(**manifest);
}

}  // namespace

void BindFolders(py::module_& m) {
  m.def(
      "read_run_tables",
      [](const std::string& dir) {
        // ReadRunFolder checks the folder whole first, and every field in its range.
        return TablesOf(Released<Result<std::vector<RunFolderTable>>>([&] {
                          return ReadRunFolderTables(dir);
                        }).value());
      },
      py::arg("dir"),
      "The run folder at `dir`, checked whole as eplb's readers check it (manifest, format "
      "version, every field) and holding nothing its manifest does not list, as {table: {column: "
      "numpy array}}: integer columns int64, reals "
      "float64, names str, in each file's column order. ValueError names what is wrong.");
  m.def(
      "read_run",
      [](const std::string& dir) {
        const RunFolderDocuments docs = Released<Result<RunFolderDocuments>>([&] {
                                          return ReadRunFolderDocuments(dir);
                                        }).value();
        const RunResult& run = docs.folder.run;
        const Scenario& s = run.scenario;
        py::dict out;
        out["tables"] = TablesOf(docs.tables);
        out["summary"] = PythonOf(docs.summary);
        out["scenario_yaml"] = py::str(docs.scenario_yaml);
        out["facts"] = py::dict("seed"_a = py::int_(s.run.seed), "nodes"_a = s.cluster.nodes,
                                "gpus_per_node"_a = s.cluster.gpus_per_node,
                                "num_gpus"_a = s.num_gpus(), "layers"_a = s.model.layers,
                                "experts"_a = s.model.experts, "num_slots"_a = s.num_slots());
        // placements.jsonl's records in the file's order: the initial placements, then commits.
        py::list placements;
        const auto record = [&](int64_t step, double time_s, int64_t layer,
                                const std::vector<int32_t>& phy2log) {
          placements.append(py::dict(
              "step"_a = step, "time_s"_a = time_s, "layer"_a = layer,
              "phy2log"_a = NumpyOf(std::vector<int64_t>(phy2log.begin(), phy2log.end()))));
        };
        for (size_t l = 0; l < docs.folder.initial_phy2log.size(); ++l)
          record(-1, 0.0, static_cast<int64_t>(l), docs.folder.initial_phy2log[l]);
        for (const CommitRecord& c : run.commits) record(c.step, c.time_s, c.layer, c.phy2log);
        out["placements"] = placements;
        // loads.jsonl: None in folders written before it existed.
        if (docs.folder.has_loads) {
          const size_t w = docs.load_windows.size();
          std::vector<int64_t> steps;
          std::vector<double> times;
          py::array_t<double> load({static_cast<py::ssize_t>(w),
                                    static_cast<py::ssize_t>(s.model.layers),
                                    static_cast<py::ssize_t>(s.model.experts)});
          double* cell = load.mutable_data();
          for (size_t i = 0; i < w; ++i) {
            steps.push_back(docs.load_windows[i].step);
            times.push_back(docs.load_windows[i].time_s);
            for (const float v : run.rearrangements[i].window_load) *cell++ = v;
          }
          out["loads"] =
              py::dict("step"_a = NumpyOf(steps), "time_s"_a = NumpyOf(times), "load"_a = load);
        } else {
          out["loads"] = py::none();
        }
        return out;
      },
      py::arg("dir"),
      "The run folder at `dir`, checked whole as read_run_tables checks it, as a dict: tables "
      "(as read_run_tables), summary (summary.json), scenario_yaml (scenario.yaml's text), facts "
      "(the scenario's seed, nodes, gpus_per_node, num_gpus, layers, experts, num_slots), "
      "placements (placements.jsonl's records: step, time_s, layer, phy2log) and loads "
      "(loads.jsonl as step, time_s and load [windows, layers, experts] arrays; None when the "
      "folder has none). ValueError names what is wrong.");
  m.def(
      "read_comparison",
      [](const std::string& dir) {
        return StudyOf(
            Released<Result<StudyFolder>>([&] { return ReadComparisonFolder(dir); }).value());
      },
      py::arg("dir"),
      "The `eplb compare` folder at `dir`, checked whole: {'document': comparison.json, 'runs': "
      "[(label, found, seeds)]}, each policy's runs as its manifest lists them. ValueError names "
      "what is wrong.");
  m.def(
      "read_sweep",
      [](const std::string& dir) {
        return StudyOf(Released<Result<StudyFolder>>([&] { return ReadSweepFolder(dir); }).value());
      },
      py::arg("dir"),
      "The `eplb sweep` folder at `dir`, checked whole: {'document': sweep.json, 'runs': "
      "[(point, found, seeds)]}, each point's runs as its manifest lists them. ValueError names "
      "what is wrong.");
  m.def(
      "comparison_run_path",
      [](const std::string& label, const py::object& seed) {
        return ComparisonRunPath(label, SeedOf(seed));
      },
      py::arg("label"), py::arg("seed") = py::none(),
      "Where policy `label`'s run (of `seed`) lies in a comparison folder, relative to it.");
  m.def(
      "sweep_run_path",
      [](size_t point, const py::object& seed) { return SweepRunPath(point, SeedOf(seed)); },
      py::arg("point"), py::arg("seed") = py::none(),
      "Where point `point`'s run (of `seed`) lies in a sweep folder, relative to it.");
  m.def(
      "folder_kind", [](const std::string& dir) { return CheckedManifest(dir, "").kind; },
      py::arg("dir"),
      "The kind of the eplb folder at `dir` (run, comparison, sweep, validation), once its "
      "manifest shows every file whole (sizes and checksums) and the folder holds nothing the "
      "manifest does not list; ValueError otherwise.");
  m.def(
      "folder_files",
      [](const std::string& dir, const std::string& kind) {
        py::list out;
        for (const FolderManifest::File& f : CheckedManifest(dir, kind).files) out.append(f.path);
        return out;
      },
      py::arg("dir"), py::arg("kind"),
      "The files of the eplb `kind` folder at `dir` ('/'-separated, relative to it), as its "
      "manifest lists them, once the folder is checked whole as folder_kind checks it; "
      "ValueError otherwise. Readers find a folder's parts here, never by listing it.");
  m.def("is_safe_path_component", &IsSafePathComponent, py::arg("name"),
        "Whether `name` is one path component eplb writes folders under (letters, digits, "
        "'.', '_', '-', '+'; not starting with '.'), as for a policy's folder in a comparison.");
  m.attr("folder_format_version") = kFolderFormatVersion;
  // The folder kinds, as io/output_folders.h defines them (folder_files' `kind`).
  m.attr("run_folder_kind") = kRunFolderKind;
  m.attr("comparison_folder_kind") = kComparisonFolderKind;
  m.attr("sweep_folder_kind") = kSweepFolderKind;
  // A run folder's placements file, which a recording may name alone (eplb.recorded).
  m.attr("placements_file") = folder_file::kPlacements;
}

}  // namespace eplb::python
