// How an error quotes what a user's file holds: at most a short, printable excerpt of the
// offending token. An error about a wrong file (a private key given as a load, /etc/passwd given
// as a scenario) names the file and the position and never echoes the file's contents.
//
// Thread-safety: a pure function.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace eplb {

// Enough for any number, field name or id an eplb file legitimately holds.
inline constexpr size_t kExcerptChars = 32;

// `text` as an error quotes it: its first `max_chars` bytes, control and non-ASCII bytes written
// as \xNN, and "..." after it when the text was longer.
std::string Excerpt(std::string_view text, size_t max_chars = kExcerptChars);

}  // namespace eplb
