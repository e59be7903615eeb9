// Every reader that takes a path, given a symbolic link of its kind's name to a file of another
// kind (a key, /etc/shadow, a .env): the file is refused unread, so the error cannot depend on
// what the file holds. Each input is written to `secret` (no extension) and read through
// scenario.yaml, load.csv, load.json, placement.json, figures.yaml and recorded.jsonl, each a
// link to it (one level) or to a link to it (two); the message must equal the one for an empty
// file.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "eplb/formats/load_file.h"
#include "eplb/io/placement_files.h"
#include "eplb/io/recorded_placements.h"
#include "eplb/io/scenario_file.h"
#include "eplb/usecases/published.h"
#include "fuzz_checks.h"

namespace fs = std::filesystem;

namespace {

const fs::path& Dir() {
  static const fs::path dir = [] {
    std::string pattern = (fs::temp_directory_path() / "eplb-fuzz-linked-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    fs::path d(pattern);
    fs::create_symlink("secret", d / "hop");  // the second level of the two-level links
    std::atexit([] { fs::remove_all(Dir()); });
    return d;
  }();
  return dir;
}

void WriteSecret(const std::string& bytes) {
  std::ofstream(Dir() / "secret", std::ios::binary | std::ios::trunc) << bytes;
}

// Each reader's message for the file behind `link`, or "" when it read the file (never, here).
std::vector<std::string> Messages(const std::string& target) {
  using Reader = std::function<eplb::Status(const std::string&)>;
  const std::vector<std::pair<const char*, Reader>> readers = {
      {"scenario.yaml", [](const std::string& p) { return eplb::LoadScenarioFile(p).status(); }},
      {"load.csv", [](const std::string& p) { return eplb::ReadLoadSeries(p).status(); }},
      {"load.json", [](const std::string& p) { return eplb::ReadLoadSeries(p).status(); }},
      {"placement.json",
       [](const std::string& p) { return eplb::ReadAnyPlacementFile(p).status(); }},
      {"figures.yaml", [](const std::string& p) { return eplb::LoadPublishedFigures(p).status(); }},
      {"recorded.jsonl",
       [](const std::string& p) { return eplb::ReadRecording(p, "recorded").status(); }},
  };
  std::vector<std::string> out;
  for (const auto& [name, read] : readers) {
    const fs::path link = Dir() / name;
    fs::remove(link);
    fs::create_symlink(target, link);
    const eplb::Status status = read(link.string());
    eplb_fuzz::CheckQuoting(status);
    if (status.ok()) __builtin_trap();  // a file of no kind's name was read
    out.push_back(status.message());
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<std::string> empty_direct = [] {
    WriteSecret("");
    return Messages("secret");
  }();
  static const std::vector<std::string> empty_hop = [] {
    WriteSecret("");
    return Messages("hop");
  }();
  WriteSecret(std::string(reinterpret_cast<const char*>(data), size));
  if (Messages("secret") != empty_direct || Messages("hop") != empty_hop) __builtin_trap();
  return 0;
}
