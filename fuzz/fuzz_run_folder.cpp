// The run-folder reader (compare, sweep, validate and the viewer read every run through it).
// An input is a folder as text: sections "==> NAME\n" followed by the file's contents. Without a
// manifest.tsv section one is written for the files given, so that inputs reach the files' own
// readers; with one, the manifest's reader is fuzzed too.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "eplb/base/file_io.h"
#include "eplb/io/run_folder.h"

namespace fs = std::filesystem;

namespace {

bool SafeName(std::string_view name) {
  if (name.empty() || name.size() > 64 || name == "." || name == "..") return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) {
      return false;
    }
  }
  return true;
}

}  // namespace

// The folder each input is written into, removed when the fuzzer exits.
struct Scratch {
  fs::path root = fs::temp_directory_path() / fmt::format("eplb-fuzz-run-{}", ::getpid());
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
};

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Scratch scratch;
  static const fs::path dir = scratch.root / "run";
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  bool has_manifest = false;
  for (size_t pos = text.find("==> "); pos != std::string_view::npos;) {
    const size_t name_end = text.find('\n', pos);
    if (name_end == std::string_view::npos) break;
    const std::string name(text.substr(pos + 4, name_end - pos - 4));
    const size_t next = text.find("\n==> ", name_end);
    const std::string_view body =
        text.substr(name_end + 1, next == std::string_view::npos ? std::string_view::npos
                                                                 : next + 1 - (name_end + 1));
    if (SafeName(name) && eplb::WriteTextFile((dir / name).string(), std::string(body)).ok()) {
      has_manifest = has_manifest || name == eplb::kManifestName;
    }
    pos = next == std::string_view::npos ? next : next + 1;
  }
  if (!has_manifest) (void)eplb::WriteFolderManifest(dir.string(), "run");
  (void)eplb::ReadRunFolder(dir.string());
  return 0;
}
