// How an error quotes what a user's file holds: the one rule for every reader. An error quotes at
// most 32 bytes of the offending token, printable (control and non-ASCII bytes written \xNN, so
// no terminal escape such as ESC ] 0 ; ... BEL reaches the terminal raw). A reader that has not
// yet recognised the file as its kind (its first structure parsed: a scenario's map of known
// sections, a load's first row of numbers, a placement's phy2log) names the file and the
// position but quotes nothing of it, so a wrong file (a private key given as a load, /etc/shadow
// given as a scenario, a .env saved as creds.csv) is never echoed.
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

// `text` as an error quotes a token of input: 'Excerpt(text)' ('expertz'; a 300-byte key as its
// first 32 bytes and "..."). Every reader quotes input through this or Excerpt, never raw.
std::string QuoteInput(std::string_view text);

// A whole message with its control bytes but the line feed written \xNN and the rest (eplb's
// own UTF-8: ×, ±) as is: the command line's last guard before stderr, for text no reader
// quoted (CLI11's messages, which quote arguments whole and end lines).
std::string PrintableMessage(std::string_view message);

// The same with the line feed written \x0a too: an error is one line, whatever a path or a
// file's text put into it (a newline there could otherwise forge a line of eplb's output, and
// the Python wrapper reads the error's first line). The command line's and the Python module's
// last guard for a Status message.
std::string PrintableLine(std::string_view message);

}  // namespace eplb
