// Output folders written whole (WriteFolderAtomically), and the leftovers of killed writers.
// The rule everywhere: eplb deletes only what it can prove it wrote. A folder it is replacing
// loses the files its manifest lists and nothing else; a leftover partial folder goes only when
// eplb's marker in it names that very folder; whatever else is there is named and kept.
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/folder_internal.h"
#include "eplb/base/file_io.h"
#include "eplb/base/interrupt.h"

namespace eplb {
namespace fs = std::filesystem;
using internal::Errno;
using internal::FolderEntries;
using internal::kPartialMarkerName;
using internal::ListEntries;

namespace {

// This machine's name, which partial folders carry: on a shared file system (an MPI or Slurm
// sweep) a PID is only meaningful on the machine that owns it.
std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "host";
  std::string out(name);
  for (char& c : out) {
    if (c == '/' || c == '-') c = '_';
  }
  return out;
}

// A PID as eplb writes one into a partial folder's name: decimal digits, no sign, no leading
// zero. Anything else (01234, +12, 1e3) is a name eplb never wrote.
std::optional<pid_t> ParsePid(std::string_view text) {
  if (text.empty() || text.size() > 10 || text.front() == '0') return std::nullopt;
  int64_t pid = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    pid = pid * 10 + (c - '0');
  }
  if (pid > INT32_MAX) return std::nullopt;
  return static_cast<pid_t>(pid);
}

bool ProcessIsGone(pid_t pid) {
  return ::kill(pid, 0) != 0 && errno == ESRCH;
}

// The states a marker names. A new partial folder is marked before fill writes anything into
// it; an old folder is marked the moment an exchange has moved it aside to be removed.
enum class Marked { kFilling, kReplaced };

constexpr std::string_view kFillingHeader = "eplb partial folder";
constexpr std::string_view kReplacedHeader = "eplb replaced folder";

std::string MarkerText(Marked state, std::string_view kind, pid_t pid) {
  return fmt::format("{}\nkind\t{}\nhost\t{}\npid\t{}\n",
                     state == Marked::kFilling ? kFillingHeader : kReplacedHeader, kind, HostName(),
                     pid);
}

// What a folder named DIR.partial-HOST-PID is, as far as eplb can prove it wrote it.
enum class Leftover {
  kUnproven,    // no marker of eplb's naming this folder: named and kept
  kEmpty,       // nothing in it: killed between making the folder and its marker
  kMarkerOnly,  // an empty marker and nothing else: killed between making the marker and its write
  kFilling,     // a partial folder eplb was filling: everything in it is eplb's
  kReplaced,    // an old folder moved aside: eplb's are its manifest's files
};

Leftover Classify(const fs::path& folder, pid_t pid) {
  const fs::path marker = folder / kPartialMarkerName;
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(marker, ec))) {
    // An empty folder holds nothing of anyone's: removing it loses nothing, and a kill between
    // making the folder and writing its marker leaves one.
    return fs::is_empty(folder, ec) && !ec ? Leftover::kEmpty : Leftover::kUnproven;
  }
  auto text = ReadTextFile(marker.string(), 4096);
  if (!text.ok()) return Leftover::kUnproven;
  if (text->empty()) {
    // The marker is written in one small write, so a kill leaves it empty or whole; empty, fill
    // had not begun, and the marker is all there may be.
    auto entries = ListEntries(folder);
    const bool alone = entries.ok() && entries->folders.empty() && entries->files.size() == 1;
    return alone ? Leftover::kMarkerOnly : Leftover::kUnproven;
  }
  std::vector<std::string> lines;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  const std::string kind_line = lines.size() == 4 ? lines[1] : "";
  if (kind_line.rfind("kind\t", 0) != 0) return Leftover::kUnproven;
  const std::string kind = kind_line.substr(5);
  for (const Marked state : {Marked::kFilling, Marked::kReplaced}) {
    if (*text == MarkerText(state, kind, pid)) {
      return state == Marked::kFilling ? Leftover::kFilling : Leftover::kReplaced;
    }
  }
  return Leftover::kUnproven;
}

// True when no step of `relative` under `folder` is a symbolic link: a listed file is removed
// only inside the folder, never through a link the folder holds.
bool InsideWithoutLinks(const fs::path& folder, const fs::path& relative) {
  fs::path at = folder;
  std::error_code ec;
  for (const fs::path& step : relative) {
    at /= step;
    if (fs::is_symlink(fs::symlink_status(at, ec))) return false;
  }
  return true;
}

// Removes from an eplb-marked old folder what its manifest lists, the manifest and the marker,
// then the folders left empty. Returns what is left (nothing when the folder is gone).
std::vector<std::string> RemoveListed(const fs::path& folder) {
  std::error_code ec;
  auto manifest = internal::ParseFolderManifest(folder.string());
  if (manifest.ok()) {
    for (const FolderManifest::File& f : manifest->files) {
      const fs::path path = folder / f.path;
      if (InsideWithoutLinks(folder, f.path) && fs::is_regular_file(fs::symlink_status(path, ec))) {
        fs::remove(path, ec);
      }
    }
  }
  // The manifest before the marker: a kill between the two leaves a marked folder that still
  // says which of its files are eplb's.
  fs::remove(folder / kManifestName, ec);
  fs::remove(folder / kPartialMarkerName, ec);
  auto entries = ListEntries(folder);
  if (!entries.ok()) return {folder.string()};
  // Deepest first; fs::remove takes a folder only when it is empty.
  for (auto it = entries->folders.rbegin(); it != entries->folders.rend(); ++it) {
    fs::remove(folder / *it, ec);
  }
  fs::remove(folder, ec);
  if (!fs::exists(fs::symlink_status(folder, ec))) return {};
  auto left = ListEntries(folder);
  if (!left.ok()) return {folder.string()};
  std::vector<std::string> kept = left->files;
  for (const std::string& f : left->folders) kept.push_back(f + "/");
  return kept;
}

std::string SomeEntries(const std::vector<std::string>& entries) {
  const size_t shown = std::min<size_t>(entries.size(), 5);
  return fmt::format(
      "{}{}",
      fmt::join(entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(shown), ", "),
      entries.size() > shown ? ", ..." : "");
}

// Removes the folder named like DIR.partial-HOST-PID as far as it is provably eplb's. Empty when
// it is gone; otherwise why it (or part of it) was kept, for the caller to say.
std::string RemoveLeftover(const fs::path& folder, pid_t pid) {
  std::error_code ec;
  switch (Classify(folder, pid)) {
    case Leftover::kFilling:
      fs::remove_all(folder, ec);
      return ec ? fmt::format("cannot remove it: {}", ec.message()) : "";
    case Leftover::kMarkerOnly:
      fs::remove(folder / kPartialMarkerName, ec);
      fs::remove(folder, ec);
      return ec ? fmt::format("cannot remove it: {}", ec.message()) : "";
    case Leftover::kEmpty:
      fs::remove(folder, ec);  // rmdir: should a file have appeared since, it stays
      return ec ? fmt::format("cannot remove it: {}", ec.message()) : "";
    case Leftover::kReplaced: {
      const std::vector<std::string> left = RemoveListed(folder);
      if (left.empty()) return "";
      return fmt::format(
          "eplb removed the files it wrote there; {} {} eplb did not write ({}), so {} kept",
          left.size(), left.size() == 1 ? "entry" : "entries", SomeEntries(left),
          left.size() == 1 ? "it is" : "they are");
    }
    case Leftover::kUnproven:
      break;
  }
  return fmt::format(
      "it is named like the leftover of a killed eplb run, but holds no {} marker of eplb's "
      "naming it (a finished folder, even one with a {}, may be yours), so it is kept",
      kPartialMarkerName, kManifestName);
}

// Removes DIR.partial-HOST-PID folders left by this machine's processes that were killed, as far
// as they are provably eplb's; what is not is named on stderr and kept.
void RemoveStalePartials(const fs::path& dir) {
  const fs::path parent = dir.parent_path().empty() ? fs::path(".") : dir.parent_path();
  const std::string prefix = dir.filename().string() + ".partial-" + HostName() + "-";
  std::error_code ec;
  std::vector<std::pair<fs::path, pid_t>> stale;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) != 0 || !fs::is_directory(it->symlink_status(ec))) continue;
    const std::optional<pid_t> pid = ParsePid(std::string_view(name).substr(prefix.size()));
    if (pid && ProcessIsGone(*pid)) stale.emplace_back(it->path(), *pid);
  }
  for (const auto& [folder, pid] : stale) {
    // Its PID may have been given to another eplb writing DIR since the listing.
    if (!ProcessIsGone(pid)) continue;
    const std::string kept = RemoveLeftover(folder, pid);
    if (!kept.empty()) {
      fmt::print(stderr, "eplb: kept {}: {}; remove it yourself if it is not yours\n",
                 folder.string(), kept);
    }
  }
}

// OK when DIR may be replaced: absent, or an eplb `kind` folder holding only its manifest's files.
Status CheckReplaceable(const std::string& dir, const std::string& kind) {
  std::error_code ec;
  // A link is the user's, and the exchange would swap the link itself away.
  if (fs::is_symlink(fs::symlink_status(dir, ec))) {
    return Status::InvalidArgument(fmt::format(
        "{} is a symbolic link{}; eplb writes its folder at --out itself: give the link's "
        "target, or another --out",
        dir, fs::exists(dir, ec) ? "" : " to nothing"));
  }
  if (!fs::exists(dir, ec)) return Status::Ok();
  if (!fs::is_directory(dir, ec)) {
    return Status::InvalidArgument(
        fmt::format("{} exists and is not a folder; choose another --out", dir));
  }
  auto manifest = ReadFolderManifest(dir);
  if (!manifest.ok()) {
    if (manifest.status().code() != Status::Code::kNotFound) return manifest.status();
    EPLB_ASSIGN_OR_RETURN(const FolderEntries entries, ListEntries(dir));
    if (entries.files.empty() && entries.folders.empty()) return Status::Ok();  // nothing to lose
    return Status::InvalidArgument(fmt::format(
        "{} exists and is not a finished eplb folder (no {}); eplb replaces only folders it "
        "wrote: choose another --out, or move it away",
        dir, kManifestName));
  }
  if (manifest->kind != kind) {
    return Status::InvalidArgument(
        fmt::format("{} is an eplb {} folder, not a {} folder; choose another --out", dir,
                    manifest->kind, kind));
  }
  EPLB_ASSIGN_OR_RETURN(const FolderEntries entries, ListEntries(dir));
  std::set<std::string> known{kManifestName};
  std::set<std::string> known_folders;  // those holding a file eplb wrote
  for (const auto& f : manifest->files) {
    known.insert(f.path);
    for (fs::path p = fs::path(f.path).parent_path(); !p.empty(); p = p.parent_path()) {
      known_folders.insert(p.generic_string());
    }
  }
  std::vector<std::string> foreign;
  for (const std::string& f : entries.files) {
    if (!known.count(f)) foreign.push_back(f);
  }
  for (const std::string& f : entries.folders) {
    if (!known_folders.count(f)) foreign.push_back(f + "/");
  }
  if (!foreign.empty()) {
    std::sort(foreign.begin(), foreign.end());
    const size_t shown = std::min<size_t>(foreign.size(), 5);
    return Status::InvalidArgument(fmt::format(
        "{} holds {} {} eplb did not write ({}{}); eplb never deletes them: move them away or "
        "choose another --out",
        dir, foreign.size(), foreign.size() == 1 ? "entry" : "entries",
        fmt::join(foreign.begin(), foreign.begin() + static_cast<std::ptrdiff_t>(shown), ", "),
        foreign.size() > shown ? ", ..." : ""));
  }
  return Status::Ok();
}

// Puts `partial` at `dir`; afterwards `partial` holds the old folder, if there was one.
Status Exchange(const std::string& partial, const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    if (::rename(partial.c_str(), dir.c_str()) != 0) {
      return Status::IoError(fmt::format("{}: cannot rename into place: {}", dir, Errno()));
    }
    return Status::Ok();
  }
  if (::renameat2(AT_FDCWD, partial.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) == 0) {
    return Status::Ok();
  }
  if (errno != EINVAL && errno != ENOSYS) {
    return Status::IoError(fmt::format("{}: cannot exchange with {}: {}", dir, partial, Errno()));
  }
  // A file system without atomic exchange: two renames, the old folder whole at every instant
  // (at DIR, then at DIR.old-PID).
  const std::string old = dir + ".old-" + std::to_string(::getpid());
  if (::rename(dir.c_str(), old.c_str()) != 0) {
    return Status::IoError(fmt::format("{}: cannot move aside: {}", dir, Errno()));
  }
  if (::rename(partial.c_str(), dir.c_str()) != 0) {
    const std::string why = Errno();
    ::rename(old.c_str(), dir.c_str());
    return Status::IoError(fmt::format("{}: cannot rename into place: {}", dir, why));
  }
  return ::rename(old.c_str(), partial.c_str()) == 0
             ? Status::Ok()
             : Status::IoError(fmt::format("{}: cannot remove the old folder: {}", old, Errno()));
}

// Removes the old folder an exchange moved to `partial` (nothing when DIR was new): marks it
// first, so that a kill midway leaves a leftover the next write finishes removing, then removes
// the files its manifest lists. A file that appeared in it since the check is named and kept.
void RemoveReplaced(const std::string& partial, const std::string& kind) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(partial, ec))) return;
  // Unmarked (the write failed), the removal below still takes only what the manifest lists.
  (void)WriteTextFile(partial + "/" + kPartialMarkerName,
                      MarkerText(Marked::kReplaced, kind, ::getpid()));
  const std::vector<std::string> left = RemoveListed(partial);
  if (!left.empty()) {
    fmt::print(stderr,
               "eplb: kept {}: the folder it replaced held {} eplb did not write ({}) by the time "
               "it was removed\n",
               partial, left.size() == 1 ? "an entry" : fmt::format("{} entries", left.size()),
               SomeEntries(left));
  }
}

// DIR without a trailing separator or dot segments, as the partial name is built from it.
// DIR without "." and ".." steps or a trailing "/". A folder that names no folder of its own
// (".", "..", "/") is refused: its partial folder would be written inside it.
Result<std::string> CleanFolderPath(const std::string& dir) {
  fs::path clean = fs::path(dir).lexically_normal();
  if (clean.filename().empty() && clean != clean.root_path()) clean = clean.parent_path();
  const std::string name = clean.filename().string();
  if (name.empty() || name == "." || name == "..") {
    return Status::InvalidArgument(fmt::format(
        "--out '{}' names no folder of its own; eplb writes a new folder and puts it in place "
        "whole: give it a name, e.g. {}",
        dir, (clean / "results").lexically_normal().string()));
  }
  return clean.string();
}

}  // namespace

Status CheckOutputFolder(const std::string& dir, const std::string& kind) {
  EPLB_ASSIGN_OR_RETURN(const std::string clean, CleanFolderPath(dir));
  return CheckReplaceable(clean, kind);
}

Status WriteFolderAtomically(const std::string& dir, const std::string& kind,
                             const std::function<Status(const std::string&)>& fill) {
  EPLB_ASSIGN_OR_RETURN(const std::string clean, CleanFolderPath(dir));
  RemoveStalePartials(clean);
  EPLB_RETURN_IF_ERROR(CheckReplaceable(clean, kind));
  const std::string partial = clean + ".partial-" + HostName() + "-" + std::to_string(::getpid());
  std::error_code ec;
  // Our own name, left by an earlier process with this PID: removed only as far as it is eplb's.
  if (fs::exists(fs::symlink_status(partial, ec))) {
    const std::string kept = fs::is_directory(fs::symlink_status(partial, ec))
                                 ? RemoveLeftover(partial, ::getpid())
                                 : "it is not a folder";
    if (!kept.empty()) {
      return Status::InvalidArgument(fmt::format(
          "{} exists and is not an eplb leftover: {}; eplb writes its partial folder there and "
          "never deletes what it did not write: move it away",
          partial, kept));
    }
  }
  if (!fs::create_directories(partial, ec) && ec) {
    return Status::IoError(fmt::format("{}: cannot create: {}", partial, ec.message()));
  }
  std::optional<ScopedCleanupFolder> cleanup(std::in_place, partial);
  const std::string marker = partial + "/" + kPartialMarkerName;
  Status s = WriteTextFile(marker, MarkerText(Marked::kFilling, kind, ::getpid()));
  if (s.ok()) s = fill(partial);
  if (s.ok()) s = CheckInterrupt();
  if (s.ok()) s = WriteFolderManifest(partial, kind);
  // The manifest marks the folder now; the marker is no file of the result.
  if (s.ok() && ::unlink(marker.c_str()) != 0) {
    s = Status::IoError(fmt::format("{}: cannot remove: {}", marker, Errno()));
  }
  if (s.ok()) {
    auto commit = CommitLock();
    s = CheckInterrupt();
    // Again: the folder may have changed while fill ran.
    if (s.ok()) s = CheckReplaceable(clean, kind);
    if (s.ok()) s = Exchange(partial, clean);
    if (s.ok()) {
      // The partial name now holds the old folder, which an interruption must not remove
      // whole: only the files eplb listed in it go, and under the lock, so the watcher waits.
      cleanup.reset();
      RemoveReplaced(partial, kind);
    }
  }
  if (!s.ok()) {
    fs::remove_all(partial, ec);
    if (s.code() == Status::Code::kCancelled) {
      return Status::Cancelled(fmt::format("{}; {} left as it was", s.message(), clean));
    }
    return s.WithSuffix(fs::exists(clean, ec)
                            ? fmt::format("; nothing was replaced: {} is as it was", clean)
                            : fmt::format("; nothing was written at {}", clean));
  }
  return Status::Ok();
}

}  // namespace eplb
