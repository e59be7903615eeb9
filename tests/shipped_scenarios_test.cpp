// Each shipped scenario runs its own model: every model constant's default is DeepSeek-V3's, so
// a scenario of another model that left one out would run with DeepSeek-V3's dense weights,
// KV cache or attention cost without a word. Whether a field is set is read from the file's
// YAML keys, not from its value (a model may share a value with DeepSeek-V3). A user's scenario
// that names another model (model.name) and leaves a constant out is warned of on stderr.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "eplb/engine/scenario.h"
#include "eplb/io/scenario_file.h"

namespace eplb {
namespace {

namespace fs = std::filesystem;

// The model constants: every key the writer puts under model: but the model's name, so that a
// constant added later is checked without anyone listing it here.
std::vector<std::string> ModelConstants() {
  auto defaults = ParseScenario("", "defaults");
  EXPECT_TRUE(defaults.ok());
  const YAML::Node written = YAML::Load(ScenarioToYaml(*defaults));
  std::vector<std::string> keys;
  for (const auto& kv : written["model"]) {
    if (kv.first.Scalar() != "name") keys.push_back(kv.first.Scalar());
  }
  return keys;
}

bool IsDeepSeekV3Shape(std::string name) {
  name = name.substr(name.rfind('/') + 1);
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return name.rfind("deepseek-v3", 0) == 0 || name.rfind("deepseek-r1", 0) == 0;
}

// scenarios/*.yaml and the parameter sets of scenarios/published/ (figures.yaml lists figures,
// not a scenario).
std::vector<fs::path> ShippedScenarios() {
  std::vector<fs::path> files;
  for (const char* dir : {"", "/published"}) {
    for (const auto& entry : fs::directory_iterator(std::string(EPLB_SCENARIO_DIR) + dir)) {
      if (entry.path().extension() != ".yaml") continue;
      if (YAML::LoadFile(entry.path().string())["figures"]) continue;
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(ShippedScenarios, EachModelSetsItsOwnConstants) {
  const std::vector<std::string> constants = ModelConstants();
  ASSERT_EQ(constants.size(), 15u);  // layers .. elementwise_bytes_per_token
  int other_models = 0;
  for (const fs::path& file : ShippedScenarios()) {
    SCOPED_TRACE(file.string());
    ::testing::internal::CaptureStderr();
    auto scenario = LoadScenarioFile(file.string());
    const std::string said = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(scenario.ok()) << scenario.status().message();
    EXPECT_EQ(said.find("warning"), std::string::npos) << said;
    const YAML::Node model = YAML::LoadFile(file.string())["model"];
    ASSERT_TRUE(model.IsMap());
    // Each names its model, so that its comments and the README can say whose constants these
    // are.
    ASSERT_TRUE(model["name"]) << "model.name is not set";
    EXPECT_EQ(scenario->model.name, model["name"].Scalar());
    // Every one sets every constant (scenarios/README.md says where each comes from); one of
    // another model than DeepSeek-V3/R1 that left one out would run with DeepSeek-V3's.
    if (!IsDeepSeekV3Shape(scenario->model.name)) ++other_models;
    std::vector<std::string> inherited;
    for (const std::string& key : constants) {
      if (!model[key]) inherited.push_back("model." + key);
    }
    EXPECT_TRUE(inherited.empty()) << scenario->model.name << " takes DeepSeek-V3's "
                                   << fmt::format("{}", fmt::join(inherited, ", "));
  }
  // tiny, Qwen3-235B-A22B, Qwen3-30B-A3B and Mixtral-8x22B at least: the test checks something.
  EXPECT_GE(other_models, 4);
}

// A scenario that says it serves decode runs the decode stage, so that its inter-token latency
// is reported and its KV cache holds each sequence's positions (issue 65: the EP144 decode
// scenarios ran as prefill, without either).
TEST(ShippedScenarios, EveryDecodeScenarioRunsTheDecodeStage) {
  int decode = 0;
  for (const fs::path& file : ShippedScenarios()) {
    if (file.filename().string().find("decode") == std::string::npos) continue;
    SCOPED_TRACE(file.string());
    ++decode;
    auto scenario = LoadScenarioFile(file.string());
    ASSERT_TRUE(scenario.ok()) << scenario.status().message();
    EXPECT_EQ(scenario->compute.stage, InferenceStage::kDecode);
  }
  EXPECT_GE(decode, 2);
}

TEST(ShippedScenarios, TheDefaultsAreDeepSeekV3s) {
  // What a scenario leaves out is DeepSeek-V3's: the DeepSeek-V3/R1 scenarios' shapes are the
  // defaults (the constants a stage or a figure sets apart: decode's absorbed attention, the
  // published sets' BF16 combine, the elementwise kernels the defaults leave unpriced).
  const ModelSpec d;
  for (const fs::path& file : ShippedScenarios()) {
    SCOPED_TRACE(file.string());
    auto s = LoadScenarioFile(file.string());
    ASSERT_TRUE(s.ok()) << s.status().message();
    if (!IsDeepSeekV3Shape(s->model.name)) continue;
    EXPECT_EQ(s->model.layers, d.layers);
    EXPECT_EQ(s->model.experts, d.experts);
    EXPECT_EQ(s->model.hidden, d.hidden);
    EXPECT_EQ(s->model.intermediate, d.intermediate);
    EXPECT_EQ(s->model.dense_params, d.dense_params);
    EXPECT_EQ(s->model.kv_bytes_per_token, d.kv_bytes_per_token);
  }
}

struct WarningCase {
  std::string yaml;
  std::vector<std::string> overrides;
  std::set<std::string> warned;  // the fields named in warnings
};

// A model named `name` with every constant set (valid on the default cluster) but `left_out`.
std::string AllConstantsBut(const std::string& name, const std::set<std::string>& left_out) {
  const std::map<std::string, std::string> values = {{"layers", "4"},
                                                     {"experts", "128"},
                                                     {"groups", "1"},
                                                     {"top_k", "8"},
                                                     {"hidden", "4096"},
                                                     {"expert_bytes", "37748736"},
                                                     {"expert_tensors", "2"},
                                                     {"activation_bytes", "2"},
                                                     {"combine_bytes", "2"},
                                                     {"topk_groups", "0"},
                                                     {"intermediate", "1536"},
                                                     {"dense_params", "7.4e9"},
                                                     {"kv_bytes_per_token", "192512"}};
  std::string yaml = "model:\n  name: " + name + "\n";
  for (const std::string& key : ModelConstants()) {
    if (left_out.count(key) > 0) continue;
    const auto it = values.find(key);
    yaml += "  " + key + ": " + (it != values.end() ? it->second : "0") + "\n";
  }
  // 128 experts on the default 32 GPUs: 32 redundant make 160 slots, 5 a GPU.
  return yaml;
}

TEST(ModelName, NamingAnotherModelWarnsOfEachConstantLeftAtDeepSeekV3s) {
  const std::vector<std::string> constants = ModelConstants();
  const std::set<std::string> all(constants.begin(), constants.end());
  const std::vector<WarningCase> cases = {
      // No name: the model is DeepSeek-V3, whose constants the defaults are.
      {"", {}, {}},
      {"model: {layers: 4}", {}, {}},
      {"model: {name: DeepSeek-R1}", {}, {}},
      {"model: {name: deepseek-ai/DeepSeek-V3-0324}", {}, {}},
      // Another model: each constant it leaves out.
      {"model: {name: Qwen3-235B-A22B}", {}, all},
      {"model: {name: Qwen3-235B-A22B}", {"model.name=DeepSeek-V3"}, {}},
      {"", {"model.name=Mixtral-8x22B-v0.1"}, all},
      {AllConstantsBut("Qwen3-235B-A22B", {"dense_params", "kv_bytes_per_token"}),
       {},
       {"dense_params", "kv_bytes_per_token"}},
      // A constant given on the command line is set.
      {AllConstantsBut("Qwen3-235B-A22B", {"dense_params", "kv_bytes_per_token"}),
       {"model.dense_params=7.4e9"},
       {"kv_bytes_per_token"}},
      {AllConstantsBut("Qwen/Qwen3-30B-A3B", {}), {}, {}},
      // The shipped default sets every constant: renaming it warns of none.
      {DefaultScenarioText(), {"model.name=Qwen3-235B-A22B"}, {}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const WarningCase& c = cases[i];
    const std::string source = fmt::format("case{}.yaml", i);
    SCOPED_TRACE(source + ":\n" + c.yaml);
    ::testing::internal::CaptureStderr();
    auto s = ParseScenario(c.yaml, source, c.overrides);
    const std::string said = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(s.ok()) << s.status().message();
    std::set<std::string> warned;
    for (const std::string& key : constants) {
      if (said.find("model." + key + " is not set") != std::string::npos) warned.insert(key);
    }
    EXPECT_EQ(warned, c.warned) << said;
    const size_t lines = static_cast<size_t>(std::count(said.begin(), said.end(), '\n'));
    EXPECT_EQ(lines, c.warned.size()) << said;
  }
}

TEST(ModelName, TheWarningNamesTheFileTheModelTheFieldAndTheValueOnce) {
  const std::string yaml = AllConstantsBut("Mixtral-8x22B-Instruct-v0.1", {"dense_params"});
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(ParseScenario(yaml, "mixtral.yaml").ok());
  // A sweep or a comparison reads its scenario once a point: the warning is said once.
  ASSERT_TRUE(ParseScenario(yaml, "mixtral.yaml").ok());
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "mixtral.yaml: warning: model.name is 'Mixtral-8x22B-Instruct-v0.1' but "
            "model.dense_params is not set, so it is DeepSeek-V3's 1.56e+10; set "
            "Mixtral-8x22B-Instruct-v0.1's own (scenarios/README.md says how each is derived)\n");
}

// The built-in scenario writes DeepSeek-V3's constants out: renaming its model by --set leaves
// each of them DeepSeek-V3's, and each is said, but those the --set gives too.
TEST(ModelName, RenamingTheBuiltInScenariosModelWarnsOfEveryConstantNotSet) {
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(LoadScenarioOrDefault("", {"model.name=Qwen3-235B-A22B", "model.experts=128"}).ok());
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("(built-in default scenario): warning: model.name is 'Qwen3-235B-A22B' but "
                      "model.layers is not set"),
            std::string::npos)
      << said;
  EXPECT_EQ(said.find("model.experts is not set"), std::string::npos) << said;
}

TEST(ModelName, IsAHuggingFaceNameWrittenBackWithTheScenario) {
  for (const char* bad : {"''", "'a b'", "'Qwen3;rm'", "[Qwen3]"}) {
    auto s = ParseScenario(fmt::format("model:\n  name: {}\n", bad), "bad.yaml");
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.status().message().find("bad.yaml:2:"), std::string::npos) << s.status().message();
    EXPECT_NE(s.status().message().find("model.name"), std::string::npos) << s.status().message();
  }
  auto s = ParseScenario(AllConstantsBut("Qwen/Qwen3-235B-A22B", {}), "q.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->model.name, "Qwen/Qwen3-235B-A22B");
  const std::string written = ScenarioToYaml(*s);
  EXPECT_EQ(YAML::Load(written)["model"]["name"].Scalar(), "Qwen/Qwen3-235B-A22B");
  // The resolved scenario sets every constant: reading it back warns of nothing.
  ::testing::internal::CaptureStderr();
  auto again = ParseScenario(written, "q-resolved.yaml");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->model.name, "Qwen/Qwen3-235B-A22B");
  // The default names DeepSeek-V3.
  EXPECT_EQ(ParseScenario("", "d.yaml")->model.name, "DeepSeek-V3");
}

}  // namespace
}  // namespace eplb
