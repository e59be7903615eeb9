// CRC-32 (ISO 3309, zip's and PNG's: reflected polynomial 0xEDB88320): zip entries' check, and
// the per-file check of eplb's folder manifests. It guards against accidents (damage, a file
// swapped in from elsewhere), not against forgery.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string_view>

namespace eplb {

// The CRC-32 of `data`; Crc32(b, Crc32(a)) is the CRC-32 of a followed by b, so that a file can
// be checked in chunks.
uint32_t Crc32(std::string_view data, uint32_t previous = 0);

}  // namespace eplb
