// Reading eplb's folders from Python: a run folder, checked whole by the C++ reader
// (io/run_folder.h), with each CSV table as typed numpy columns, so that the package never
// parses the files again nor guesses their types.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include <fmt/format.h>

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

// The manifest of the eplb `kind` folder at `dir` (any kind when empty), once the folder is shown
// to be exactly what eplb wrote: the manifest whole and every file it lists of the size and
// checksum written (ReadFolderManifest), and nothing in the folder that it does not list. The
// manifest vouches only for the files it names, so a folder whose manifest lists none, or
// leaves out a file a reader opens, would otherwise be read unchecked; and eplb writes no
// symbolic links, so one inside the folder (which could point anywhere) is refused.
Result<FolderManifest> CheckFolderWhole(const std::string& dir, const std::string& kind) {
  namespace fs = std::filesystem;
  auto manifest = ReadFolderManifest(dir);
  if (manifest.status().code() == Status::Code::kNotFound) {
    return Status::InvalidArgument(fmt::format(
        "{}: not a finished eplb folder (no {}: eplb writes it last)", dir, kManifestName));
  }
  if (!manifest.ok()) return manifest.status();
  if (!kind.empty() && manifest->kind != kind) {
    return Status::InvalidArgument(
        fmt::format("{}: an eplb {} folder, not a {} folder", dir, manifest->kind, kind));
  }
  std::set<std::string> listed{kManifestName};
  for (const FolderManifest::File& f : manifest->files) listed.insert(f.path);
  std::vector<std::string> unlisted;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::file_status status = it->symlink_status(ec);
    if (ec) break;
    // Lexically: a link's entry is the link's own name, never what it points to.
    const std::string path = it->path().lexically_relative(dir).generic_string();
    if (fs::is_symlink(status)) {
      return Status::InvalidArgument(
          fmt::format("{}: {} is a symbolic link; eplb writes none, so the folder was changed "
                      "after eplb wrote it",
                      dir, path));
    }
    if (!fs::is_directory(status) && !listed.count(path)) unlisted.push_back(path);
  }
  if (ec) return Status::IoError(fmt::format("{}: cannot list: {}", dir, ec.message()));
  if (!unlisted.empty()) {
    std::sort(unlisted.begin(), unlisted.end());
    const size_t shown = std::min<size_t>(unlisted.size(), 3);
    return Status::InvalidArgument(fmt::format(
        "{}: {}{} {} not listed in {}: the folder was changed after eplb wrote it", dir,
        fmt::join(unlisted.begin(), unlisted.begin() + static_cast<std::ptrdiff_t>(shown), ", "),
        unlisted.size() > shown ? fmt::format(" and {} more", unlisted.size() - shown) : "",
        unlisted.size() == 1 ? "is" : "are", kManifestName));
  }
  return manifest;
}

FolderManifest CheckedManifest(const std::string& dir, const std::string& kind) {
  std::optional<Result<FolderManifest>> manifest;
  {
    py::gil_scoped_release release;
    manifest = CheckFolderWhole(dir, kind);
  }
  if (!manifest->ok()) throw py::value_error(manifest->status().message());
  return std::move(**manifest);
}

}  // namespace

void BindFolders(py::module_& m) {
  m.def(
      "read_run_tables",
      [](const std::string& dir) {
        CheckedManifest(dir, "run");
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
