// Load and placement files: formats and error messages.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "eplb/formats/load_file.h"
#include "eplb/io/placement_files.h"
#include "test_util.h"

namespace eplb {
namespace {

std::string Msg(const Result<LoadMatrix>& r) {
  return r.ok() ? "ok" : r.status().message();
}

TEST(LoadFile, CsvSkipsBlankAndCommentLines) {
  auto m = ParseLoadCsv("# layer loads\n1, 2,3\n\n4,5,6.5\n", "l.csv");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->rows(), 2);
  EXPECT_DOUBLE_EQ((*m)(1, 2), 6.5);
}

TEST(LoadFile, CsvErrorsNameFileLineAndField) {
  EXPECT_EQ(Msg(ParseLoadCsv("1,2\n3,x\n", "l.csv")),
            "l.csv:2: field 2 is 'x'; expected a non-negative number");
  EXPECT_EQ(Msg(ParseLoadCsv("1,2\n3,-4\n", "l.csv")),
            "l.csv:2: field 2 is -4; loads must be finite and non-negative");
  EXPECT_EQ(Msg(ParseLoadCsv("1,2\n3\n", "l.csv")),
            "l.csv:2: 1 experts on this line but 2 on the first layer's line; every layer needs "
            "the same count");
  EXPECT_EQ(Msg(ParseLoadCsv("1,,2\n", "l.csv")),
            "l.csv:1: field 2 is ''; expected a non-negative number");
  EXPECT_EQ(Msg(ParseLoadCsv("# nothing\n", "l.csv")), "l.csv: no layers of load found");
}

TEST(LoadFile, JsonLayouts) {
  auto a = ParseLoadJson("[[1,2],[3,4]]", "a.json");
  auto b = ParseLoadJson(R"({"load": [[1,2],[3,4]]})", "b.json");
  auto c = ParseLoadJson(R"({"logical_count": [[[1,0],[1,4]], [[0,2],[2,0]]]})", "c.json");
  ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << c.status().message();
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(*a, *c);  // steps are summed
}

TEST(LoadFile, JsonErrorsNameThePath) {
  EXPECT_EQ(Msg(ParseLoadJson(R"({"load": [[1,2],[3,"x"]]})", "f.json")),
            "f.json: load[1][1] is \"x\"; expected a non-negative number");
  EXPECT_EQ(
      Msg(ParseLoadJson(R"([[1,2],[3]])", "f.json")),
      "f.json: load[1] has 1 experts but the first layer has 2; every layer needs the same count");
  EXPECT_EQ(Msg(ParseLoadJson(R"({"weights": []})", "f.json")),
            "f.json: the JSON object has none of the keys 'load', 'logical_count' or 'steps'");
  EXPECT_EQ(Msg(ParseLoadJson(R"([[1,2],[3,-1]])", "f.json")),
            "f.json: load of layer 1, expert 1 is -1; loads must be finite and non-negative");
  EXPECT_NE(Msg(ParseLoadJson("[[1,2]", "f.json")).find("f.json:1:7: not valid JSON"),
            std::string::npos);
}

// Hostile JSON is a message, never a crash: nesting that would overflow the stack, numbers beyond
// a double, loads beyond what the arithmetic downstream keeps finite.
TEST(LoadFile, HostileJsonIsAnError) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_NE(Msg(ParseLoadJson(deep, "f.json"))
                .find("f.json:1:65: not valid here: arrays and objects nest more than 64 deep"),
            std::string::npos)
      << Msg(ParseLoadJson(deep, "f.json"));
  EXPECT_NE(Msg(ParseLoadJson("[[1e400]]", "f.json")).find("number overflow"), std::string::npos)
      << Msg(ParseLoadJson("[[1e400]]", "f.json"));
  EXPECT_EQ(Msg(ParseLoadJson("[[1, 1e300]]", "f.json")),
            "f.json: load of layer 0, expert 1 is 1e+300; loads are at most 1e+15 tokens");
  EXPECT_EQ(Msg(ParseLoadCsv("1,1e300\n", "f.csv")),
            "f.csv: load of layer 0, expert 1 is 1e+300; loads are at most 1e+15 tokens");
  // Brackets inside strings do not count.
  EXPECT_TRUE(
      ParseLoadJson(
          R"({"note": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", "load": [[1]]})",
          "f.json")
          .ok());
}

TEST(LoadFile, ReadsRecordedRealLoads) {
  // Qwen3-30B-A3B prefill: 3 steps × 48 layers × 128 experts, summed over steps.
  auto m = ReadLoadFile(testing::DataPath("qwen3-30b-a3b-prefill.json"));
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->rows(), 48);
  EXPECT_EQ(m->cols(), 128);
  EXPECT_GT(m->sum(), 0);
}

TEST(LoadFile, MissingFileIsAnIoError) {
  auto m = ReadLoadFile("/nonexistent/load.csv");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Status::Code::kIoError);
  EXPECT_EQ(m.status().message(), "/nonexistent/load.csv: cannot open: No such file or directory");
}

TEST(PlacementFile, RoundTripsAndValidates) {
  auto p = ParsePlacementJson(R"({"phy2log": [[0,1,2,0],[2,1,0,1]]})", "p.json");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->num_experts(), 3);
  std::string text = "{";
  AppendPlacementJsonMembers(text, *p);
  text += "}";
  // The text is JSON as nlohmann writes it.
  EXPECT_EQ(nlohmann::ordered_json::parse(text).dump(), text);
  auto again = ParsePlacementJson(text, "again.json");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*p, *again);
  EXPECT_EQ(ParsePlacementJson(R"({"phy2log": [[0,1,"a"]]})", "p.json").status().message(),
            "p.json: phy2log[0][2] is \"a\"; expected an expert id (-1 for an empty slot)");
  EXPECT_EQ(ParsePlacementJson(R"({"phy2log": [[0,1,1]], "num_experts": 3})", "p.json")
                .status()
                .message(),
            "p.json: layer 0: logical expert 2 has no replica; every expert 0..2 needs at least "
            "one slot");
  EXPECT_EQ(ParsePlacementJson(R"([[0,1]])", "p.json").status().message(),
            "p.json: expected a JSON object with key 'phy2log' or 'physical_to_logical_map' "
            "(layers × slots)");
}

// What `eplb rebalance --format sglang|vllm|trtllm` writes reads back as the same placement,
// TensorRT-LLM's layers keyed from the first MoE layer's index.
TEST(PlacementFile, EngineFilesReadBackAsThePlacement) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    const int experts = 4 + static_cast<int>(rng() % 12);
    const int slots = experts + static_cast<int>(rng() % 9);
    const Placement p =
        testing::RandomPlacement(rng, 1 + static_cast<int>(rng() % 5), slots, experts);
    const std::string json = EnginePlacementFile(EngineFormat::kSglang, p);
    EXPECT_EQ(json, nlohmann::json::parse(json).dump() + "\n");
    auto sglang = ParsePlacementJson(json, "sglang.json");
    ASSERT_TRUE(sglang.ok()) << sglang.status().message();
    EXPECT_EQ(*sglang, p);
    const auto vllm = nlohmann::json::parse(EnginePlacementFile(EngineFormat::kVllm, p));
    ASSERT_EQ(vllm["physical_to_logical_map"],
              nlohmann::json::parse(json)["physical_to_logical_map"]);
    for (int l = 0; l < p.num_layers(); ++l) {
      for (int e = 0; e < experts; ++e) {
        const auto replicas = p.replicas(l, e);
        EXPECT_EQ(vllm["logical_replica_count"][l][e], replicas.size());
        const auto& row = vllm["logical_to_physical_map"][l][e];
        ASSERT_EQ(row.size(), static_cast<size_t>(slots - experts + 1));
        for (size_t i = 0; i < row.size(); ++i) {
          EXPECT_EQ(row[i].get<int>(), i < replicas.size() ? replicas[i] : -1);
        }
      }
    }
    const std::string yaml = EnginePlacementFile(EngineFormat::kTrtllm, p, 3);
    EXPECT_NE(yaml.find("initial_global_assignments:\n  3: ["), std::string::npos) << yaml;
    EXPECT_NE(yaml.find(fmt::format("num_slots: {}\nlayer_updates_per_iter: 0\n", slots)),
              std::string::npos)
        << yaml;
    auto trtllm = ParseTrtllmPlacement(yaml, "moe_load_balancer.yaml", experts);
    ASSERT_TRUE(trtllm.ok()) << trtllm.status().message();
    EXPECT_EQ(*trtllm, p);
  }
}

// vLLM's and SGLang's name for phy2log reads the same, and one file may not give both.
TEST(PlacementFile, ReadsTheEnginesPhysicalToLogicalMap) {
  auto ours = ParsePlacementJson(R"({"phy2log": [[0,1,2,0],[2,1,0,1]]})", "a.json");
  auto theirs =
      ParsePlacementJson(R"({"physical_to_logical_map": [[0,1,2,0],[2,1,0,1]]})", "b.json");
  ASSERT_TRUE(theirs.ok()) << theirs.status().message();
  EXPECT_EQ(*ours, *theirs);
  EXPECT_EQ(
      ParsePlacementJson(R"({"physical_to_logical_map": [[0,"x"]]})", "b.json").status().message(),
      "b.json: physical_to_logical_map[0][1] is \"x\"; expected an expert id (-1 for an "
      "empty slot)");
  EXPECT_EQ(ParsePlacementJson(R"({"phy2log": [[0]], "physical_to_logical_map": [[0]]})", "c.json")
                .status()
                .message(),
            "c.json: both 'phy2log' and 'physical_to_logical_map' are given; keep one");
}

// One row per kind of hostile placement file: each is a message naming the file, never a crash.
TEST(PlacementFile, HostileInputTable) {
  struct Case {
    const char* name;
    std::string json;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"deep nesting", std::string(100000, '[') + std::string(100000, ']'),
       "p.json:1:65: not valid here: arrays and objects nest more than 64 deep"},
      {"number beyond a double", R"({"phy2log": [[1e400]]})", "number overflow"},
      {"a real for an id", R"({"phy2log": [[0, 1.5]]})",
       "phy2log[0][1] is 1.5; expected an expert id"},
      {"an id beyond the range", R"({"phy2log": [[0, 1099511627776]]})",
       "phy2log[0][1] is 1099511627776; expected an expert id"},
      {"num_experts beyond the range", R"({"phy2log": [[0]], "num_experts": 4294967297})",
       "num_experts is 4294967297; expected an integer within 1..16777216"},
      {"layers of different widths", R"({"phy2log": [[0, 1], [0]]})", "p.json: "},
      {"not JSON", "\xff\xfe", "p.json:1:1: not valid JSON"},
      {"empty", "", "not valid JSON"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto p = ParsePlacementJson(c.json, "p.json");
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.status().message().find(c.expected), std::string::npos) << p.status().message();
  }
}

}  // namespace
}  // namespace eplb
