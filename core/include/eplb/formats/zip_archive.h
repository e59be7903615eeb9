// The zip container of PyTorch's `.pt` files, read from memory.
//
// torch.save writes a zip archive whose entries are stored (not compressed), each aligned to 64
// bytes by padding in its local header's extra field; archives over 4 GiB use zip64 records.
// This reader takes exactly that: stored entries, zip64 sizes and offsets. It refuses encryption,
// multi-disk archives and entries that overlap or lie outside the file; a compressed entry is
// listed (so that a caller can tell what the archive is by its names) but refused when read.
// Every entry's CRC-32 is checked when it is read, so a damaged file is refused, not misread.
//
// Errors name the archive and the entry, and quote no entry's contents.
//
// Thread-safety: a ZipArchive is immutable after Open; it views the caller's bytes, which must
// outlive it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "eplb/base/status.h"

namespace eplb {

class ZipArchive {
 public:
  struct Entry {
    std::string name;     // as stored: '/'-separated
    uint64_t offset = 0;  // of the entry's data in the archive
    uint64_t size = 0;    // as stored
    int method = 0;       // 0: stored; anything else is compressed
    uint32_t crc32 = 0;
  };

  // The archive in `bytes`; `name` (its path) prefixes errors.
  static Result<ZipArchive> Open(std::string_view bytes, std::string name);

  const std::vector<Entry>& entries() const { return entries_; }
  // The entry called `name`, or nullptr: O(log n), so that a dump of many tensors is not read in
  // time quadratic in its entries (an ordered map: no chosen names make it degrade).
  const Entry* Find(std::string_view name) const;
  // A stored entry's data, its CRC-32 checked (every call checks it again: a caller that reads an
  // entry more than once keeps what it read).
  Result<std::string_view> Read(const Entry& entry) const;
  const std::string& name() const { return name_; }

 private:
  std::string_view bytes_;
  std::string name_;
  std::vector<Entry> entries_;
  std::map<std::string, size_t, std::less<>> index_;  // name -> position in entries_
};

}  // namespace eplb
