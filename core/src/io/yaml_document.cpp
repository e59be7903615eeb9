// One YAML document read as eplb reads every YAML file it takes: scenarios, figures files and
// TensorRT-LLM's placement files.
#include "io/yaml_document.h"

#include <algorithm>
#include <map>
#include <string_view>

#include <fmt/format.h>

#include "eplb/base/excerpt.h"

namespace eplb {
namespace {

std::string DescribeKey(const YAML::Node& n) {
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a map";
  return "empty";
}

// Refuses what YAML would read silently in a way the author did not mean: a key given twice
// (yaml-cpp keeps the first). Also bounds the work on aliases that multiply a small text.
// `quote`: the file is recognised as its kind, so a key may be quoted (base/excerpt.h).
Status CheckKeysAt(const YAML::Node& node, const std::string& source, size_t& visited, int depth,
                   bool quote) {
  if (++visited > 1000000) {
    return Status::InvalidArgument(fmt::format(
        "{}: more than a million YAML nodes (aliases?); eplb reads files of a page or two",
        source));
  }
  // eplb's files nest a few levels; an alias inside its own anchor (&a [*a]) nests forever.
  if (depth > 64) {
    const YAML::Mark m = node.Mark();
    return Status::InvalidArgument(
        fmt::format("{}:{}:{}: nested more than 64 deep (an alias inside its own anchor?)", source,
                    m.line + 1, m.column + 1));
  }
  if (node.IsMap()) {
    std::map<std::string, YAML::Mark> keys;
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) {
        const YAML::Mark m = kv.first.Mark();
        return Status::InvalidArgument(
            fmt::format("{}:{}:{}: a key is {}; keys are names or numbers", source, m.line + 1,
                        m.column + 1, DescribeKey(kv.first)));
      }
      {
        const auto [it, fresh] = keys.emplace(kv.first.Scalar(), kv.first.Mark());
        if (!fresh) {
          const YAML::Mark m = kv.first.Mark();
          return Status::InvalidArgument(
              fmt::format("{}:{}:{}: {} is given twice (also at line {}); give each field once",
                          source, m.line + 1, m.column + 1,
                          quote ? QuoteInput(kv.first.Scalar()) : "a key", it->second.line + 1));
        }
      }
      EPLB_RETURN_IF_ERROR(CheckKeysAt(kv.second, source, visited, depth + 1, quote));
    }
  } else if (node.IsSequence()) {
    for (const auto& item : node)
      EPLB_RETURN_IF_ERROR(CheckKeysAt(item, source, visited, depth + 1, quote));
  }
  return Status::Ok();
}

// Where a YAML text has content, by lines (1-based; 0: none). A document marker ("---",
// or anything after "...") can only stand at column 0, where no block scalar's content can, so a
// scan finds a second document without yaml-cpp (0.7's LoadAll, which would count documents,
// loops forever allocating on a text as small as ",": found by fuzzing).
struct TextShape {
  int first_content = 0;    // the first line with more than blanks, a comment or a marker
  int second_document = 0;  // the first line of a second document
};
TextShape ScanDocuments(const std::string& text) {
  TextShape shape;
  bool started = false, ended = false;
  int line_no = 0;
  for (size_t pos = 0; pos < text.size() && shape.second_document == 0;) {
    const size_t nl = std::min(text.find('\n', pos), text.size());
    const std::string_view line = std::string_view(text).substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    const auto marker = [&](std::string_view m) {
      return line.substr(0, 3) == m &&
             (line.size() == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r');
    };
    const size_t first = line.find_first_not_of(" \t\r");
    if (marker("---")) {
      if (started || ended) shape.second_document = line_no;
      started = true;  // the first document's explicit start
    } else if (marker("...")) {
      ended = true;
    } else if (first != std::string_view::npos && line[first] != '#') {
      if (ended) shape.second_document = line_no;
      started = true;
      if (shape.first_content == 0) shape.first_content = line_no;
    }
  }
  return shape;
}

}  // namespace

Status CheckYamlKeys(const YAML::Node& node, const std::string& source, size_t& visited) {
  return CheckKeysAt(node, source, visited, 0, /*quote=*/true);
}

bool HasKindField(const YAML::Node& root, std::initializer_list<std::string_view> kind_fields) {
  if (!root.IsMap()) return false;
  for (const auto& kv : root) {
    if (!kv.first.IsScalar()) continue;
    for (std::string_view field : kind_fields) {
      if (kv.first.Scalar() == field) return true;
    }
  }
  return false;
}

std::string YamlReason(const std::string& msg) {
  // yaml-cpp stops at 2,000 levels of nesting with the message "bad file".
  if (msg == YAML::ErrorMsg::BAD_FILE) return "nested too deep";
  // The messages that append input do so after ": " or in " (key: ...)" / "; first invalid key".
  size_t end = msg.size();
  for (std::string_view tail : {": ", " (key", "; first invalid key"}) {
    end = std::min(end, msg.find(tail));
  }
  return Excerpt(std::string_view(msg).substr(0, end), 200);
}

Result<YAML::Node> LoadOneYamlDocument(const std::string& text, const std::string& source,
                                       const char* what,
                                       std::initializer_list<std::string_view> kind_fields) {
  const TextShape shape = ScanDocuments(text);
  if (shape.second_document > 0) {
    return Status::InvalidArgument(
        fmt::format("{}:{}: a second YAML document; {} holds one (remove the '---')", source,
                    shape.second_document, what));
  }
  YAML::Node doc;
  try {
    doc = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    return Status::InvalidArgument(fmt::format("{}:{}:{}: not valid YAML: {}", source,
                                               e.mark.line + 1, e.mark.column + 1,
                                               YamlReason(e.msg)));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(
        fmt::format("{}: not valid YAML: {}", source, YamlReason(e.msg)));
  }
  if (!doc || doc.IsNull()) {
    if (shape.first_content > 0) {
      // yaml-cpp reads some invalid text (a stray ',') as nothing at all.
      return Status::InvalidArgument(
          fmt::format("{}:{}: not valid YAML here: it reads as nothing (null), not a map of fields",
                      source, shape.first_content));
    }
    return YAML::Node();  // none: the caller says what it needed
  }
  size_t visited = 0;
  EPLB_RETURN_IF_ERROR(CheckKeysAt(doc, source, visited, 0, HasKindField(doc, kind_fields)));
  return doc;
}

}  // namespace eplb
