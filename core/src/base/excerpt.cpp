#include "eplb/base/excerpt.h"

#include <fmt/format.h>

namespace eplb {

std::string Excerpt(std::string_view text, size_t max_chars) {
  std::string out;
  for (char c : text.substr(0, max_chars)) {
    if (c >= 0x20 && c < 0x7f) {
      out += c;
    } else {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    }
  }
  if (text.size() > max_chars) out += "...";
  return out;
}

std::string QuoteInput(std::string_view text) {
  // Appended, not "'" + ... + "'": GCC 12 warns (-Wrestrict) falsely on that form.
  std::string out(1, '\'');
  out += Excerpt(text);
  out += '\'';
  return out;
}

namespace {

std::string Printable(std::string_view message, bool keep_line_feeds) {
  std::string out;
  out.reserve(message.size());
  for (char c : message) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte < 0x20 && !(keep_line_feeds && c == '\n')) || byte == 0x7f) {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string PrintableMessage(std::string_view message) {
  return Printable(message, /*keep_line_feeds=*/true);
}

std::string PrintableLine(std::string_view message) {
  return Printable(message, /*keep_line_feeds=*/false);
}

}  // namespace eplb
