// Reading eplb's folders from Python: a run folder, checked whole by the C++ reader
// (io/run_folder.h), with each CSV table as typed numpy columns, so that the package never
// parses the files again nor guesses their types.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "eplb/base/file_io.h"
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
        std::optional<Result<std::vector<RunFolderTable>>> tables;
        {
          py::gil_scoped_release release;
          tables = ReadRunFolderTables(dir);
        }
        if (!tables->ok()) throw py::value_error(tables->status().message());
        py::dict out;
        for (const RunFolderTable& table : **tables) {
          py::dict columns;  // in the file's order: dicts keep insertion order
          for (const RunFolderTable::Column& column : table.columns)
            columns[py::str(std::string(column.name))] = ColumnArray(column);
          std::string name(table.file);
          out[py::str(name.substr(0, name.size() - 4))] = columns;  // without ".csv"
        }
        return out;
      },
      py::arg("dir"),
      "The run folder at `dir`, checked whole as eplb's readers check it (manifest, format "
      "version, every field) and holding nothing its manifest does not list, as {table: {column: "
      "numpy array}}: integer columns int64, reals "
      "float64, names str, in each file's column order. ValueError names what is wrong.");
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
}

}  // namespace eplb::python
