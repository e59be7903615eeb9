// The scenario schema (io/scenario_schema.h) against scenarios/README.md's field table: every
// row of the table is the schema's row for that field, byte for byte (path, default, valid
// values, meaning), and every field of the schema has its row. A field added, a default or a
// range changed, an enum's name added or renamed in one and not the other fails here, naming
// the row the schema would write.
#include <cmath>
#include <map>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "eplb/base/file_io.h"
#include "eplb/io/scenario_file.h"

namespace eplb {
namespace {

// The rows of the README's "## Fields" table, by path.
std::map<std::string, std::string> ReadmeRows() {
  auto text = ReadTextFile(std::string(EPLB_SCENARIO_DIR) + "/README.md", 1 << 20);
  EXPECT_TRUE(text.ok()) << text.status().message();
  std::map<std::string, std::string> rows;
  if (!text.ok()) return rows;
  std::istringstream in(*text);
  bool in_table = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| field | default | valid | meaning |", 0) == 0) {
      in_table = true;
      continue;
    }
    if (!in_table || line.rfind("|---", 0) == 0) continue;
    if (line.rfind("| `", 0) != 0) break;  // the table ends
    const size_t end = line.find('`', 3);
    rows[line.substr(3, end - 3)] = line;
  }
  return rows;
}

TEST(ScenarioSchema, ReadmeTableIsTheSchemaRowForEveryField) {
  const std::map<std::string, std::string> readme = ReadmeRows();
  ASSERT_GT(readme.size(), 50u) << "scenarios/README.md: no field table found";
  std::map<std::string, bool> in_schema;
  for (const ScenarioFieldDoc& f : ScenarioFieldDocs()) {
    in_schema[f.path] = true;
    const auto row = readme.find(f.path);
    if (row == readme.end()) {
      ADD_FAILURE() << "scenarios/README.md has no row for " << f.path << "; the schema's:\n"
                    << f.readme_row;
      continue;
    }
    EXPECT_EQ(row->second, f.readme_row) << "scenarios/README.md's row for " << f.path
                                         << " and the schema (io/scenario_schema_fields.cpp) "
                                         << "disagree; the schema's row comes second";
  }
  for (const auto& [path, row] : readme) {
    EXPECT_TRUE(in_schema.count(path))
        << "scenarios/README.md documents " << path << ", which the schema does not have";
  }
}

// Where a row's columns are prose, they still hold the schema's names and default.
TEST(ScenarioSchema, EveryRowNamesItsValidValuesAndDefault) {
  for (const ScenarioFieldDoc& f : ScenarioFieldDocs()) {
    for (const std::string& name : f.names) {
      EXPECT_NE(f.readme_row.find("`" + name + "`"), std::string::npos)
          << f.path << "'s row does not name its valid value " << name;
    }
    if (!f.default_number) continue;
    char* end = nullptr;
    const double shown = std::strtod(f.default_text.c_str(), &end);
    ASSERT_EQ(*end, '\0') << f.path << "'s default column is not a number: " << f.default_text;
    EXPECT_EQ(shown, *f.default_number) << f.path;
  }
}

// An enum's error lists its table's names, in the table's order.
TEST(ScenarioSchema, AWrongNameListsTheTablesNames) {
  int checked = 0;
  for (const ScenarioFieldDoc& f : ScenarioFieldDocs()) {
    if (f.names.empty() || f.path.find("[]") != std::string::npos) continue;
    std::string valid;
    for (const std::string& name : f.names) valid += (valid.empty() ? "" : ", ") + name;
    auto s = ParseScenario("", "s.yaml", {f.path + "=bogus"});
    ASSERT_FALSE(s.ok()) << f.path;
    EXPECT_EQ(s.status().message(),
              "s.yaml (--set " + f.path + "): " + f.path + " is 'bogus'; valid values: " + valid);
    ++checked;
  }
  EXPECT_GE(checked, 16);
}

// The writer writes every field the reader reads, and a written scenario reads back the same.
TEST(ScenarioSchema, WrittenScenarioHasEveryFieldAndReadsBack) {
  auto s = ParseScenario(DefaultScenarioText(), "default");
  ASSERT_TRUE(s.ok()) << s.status().message();
  const std::string yaml = ScenarioToYaml(*s);
  for (const ScenarioFieldDoc& f : ScenarioFieldDocs()) {
    if (f.path.find("[]") != std::string::npos) continue;  // a list entry's field
    const std::string key = f.path.substr(f.path.rfind('.') + 1) + ":";
    EXPECT_NE(yaml.find(key), std::string::npos) << f.path << " is not written";
  }
  auto again = ParseScenario(yaml, "written");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(ScenarioToYaml(*again), yaml);
}

}  // namespace
}  // namespace eplb
