#include "eplb/formats/json.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "eplb/base/excerpt.h"

namespace eplb {
namespace {

// "source:line:column: " of the byte at `offset` (0-based).
std::string Where(std::string_view text, size_t offset, const std::string& source, int first_line) {
  offset = std::min(offset, text.size());
  const std::string_view before = text.substr(0, offset);
  const size_t line = static_cast<size_t>(first_line) +
                      static_cast<size_t>(std::count(before.begin(), before.end(), '\n'));
  const size_t nl = before.rfind('\n');
  const size_t column = nl == std::string_view::npos ? offset + 1 : offset - nl;
  return fmt::format("{}:{}:{}: ", source, line, column);
}

// The offset of the first bracket nested deeper than the limit, or npos.
size_t TooDeep(std::string_view text) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::string_view::npos;
}

// Where `key` is written as a key the second time (as "key" then ':'), for the message; the
// text's end when it is spelled with escapes.
size_t SecondKey(std::string_view text, const std::string& key) {
  const std::string quoted = "\"" + key + "\"";
  int seen = 0;
  for (size_t at = text.find(quoted); at != std::string_view::npos;
       at = text.find(quoted, at + 1)) {
    const size_t next = text.find_first_not_of(" \t\r\n", at + quoted.size());
    if (next != std::string_view::npos && text[next] == ':' && ++seen == 2) return at;
  }
  return text.size();
}

}  // namespace

Result<nlohmann::json> ParseJson(std::string_view text, const std::string& source, int first_line) {
  if (const size_t deep = TooDeep(text); deep != std::string_view::npos) {
    return Status::InvalidArgument(
        fmt::format("{}not valid here: arrays and objects nest more than {} deep",
                    Where(text, deep, source, first_line), kMaxJsonDepth));
  }
  // JSON text holds no NUL byte; a reader stopping at one would take what follows for nothing.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    return Status::InvalidArgument(
        fmt::format("{}not valid JSON: a NUL byte; JSON text holds none (a binary file, or text "
                    "cut and joined?)",
                    Where(text, nul, source, first_line)));
  }
  // A key twice in one object: nlohmann keeps the last, and which the writer meant is unknowable.
  std::vector<std::set<std::string>> keys;  // per object being read, innermost last
  std::string duplicate;
  const auto refuse_duplicates = [&](int /*depth*/, nlohmann::json::parse_event_t event,
                                     nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) {
      keys.emplace_back();
    } else if (event == Event::object_end) {
      if (!keys.empty()) keys.pop_back();
    } else if (event == Event::key && !keys.empty() && duplicate.empty() &&
               !keys.back().insert(parsed.get<std::string>()).second) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  try {
    nlohmann::json parsed = nlohmann::json::parse(text, refuse_duplicates);
    if (!duplicate.empty()) {
      return Status::InvalidArgument(fmt::format(
          "{}not valid here: the key {} appears twice in one object; each key must be given "
          "once",
          Where(text, SecondKey(text, duplicate), source, first_line), QuoteInput(duplicate)));
    }
    return parsed;
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is 1-based: the byte that could not be read. nlohmann quotes the token it last read,
    // which may be a line of a file of another kind (a .env saved as x.json): left off, since a
    // text that does not parse is not yet recognised as JSON of its kind (base/excerpt.h).
    std::string what = e.what();
    if (const size_t quote = what.find("; last read: "); quote != std::string::npos) {
      what.resize(quote);
    }
    what = Excerpt(what, what.size());
    const size_t colon = what.find("syntax error");
    return Status::InvalidArgument(fmt::format(
        "{}not valid JSON: {}", Where(text, e.byte > 0 ? e.byte - 1 : 0, source, first_line),
        colon == std::string::npos ? what : what.substr(colon)));
  } catch (const nlohmann::json::out_of_range& e) {
    // "number overflow parsing '1e400'": the number is quoted as input is (base/excerpt.h).
    std::string what = e.what();
    if (const size_t quote = what.find(" '"); quote != std::string::npos && what.back() == '\'') {
      what = what.substr(0, quote + 1) +
             QuoteInput(std::string_view(what).substr(quote + 2, what.size() - quote - 3));
    }
    return Status::InvalidArgument(fmt::format(
        "{}:{}: not valid here: {} (numbers must be within the range of a double, ±1.8e308)",
        source, first_line, Excerpt(what, what.size())));
  } catch (const nlohmann::json::exception& e) {
    const std::string what = e.what();
    return Status::InvalidArgument(
        fmt::format("{}: not valid JSON: {}", source, Excerpt(what, what.size())));
  }
}

std::string QuoteJson(const nlohmann::json& value) {
  // JSON text quotes itself: a string is "x", a number 1.5.
  return Excerpt(
      value.dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace));
}

}  // namespace eplb
