// Reading one YAML document the way every eplb YAML reader does (internal to io/).
//
// yaml-cpp reads silently what the author did not mean: a second document is ignored, a key
// given twice keeps its first value, some invalid text reads as nothing, aliases multiply a small
// text. These refuse each with the file and line.
#pragma once

#include <cstddef>
#include <string>

#include <yaml-cpp/yaml.h>

#include "eplb/base/status.h"

namespace eplb {

// The one document of `text` (named `source` in errors); `what` names the kind of file for
// them ("a scenario file"). A second document, invalid YAML, a key given twice and more than a
// million nodes or 64 levels are errors. An empty text (blanks, comments) gives a null node: the
// caller decides whether that is an error.
Result<YAML::Node> LoadOneYamlDocument(const std::string& text, const std::string& source,
                                       const char* what);

// The key checks of LoadOneYamlDocument on a node read some other way (a --set value); `visited`
// counts nodes across calls.
Status CheckYamlKeys(const YAML::Node& node, const std::string& source, size_t& visited);

}  // namespace eplb
