// The study-folder readers (comparisons and sweeps read back: Python's read_comparison and
// read_sweep, the report). An input is 'c' (a comparison) or 's' (a sweep), the document's text,
// then sections "==> PATH\n" naming the run folders' manifests the folder holds
// (static/manifest.tsv, points/1/seed-3/manifest.tsv). The folder's own manifest is written for
// what is there, so that inputs reach the document's reader rather than stop at the checksum.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "eplb/base/file_io.h"
#include "eplb/io/output_folders.h"

namespace fs = std::filesystem;

namespace {

// A relative path of at most 4 safe components: the fuzzer writes nowhere but its folder.
bool SafePath(std::string_view path) {
  if (path.empty() || path.size() > 128) return false;
  int components = 0;
  for (size_t start = 0; start <= path.size();) {
    const size_t slash = std::min(path.find('/', start), path.size());
    if (!eplb::IsSafePathComponent(path.substr(start, slash - start)) || ++components > 4) {
      return false;
    }
    start = slash + 1;
  }
  return true;
}

// The folder each input is written into, removed when the fuzzer exits.
struct Scratch {
  fs::path root = fs::temp_directory_path() / fmt::format("eplb-fuzz-study-{}", ::getpid());
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const Scratch scratch;
  static const fs::path dir = scratch.root / "study";
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  const bool comparison = data[0] == 'c';
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t first = text.find("\n==> ");
  const std::string document(text.substr(0, first));
  (void)eplb::WriteTextFile(
      (dir / (comparison ? eplb::folder_file::kComparisonJson : eplb::folder_file::kSweepJson))
          .string(),
      document);
  for (size_t pos = first; pos != std::string_view::npos;) {
    const size_t name_end = text.find('\n', pos + 1);
    const std::string_view name = text.substr(
        pos + 5, (name_end == std::string_view::npos ? text.size() : name_end) - (pos + 5));
    if (SafePath(name)) {
      fs::create_directories((dir / name).parent_path(), ec);
      (void)eplb::WriteTextFile((dir / name).string(), "x");
    }
    pos = name_end == std::string_view::npos ? name_end : text.find("\n==> ", name_end);
  }
  (void)eplb::WriteFolderManifest(
      dir.string(), comparison ? eplb::kComparisonFolderKind : eplb::kSweepFolderKind);
  if (comparison) {
    (void)eplb::ReadComparisonFolder(dir.string());
  } else {
    (void)eplb::ReadSweepFolder(dir.string());
  }
  return 0;
}
