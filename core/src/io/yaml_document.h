// Reading one YAML document the way every eplb YAML reader does (internal to io/).
//
// yaml-cpp reads silently what the author did not mean: a second document is ignored, a key
// given twice keeps its first value, some invalid text reads as nothing, aliases multiply a small
// text. These refuse each with the file and line.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>

#include <yaml-cpp/yaml.h>

#include "eplb/base/status.h"

namespace eplb {

// The one document of `text` (named `source` in errors); `what` names the kind of file for
// them ("a scenario file"). A second document, invalid YAML, a key given twice and more than a
// million nodes or 64 levels are errors. An empty text (blanks, comments) gives a null node: the
// caller decides whether that is an error. `kind_fields` are the top-level fields that make the
// text a file of its kind: until its root is a map holding one of them, errors quote nothing of
// the text (a shadow file saved as x.yaml is not echoed), and after, at most 32 printable bytes
// (base/excerpt.h). Whether an unrecognised root is an error is the caller's to say.
Result<YAML::Node> LoadOneYamlDocument(const std::string& text, const std::string& source,
                                       const char* what,
                                       std::initializer_list<std::string_view> kind_fields = {});

// True when `root` is a map with one of `kind_fields` among its keys: the file is of its kind.
bool HasKindField(const YAML::Node& root, std::initializer_list<std::string_view> kind_fields);

// The key checks of LoadOneYamlDocument on a node read some other way (a --set value); `visited`
// counts nodes across calls. A key given twice is quoted as base/excerpt.h quotes input.
Status CheckYamlKeys(const YAML::Node& node, const std::string& source, size_t& visited);

// yaml-cpp's message `msg` with what it appends of the input (an escape's character, a key, a
// version) left off and the rest printable: its errors may be about a file not yet recognised.
std::string YamlReason(const std::string& msg);

}  // namespace eplb
