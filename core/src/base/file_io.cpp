#include "eplb/base/file_io.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "base/folder_internal.h"
#include "eplb/base/checksum.h"
#include "eplb/base/csv.h"
#include "eplb/base/excerpt.h"
#include "eplb/base/interrupt.h"

namespace eplb {
namespace fs = std::filesystem;
using internal::Errno;
using internal::FolderEntries;
using internal::kPartialMarkerName;
using internal::ListEntries;
using internal::ParseFolderManifest;

namespace {

const char* FileTypeName(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a pipe";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

constexpr std::string_view kManifestHeader = "# eplb folder manifest v2";
// Folders written before files carried checksums: sizes only.
constexpr std::string_view kManifestHeaderV1 = "# eplb folder manifest v1";

}  // namespace

namespace internal {

Result<FolderEntries> ListEntries(const fs::path& dir) {
  FolderEntries out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const bool folder = fs::is_directory(it->symlink_status(ec));
    // Lexically: fs::relative resolves symbolic links, and a link's entry must be the link's
    // own name (one eplb did not write is then refused, never taken for what it points to).
    const std::string path = it->path().lexically_relative(dir).generic_string();
    (folder ? out.folders : out.files).push_back(path);
  }
  if (ec) return Status::IoError(fmt::format("{}: cannot list: {}", dir.string(), ec.message()));
  std::sort(out.files.begin(), out.files.end());
  std::sort(out.folders.begin(), out.folders.end());
  return out;
}

}  // namespace internal

namespace {

// The CRC-32 of a file's bytes, read in chunks.
Result<uint32_t> FileChecksum(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) return Status::IoError(fmt::format("{}: cannot open: {}", path, Errno()));
  uint32_t crc = 0;
  // 64 KiB: a few pages the kernel fills per read; a larger buffer costs more to allocate and
  // zero than it saves in reads (a manifest checksums every file of a folder).
  std::vector<char> buffer(1 << 16);
  while (true) {
    const ssize_t n = ::read(fd.get(), buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::IoError(fmt::format("{}: read failed: {}", path, Errno()));
    if (n == 0) break;
    crc = Crc32(std::string_view(buffer.data(), static_cast<size_t>(n)), crc);
  }
  return crc;
}

}  // namespace

Status WriteFolderManifest(const std::string& dir, const std::string& kind) {
  EPLB_ASSIGN_OR_RETURN(const FolderEntries entries, ListEntries(dir));
  std::string text = fmt::format("{}\nkind\t{}\n", kManifestHeader, kind);
  for (const std::string& f : entries.files) {
    if (f == kManifestName || f == kPartialMarkerName) continue;
    std::error_code ec;
    const auto bytes = fs::file_size(fs::path(dir) / f, ec);
    if (ec) return Status::IoError(fmt::format("{}/{}: {}", dir, f, ec.message()));
    EPLB_ASSIGN_OR_RETURN(const uint32_t checksum, FileChecksum(fmt::format("{}/{}", dir, f)));
    text += fmt::format("file\t{}\t{}\t{:08x}\n", f, bytes, checksum);
  }
  return WriteTextFile(dir + "/" + kManifestName, text);
}

bool IsSafePathComponent(std::string_view name) {
  if (name.empty() || name.size() > 100 || name.front() == '.') return false;
  // ASCII whatever the locale: a Latin-1 locale (Python sets one from the environment) would
  // take bytes past 0x7f for letters.
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-' || c == '+';
  });
}

Status ExpectFileKind(const std::string& path, std::string_view kind,
                      std::initializer_list<std::string_view> extensions) {
  // Folders, devices and missing paths get the reader's own, more precise message.
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return Status::Ok();
  const auto extension_of = [](const std::filesystem::path& p) {
    std::string ext = p.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return ext;
  };
  const auto of_kind = [&](const std::string& ext) {
    return std::find(extensions.begin(), extensions.end(), ext) != extensions.end();
  };
  const auto ends_in = [](const std::string& ext) {
    return ext.empty() ? std::string("has no extension")
                       : fmt::format("ends in {}", QuoteInput(ext));
  };
  std::vector<std::string_view> names(extensions);
  const std::string_view last = names.back();
  names.pop_back();
  const std::string expected =
      fmt::format("expected {}, a file named *{}{}{}", kind, fmt::join(names, ", *"),
                  names.empty() ? "" : " or *", last);
  // A path may come from a file (a figures file's scenario:): printable, never truncated.
  const std::string shown = Excerpt(path, path.size());
  const std::string ext = extension_of(path);
  if (!of_kind(ext)) {
    return Status::InvalidArgument(fmt::format("{}: {}; this one {}, so eplb does not read it",
                                               shown, expected, ends_in(ext)));
  }
  // A symbolic link is judged by the file it leads to, every level resolved: x.yaml -> /etc/shadow
  // is a shadow file, not a scenario. The file's own name must be of the kind too.
  const std::filesystem::path target = std::filesystem::canonical(path, ec);
  if (ec) return Status::Ok();  // gone since: the reader's open says so
  const std::string target_ext = extension_of(target.filename());
  if (!of_kind(target_ext)) {
    const std::string target_text = target.string();
    return Status::InvalidArgument(fmt::format(
        "{}: a symbolic link to {}; {}, and the file it links to {}, so eplb does not read it",
        shown, Excerpt(target_text, target_text.size()), expected, ends_in(target_ext)));
  }
  return Status::Ok();
}

Result<std::string> ReadTextFile(const std::string& path, int64_t max_bytes) {
  // O_NONBLOCK: opening a pipe must not wait for a writer; it is refused below.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) return Status::IoError(fmt::format("{}: cannot open: {}", path, Errno()));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return Status::IoError(fmt::format("{}: cannot stat: {}", path, Errno()));
  }
  if (!S_ISREG(st.st_mode)) {
    return Status::InvalidArgument(
        fmt::format("{} is {}; expected a regular file", path, FileTypeName(st.st_mode)));
  }
  const auto too_large = [&](int64_t size) {
    return Status::InvalidArgument(fmt::format("{} is {}; eplb reads input files of at most {}",
                                               path, FormatBytes(size), FormatBytes(max_bytes)));
  };
  if (st.st_size > max_bytes) return too_large(st.st_size);
  std::string text;
  text.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (true) {
    if (got == text.size()) {
      // The file may have grown since fstat (or /proc reports 0): read on, up to the cap.
      if (static_cast<int64_t>(got) > max_bytes) return too_large(static_cast<int64_t>(got));
      text.resize(
          std::min<size_t>(std::max<size_t>(got * 2, 4096), static_cast<size_t>(max_bytes) + 1));
    }
    const ssize_t n = ::read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::IoError(fmt::format("{}: read failed: {}", path, Errno()));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (static_cast<int64_t>(got) > max_bytes) return too_large(static_cast<int64_t>(got));
  text.resize(got);
  return text;
}

Status WriteTextFile(const std::string& path, const std::string& text) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) return Status::IoError(fmt::format("{}: cannot create: {}", path, Errno()));
  // A full disk or quota is the machine's state, not bad input: Unavailable (exit 1).
  const auto failed = [&] {
    return Status::Unavailable(fmt::format("{} while writing {}", Errno(), path));
  };
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return failed();
    done += static_cast<size_t>(n);
  }
  if (::close(fd.release()) != 0) return failed();  // NFS and quotas report on close
  return Status::Ok();
}

namespace {

bool ParseChecksum(const std::string& text, std::optional<uint32_t>& out) {
  if (text.size() != 8) return false;
  uint32_t v = 0;
  for (char c : text) {
    const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (digit < 0) return false;
    v = v << 4 | static_cast<uint32_t>(digit);
  }
  out = v;
  return true;
}

}  // namespace

namespace internal {

Result<FolderManifest> ParseFolderManifest(const std::string& dir) {
  const std::string path = dir + "/" + kManifestName;
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return Status::NotFound(
        fmt::format("{}: no {}: not a finished eplb folder", dir, kManifestName));
  }
  EPLB_ASSIGN_OR_RETURN(const std::string text, ReadTextFile(path, 64 << 20));
  FolderManifest m;
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  bool sizes_only = false;
  const auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(fmt::format("{}:{}: {}", path, line_no, why));
  };
  while (std::getline(in, line)) {
    ++line_no;
    if (line_no == 1) {
      if (line == kManifestHeaderV1) {
        sizes_only = true;
      } else if (line != kManifestHeader) {
        return bad(fmt::format("expected '{}'", kManifestHeader));
      }
      continue;
    }
    std::vector<std::string> f;
    std::istringstream fields(line);
    for (std::string field; std::getline(fields, field, '\t');) f.push_back(field);
    if (f.size() == 2 && f[0] == "kind") {
      m.kind = f[1];
    } else if (f.size() == (sizes_only ? 3u : 4u) && f[0] == "file") {
      int64_t bytes = -1;
      FolderManifest::File file{f[1], 0, std::nullopt};
      if (!ParseCsvInt64(f[2], bytes) || bytes < 0 || f[1].empty() ||
          f[1].find("..") != std::string::npos || f[1].front() == '/' ||
          (!sizes_only && !ParseChecksum(f[3], file.checksum))) {
        return bad(sizes_only ? "expected file<TAB>relative path<TAB>bytes"
                              : "expected file<TAB>relative path<TAB>bytes<TAB>8 hex digits");
      }
      file.bytes = bytes;
      m.files.push_back(std::move(file));
    } else {
      return bad(sizes_only ? "expected 'kind<TAB>KIND' or 'file<TAB>PATH<TAB>BYTES'"
                            : "expected 'kind<TAB>KIND' or 'file<TAB>PATH<TAB>BYTES<TAB>CRC32'");
    }
  }
  if (line_no == 0) {
    ++line_no;
    return bad("empty");
  }
  if (m.kind.empty()) return bad("no 'kind' line");
  return m;
}

}  // namespace internal

namespace {

// OK when every file `m` lists is in DIR, of the size and checksum it says.
Status VerifyFolderFiles(const std::string& dir, const FolderManifest& m) {
  std::error_code ec;
  for (const auto& f : m.files) {
    const fs::path p = fs::path(dir) / f.path;
    const auto size = fs::file_size(p, ec);
    if (ec) {
      return Status::InvalidArgument(fmt::format(
          "{}: {} lists {}, which is missing: the folder was changed after eplb wrote it", dir,
          kManifestName, f.path));
    }
    if (static_cast<int64_t>(size) != f.bytes) {
      return Status::InvalidArgument(fmt::format(
          "{}: {} is {} bytes but {} says {}: the file was truncated or changed after eplb "
          "wrote it",
          dir, f.path, size, kManifestName, f.bytes));
    }
    if (!f.checksum) continue;
    EPLB_ASSIGN_OR_RETURN(const uint32_t checksum, FileChecksum(p.string()));
    if (checksum != *f.checksum) {
      return Status::InvalidArgument(fmt::format(
          "{}: {} has checksum {:08x} but {} says {:08x}: the file was changed or replaced "
          "after eplb wrote it",
          dir, f.path, checksum, kManifestName, *f.checksum));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<FolderManifest> ReadFolderManifest(const std::string& dir) {
  EPLB_ASSIGN_OR_RETURN(FolderManifest m, ParseFolderManifest(dir));
  EPLB_RETURN_IF_ERROR(VerifyFolderFiles(dir, m));
  return m;
}

Result<FolderManifest> ReadWholeFolder(const std::string& dir, std::string_view kind) {
  std::error_code ec;
  // symlink_status: a manifest that is a link is there, and refused below as a link.
  if (!fs::exists(fs::symlink_status(fs::path(dir) / kManifestName, ec))) {
    return Status::NotFound(
        fmt::format("{}: not a finished eplb {}{}folder (no {}: eplb writes it "
                    "last)",
                    dir, kind, kind.empty() ? "" : " ", kManifestName));
  }
  // Links first, before any file is opened: nothing is read through one.
  std::vector<std::string> files, links;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::file_status status = it->symlink_status(ec);
    if (ec) break;
    // Lexically: a link's entry is the link's own name, never what it points to.
    const std::string path = it->path().lexically_relative(dir).generic_string();
    if (fs::is_symlink(status)) {
      links.push_back(path);
    } else if (!fs::is_directory(status)) {
      files.push_back(path);
    }
  }
  if (ec) return Status::IoError(fmt::format("{}: cannot list: {}", dir, ec.message()));
  const auto some = [](std::vector<std::string>& paths) {
    std::sort(paths.begin(), paths.end());
    const size_t shown = std::min<size_t>(paths.size(), 3);
    return fmt::format(
        "{}{}",
        Excerpt(
            fmt::format("{}", fmt::join(paths.begin(),
                                        paths.begin() + static_cast<std::ptrdiff_t>(shown), ", ")),
            1000),
        paths.size() > shown ? fmt::format(" and {} more", paths.size() - shown) : "");
  };
  if (!links.empty()) {
    return Status::InvalidArgument(fmt::format(
        "{}: {} {} a symbolic link{}; eplb writes none, so the folder was changed "
        "after eplb wrote it",
        dir, some(links), links.size() == 1 ? "is" : "are", links.size() == 1 ? "" : "s"));
  }
  EPLB_ASSIGN_OR_RETURN(FolderManifest m, ParseFolderManifest(dir));
  if (!kind.empty() && m.kind != kind) {
    return Status::InvalidArgument(
        fmt::format("{}: an eplb {} folder, not a {} folder", dir, Excerpt(m.kind), kind));
  }
  std::set<std::string> listed{kManifestName};
  for (const FolderManifest::File& f : m.files) listed.insert(f.path);
  std::vector<std::string> unlisted;
  for (const std::string& f : files) {
    if (!listed.count(f)) unlisted.push_back(f);
  }
  if (!unlisted.empty()) {
    return Status::InvalidArgument(
        fmt::format("{}: {} {} not listed in {}: the folder was changed after eplb wrote it", dir,
                    some(unlisted), unlisted.size() == 1 ? "is" : "are", kManifestName));
  }
  EPLB_RETURN_IF_ERROR(VerifyFolderFiles(dir, m));
  return m;
}

int64_t PeakRssBytes() {
  struct rusage usage {};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

int64_t PhysicalMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<int64_t>(pages) * page;
}

std::string FormatBytes(int64_t bytes) {
  constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return fmt::format("{} bytes", bytes);
  double v = static_cast<double>(bytes);
  int unit = -1;
  while (v >= 1024 && unit < 5) {
    v /= 1024;
    ++unit;
  }
  return v < 10 ? fmt::format("{:.1f} {}", v, kUnits[unit])
                : fmt::format("{:.0f} {}", v, kUnits[unit]);
}

}  // namespace eplb
