// End-to-end runs of the `eplb` command line: outputs and every error path.
#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_fixture.h"
#include "eplb/io/run_folder.h"
#include "test_util.h"

namespace eplb {
namespace {

[[maybe_unused]] size_t CountOf(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

constexpr const char* kReadmeArgs = "--replicas 16 --groups 4 --nodes 2 --gpus 8";

TEST_F(CliTest, RebalancePrintsDeepSeeksReadmePlacement) {
  const CliRun r = Eplb("rebalance --policy deepseek --load " + ReadmeLoad() + " " + kReadmeArgs);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["policy"], "deepseek");
  EXPECT_EQ(j["phy2log"].dump(),
            "[[5,6,5,7,8,4,3,4,10,9,10,2,0,1,11,1],[7,10,6,8,6,11,8,9,2,4,5,1,5,0,3,1]]");
  EXPECT_EQ(j["logcnt"].dump(), "[[1,2,1,1,2,2,1,1,1,1,2,1],[1,2,1,1,1,2,2,1,2,1,1,1]]");
  EXPECT_EQ(j["log2phy"][0][1].dump(), "[13,15]");
  EXPECT_EQ(j["log2phy"][0][0].dump(), "[12,-1]");
  // GPU loads by hand: layer 0 mean 129.125, max 156; layer 1 mean 144.5, max 179.5.
  EXPECT_NEAR(j["balancedness"].get<double>(), (129.125 + 144.5) / (156 + 179.5), 1e-12);
  EXPECT_GE(j["imbalance_ratio"].get<double>(), 0.0);
  EXPECT_GE(j["elapsed_ms"].get<double>(), 0.0);
  // Key order is part of the format.
  EXPECT_EQ(r.out.substr(0, 22), "{\"policy\":\"deepseek\",\"");
}

TEST_F(CliTest, RebalanceTableShowsEveryGpu) {
  const CliRun r = Eplb("rebalance --load " + ReadmeLoad() + " " + kReadmeArgs + " --format table");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("balancedness"), std::string::npos);
  EXPECT_NE(r.out.find("layer 1:"), std::string::npos);
  // GPU 0 of layer 0 holds experts 5 and 6 (loads 165/2 + 39 = 121.5).
  EXPECT_NE(r.out.find("     0    0        121.5  5 6\n"), std::string::npos) << r.out;
}

// Each engine's own file, and eplb reads back what it wrote for SGLang and vLLM.
TEST_F(CliTest, RebalanceWritesTheEnginesOwnFiles) {
  const std::string args = "rebalance --load " + ReadmeLoad() + " " + kReadmeArgs;
  const std::string phy2log =
      "[[5,6,5,7,8,4,3,4,10,9,10,2,0,1,11,1],[7,10,6,8,6,11,8,9,2,4,5,1,5,0,3,1]]";

  const CliRun sglang = Eplb(args + " --format sglang");
  ASSERT_EQ(sglang.code, 0) << sglang.err;
  EXPECT_EQ(sglang.out, "{\"physical_to_logical_map\":" + phy2log + "}\n");

  const CliRun vllm = Eplb(args + " --format vllm");
  ASSERT_EQ(vllm.code, 0) << vllm.err;
  const auto v = nlohmann::json::parse(vllm.out);
  EXPECT_EQ(v["physical_to_logical_map"].dump(), phy2log);
  EXPECT_EQ(v["logical_to_physical_map"][0][1].dump(), "[13,15,-1,-1,-1]");  // 16 - 12 + 1 wide
  EXPECT_EQ(v["logical_replica_count"][0].dump(), "[1,2,1,1,2,2,1,1,1,1,2,1]");

  const CliRun trtllm = Eplb(args + " --format trtllm --first-layer 3");
  ASSERT_EQ(trtllm.code, 0) << trtllm.err;
  EXPECT_EQ(trtllm.out,
            "initial_global_assignments:\n"
            "  3: [5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1]\n"
            "  4: [7, 10, 6, 8, 6, 11, 8, 9, 2, 4, 5, 1, 5, 0, 3, 1]\n"
            "num_slots: 16\n"
            "layer_updates_per_iter: 0\n");

  // Each engine's file is a placement eplb reads back (--current, plan) as the same placement.
  const std::string ours = Write("ours.json", Eplb(args).out);
  for (const auto& [name, text] : {std::pair{"s.json", sglang.out},
                                   {"v.json", vllm.out},
                                   {"moe_load_balancer.yaml", trtllm.out}}) {
    const CliRun again = Eplb(args + " --current " + Write(name, text));
    EXPECT_EQ(again.code, 0) << name << ": " << again.err;
    const CliRun plan = Eplb("plan --old " + ours + " --new " + Write(name, text));
    ASSERT_EQ(plan.code, 0) << name << ": " << plan.err;
    EXPECT_EQ(nlohmann::json::parse(plan.out)["layers"].size(), 0u) << name;  // nothing moves
  }
  ExpectErrors(
      {{"yaml without assignments",
        "plan --old " + ours + " --new " + Write("bad.yaml", "num_slots: 16\n"),
        "bad.yaml: expected TensorRT-LLM's moe_load_balancer.yaml with "
        "initial_global_assignments"},
       {"yaml slots",
        "plan --old " + ours + " --new " +
            Write("slots.yaml", "initial_global_assignments:\n  3: [0, 1]\nnum_slots: 4\n"),
        "slots.yaml: num_slots is 4 but layer 3 lists 2 slots"},
       {"yaml with a second document",
        "plan --old " + ours + " --new " +
            Write("two.yaml", trtllm.out + "---\ninitial_global_assignments:\n  3: [0]\n"),
        "two.yaml:6: a second YAML document; TensorRT-LLM's moe_load_balancer.yaml holds one"},
       {"yaml with a key twice",
        "plan --old " + ours + " --new " + Write("twice.yaml", trtllm.out + "num_slots: 16\n"),
        "twice.yaml:6:1: 'num_slots' is given twice (also at line 4)"},
       // Each format reads back as written: TensorRT-LLM's file has no empty slot.
       {"trtllm around lost GPUs", args + " --format trtllm --lost-ranks 3",
        "--format trtllm cannot hold --lost-ranks"}});
}

// Placements record the cluster they were made for; plan takes it from them and refuses another.
TEST_F(CliTest, PlacementsRecordTheirClusterAndPlanChecksIt) {
  const std::string args = "rebalance --load " + ReadmeLoad() + " " + kReadmeArgs;
  const CliRun made = Eplb(args);
  ASSERT_EQ(made.code, 0) << made.err;
  const auto j = nlohmann::json::parse(made.out);
  EXPECT_EQ(j["num_gpus"], 8);
  EXPECT_EQ(j["num_nodes"], 2);
  const std::string placed = Write("placed.json", made.out);
  const std::string initial =
      Write("initial.json", R"({"phy2log": [[0,1,2,3,4,5,6,7,8,9,10,11,0,1,2,3],
                                      [0,1,2,3,4,5,6,7,8,9,10,11,0,1,2,3]]})");
  const CliRun plan = Eplb("plan --old " + initial + " --new " + placed);
  ASSERT_EQ(plan.code, 0) << plan.err;
  EXPECT_GT(nlohmann::json::parse(plan.out)["bytes"]["nic"].get<int64_t>(), 0);  // two nodes
  ExpectErrors({
      {"other GPUs", "plan --old " + initial + " --new " + placed + " --gpus 16",
       "placed.json was made for 8 GPUs but --gpus is 16; plan it for the cluster it was made for"},
      {"other nodes", "plan --old " + initial + " --new " + placed + " --nodes 1",
       "placed.json was made for 2 nodes but --nodes is 1"},
      {"nothing recorded", "plan --old " + initial + " --new " + initial + " --gpus 8",
       "--nodes is not given and the placement files do not record num_nodes"},
      {"groups without nodes",
       "rebalance --load " + ReadmeLoad() + " --replicas 16 --groups 4 --gpus 8",
       "--groups is 4 but --nodes is not given"},
  });
}

// A load counted per physical slot (vLLM's window) is refused as logical experts, and folds
// through the placement it was counted under.
TEST_F(CliTest, RebalanceFoldsAPerSlotLoadAndChecksTheWidth) {
  const std::string slots = Write("slots.csv", "1,2,3,4,5,6\n6,5,4,3,2,1\n");
  const std::string map =
      Write("map.json", R"({"physical_to_logical_map": [[0,1,2,3,0,1],[0,1,2,3,0,1]]})");
  ExpectErrors(
      {{"per-slot width", "rebalance --load " + slots + " --experts 4 --replicas 6 --gpus 2",
        "the load has 6 experts per layer but --experts is 4; a load counted per "
        "physical slot"}});
  const CliRun r = Eplb("rebalance --load " + slots + " --physical-map " + map +
                        " --experts 4 --replicas 6 --gpus 2 --format table");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("4 experts, 6 slots"), std::string::npos) << r.out;
}

TEST_F(CliTest, RebalanceAcceptsJsonLoadAndCurrentPlacement) {
  const std::string load = Write("load.json", R"({"logical_count": [[4,1,1,1],[1,1,1,9]]})");
  const std::string current = Write("cur.json", R"({"phy2log": [[0,1,2,3,0,1],[0,1,2,3,0,1]]})");
  const CliRun r =
      Eplb("rebalance --load " + load + " --current " + current + " --replicas 6 --gpus 2");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["logcnt"].dump(), "[[3,1,1,1],[1,1,1,3]]");
}

TEST_F(CliTest, ErrorsExitTwoWithAClearMessage) {
  const std::string load = ReadmeLoad();
  const std::string bad_csv = Write("bad.csv", "1,2,3\n4,five,6\n");
  const std::string neg = Write("neg.csv", "1,2,3\n4,-5,6\n");
  const std::string bad_cur = Write("badcur.json", R"({"phy2log": [[0,1,99]]})");
  const std::string short_cur =
      Write("short.json", R"({"phy2log": [[0,1,2,3,4,5,6,7,8,9,10,11]]})");
  const std::vector<ErrorCase> cases = {
      {"missing file", "rebalance --load /no/such.csv --replicas 16 --gpus 8",
       "/no/such.csv: cannot open: No such file or directory"},
      {"bad csv value", "rebalance --load " + bad_csv + " --replicas 4 --gpus 2",
       "bad.csv:2: field 2 is 'five'; expected a non-negative number"},
      {"negative load", "rebalance --load " + neg + " --replicas 4 --gpus 2",
       "neg.csv:2: field 2 is -5; loads must be finite and non-negative"},
      {"replicas not multiple of gpus",
       "rebalance --load " + load + " --replicas 18 --nodes 2 --gpus 8",
       "replicas is 18; it must be a positive multiple of GPUs (8)"},
      {"gpus not multiple of nodes",
       "rebalance --load " + load + " --replicas 18 --nodes 4 --gpus 6",
       "GPUs is 6; it must be a positive multiple of nodes (4)"},
      {"fewer replicas than experts", "rebalance --load " + load + " --replicas 8 --gpus 8",
       "the cluster has 8 slots per layer but the load has 12 experts"},
      {"unknown policy", "rebalance --policy magic --load " + load + " " + kReadmeArgs,
       "unknown policy 'magic'; " + testing::ValidPoliciesText()},
      {"bad format", "rebalance --load " + load + " " + kReadmeArgs + " --format xml", "--format"},
      {"missing option", "rebalance --load " + load + " --gpus 8", "--replicas is required"},
      {"no subcommand", "", "A subcommand is required"},
      {"bad current", "rebalance --load " + load + " " + kReadmeArgs + " --current " + bad_cur,
       "badcur.json: phy2log[0][2] is 99; valid values are -1 (empty) or 0..11"},
      {"current shape", "rebalance --load " + load + " " + kReadmeArgs + " --current " + short_cur,
       "current placement: placement has 12 slots per layer but the cluster has 16"},
      {"groups zero", "rebalance --load " + load + " --replicas 16 --groups 0 --gpus 8",
       "groups is 0; it must be at least 1"},
  };
  ExpectErrors(cases);
}

// vLLM's sender-rule example, with a sixth rank keeping expert 1 so both placements are valid.
TEST_F(CliTest, PlanPrintsVllmsTransfers) {
  const std::string old_p = Write("old.json", R"({"phy2log": [[0,0,1,1,1,1]]})");
  const std::string new_p = Write("new.json", R"({"phy2log": [[0,0,0,0,0,1]]})");
  const CliRun r = Eplb("plan --old " + old_p + " --new " + new_p +
                        " --gpus 6 --nodes 1 --sender-rule vllm --expert-bytes 1000 --nvlink-bw 1 "
                        "--nvlink-latency-us 0");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["layers"].size(), 1u);
  std::set<std::tuple<int, int, int>> moves;
  for (const auto& t : j["layers"][0]["transfers"]) {
    moves.insert({t["src_rank"].get<int>(), t["dst_rank"].get<int>(), t["expert"].get<int>()});
    EXPECT_EQ(t["link"], "nvlink");
    EXPECT_EQ(t["bytes"], 1000);
  }
  EXPECT_EQ(moves, (std::set<std::tuple<int, int, int>>{{0, 2, 0}, {0, 4, 0}, {1, 3, 0}}));
  // Rank 0 sends two experts: two rounds of 1 µs at 1 GB/s; that is also the bound.
  EXPECT_EQ(j["rounds"], 2);
  EXPECT_NEAR(j["makespan_s"].get<double>(), 2e-6, 1e-15);
  EXPECT_NEAR(j["lower_bound_s"].get<double>(), 2e-6, 1e-15);
  EXPECT_EQ(j["bytes"]["nvlink"], 3000);
}

TEST_F(CliTest, PlanTableComparesSchedulesAndPreservesSlots) {
  const std::string old_p = Write("old.json", R"({"phy2log": [[0,1,2,3,4,5,6,7]]})");
  const std::string new_p = Write("new.json", R"({"phy2log": [[1,5,0,4,6,2,7,3]]})");
  const CliRun r =
      Eplb("plan --old " + old_p + " --new " + new_p + " --gpus 2 --nodes 1 --format table");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("greedy-pairs"), std::string::npos);
  EXPECT_NE(r.out.find("4 transfers"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("4 local copies"), std::string::npos) << r.out;
  const CliRun kept = Eplb("plan --old " + old_p + " --new " + new_p +
                           " --gpus 2 --nodes 1 --format table --preserve-slots");
  ASSERT_EQ(kept.code, 0) << kept.err;
  EXPECT_NE(kept.out.find("4 transfers"), std::string::npos) << kept.out;
  EXPECT_NE(kept.out.find("0 local copies"), std::string::npos) << kept.out;
}

TEST_F(CliTest, PlanErrorsExitTwo) {
  const std::string a = Write("a.json", R"({"phy2log": [[0,1,2,3]]})");
  const std::string b = Write("b.json", R"({"phy2log": [[0,1,2,3,0,1]]})");
  const std::string two = Write("two.json", R"({"phy2log": [[0,1,2,3],[0,1,2,3]]})");
  const std::string bad = Write("bad.json", R"({"phy2log": [[0,1,"x",3]]})");
  const std::vector<ErrorCase> cases = {
      {"shape", "plan --old " + a + " --new " + b + " --gpus 2 --nodes 1",
       "a.json has 1 layers × 4 slots but"},
      {"layers", "plan --old " + a + " --new " + two + " --gpus 2 --nodes 1",
       "has 1 layers × 4 slots but"},
      {"bad file", "plan --old " + a + " --new " + bad + " --gpus 2 --nodes 1",
       "bad.json: phy2log[0][2] is \"x\""},
      {"gpus", "plan --old " + a + " --new " + a + " --gpus 3 --nodes 1",
       "--gpus 3 --nodes 1 for " + a +
           " (4 slots per layer): replicas is 4; it must be a "
           "positive multiple of GPUs (3)"},
      {"nodes", "plan --old " + a + " --new " + a + " --gpus 2 --nodes 3",
       "GPUs is 2; it must be a positive multiple of nodes (3)"},
      {"rule", "plan --old " + a + " --new " + a + " --gpus 2 --nodes 1 --sender-rule nearest",
       "--sender-rule"},
      {"schedule", "plan --old " + a + " --new " + a + " --gpus 2 --nodes 1 --schedule magic",
       "--schedule"},
      {"bandwidth", "plan --old " + a + " --new " + a + " --gpus 2 --nodes 1 --nic-bw 0",
       "--nic-bw"},
      {"missing", "plan --old /no/such.json --new " + a + " --gpus 2 --nodes 1",
       "/no/such.json: cannot open"},
  };
  ExpectErrors(cases);
}

#ifdef EPLB_HAVE_SIM
// Compares two JSON values, numbers within a relative 1e-9, ignoring keys absent from `golden`.
void ExpectJsonNear(const nlohmann::json& golden, const nlohmann::json& actual,
                    const std::string& path) {
  if (golden.is_object()) {
    for (auto it = golden.begin(); it != golden.end(); ++it) {
      ASSERT_TRUE(actual.contains(it.key())) << path << "." << it.key();
      ExpectJsonNear(it.value(), actual[it.key()], path + "." + it.key());
    }
  } else if (golden.is_number()) {
    const double g = golden.get<double>(), a = actual.get<double>();
    EXPECT_NEAR(a, g, 1e-9 * std::max(1.0, std::abs(g))) << path;
  } else {
    EXPECT_EQ(golden, actual) << path;
  }
}

// The tiny scenario is deterministic given its seed: its summary and first metrics lines are
// golden (tests/data/golden, written by this build of eplb run and checked by hand).
TEST_F(CliTest, RunTinyScenarioMatchesGolden) {
  const std::string out = (dir_ / "tiny").string();
  const CliRun r = Eplb(std::string("run ") + EPLB_SCENARIO_DIR + "/tiny.yaml --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("tiny: 400 steps"), std::string::npos) << r.out;
  for (const char* f : {"scenario.yaml", "summary.json", "metrics.csv", "transfers.csv",
                        "placements.jsonl", "trace.json"}) {
    EXPECT_TRUE(fs::exists(fs::path(out) / f)) << f;
  }
  const auto golden =
      nlohmann::json::parse(testing::ReadFile(testing::DataPath("golden/tiny-summary.json")));
  const auto summary = nlohmann::json::parse(testing::ReadFile(out + "/summary.json"));
  ExpectJsonNear(golden, summary, "summary");
  const std::string metrics = testing::ReadFile(out + "/metrics.csv");
  const std::string head = testing::ReadFile(testing::DataPath("golden/tiny-metrics-head.csv"));
  EXPECT_EQ(metrics.substr(0, head.size()), head);
  // The trace parses, and every transfer in transfers.csv is a begin/end pair in it.
  const auto trace = nlohmann::json::parse(testing::ReadFile(out + "/trace.json"));
  size_t begins = 0;
  for (const auto& e : trace["traceEvents"]) begins += e["ph"] == "b";
  const std::string transfers = testing::ReadFile(out + "/transfers.csv");
  EXPECT_EQ(begins, static_cast<size_t>(std::count(transfers.begin(), transfers.end(), '\n') - 1));
  EXPECT_EQ(summary["transfers"].get<size_t>(), begins);
  // The resolved scenario reproduces the run.
  const CliRun again = Eplb("run " + out + "/scenario.yaml --out " + out + "2");
  ASSERT_EQ(again.code, 0) << again.err;
  ExpectJsonNear(golden, nlohmann::json::parse(testing::ReadFile(out + "2/summary.json")), "rerun");
}

// With one layer and spans of one step, a layer's balancedness is the step's: the two files
// agree line by line, and the report's heat map draws 1 − each value.
TEST_F(CliTest, LayerBalanceAgreesWithTheStepsBalance) {
  const std::string out = (dir_ / "one-layer").string();
  const CliRun r = Eplb(std::string("compare ") + EPLB_SCENARIO_DIR +
                        "/tiny.yaml --policies deepseek --set model.layers=1 --set run.steps=150 "
                        "--no-trace --out " +
                        out);
  ASSERT_EQ(r.code, 0) << r.err;
  auto folder = ReadRunFolder(out + "/deepseek");
  ASSERT_TRUE(folder.ok()) << folder.status().message();
  const RunResult& run = folder->run;
  ASSERT_EQ(run.layer_balance.size(), run.steps.size());
  const std::string map = testing::ReadFile(out + "/figures/layer-imbalance-deepseek.svg");
  for (size_t i = 0; i < run.steps.size(); ++i) {
    EXPECT_EQ(run.layer_balance[i].first_step, static_cast<int>(i));
    EXPECT_NEAR(run.layer_balance[i].balancedness[0], run.steps[i].balancedness, 1.5e-6)
        << "step " << i;
    const double imbalance = 1.0 - static_cast<double>(run.layer_balance[i].balancedness[0]);
    if (imbalance > 0) {
      EXPECT_NE(map.find(fmt::format("data-row=\"0\" data-column=\"{}\" data-value=\"{}\"", i,
                                     imbalance)),
                std::string::npos)
          << "step " << i;
    }
  }
}

// A dense heat map (61 layers × 200 spans, DeepSeek-V3's shape) stays the size of a paper's
// figure: one embedded PNG, not a rect per cell (2.4 MB each before).
TEST_F(CliTest, ALayerImbalanceMapOfManyLayersIsSmall) {
  const std::string out = (dir_ / "many-layers").string();
  const CliRun r = Eplb(std::string("compare ") + EPLB_SCENARIO_DIR +
                        "/tiny.yaml --policies deepseek --set model.layers=61 --set "
                        "run.steps=400 --no-trace --out " +
                        out);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string map = testing::ReadFile(out + "/figures/layer-imbalance-deepseek.svg");
  EXPECT_LT(map.size(), 300u * 1024);
  EXPECT_EQ(CountOf(map, "<image class=\"cells\" data-rows=\"61\" data-columns=\"200\""), 1u);
  EXPECT_NE(map.find(">step (columns of 2 steps)</text>"), std::string::npos);
  EXPECT_NE(map.find(">1 − balancedness</text>"), std::string::npos);
  // Layers ticked every 10 (not 61 labels on top of each other).
  EXPECT_NE(map.find("text-anchor=\"end\">60</text>"), std::string::npos);
  EXPECT_EQ(map.find("text-anchor=\"end\">59</text>"), std::string::npos);
}

// --no-trace leaves out only trace.json: the folder is complete for every reader, and a
// comparison's runs are written the same way.
TEST_F(CliTest, NoTraceLeavesOutOnlyTheTrace) {
  const std::string out = (dir_ / "no-trace").string();
  const CliRun r =
      Eplb(std::string("run ") + EPLB_SCENARIO_DIR + "/tiny.yaml --no-trace --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(fs::exists(fs::path(out) / "trace.json"));
  EXPECT_EQ(testing::ReadFile(out + "/manifest.tsv").find("trace.json"), std::string::npos);
  auto folder = ReadRunFolder(out);
  ASSERT_TRUE(folder.ok()) << folder.status().message();
  const auto golden =
      nlohmann::json::parse(testing::ReadFile(testing::DataPath("golden/tiny-summary.json")));
  ExpectJsonNear(golden, nlohmann::json::parse(testing::ReadFile(out + "/summary.json")),
                 "summary");
  const std::string cmp = (dir_ / "no-trace-compare").string();
  const CliRun c = Eplb(std::string("compare ") + EPLB_SCENARIO_DIR +
                        "/tiny.yaml --policies static,deepseek --no-trace --out " + cmp);
  ASSERT_EQ(c.code, 0) << c.err;
  for (const char* policy : {"static", "deepseek"}) {
    EXPECT_TRUE(fs::exists(fs::path(cmp) / policy / "summary.json")) << policy;
    EXPECT_FALSE(fs::exists(fs::path(cmp) / policy / "trace.json")) << policy;
  }
  EXPECT_TRUE(fs::exists(fs::path(cmp) / "report.html"));
}

// Every shipped scenario runs a short number of steps with a rearrangement in them, each its
// own test, so that a failing scenario names itself.
std::vector<std::string> ShippedScenarios() {
  std::vector<std::string> paths;
  for (const auto& entry : fs::directory_iterator(EPLB_SCENARIO_DIR)) {
    if (entry.path().extension() == ".yaml") paths.push_back(entry.path().string());
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

TEST(ShippedScenarios, AreFound) {
  EXPECT_GE(ShippedScenarios().size(), 6u);
}

class ShippedScenario : public CliTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(ShippedScenario, Runs) {
  const fs::path scenario = GetParam();
  const std::string out = (dir_ / scenario.stem()).string();
  const CliRun r = Eplb("run " + scenario.string() +
                        " --set run.steps=120 --set eplb.step_interval=40 --set "
                        "eplb.window_size=20 --out " +
                        out);
  ASSERT_EQ(r.code, 0) << scenario << ": " << r.err;
  const auto summary = nlohmann::json::parse(testing::ReadFile(out + "/summary.json"));
  EXPECT_EQ(summary["steps"], 120) << scenario;
  EXPECT_GE(summary["rearrangements"]["started"].get<int>(), 1) << scenario;
}

INSTANTIATE_TEST_SUITE_P(Every, ShippedScenario, ::testing::ValuesIn(ShippedScenarios()),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           std::string name = fs::path(param.param).stem().string();
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

TEST_F(CliTest, RunErrorsLeaveNoFolder) {
  const std::string bad = Write("bad.yaml", "cluster:\n  nodes: 2\n  gpu_per_node: 8\n");
  const std::string out = (dir_ / "never").string();
  const CliRun r = Eplb("run " + bad + " --out " + out);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("bad.yaml:3:3: unknown field 'cluster.gpu_per_node'"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(out));
  const CliRun set = Eplb("run " + bad + " --set cluster.gpu_per_node=8 --set nope=1 --out " + out);
  EXPECT_EQ(set.code, 2);
  const CliRun missing = Eplb("run /no/such.yaml --out " + out);
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("/no/such.yaml: cannot open"), std::string::npos);
  // An existing folder that is not a run folder is never replaced.
  fs::create_directories(out);
  Write("never/keep.txt", "mine");
  const CliRun clash =
      Eplb(std::string("run ") + EPLB_SCENARIO_DIR + "/tiny.yaml --set run.steps=10 --out " + out);
  EXPECT_EQ(clash.code, 2);
  EXPECT_NE(clash.err.find("is not a finished eplb folder"), std::string::npos) << clash.err;
  EXPECT_TRUE(fs::exists(fs::path(out) / "keep.txt"));
  for (const auto& e : fs::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().filename().string().find(".partial-"), std::string::npos) << e.path();
  }
}
// Checks that every tag opened in `html` is closed in order (void elements aside): enough to
// catch a truncated or malformed page without an HTML library.
std::string CheckTags(const std::string& html) {
  static const std::set<std::string> kVoid = {"meta",  "br",   "hr",      "img",
                                              "input", "link", "!DOCTYPE"};
  std::vector<std::string> open;
  for (size_t i = html.find('<'); i != std::string::npos; i = html.find('<', i + 1)) {
    const size_t end = html.find('>', i);
    if (end == std::string::npos) return "unterminated tag";
    std::string tag = html.substr(i + 1, end - i - 1);
    const bool closing = !tag.empty() && tag[0] == '/';
    const bool self_closing = !tag.empty() && tag.back() == '/';
    const std::string name =
        tag.substr(closing ? 1 : 0, tag.find_first_of(" />", closing ? 1 : 0) - (closing ? 1 : 0));
    if (kVoid.count(name) || self_closing) continue;
    if (!closing) {
      open.push_back(name);
    } else if (open.empty() || open.back() != name) {
      return "</" + name + "> closes " + (open.empty() ? "nothing" : "<" + open.back() + ">");
    } else {
      open.pop_back();
    }
  }
  return open.empty() ? "" : "<" + open.back() + "> never closed";
}

TEST_F(CliTest, CompareWritesAReportWhoseNumbersAreTheJsons) {
  const std::string out = (dir_ / "cmp").string();
  const CliRun r = Eplb(std::string("compare ") + EPLB_SCENARIO_DIR +
                        "/tiny.yaml --policies static,deepseek,timeseries,migration-aware "
                        "--set run.steps=1200 --out " +
                        out);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string html = testing::ReadFile(out + "/report.html");
  EXPECT_EQ(CheckTags(html), "");
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(html.find("http"), html.find("http://www.w3.org/2000/svg"));  // nothing to fetch
  for (const char* plot :
       {"Balancedness over the run", "Step latency over the run", "Balance against bytes moved",
        "Bytes moved per rearrangement", "CDF of step latency, steps "}) {
    EXPECT_NE(html.find(std::string("aria-label=\"") + plot), std::string::npos) << plot;
  }
  EXPECT_NE(html.find("<pre>name: tiny"), std::string::npos);
  const auto doc = nlohmann::json::parse(testing::ReadFile(out + "/comparison.json"));
  ASSERT_EQ(doc["policies"].size(), 4u);
  size_t values = 0;
  for (const auto& row : doc["policies"]) {
    const std::string label = row["label"];
    EXPECT_NE(html.find("data-series=\"" + label + "\""), std::string::npos) << label;
    EXPECT_TRUE(fs::exists(fs::path(out) / label / "summary.json"));
    // Every number in the table row equals comparison.json's.
    const size_t at = html.find("<tr><td>" + label + "</td>");
    ASSERT_NE(at, std::string::npos) << label;
    const std::string tr = html.substr(at, html.find("</tr>", at) - at);
    for (size_t k = tr.find("data-key=\""); k != std::string::npos;
         k = tr.find("data-key=\"", k + 1)) {
      const size_t ks = k + 10, ke = tr.find('"', ks);
      const std::string key = tr.substr(ks, ke - ks);
      const size_t vs = tr.find("data-value=\"", ke) + 12;
      const double v = std::stod(tr.substr(vs, tr.find('"', vs) - vs));
      EXPECT_NEAR(v, row[key].get<double>(), 1e-12 * std::max(1.0, std::abs(v)))
          << label << " " << key;
      ++values;
    }
  }
  EXPECT_EQ(values, 4u * 22u);
  // The trade-off scatter: one dot per policy at its row's bytes and balance after rearrangement.
  for (const auto& row : doc["policies"]) {
    const std::string label = row["label"];
    const size_t at = html.find("<circle class=\"point\" data-series=\"" + label + "\"");
    ASSERT_NE(at, std::string::npos) << label;
    const std::string dot = html.substr(at, html.find('>', at) - at);
    auto attribute = [&](const std::string& name) {
      const size_t vs = dot.find(name + "=\"") + name.size() + 2;
      return std::stod(dot.substr(vs, dot.find('"', vs) - vs));
    };
    EXPECT_DOUBLE_EQ(attribute("data-x"), row["bytes_per_rearrangement"].get<double>() / 1e9);
    EXPECT_DOUBLE_EQ(attribute("data-y"), row["following_balancedness"].get<double>());
  }
  // Rearrangement starts are marked at their steps, as rearrangements.csv has them.
  const std::string rearrangements = testing::ReadFile(out + "/deepseek/rearrangements.csv");
  const size_t first_line = rearrangements.find('\n') + 1;
  const std::string first_step =
      rearrangements.substr(first_line, rearrangements.find(',', first_line) - first_line);
  EXPECT_NE(html.find("class=\"mark\" data-x=\"" + first_step + "\""), std::string::npos)
      << first_step;
  // The workload's phase change (tiny.yaml: step 200) is marked too.
  EXPECT_NE(html.find("class=\"phase-mark\" data-x=\"200\""), std::string::npos);
  // The envelope of each series longer than the plot has points (1,200 steps, 400 points).
  EXPECT_NE(html.find("<polygon class=\"band\" data-series=\"deepseek\""), std::string::npos);
  // The load map of each policy: every GPU's tokens per expert at the last step of layer 0,
  // from the placement then in force and the latest rearrangement's window load.
  {
    auto folder = ReadRunFolder(out + "/deepseek");
    ASSERT_TRUE(folder.ok()) << folder.status().message();
    const RunResult& run = folder->run;
    const int last = static_cast<int>(run.steps.size()) - 1;
    const RearrangementRecord* window = nullptr;
    for (const auto& rec : run.rearrangements) {
      if (rec.step <= last) window = &rec;
    }
    ASSERT_NE(window, nullptr);
    std::vector<int32_t> row = folder->initial_phy2log[0];
    for (const auto& c : run.commits) {
      if (c.layer == 0 && c.step <= last) row = c.phy2log;
    }
    const int per_gpu = static_cast<int>(row.size()) / run.scenario.num_gpus();
    std::map<int32_t, int> count;
    for (int32_t e : row) ++count[e];
    std::map<std::pair<size_t, int32_t>, double> expected;
    for (size_t slot = 0; slot < row.size(); ++slot)
      expected[{slot / static_cast<size_t>(per_gpu), row[slot]}] +=
          static_cast<double>(window->window_load[static_cast<size_t>(row[slot])]) /
          count[row[slot]];
    const std::string map = testing::ReadFile(out + "/figures/load-map-deepseek.svg");
    EXPECT_EQ(CountOf(map, "<rect class=\"cell\""), expected.size());
    for (const auto& [where, tokens] : expected) {
      const std::string cell = fmt::format("data-row=\"{}\" data-column=\"{}\" data-value=\"{}\"",
                                           where.first, where.second, tokens);
      EXPECT_NE(map.find(cell), std::string::npos) << cell;
    }
    // Titled with its layer and step, a tick per GPU, the colour bar labelled.
    EXPECT_NE(html.find(fmt::format(
                  "aria-label=\"Load per GPU and expert, layer 0 at step {}: static\"", last)),
              std::string::npos);
    for (int gpu = 0; gpu < run.scenario.num_gpus(); ++gpu) {
      EXPECT_NE(map.find(fmt::format("class=\"tick\" text-anchor=\"end\">{}</text>", gpu)),
                std::string::npos)
          << gpu;
    }
    EXPECT_NE(map.find(">tokens in the window</text>"), std::string::npos);
  }
  // The layer-imbalance heat maps: 4 layers × 200 spans, dense, drawn as one embedded PNG with
  // steps on the x axis and a labelled colour bar, the size of a paper's figure.
  for (const auto& row : doc["policies"]) {
    const std::string label = row["label"];
    const std::string map = testing::ReadFile(out + "/figures/layer-imbalance-" + label + ".svg");
    EXPECT_LT(map.size(), 300u * 1024) << label;
    EXPECT_EQ(CountOf(map, "<image class=\"cells\" data-rows=\"4\" data-columns=\"200\""), 1u)
        << label;
    EXPECT_NE(map.find("href=\"data:image/png;base64,iVBORw0KGgo"), std::string::npos) << label;
    EXPECT_EQ(CountOf(map, "<rect class=\"cell\""), 0u) << label;
    EXPECT_NE(map.find(">step (columns of 6 steps)</text>"), std::string::npos) << label;
    EXPECT_NE(map.find("text-anchor=\"middle\">1200</text>"), std::string::npos) << label;
    EXPECT_NE(map.find("class=\"scale-label\""), std::string::npos) << label;
    EXPECT_NE(map.find(">1 − balancedness</text>"), std::string::npos) << label;
  }
  // Peak memory: a point per rearrangement on an axis that spans the values, and a table of the
  // resident and staged memory with a row per policy.
  {
    const std::string memory = testing::ReadFile(out + "/figures/peak-memory.svg");
    EXPECT_EQ(CountOf(memory, "<rect class=\"bar\""), 0u);
    EXPECT_GT(CountOf(memory, "<circle class=\"point\""), 0u);
    const size_t table = html.find("<table id=\"memory\">");
    ASSERT_NE(table, std::string::npos);
    const std::string rows = html.substr(table, html.find("</table>", table) - table);
    for (const auto& row : doc["policies"]) {
      EXPECT_NE(rows.find("<tr><td>" + row["label"].get<std::string>() + "</td>"),
                std::string::npos)
          << row["label"];
    }
  }
  // Each figure is also a standalone SVG file, the same chart with its style inside.
  for (const char* figure : {"balancedness", "step-time", "balance-vs-bytes",
                             "bytes-per-rearrangement", "step-time-cdf", "peak-memory"}) {
    const std::string svg = testing::ReadFile(out + "/figures/" + figure + ".svg");
    ASSERT_FALSE(svg.empty()) << figure;
    EXPECT_EQ(svg.rfind("<?xml", 0), 0u) << figure;
    EXPECT_NE(svg.find("<style>"), std::string::npos) << figure;
    const size_t body = svg.find("</style>") + 8;
    const std::string rest = svg.substr(body, svg.size() - body - 1);  // without the newline
    EXPECT_NE(html.find(rest), std::string::npos) << figure;
  }
  // The static policy never moves anything; the others do.
  EXPECT_EQ(doc["policies"][0]["bytes_per_rearrangement"], 0);
  EXPECT_GT(doc["policies"][1]["bytes_per_rearrangement"].get<double>(), 0);
  const std::string csv = testing::ReadFile(out + "/comparison.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 5);
}

// eplb.dispatch sweeps like any field: each point's run folder records its mode, and the modes
// that draw replicas per assignment change the steps' balance.
TEST_F(CliTest, SweepOverDispatchModesRecordsEachMode) {
  const std::string out = (dir_ / "dispatch").string();
  const CliRun r = Eplb(std::string("sweep ") + EPLB_SCENARIO_DIR +
                        "/tiny.yaml --vary eplb.dispatch=even,random,lp --set "
                        "eplb.num_redundant_experts=16 --set run.steps=250 --no-trace --out " +
                        out);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(testing::ReadFile(out + "/sweep.json"));
  ASSERT_EQ(doc["points"].size(), 3u);
  std::map<std::string, double> imbalance;
  for (size_t i = 0; i < 3; ++i) {
    const auto& p = doc["points"][i];
    const std::string mode = p["eplb.dispatch"].get<std::string>();
    imbalance[mode] = p["imbalance_ratio_mean"].get<double>();
    const std::string yaml = testing::ReadFile(fmt::format("{}/points/{}/scenario.yaml", out, i));
    EXPECT_NE(yaml.find("dispatch: " + mode), std::string::npos) << mode;
  }
  ASSERT_EQ(imbalance.size(), 3u);
  // Values that are not numbers sit apart on the plots' x axis, in the order swept, each ticked
  // with its name (they were all drawn at 0).
  const std::string plot =
      testing::ReadFile(out + "/figures/balancedness-against-eplb.dispatch.svg");
  for (const auto& [x, mode] : {std::pair{0, "even"}, std::pair{1, "random"}, std::pair{2, "lp"}}) {
    EXPECT_NE(plot.find(fmt::format("data-x=\"{}\"", x)), std::string::npos) << mode;
    EXPECT_NE(plot.find(fmt::format("text-anchor=\"middle\">{}</text>", mode)), std::string::npos)
        << mode;
  }
  EXPECT_NE(imbalance["random"], imbalance["even"]);
  EXPECT_NE(imbalance["lp"], imbalance["random"]);
}

// Each weight transport on the same run (migrate/transport.h): the same placements and bytes,
// each priced by what it uses. Stop-the-world, so each stall is a rearrangement's whole time.
TEST_F(CliTest, SweepOverTransportsPricesEachOne) {
  const std::string out = (dir_ / "transports").string();
  const CliRun r = Eplb(std::string("sweep ") + EPLB_SCENARIO_DIR +
                        "/tiny.yaml --vary migration.transport=nccl,nixl,gloo,host_pool --set "
                        "eplb.use_async=false --set run.steps=250 --no-trace --out " +
                        out);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(testing::ReadFile(out + "/sweep.json"));
  ASSERT_EQ(doc["points"].size(), 4u);
  std::map<std::string, nlohmann::json> by;
  for (const auto& p : doc["points"]) by[p["migration.transport"].get<std::string>()] = p;
  ASSERT_EQ(by.size(), 4u);
  const auto stalled = [&](const char* t) { return by[t]["stalled_s"].get<double>(); };
  const auto moved = [&](const char* t) { return by[t]["bytes_per_rearrangement"].get<double>(); };
  // The policy sees the same loads whatever moves the weights.
  for (const char* t : {"nixl", "gloo", "host_pool"}) {
    EXPECT_EQ(by[t]["rearrangements"], by["nccl"]["rearrangements"]) << t;
    EXPECT_EQ(by[t]["balancedness_mean"], by["nccl"]["balancedness_mean"]) << t;
  }
  EXPECT_GT(moved("nccl"), 0);
  EXPECT_EQ(moved("nixl"), moved("nccl"));
  EXPECT_EQ(moved("gloo"), moved("nccl"));
  EXPECT_EQ(moved("host_pool"), 0);  // from host memory: nothing crosses NVLink or a NIC
  // NIXL adds 0.45 ms per layer before each rank's reads, layer after layer.
  EXPECT_GT(stalled("nixl"), stalled("nccl") + 3 * 0.45e-3);
  // gloo: 1 MiB experts at 2.4 GB/s (0.44 ms each) against ~40 GB/s NVLink.
  EXPECT_GT(stalled("gloo"), 5 * stalled("nccl"));
  // host_pool reads at 25 GB/s per GPU from host memory, slower than NVLink here.
  EXPECT_GT(stalled("host_pool"), stalled("nccl"));
  for (int i = 0; i < 4; ++i) {
    const std::string yaml = testing::ReadFile(fmt::format("{}/points/{}/scenario.yaml", out, i));
    const std::string t = doc["points"][i]["migration.transport"].get<std::string>();
    EXPECT_NE(yaml.find("transport: " + t), std::string::npos) << t;
  }
}

// NCCL's kernels hold SMs while a rearrangement is in flight (migration.sms): the steps that
// overlap it compute on the rest, and that shows as time the migration slowed steps by.
TEST_F(CliTest, MigrationSmsSlowTheStepsThatOverlapARearrangement) {
  const std::string out = (dir_ / "sms").string();
  const CliRun r = Eplb(std::string("sweep ") + EPLB_SCENARIO_DIR +
                        "/tiny.yaml --vary migration.sms=0,66 --set run.steps=250 --no-trace "
                        "--out " +
                        out);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(testing::ReadFile(out + "/sweep.json"));
  ASSERT_EQ(doc["points"].size(), 2u);
  std::map<int, nlohmann::json> by;
  for (const auto& p : doc["points"]) by[p["migration.sms"].get<int>()] = p;
  EXPECT_EQ(by[66]["balancedness_mean"], by[0]["balancedness_mean"]);
  // Half of the H200's 132 SMs: compute twice as long on the steps with layers in flight.
  EXPECT_GT(by[66]["slowed_s"].get<double>(), by[0]["slowed_s"].get<double>() + 1e-3);
  EXPECT_GT(by[66]["step_time_mean_s"].get<double>(), by[0]["step_time_mean_s"].get<double>());
}

TEST_F(CliTest, SweepRunsTheCrossProduct) {
  const std::string out = (dir_ / "sweep").string();
  const CliRun r =
      Eplb(std::string("sweep ") + EPLB_SCENARIO_DIR +
           "/tiny.yaml --vary cluster.nic.bandwidth_gbps=25,100 --vary eplb.step_interval=100,200 "
           "--policies deepseek,static --set run.steps=250 --out " +
           out);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(testing::ReadFile(out + "/sweep.json"));
  ASSERT_EQ(doc["points"].size(), 8u);
  std::set<std::tuple<double, double, std::string>> seen;
  for (const auto& p : doc["points"]) {
    seen.insert({p["cluster.nic.bandwidth_gbps"].get<double>(),
                 p["eplb.step_interval"].get<double>(), p["policy"].get<std::string>()});
  }
  EXPECT_EQ(seen.size(), 8u);
  const std::string html = testing::ReadFile(out + "/report.html");
  EXPECT_EQ(CheckTags(html), "");
  EXPECT_NE(html.find("mean step time (ms) against cluster.nic.bandwidth_gbps"), std::string::npos);
  EXPECT_NE(html.find("balancedness against eplb.step_interval"), std::string::npos);
  // Every point of the sweep is a dot of the trade-off scatter, at its own numbers.
  const std::string scatter = testing::ReadFile(out + "/figures/balance-vs-bytes.svg");
  for (const auto& p : doc["points"]) {
    const std::string dot = fmt::format("data-series=\"{}\" data-x=\"{}\" data-y=\"{}\"",
                                        p["policy"].get<std::string>(),
                                        p["bytes_per_rearrangement"].get<double>() / 1e9,
                                        p["following_balancedness"].get<double>());
    EXPECT_NE(scatter.find(dot), std::string::npos) << dot;
  }
  // The per-field plots mark their points (two values per field: a line alone would hide them).
  const std::string per_field =
      testing::ReadFile(out + "/figures/step-time-against-cluster.nic.bandwidth_gbps.svg");
  // Faceted, not averaged: a line per policy and value of the other field, 2 dots each.
  EXPECT_EQ(CountOf(per_field, "<circle class=\"point\""), 8u);
  EXPECT_NE(per_field.find("data-series=\"deepseek · eplb.step_interval=100\""), std::string::npos);
  // The x axis ticks the swept values themselves (25 and 100 GB/s, not 20, 40, ...).
  EXPECT_NE(per_field.find("class=\"tick\" text-anchor=\"middle\">25</text>"), std::string::npos);
  EXPECT_NE(per_field.find("class=\"tick\" text-anchor=\"middle\">100</text>"), std::string::npos);
  // Total bytes moved (per rearrangement hides it when the interval varies), the p99 latency
  // and the peak memory, each against each field, a dot per point at its row's numbers.
  for (const char* stem : {"bytes-moved", "latency-p99", "peak-memory"}) {
    EXPECT_TRUE(fs::exists(out + "/figures/" + stem + "-against-eplb.step_interval.svg")) << stem;
  }
  const std::string moved =
      testing::ReadFile(out + "/figures/bytes-moved-against-eplb.step_interval.svg");
  EXPECT_NE(html.find("GB moved in all against eplb.step_interval"), std::string::npos);
  for (const auto& p : doc["points"]) {
    const double total =
        p["rearrangements"].get<double>() * p["bytes_per_rearrangement"].get<double>() * 1e-9;
    const std::string dot =
        fmt::format("data-x=\"{}\" data-y=\"{}\"", p["eplb.step_interval"].get<double>(), total);
    EXPECT_NE(moved.find(dot), std::string::npos) << dot;
  }
  // Varied values read as written: 25, not 25.0.
  EXPECT_NE(html.find("<td>25</td>"), std::string::npos);
  EXPECT_EQ(html.find("<td>25.0</td>"), std::string::npos);
  // A faster NIC never makes the same point's steps slower.
  const auto& pts = doc["points"];
  for (const auto& a : pts) {
    for (const auto& b : pts) {
      if (a["policy"] == b["policy"] && a["eplb.step_interval"] == b["eplb.step_interval"] &&
          a["cluster.nic.bandwidth_gbps"] < b["cluster.nic.bandwidth_gbps"]) {
        EXPECT_GE(a["step_time_mean_s"].get<double>(),
                  b["step_time_mean_s"].get<double>() * (1 - 1e-12));
      }
    }
  }
}

// Under mpirun each rank takes every size-th point; rank 0 waits for the others' marks in the
// shared folder and writes the tables. Two ranks are two processes with Open MPI's variables.
TEST_F(CliTest, SweepSpreadsPointsOverMpiRanks) {
  const std::string out = (dir_ / "mpi").string();
  const std::string args =
      std::string("sweep ") + EPLB_SCENARIO_DIR +
      "/tiny.yaml --vary eplb.num_redundant_experts=0,4,8 --set run.steps=150 --jobs 1 --out " +
      out;
  FILE* rank1 = popen(("OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 " + std::string(EPLB_BINARY) +
                       " " + args + " >/dev/null 2>&1")
                          .c_str(),
                      "r");
  const CliRun rank0 = Eplb(args, "OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2");
  const int status1 = pclose(rank1);
  ASSERT_EQ(rank0.code, 0) << rank0.err;
  EXPECT_EQ(WEXITSTATUS(status1), 0);
  const auto doc = nlohmann::json::parse(testing::ReadFile(out + "/sweep.json"));
  ASSERT_EQ(doc["points"].size(), 3u);
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(fs::exists(fs::path(out) / "points" / std::to_string(i) / "summary.json"));
  EXPECT_FALSE(fs::exists(out + ".shared-partial"));
}

// A Slurm job array's tasks may run one after another: each runs its share of the points, and
// the last to finish (here task 0, run second) writes the report.
TEST_F(CliTest, SweepSpreadsPointsOverASlurmJobArray) {
  const std::string out = (dir_ / "array").string();
  const std::string args =
      std::string("sweep ") + EPLB_SCENARIO_DIR +
      "/tiny.yaml --vary eplb.num_redundant_experts=0,4,8 --set run.steps=150 --jobs 1 --out " +
      out;
  const std::string array = "SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_COUNT=2 SLURM_ARRAY_TASK_ID=";
  const CliRun second = Eplb(args, array + "2");
  ASSERT_EQ(second.code, 0) << second.err;
  EXPECT_NE(second.out.find("Slurm array task 1 of 2: 1 of 2 finished; the last to finish writes"),
            std::string::npos)
      << second.out;
  EXPECT_FALSE(fs::exists(out));
  // Another sweep's task given the same --out is refused, not mixed in under the wrong labels.
  const std::string other_args =
      args.substr(0, args.find("0,4,8")) + "0,4,12" + args.substr(args.find("0,4,8") + 5);
  const CliRun other = Eplb(other_args, array + "1");
  EXPECT_EQ(other.code, 2);
  EXPECT_NE(other.err.find("holds the points of another sweep"), std::string::npos) << other.err;
  // A launch of more tasks than points (or a wrong count) is refused at once, not scanned for.
  const CliRun too_many = Eplb(args, "SLURM_ARRAY_TASK_COUNT=2147483647 SLURM_ARRAY_TASK_ID=0");
  EXPECT_EQ(too_many.code, 2);
  EXPECT_NE(too_many.err.find("Slurm array task 0 of 2147483647, but the sweep has 3 points"),
            std::string::npos)
      << too_many.err;
  const CliRun first = Eplb(args, array + "1");
  ASSERT_EQ(first.code, 0) << first.err;
  const auto doc = nlohmann::json::parse(testing::ReadFile(out + "/sweep.json"));
  ASSERT_EQ(doc["points"].size(), 3u);
  EXPECT_EQ(doc["points"][2]["eplb.num_redundant_experts"], 8);
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(fs::exists(fs::path(out) / "points" / std::to_string(i) / "summary.json"));
  EXPECT_FALSE(fs::exists(out + ".shared-partial"));
}

// Varying the policy as a field: each point runs the policy it is labelled with.
TEST_F(CliTest, SweepOverThePolicyFieldRunsEachPolicy) {
  const std::string out = (dir_ / "policies").string();
  const CliRun r = Eplb(std::string("sweep ") + EPLB_SCENARIO_DIR +
                        "/tiny.yaml --vary eplb.policy=deepseek,static --set run.steps=150 "
                        "--no-trace --jobs 1 --out " +
                        out);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(testing::ReadFile(out + "/sweep.json"));
  ASSERT_EQ(doc["points"].size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const std::string policy = doc["points"][i]["eplb.policy"];
    EXPECT_EQ(doc["points"][i]["policy"], policy);
    auto folder = ReadRunFolder(out + "/points/" + std::to_string(i));
    ASSERT_TRUE(folder.ok()) << folder.status().message();
    EXPECT_EQ(folder->run.scenario.eplb.policy, policy);
  }
  EXPECT_NE(doc["points"][0]["balancedness_mean"], doc["points"][1]["balancedness_mean"]);
}

TEST_F(CliTest, CompareAndSweepErrorsExitTwo) {
  const std::string tiny = std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml";
  ExpectErrors({
      {"unknown policy", "compare " + tiny + " --policies deepseek,oracle",
       "--policies: unknown policy 'oracle'"},
      {"empty policies", "compare " + tiny + " --policies ,",
       "--policies ',': item 1 is empty; expected values separated by single commas"},
      {"an empty seed", "compare " + tiny + " --seeds 1,,2",
       "--seeds '1,,2': item 2 is empty; expected values separated by single commas"},
      {"a trailing comma", "sweep " + tiny + " --vary cluster.nodes=1,2,",
       "--vary cluster.nodes '1,2,': item 3 is empty"},
      {"bad vary", "sweep " + tiny + " --vary cluster.nodes",
       "--vary 'cluster.nodes': expected key.path=v1,v2,..."},
      {"bad point", "sweep " + tiny + " --vary cluster.nodes=2,0",
       "point 1: " + tiny +
           " (--set cluster.nodes): cluster.nodes is 0; valid values are 1..65536"},
      {"unknown field", "sweep " + tiny + " --vary cluster.nodez=1,2",
       "unknown field 'cluster.nodez'"},
      {"policies twice", "sweep " + tiny + " --vary eplb.policy=deepseek,static --policies static",
       "--vary eplb.policy and --policies both name the policies"},
  });
}

// What `eplb run` refuses at load (exit 2), compare and sweep refuse before the first simulation
// starts, naming the policy or point: before, they exited 1 after running everything else.
TEST_F(CliTest, CompareAndSweepCheckEveryRunBeforeTheFirst) {
  const std::string tiny = std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml";
  const std::string lost =
      " --set run.steps=60 --set eplb.num_redundant_experts=16 "
      "'--set=faults=[{kind: gpu_lost, step: 30, rank: 1}]'";
  const std::string static_lost =
      "eplb.policy is 'static', which cannot place around lost or idle GPUs";
  const struct {
    std::string name, args, expected;
  } cases[] = {
      {"run", "run " + tiny + lost + " --set eplb.policy=static", static_lost},
      {"compare", "compare " + tiny + lost + " --policies deepseek,static",
       "--policies static: " + tiny + ": " + static_lost},
      {"compare, seeds", "compare " + tiny + lost + " --policies deepseek,static --seeds 1,2",
       "--policies static seed 1: " + tiny + ": " + static_lost},
      {"sweep, memory", "sweep " + tiny + " --vary run.steps=20,2000000000",
       "point 1 (run.steps=2000000000, deepseek): " + tiny + ": this run would need about"},
      {"sweep, policy", "sweep " + tiny + lost + " --vary run.seed=1 --policies deepseek,static",
       "point 1: " + tiny},
      {"sweep, policy's reason",
       "sweep " + tiny + lost + " --vary run.seed=1 --policies deepseek,static", static_lost},
  };
  for (const auto& c : cases) {
    const std::string out = (dir_ / "out").string();
    const CliRun r = Eplb(c.args + " --out " + out);
    EXPECT_EQ(r.code, 2) << c.name << ": " << r.err;
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << c.name << ": " << r.err;
    // Refused before any simulation began: no progress line, no folder.
    EXPECT_EQ(r.err.find("step 0/"), std::string::npos) << c.name << ": " << r.err;
    EXPECT_FALSE(fs::exists(out)) << c.name;
  }
}
#else
TEST_F(CliTest, RunSaysTheSimulatorWasNotBuilt) {
  const CliRun r =
      Eplb(std::string("run ") + EPLB_SCENARIO_DIR + "/tiny.yaml --out " + (dir_ / "x").string());
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("built without the SimGrid simulator"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "x"));
}
#endif

// On a GPU machine: the tiny scenario runs on virtual ranks and writes a whole run folder.
// Elsewhere: a clear error naming the missing GPU (or the part not built), exit 1, no folder.
TEST_F(CliTest, DeviceRunRunsOnAGpuOrSaysWhyNot) {
  const std::string out = (dir_ / "device").string();
  const CliRun r = Eplb(std::string("device-run ") + EPLB_SCENARIO_DIR +
                        "/tiny.yaml --virtual --set run.steps=120 --step-scale 0.01 --out " + out);
  const bool no_gpu = r.err.find("no CUDA GPU") != std::string::npos ||
                      r.err.find("built without the GPU backend") != std::string::npos;
  if (no_gpu) {
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_FALSE(fs::exists(out));
#ifdef EPLB_HAVE_DEVICE
    EXPECT_NE(r.err.find("cudaGetDeviceCount"), std::string::npos) << r.err;
#endif
    GTEST_SKIP() << "no GPU here: " << r.err;
  }
  ASSERT_EQ(r.code, 0) << r.err;
  const auto summary = nlohmann::json::parse(testing::ReadFile(out + "/summary.json"));
  EXPECT_EQ(summary["steps"], 120);
  EXPECT_GE(summary["rearrangements"]["completed"].get<int>(), 1);
  EXPECT_GT(summary["transfers"].get<int>(), 0);
}

TEST_F(CliTest, DeviceCommandsRejectBadOptions) {
  const std::string tiny = std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml";
#ifdef EPLB_HAVE_DEVICE
  ExpectErrors({
      {"both modes", "device-run " + tiny + " --virtual --nccl", "--virtual excludes --nccl"},
      {"mpi and virtual", "device-run " + tiny + " --mpi --virtual", "excludes --mpi"},
      {"validate is one process", "validate " + tiny + " --mpi", "--mpi"},
      {"bad ranks", "device-run " + tiny + " --ranks 0", "--ranks"},
      {"a simulated transport", "device-run " + tiny + " --set migration.transport=nixl",
       "migration.transport is 'nixl', but device-run moves the weights over NCCL or CUDA peer "
       "copies"},
      {"ranks that do not divide the slots", "validate " + tiny + " --ranks 7", "--ranks 7: "},
  });
#else
  // Without the GPU backend its commands are not there to parse options: they say why.
  for (const char* command : {"device-run", "validate"}) {
    const CliRun r = Eplb(std::string(command) + " " + tiny + " --ranks 0");
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_NE(r.err.find("built without the GPU backend"), std::string::npos) << r.err;
  }
#endif
}

// The front end lists every command, whichever executable carries it.
TEST_F(CliTest, HelpListsEveryCommand) {
  const CliRun r = Eplb("--help");
  EXPECT_EQ(r.code, 0);
  for (const char* command :
       {"rebalance", "plan", "policies", "run", "compare", "sweep", "device-run", "validate"}) {
    EXPECT_NE(r.out.find(std::string("  ") + command + " "), std::string::npos) << command;
  }
}

TEST_F(CliTest, HelpExitsZero) {
  const CliRun r = Eplb("rebalance --help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("--replicas"), std::string::npos);
}

}  // namespace
}  // namespace eplb
