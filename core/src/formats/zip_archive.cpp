#include "eplb/formats/zip_archive.h"

#include <algorithm>
#include <array>
#include <cstring>

#include <fmt/format.h>

#include "eplb/base/checksum.h"
#include "eplb/base/excerpt.h"

namespace eplb {
namespace {

constexpr uint32_t kLocalHeader = 0x04034b50;
constexpr uint32_t kCentralHeader = 0x02014b50;
constexpr uint32_t kEndOfDirectory = 0x06054b50;
constexpr uint32_t kZip64EndOfDirectory = 0x06064b50;
constexpr uint32_t kZip64Locator = 0x07064b50;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr size_t kEndOfDirectorySize = 22;
constexpr size_t kCentralHeaderSize = 46;
constexpr size_t kLocalHeaderSize = 30;
// A .pt holds a handful of entries per tensor; far more is not a dump.
constexpr uint64_t kMaxEntries = 1 << 20;

// Little-endian reads within `bytes`; callers check the bounds first.
uint64_t Le(std::string_view bytes, uint64_t at, int width) {
  uint64_t v = 0;
  for (int i = width - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(bytes[at + i]);
  return v;
}

bool Fits(std::string_view bytes, uint64_t at, uint64_t length) {
  return at <= bytes.size() && length <= bytes.size() - at;
}

}  // namespace

Result<ZipArchive> ZipArchive::Open(std::string_view bytes, std::string name) {
  auto bad = [&](const std::string& what) {
    return Status::InvalidArgument(fmt::format("{}: {}", name, what));
  };
  if (bytes.size() < kEndOfDirectorySize) {
    return bad(
        fmt::format("{} bytes; too short for a zip archive (PyTorch's .pt format)", bytes.size()));
  }
  // The end-of-directory record is the last 22 bytes plus a comment of at most 65,535 bytes.
  const uint64_t lowest =
      bytes.size() > kEndOfDirectorySize + 0xFFFF ? bytes.size() - kEndOfDirectorySize - 0xFFFF : 0;
  uint64_t eocd = bytes.size() - kEndOfDirectorySize;
  while (true) {
    if (Le(bytes, eocd, 4) == kEndOfDirectory &&
        eocd + kEndOfDirectorySize + Le(bytes, eocd + 20, 2) == bytes.size()) {
      break;
    }
    if (eocd == lowest) {
      return bad("no zip end-of-directory record; not a zip archive, or a truncated one");
    }
    --eocd;
  }
  if (Le(bytes, eocd + 4, 2) != 0 || Le(bytes, eocd + 6, 2) != 0) {
    return bad("a zip archive split over several disks; expected one file");
  }
  uint64_t count = Le(bytes, eocd + 10, 2);
  uint64_t directory_size = Le(bytes, eocd + 12, 4);
  uint64_t directory_offset = Le(bytes, eocd + 16, 4);
  if (count == 0xFFFF || directory_size == 0xFFFFFFFF || directory_offset == 0xFFFFFFFF) {
    // zip64: a locator just before the end record points at the zip64 end record.
    if (eocd < 20 || Le(bytes, eocd - 20, 4) != kZip64Locator) {
      return bad("the end-of-directory record defers to zip64 but there is no zip64 locator");
    }
    const uint64_t at = Le(bytes, eocd - 20 + 8, 8);
    if (!Fits(bytes, at, 56) || Le(bytes, at, 4) != kZip64EndOfDirectory) {
      return bad("the zip64 locator points outside the file or at no zip64 end record");
    }
    count = Le(bytes, at + 32, 8);
    directory_size = Le(bytes, at + 40, 8);
    directory_offset = Le(bytes, at + 48, 8);
  }
  if (count > kMaxEntries) {
    return bad(
        fmt::format("the archive claims {} entries; a tensor dump has far fewer (at most {})",
                    count, kMaxEntries));
  }
  if (!Fits(bytes, directory_offset, directory_size)) {
    return bad(
        fmt::format("the central directory ({} bytes at offset {}) lies outside the {}-byte "
                    "file",
                    directory_size, directory_offset, bytes.size()));
  }

  ZipArchive archive;
  archive.bytes_ = bytes;
  archive.name_ = name;
  std::vector<std::pair<uint64_t, uint64_t>> spans;  // [local header, end of data) per entry
  uint64_t at = directory_offset;
  const uint64_t directory_end = directory_offset + directory_size;
  for (uint64_t i = 0; i < count; ++i) {
    if (!Fits(bytes, at, kCentralHeaderSize) || at + kCentralHeaderSize > directory_end ||
        Le(bytes, at, 4) != kCentralHeader) {
      return bad(fmt::format("central directory entry {} of {} is missing or damaged", i, count));
    }
    const uint64_t flags = Le(bytes, at + 8, 2);
    const uint64_t method = Le(bytes, at + 10, 2);
    Entry e;
    e.crc32 = static_cast<uint32_t>(Le(bytes, at + 16, 4));
    uint64_t compressed = Le(bytes, at + 20, 4);
    uint64_t size = Le(bytes, at + 24, 4);
    const uint64_t name_len = Le(bytes, at + 28, 2);
    const uint64_t extra_len = Le(bytes, at + 30, 2);
    const uint64_t comment_len = Le(bytes, at + 32, 2);
    uint64_t local = Le(bytes, at + 42, 4);
    const uint64_t record = kCentralHeaderSize + name_len + extra_len + comment_len;
    if (at + record > directory_end) {
      return bad(fmt::format("central directory entry {} runs past the directory's end", i));
    }
    e.name = std::string(bytes.substr(at + kCentralHeaderSize, name_len));
    // zip64 extra field: the 64-bit values of exactly the fields saturated above, in order.
    uint64_t x = at + kCentralHeaderSize + name_len;
    const uint64_t extra_end = x + extra_len;
    while (x + 4 <= extra_end) {
      const uint64_t id = Le(bytes, x, 2), len = Le(bytes, x + 2, 2);
      if (x + 4 + len > extra_end) break;
      if (id == kZip64ExtraId) {
        uint64_t y = x + 4;
        for (uint64_t* field : {&size, &compressed, &local}) {
          if (*field != 0xFFFFFFFF) continue;
          if (y + 8 > x + 4 + len)
            return bad(fmt::format("entry '{}': a short zip64 field", Excerpt(e.name)));
          *field = Le(bytes, y, 8);
          y += 8;
        }
      }
      x += 4 + len;
    }
    if (flags & 0x1) return bad(fmt::format("entry '{}' is encrypted", Excerpt(e.name)));
    if (method == 0 && compressed != size) {
      return bad(fmt::format("entry '{}' is stored with {} bytes but says it holds {}",
                             Excerpt(e.name), compressed, size));
    }
    e.method = static_cast<int>(method);
    size = compressed;
    if (!Fits(bytes, local, kLocalHeaderSize) || Le(bytes, local, 4) != kLocalHeader) {
      return bad(fmt::format("entry '{}': its local header (offset {}) is missing", Excerpt(e.name),
                             local));
    }
    const uint64_t data =
        local + kLocalHeaderSize + Le(bytes, local + 26, 2) + Le(bytes, local + 28, 2);
    if (!Fits(bytes, data, size)) {
      return bad(fmt::format("entry '{}' ({} bytes at offset {}) lies outside the {}-byte file",
                             Excerpt(e.name), size, data, bytes.size()));
    }
    e.offset = data;
    e.size = size;
    spans.emplace_back(local, data + size);
    if (!archive.index_.try_emplace(e.name, archive.entries_.size()).second) {
      return bad(fmt::format("entry '{}' appears twice", Excerpt(e.name)));
    }
    archive.entries_.push_back(std::move(e));
    at += record;
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].first < spans[i - 1].second) {
      return bad(
          fmt::format("two entries overlap at offset {}; a zip archive's entries are "
                      "disjoint",
                      spans[i].first));
    }
  }
  return archive;
}

const ZipArchive::Entry* ZipArchive::Find(std::string_view entry_name) const {
  const auto it = index_.find(entry_name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

Result<std::string_view> ZipArchive::Read(const Entry& entry) const {
  if (entry.method != 0) {
    return Status::InvalidArgument(fmt::format(
        "{}: entry '{}' is compressed (method {}); torch.save stores its entries uncompressed, so "
        "this is not a file torch.save wrote",
        name_, Excerpt(entry.name), entry.method));
  }
  const std::string_view data = bytes_.substr(entry.offset, entry.size);
  const uint32_t crc = Crc32(data);
  if (crc != entry.crc32) {
    return Status::InvalidArgument(
        fmt::format("{}: entry '{}' is damaged: its CRC-32 is {:08x} but the directory says {:08x}",
                    name_, Excerpt(entry.name), crc, entry.crc32));
  }
  return data;
}

}  // namespace eplb
