// Load series: every layout keeps its steps, the engines' files read as they write them, and
// nothing is silently misread (a wrong width, a per-slot load, a broken tensor file).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>

#include <gtest/gtest.h>

#include "eplb/engine/workload.h"
#include "eplb/formats/load_file.h"
#include "eplb/formats/safetensors.h"
#include "eplb/io/placement_files.h"
#include "test_util.h"

namespace fs = std::filesystem;

namespace eplb {
namespace {

std::string Msg(const Result<LoadSeries>& r) {
  return r.ok() ? "ok" : r.status().message();
}

LoadMatrix M(std::initializer_list<std::initializer_list<double>> rows) {
  LoadMatrix m(static_cast<Eigen::Index>(rows.size()),
               static_cast<Eigen::Index>(rows.begin()->size()));
  int l = 0;
  for (const auto& row : rows) {
    int e = 0;
    for (double v : row) m(l, e++) = v;
    ++l;
  }
  return m;
}

class LoadSeriesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("eplb-load-series-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& bytes) {
    const fs::path p = dir_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }
  fs::path dir_;
};

TEST(LoadSeries, JsonStepsStayStepsAndTotalIsTheirSum) {
  auto s = ParseLoadJsonSeries(R"({"logical_count": [[[1,0],[1,4]], [[0,2],[2,0]]]})", "c.json");
  ASSERT_TRUE(s.ok()) << Msg(s);
  ASSERT_EQ(s->steps.size(), 2u);
  EXPECT_EQ(s->steps[0], M({{1, 0}, {1, 4}}));
  EXPECT_EQ(s->steps[1], M({{0, 2}, {2, 0}}));
  EXPECT_EQ(s->Total(), M({{1, 2}, {3, 4}}));
  EXPECT_EQ(Msg(ParseLoadJsonSeries("[[[1,2]], [[1,2],[3,4]]]", "f.json")),
            "f.json: load[1] has 2 layers but load[0] has 1");
}

TEST(LoadSeries, ChunksCutTheStepsInOrder) {
  LoadSeries s;
  for (int t = 0; t < 5; ++t) s.steps.push_back(M({{double(t), 1}}));
  const auto chunks = s.Chunks(2);  // 3 steps, then 2
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0], M({{0 + 1 + 2, 3}}));
  EXPECT_EQ(chunks[1], M({{3 + 4, 2}}));
  EXPECT_EQ(s.Chunks(16).size(), 5u);
}

TEST(LoadSeries, CsvHeaderRowsAndIndexColumns) {
  // pandas' df.to_csv(): an unnamed index column over numbered expert columns.
  auto pandas = ParseLoadCsvSeries(",0,1,2\n0,1,2,3\n1,4,5,6\n", "p.csv");
  ASSERT_TRUE(pandas.ok()) << Msg(pandas);
  EXPECT_EQ(pandas->Total(), M({{1, 2, 3}, {4, 5, 6}}));
  auto named = ParseLoadCsvSeries("e0,e1\n1,2\n3,4\n", "n.csv");
  ASSERT_TRUE(named.ok()) << Msg(named);
  EXPECT_EQ(named->Total(), M({{1, 2}, {3, 4}}));
  // step and layer columns: a series in the wide layout.
  auto stepped =
      ParseLoadCsvSeries("step,layer,e0,e1\n0,0,1,2\n0,1,3,4\n7,0,5,6\n7,1,7,8\n", "s.csv");
  ASSERT_TRUE(stepped.ok()) << Msg(stepped);
  ASSERT_EQ(stepped->steps.size(), 2u);
  EXPECT_EQ(stepped->steps[1], M({{5, 6}, {7, 8}}));
  EXPECT_EQ(Msg(ParseLoadCsvSeries("layer,e0\n1,5\n", "b.csv")),
            "b.csv:2: field 1 (layer) is '1'; expected 0 (layers count 0, 1, ... within each "
            "step)");
  EXPECT_EQ(Msg(ParseLoadCsvSeries("step,layer,e0\n0,0,1\n0,1,1\n1,0,1\n", "b.csv")),
            "b.csv:4: step 1 has 1 layers but the first step has 2");
  EXPECT_EQ(Msg(ParseLoadCsvSeries("a,b\n1,2,3\n", "b.csv")),
            "b.csv:2: 3 fields on this line but 2 in the header");
  EXPECT_EQ(Msg(ParseLoadCsvSeries("layer\n0\n", "b.csv")),
            "b.csv:1: the header names only index columns; expected a column per expert");
}

TEST(LoadSeries, CsvLongFormatInAnyColumnOrder) {
  auto s = ParseLoadCsvSeries("tokens,expert,layer,step\n5,1,0,3\n2,0,0,9\n1,0,0,3\n", "l.csv");
  ASSERT_TRUE(s.ok()) << Msg(s);
  ASSERT_EQ(s->steps.size(), 2u);  // steps 3 and 9, in order
  EXPECT_EQ(s->steps[0], M({{1, 5}}));
  EXPECT_EQ(s->steps[1], M({{2, 0}}));
  // A cell given twice is refused with both lines, not summed.
  EXPECT_EQ(
      Msg(ParseLoadCsvSeries("tokens,expert,layer,step\n5,1,0,3\n2,0,0,9\n1,1,0,3\n", "l.csv")),
      "l.csv:4: step 3, layer 0, expert 1 is given again (first at line 2); give each cell "
      "once");
  // A first line with a bad number is data, refused, not a header dropped; before a row of
  // numbers the file is not recognised as a load, so nothing of it is quoted (base/excerpt.h).
  EXPECT_EQ(Msg(ParseLoadCsvSeries("100junk,2,3,4\n5,6,7,8\n", "j.csv")),
            "j.csv:1: field 1 is not a number (not quoted: no row of numbers came before); "
            "expected a non-negative number");
  EXPECT_EQ(Msg(ParseLoadCsvSeries("1,2,3,4\n100junk,6,7,8\n", "j.csv")),
            "j.csv:2: field 1 is '100junk'; expected a non-negative number");
  auto one = ParseLoadCsvSeries("layer,expert,tokens\n1,0,4\n", "l.csv");
  ASSERT_TRUE(one.ok()) << Msg(one);
  EXPECT_EQ(one->steps[0], M({{0}, {4}}));
  EXPECT_EQ(Msg(ParseLoadCsvSeries("step,layer,expert,tokens\n0,0,-1,3\n", "l.csv")),
            "l.csv:2: step 0, layer 0, expert -1, tokens 3; step, layer and expert count from 0 "
            "(layers below 1048576, experts below 16777216) and tokens are within [0, 1e+15]");
  EXPECT_NE(
      Msg(ParseLoadCsvSeries("layer,expert,tokens,extra\n", "l.csv")).find("field 4 is 'extra'"),
      std::string::npos);
}

TEST_F(LoadSeriesTest, TheWidthIsCheckedAgainstTheModel) {
  const std::string path = Write("w.csv", "1,2,3\n");
  LoadReadOptions o;
  o.experts = 2;
  EXPECT_EQ(Msg(ReadLoadSeries(path, o)),
            path +
                ": the load has 3 experts per layer but --experts is 2; a load counted per "
                "physical slot (vLLM's windows) needs the placement that maps slots to experts");
}

TEST_F(LoadSeriesTest, PerSlotLoadFoldsThroughThePlacement) {
  const std::string path = Write("slots.json", "[[[1,2,3,4]], [[10,20,30,40]]]");
  auto map = ParsePlacementJson(R"({"physical_to_logical_map": [[0,1,2,0]]})", "m.json");
  ASSERT_TRUE(map.ok());
  LoadReadOptions o;
  o.experts = 3;
  o.physical_map = &*map;
  auto s = ReadLoadSeries(path, o);
  ASSERT_TRUE(s.ok()) << Msg(s);
  ASSERT_EQ(s->steps.size(), 2u);
  EXPECT_EQ(s->steps[0], M({{1 + 4, 2, 3}}));
  EXPECT_EQ(s->steps[1], M({{50, 20, 30}}));
  auto narrow = ParsePlacementJson(R"({"phy2log": [[0,1,2]]})", "n.json");
  o.physical_map = &*narrow;
  EXPECT_EQ(Msg(ReadLoadSeries(path, o)),
            path +
                ": the load has 1 layers × 4 columns but the physical-to-logical map has 1 "
                "layers × 3 slots; a per-slot load needs one column per slot");
}

TEST(Safetensors, RoundTripsAndRefusesBrokenFiles) {
  std::map<std::string, Tensor> in;
  in["0_3"] = {"F64", {3}, {1, 2, 3}};
  in["1_3"] = {"F64", {2, 2}, {4, 5, 6, 7}};
  const std::string bytes = WriteSafetensors(in);
  auto out = ParseSafetensors(bytes, "t.safetensors");
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->at("1_3").values, (std::vector<double>{4, 5, 6, 7}));
  EXPECT_EQ(out->at("1_3").shape, (std::vector<int64_t>{2, 2}));

  auto err = [](std::string_view b) {
    auto r = ParseSafetensors(b, "t.safetensors");
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_EQ(err("1234"),
            "t.safetensors: 4 bytes; a safetensors file starts with an 8-byte "
            "header length");
  EXPECT_NE(err(bytes.substr(0, bytes.size() - 8)).find("the offsets must lie within it"),
            std::string::npos);
  std::string huge = bytes;
  huge[7] = '\x7f';
  EXPECT_NE(err(huge).find("not a safetensors file or a truncated one"), std::string::npos);
  auto header = [](const std::string& json, size_t data) {
    std::string h = json;
    const uint64_t n = h.size();
    return std::string(reinterpret_cast<const char*>(&n), 8) + h + std::string(data, '\0');
  };
  EXPECT_NE(err(header(R"({"a":{"dtype":"F8","shape":[1],"data_offsets":[0,1]}})", 1))
                .find("has dtype F8; expected one of"),
            std::string::npos);
  EXPECT_NE(err(header(R"({"a":{"dtype":"I32","shape":[3],"data_offsets":[0,8]}})", 8))
                .find("span the shape's elements"),
            std::string::npos);
  EXPECT_NE(err(header(R"({"a":{"dtype":"I32","shape":[1099511627776,1099511627776],)"
                       R"("data_offsets":[0,4]}})",
                       4))
                .find("tensor 'a'"),
            std::string::npos);
  // The tensors tile the data section: overlapping offsets (two tensors reading one byte), gaps
  // and bytes left over are refused, as the format says.
  EXPECT_NE(err(header(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                       R"("b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}})",
                       3))
                .find("tensor 'b' starts at byte 1 of the data section, but the tensors before "
                      "it end at 2; safetensors' tensors tile the data section without "
                      "overlapping"),
            std::string::npos);
  EXPECT_NE(err(header(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})", 2))
                .find("without gaps"),
            std::string::npos);
  EXPECT_NE(err(header(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 2))
                .find("the tensors cover 1 of the data section's 2 bytes"),
            std::string::npos);
  // Integer and half-precision dtypes read as their values.
  const int32_t ints[2] = {7, -1};
  std::string i32 = header(R"({"x":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})", 0);
  i32.append(reinterpret_cast<const char*>(ints), 8);
  auto r = ParseSafetensors(i32, "i.safetensors");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->at("x").values, (std::vector<double>{7, -1}));
  const uint16_t halves[2] = {0x3c00, 0x4000};  // 1.0 and 2.0 in F16; BF16 0x3f80 is 1.0
  std::string f16 = header(R"({"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", 0);
  f16.append(reinterpret_cast<const char*>(halves), 4);
  EXPECT_EQ(ParseSafetensors(f16, "h")->at("h").values, (std::vector<double>{1, 2}));
}

// TensorRT-LLM's EXPERT_STATISTIC_PATH: per-rank counts summed, iterations as steps, its MoE
// layer numbers (3, 4 for DeepSeek) as layers 0, 1.
TEST_F(LoadSeriesTest, ReadsTensorRtLlmStatistics) {
  Write("stats/meta_info.json", R"({"num_experts": 3, "num_experts_per_token": 2})");
  std::map<std::string, Tensor> rank0, rank1;
  rank0["100_3"] = {"F64", {3}, {1, 2, 3}};
  rank0["100_4"] = {"F64", {3}, {0, 0, 1}};
  rank0["101_3"] = {"F64", {3}, {5, 0, 0}};
  rank0["101_4"] = {"F64", {3}, {0, 5, 0}};
  rank1 = rank0;
  rank1["100_3"].values = {10, 0, 0};
  Write("stats/rank0.safetensors", WriteSafetensors(rank0));
  Write("stats/rank1.safetensors", WriteSafetensors(rank1));
  Write("stats/cooccurrence_rank0.safetensors", "not read");
  auto s = ReadLoadSeries((dir_ / "stats").string());
  ASSERT_TRUE(s.ok()) << Msg(s);
  ASSERT_EQ(s->steps.size(), 2u);
  EXPECT_EQ(s->steps[0], M({{11, 2, 3}, {0, 0, 2}}));
  EXPECT_EQ(s->steps[1], M({{10, 0, 0}, {0, 10, 0}}));

  rank1.erase("101_4");
  rank1["101_5"] = {"F64", {3}, {1, 1, 1}};
  Write("stats/rank1.safetensors", WriteSafetensors(rank1));
  EXPECT_NE(Msg(ReadLoadSeries((dir_ / "stats").string())).find("has no counts for layer"),
            std::string::npos);
  rank1["oops"] = {"F64", {3}, {1, 1, 1}};
  Write("stats/rank1.safetensors", WriteSafetensors(rank1));
  EXPECT_NE(Msg(ReadLoadSeries((dir_ / "stats").string()))
                .find("tensor 'oops' is not named ITERATION_LAYER"),
            std::string::npos);
  // A layer's counts are one vector of counts: a 2-D tensor of as many values, or bools, are not.
  rank1.erase("oops");
  rank1["101_5"] = {"F64", {1, 3}, {1, 1, 1}};
  Write("stats/rank1.safetensors", WriteSafetensors(rank1));
  EXPECT_NE(Msg(ReadLoadSeries((dir_ / "stats").string()))
                .find("tensor '101_5' has 2 dimensions; a layer's counts are one [num_experts] "
                      "vector"),
            std::string::npos);
  Write("stats/meta_info.json", R"({"num_experts": 4})");
  EXPECT_NE(Msg(ReadLoadSeries((dir_ / "stats").string()))
                .find("has 3 values but meta_info.json's num_experts is 4"),
            std::string::npos);
}

// A count is checked per slot, or per rank, before replicas of an expert or ranks are added:
// -7 beside +10 would fold to an acceptable 3, and 1e300 beside -1e300 to 0.
TEST(LoadSeries, EveryPhysicalCountIsCheckedBeforeReplicasAreFolded) {
  auto map = Placement::Create(2, 4, {0, 1, 0, 1});  // slots 0 and 2 hold expert 0
  ASSERT_TRUE(map.ok()) << map.status().message();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    std::string name;
    std::vector<double> slots;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"minus seven", {-7, 0, 10, 0}, "step 1, layer 0, slot 0 counts -7"},
      {"cancelling huge", {1e300, 0, -1e300, 0}, "step 1, layer 0, slot 0 counts 1e+300"},
      {"nan", {1, nan, 1, 0}, "step 1, layer 0, slot 1 counts nan"},
      {"inf", {1, 0, inf, 0}, "step 1, layer 0, slot 2 counts inf"},
      {"minus inf", {0, 0, 0, -inf}, "step 1, layer 0, slot 3 counts -inf"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    LoadSeries series;
    series.steps.push_back(M({{1, 2, 3, 4}}));  // a step that is fine, then the case
    series.steps.push_back(M({{c.slots[0], c.slots[1], c.slots[2], c.slots[3]}}));
    EXPECT_EQ(
        Msg(FoldPhysicalLoad(series, *map, "w.csv")),
        "w.csv: " + c.message + "; counts must be finite, non-negative and at most 1e+15 tokens");
  }
  LoadSeries fine;
  fine.steps.push_back(M({{10, 1, 7, 2}}));
  auto folded = FoldPhysicalLoad(fine, *map, "w.csv");
  ASSERT_TRUE(folded.ok()) << Msg(folded);
  EXPECT_EQ(folded->steps[0], M({{17, 3}}));
}

// TensorRT-LLM's ranks are summed: each rank's counts are checked first.
TEST_F(LoadSeriesTest, TensorRtLlmRanksAreCheckedBeforeTheyAreSummed) {
  Write("ranks/meta_info.json", R"({"num_experts": 2})");
  std::map<std::string, Tensor> rank0, rank1;
  rank0["100_3"] = {"F64", {2}, {-7, 1}};
  rank1["100_3"] = {"F64", {2}, {10, 1}};
  Write("ranks/rank0.safetensors", WriteSafetensors(rank0));
  Write("ranks/rank1.safetensors", WriteSafetensors(rank1));
  const std::string rank0_path = (dir_ / "ranks" / "rank0.safetensors").string();
  EXPECT_EQ(Msg(ReadLoadSeries((dir_ / "ranks").string())),
            rank0_path +
                ": tensor '100_3' counts -7 for expert 0; counts must be finite, non-negative and "
                "at most 1e+15 tokens");
  rank0["100_3"].values = {1e300, 1};
  rank1["100_3"].values = {-1e300, 1};
  Write("ranks/rank0.safetensors", WriteSafetensors(rank0));
  Write("ranks/rank1.safetensors", WriteSafetensors(rank1));
  EXPECT_NE(Msg(ReadLoadSeries((dir_ / "ranks").string())).find("counts 1e+300 for expert 0"),
            std::string::npos);
}

// A scenario trace with steps replays them one by one, in order, whatever its layout.
TEST_F(LoadSeriesTest, TraceStepsReplayStepByStep) {
  Scenario s;
  s.model.layers = 1;
  s.model.experts = 2;
  s.workload.kind = "trace";
  s.base_dir = dir_.string();
  for (const auto& [name, text] :
       {std::pair{"t.json", std::string(R"({"logical_count": [[[1,2]], [[3,4]], [[5,0]]]})")},
        {"t.csv", std::string("step,layer,expert,tokens\n0,0,0,1\n0,0,1,2\n1,0,0,3\n1,0,1,4\n"
                              "2,0,0,5\n")}}) {
    SCOPED_TRACE(name);
    s.workload.trace = Write(name, text);
    auto w = MakeWorkload(s);
    ASSERT_TRUE(w.ok()) << w.status().message();
    LoadMatrix m;
    for (const LoadMatrix& want : {M({{1, 2}}), M({{3, 4}}), M({{5, 0}}), M({{1, 2}})}) {
      (*w)->Next(m);
      EXPECT_EQ(m, want);
    }
  }
}

// A single recorded matrix is a distribution sampled per step, so each step moves around it
// (workload.step_sigma) as well as sampling; recorded steps replay exactly as recorded.
TEST_F(LoadSeriesTest, ASingleMatrixMovesEachStepAndRecordedStepsReplayAsRecorded) {
  Scenario s;
  s.model.layers = 1;
  s.model.experts = 64;
  s.workload.kind = "trace";
  s.workload.step_sigma = 0.3;
  s.base_dir = dir_.string();
  std::string row;
  for (int e = 0; e < 64; ++e) row += e == 0 ? "1000" : ",1000";
  s.workload.trace = Write("one.json", R"({"logical_count": [[[)" + row + "]]]}");
  auto w = MakeWorkload(s);
  ASSERT_TRUE(w.ok()) << w.status().message();
  LoadMatrix m;
  double sum = 0, squares = 0;
  const int steps = 50;
  for (int step = 0; step < steps; ++step) {
    (*w)->Next(m);
    sum += m.sum();
    squares += m.array().square().sum();
  }
  const double draws = steps * 64.0, mean = sum / draws, variance = squares / draws - mean * mean;
  // Sampling's 1,000 plus the movement's 1,000² · (e^{0.09} − 1): a spread of ~31%, not 3%.
  const double expected = 1000 + 1000.0 * 1000 * std::expm1(0.3 * 0.3);
  EXPECT_NEAR(mean, 1000, 20);
  EXPECT_NEAR(variance, expected, 0.1 * expected);

  s.model.experts = 2;
  s.workload.trace = Write("two.json", R"({"logical_count": [[[1,2]], [[3,4]]]})");
  auto replay = MakeWorkload(s);
  ASSERT_TRUE(replay.ok()) << replay.status().message();
  for (const LoadMatrix& want : {M({{1, 2}}), M({{3, 4}}), M({{1, 2}})}) {
    (*replay)->Next(m);
    EXPECT_EQ(m, want);
  }
}

TEST_F(LoadSeriesTest, AFolderOfNeitherKindIsNamed) {
  fs::create_directories(dir_ / "empty");
  EXPECT_EQ(Msg(ReadLoadSeries((dir_ / "empty").string())),
            (dir_ / "empty").string() +
                " is a folder with neither TensorRT-LLM's meta_info.json nor .pt dumps; expected a "
                "load file or one of those folders");
}

}  // namespace
}  // namespace eplb
