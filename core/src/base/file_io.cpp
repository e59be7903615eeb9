#include "eplb/base/file_io.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace eplb {
namespace fs = std::filesystem;

Result<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::IoError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::IoError(fmt::format("{}: read failed", path));
  return ss.str();
}

Status WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) return Status::IoError(fmt::format("{}: write failed", path));
  return Status::Ok();
}

Status WriteFolderAtomically(const std::string& dir, const std::string& kind,
                             const std::string& marker,
                             const std::function<Status(const std::string&)>& fill) {
  const std::string partial = dir + ".partial-" + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(partial, ec);
  if (!fs::create_directories(partial, ec) && ec) {
    return Status::IoError(fmt::format("{}: cannot create: {}", partial, ec.message()));
  }
  Status s = fill(partial);
  if (s.ok() && fs::exists(dir) && !fs::exists(fs::path(dir) / marker)) {
    s = Status::InvalidArgument(fmt::format(
        "{} exists and is not an eplb {} folder (no {}); choose another --out", dir, kind, marker));
  }
  if (!s.ok()) {
    fs::remove_all(partial, ec);
    return s;
  }
  fs::remove_all(dir, ec);
  fs::rename(partial, dir, ec);
  if (ec)
    return Status::IoError(fmt::format("{}: cannot rename into place: {}", dir, ec.message()));
  return Status::Ok();
}

int64_t PeakRssBytes() {
  struct rusage usage {};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

}  // namespace eplb
