// Whole-file reads and writes, and folders that appear whole or not at all.
//
// Thread-safety: the functions share no state; two calls on the same path race as the file
// system does.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "eplb/base/status.h"

namespace eplb {

// The largest input file eplb reads (2 GiB): what the formats' largest real inputs need with
// room to spare, and a bound on what a wrong path (/dev/zero, a disk image) can cost.
inline constexpr int64_t kMaxInputFileBytes = int64_t{2} << 30;

// The whole of a regular file of at most `max_bytes`, or an error naming the file: IoError
// when it cannot be read, InvalidArgument when it is not a regular file (a folder, a device, a
// pipe) or is larger than the cap. Never blocks on a pipe and never reads past the cap.
Result<std::string> ReadTextFile(const std::string& path, int64_t max_bytes = kMaxInputFileBytes);
// OK when `path` ends in one of `extensions` (".yaml", compared ignoring case); otherwise an
// InvalidArgument naming the file, the `kind` expected ("a scenario") and the extensions taken.
// Readers check this before opening a file, so that a wrong path (a private key, /etc/passwd) is
// refused unread and no error ever quotes a line of a file of another kind. A symbolic link is
// followed to the file it finally names (every level resolved), and that file's name must end in
// one of `extensions` too: `ln -s /etc/shadow x.yaml` is refused unread, naming the link and its
// target (a link is no way around the check, and a link named otherwise than its file is as wrong
// a path as a file named so). A path that is no regular file passes: the reader's own message (a
// folder, a device, missing) is more precise. What a file of the right name holds is the reader's
// to recognise before it quotes any of it (base/excerpt.h).
Status ExpectFileKind(const std::string& path, std::string_view kind,
                      std::initializer_list<std::string_view> extensions);

// True when `name` is one safe path component: 1 to 100 of letters, digits, '.', '_', '-' and
// '+', not starting with '.'. Names that become default output folders (runs/NAME) must be, so
// that a name like ../../etc/x or /tmp/x never writes outside runs/.
bool IsSafePathComponent(std::string_view name);

// Writes `text` to `path`, or an IoError naming it.
Status WriteTextFile(const std::string& path, const std::string& text);

// The file that makes an eplb output folder whole: written last, it names the folder's kind
// and every file in it with its size and CRC-32 (base/checksum.h). A folder without one is
// unfinished.
inline constexpr const char* kManifestName = "manifest.tsv";

struct FolderManifest {
  std::string kind;  // the folder's kind: io/output_folders.h defines each
  struct File {
    std::string path;  // relative to the folder, '/'-separated
    int64_t bytes = 0;
    std::optional<uint32_t> checksum;  // CRC-32; absent in folders written before v2
  };
  std::vector<File> files;  // every file but the manifest itself, sorted by path
};

// The manifest of the eplb folder at `dir`: NotFound when the folder has none (unfinished, or
// not eplb's); InvalidArgument when it is damaged, or when a file it lists is missing or has
// another size or checksum than it says (truncated, edited or replaced since). Reads every file.
Result<FolderManifest> ReadFolderManifest(const std::string& dir);

// The manifest of the eplb folder at `dir`, once the folder is shown to be exactly what eplb
// wrote: no symbolic link inside it (eplb writes none, and one could point anywhere), nothing in
// it that its manifest does not list (the manifest vouches only for the files it names, so a
// folder whose manifest lists none, or leaves out a file a reader opens, would otherwise be read
// unchecked), its kind `kind` (any kind when empty), and every file it lists of the size and
// checksum written (as ReadFolderManifest). The links and the listing are checked before any
// file is opened. NotFound when the folder has no manifest; InvalidArgument naming the folder and
// the offending file otherwise. Every reader of an eplb folder (run folders, and comparisons and
// sweeps from Python) calls this first; `dir` itself may be a link (the user's path).
Result<FolderManifest> ReadWholeFolder(const std::string& dir, std::string_view kind);

// Writes DIR's manifest for the files now in it, as WriteFolderAtomically does last. For tests
// and tools that assemble or alter a folder themselves.
Status WriteFolderManifest(const std::string& dir, const std::string& kind);

// OK when WriteFolderAtomically(dir, kind, ...) may write DIR now: commands call it before their
// work, so that an --out that would be refused (a file, a link, a folder eplb did not write or of
// another kind) is refused before minutes of simulation, not after. The write checks again.
Status CheckOutputFolder(const std::string& dir, const std::string& kind);

// Writes the folder DIR as a whole. fill(partial) builds DIR.partial-HOST-PID; the manifest is
// added; then one atomic exchange of the two names puts the new folder at DIR, and the old one (now
// at the partial name) loses the files its manifest lists. A kill at any instant leaves DIR whole,
// old or new, plus at most a stale DIR.partial-HOST-PID that the next write to DIR from HOST
// removes as far as it is provably eplb's (its process being gone; other machines' partial
// folders on a shared file system are left alone). Proof is eplb's `.eplb-partial` marker naming
// that very folder (its host and PID): written into a new partial folder before fill runs (the
// whole folder is then eplb's) and into an old folder the moment the exchange moved it aside (its
// manifest's files are then eplb's). An empty one, which a kill between making the folder and
// its marker leaves, holds nothing of anyone's and is removed. Anything else, a finished folder
// with a manifest among them too, may be the user's: named on stderr and kept.
//
// DIR is replaced only when it is an eplb folder of the same `kind` holding nothing but the
// files its manifest lists: a folder with anything else in it is refused (before fill runs),
// since eplb never deletes what it did not write. The partial folder is registered for removal
// on interruption (base/interrupt.h), and an interruption before the exchange cancels it.
Status WriteFolderAtomically(const std::string& dir, const std::string& kind,
                             const std::function<Status(const std::string&)>& fill);

// The process's peak resident set so far (0 where unknown).
int64_t PeakRssBytes();

// The machine's physical memory in bytes (0 where unknown).
int64_t PhysicalMemoryBytes();

// "1.5 GiB", "312 MiB", "4 KiB", "17 bytes".
std::string FormatBytes(int64_t bytes);

}  // namespace eplb
