// The all-to-all micro-benchmark's model and the published-figures table: shapes that must
// hold whatever the parameters, the shipped figures file read and simulated whole, and a
// figures file's errors named with their line and field.
#include "eplb/usecases/published.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "eplb/engine/all_to_all.h"
#include "eplb/io/scenario_file.h"

namespace eplb {
namespace {

const std::string kFigures = std::string(EPLB_SCENARIO_DIR) + "/published/figures.yaml";

Scenario H800(int nodes) {
  auto s = LoadScenarioFile(
      std::string(EPLB_SCENARIO_DIR) + "/published/h800-deepseek-v3.yaml",
      {"cluster.nodes=" + std::to_string(nodes), "model.groups=" + std::to_string(nodes),
       "model.topk_groups=" + std::to_string(std::min(nodes, 4)), "eplb.num_redundant_experts=0"});
  EXPECT_TRUE(s.ok()) << s.status().message();
  return *s;
}

TEST(AllToAll, TimeGrowsWithTokensInEveryMode) {
  for (AllToAllMode mode :
       {AllToAllMode::kBulk, AllToAllMode::kNormal, AllToAllMode::kLowLatency}) {
    for (int nodes : {1, 2, 4}) {
      double last_dispatch = 0, last_combine = 0;
      for (int tokens : {16, 128, 1024, 4096}) {
        auto r = SimulateAllToAll(H800(nodes), tokens, mode);
        ASSERT_TRUE(r.ok()) << r.status().message();
        EXPECT_GT(r->dispatch_s, last_dispatch) << AllToAllModeName(mode) << " " << tokens;
        EXPECT_GT(r->combine_s, last_combine);
        last_dispatch = r->dispatch_s;
        last_combine = r->combine_s;
      }
    }
  }
}

TEST(AllToAll, LowLatencyGrowsWithEpSizeAsMoreMessagesCrossNics) {
  double last = 0;
  for (int nodes : {1, 2, 4, 8}) {
    auto r = SimulateAllToAll(H800(nodes), 128, AllToAllMode::kLowLatency);
    ASSERT_TRUE(r.ok());
    EXPECT_GT(r->dispatch_s, last) << nodes;
    last = r->dispatch_s;
    // Every message counts: 128 tokens × 8 experts of 7,168 FP8 values and their scales.
    EXPECT_NEAR(r->dispatch_bytes, 128 * 8 * 7168 * (1 + 4.0 / 128), 1e-6 * r->dispatch_bytes);
    EXPECT_DOUBLE_EQ(r->combine_bytes, 2 * r->dispatch_bytes / (1 + 4.0 / 128));
  }
}

TEST(AllToAll, NormalKernelsCountRdmaOverNodesReachedAndNvlOnOneNode) {
  // One node: NVLink is the bottleneck DeepEP reports.
  auto one = SimulateAllToAll(H800(1), 4096, AllToAllMode::kNormal);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->bottleneck, "NVL");
  // Two nodes, both groups chosen: every token reaches both nodes, one of them remote, so the
  // counted RDMA bytes are twice the NIC's; the bandwidth printed can exceed the NIC's rate.
  auto two = SimulateAllToAll(H800(2), 4096, AllToAllMode::kNormal);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->bottleneck, "RDMA");
  const double reach = 1 - std::pow(0.5, 8);
  EXPECT_NEAR(two->dispatch_bytes, 4096 * 2 * reach * 7168 * (1 + 4.0 / 128),
              1e-6 * two->dispatch_bytes);
  // Eight nodes with 4 groups per token: at most 4 nodes reached, so more nodes do not add RDMA
  // bytes per token beyond the cap.
  auto eight = SimulateAllToAll(H800(8), 4096, AllToAllMode::kNormal);
  ASSERT_TRUE(eight.ok());
  EXPECT_NEAR(eight->dispatch_bytes, 4096 * 4 * 7168 * (1 + 4.0 / 128),
              1e-6 * eight->dispatch_bytes);
  EXPECT_FALSE(SimulateAllToAll(H800(1), 0, AllToAllMode::kNormal).ok());
}

// GB200 NVL72: one NVLink domain, so every message crosses NVLink, none a NIC. TensorRT-LLM's
// one-sided kernels at 2,048 BF16 tokens per GPU, EP32, each token to 8 GPUs: a GPU sends
// 2,048 × 8 × 31/32 remote messages of 7,168 × 2 bytes at 900 × 0.8 GB/s, after the NVLink
// latency (3 µs) and the kernels' fixed cost (17 µs).
TEST(AllToAll, OneNvlinkDomainSendsEveryRemoteMessageOverNvlinkByHand) {
  auto s = LoadScenarioFile(std::string(EPLB_SCENARIO_DIR) + "/published/gb200-deepseek-r1.yaml",
                            {"model.activation_bytes=2", "eplb.num_redundant_experts=0"});
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto r = SimulateAllToAll(*s, 2048, AllToAllMode::kLowLatency);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const double bytes = 2048.0 * 8 * 31 / 32 * 7168 * 2;
  EXPECT_NEAR(r->dispatch_s, 3e-6 + bytes / (900e9 * 0.8) + 17e-6, 1e-12);
  EXPECT_NEAR(r->combine_s, r->dispatch_s, 1e-12);  // BF16 both ways: the same bytes
  // 1,024 tokens: half the bytes, the same fixed 20 µs.
  auto half = SimulateAllToAll(*s, 1024, AllToAllMode::kLowLatency);
  ASSERT_TRUE(half.ok());
  EXPECT_NEAR(half->dispatch_s - 20e-6, (r->dispatch_s - 20e-6) / 2, 1e-12);
}

TEST(Published, EveryShippedFigureIsSimulatedAndTabled) {
  auto figures = LoadPublishedFigures(kFigures);
  ASSERT_TRUE(figures.ok()) << figures.status().message();
  ASSERT_EQ(figures->size(), 63u);
  std::vector<FigureResult> results;
  for (const PublishedFigure& f : *figures) {
    auto r = EvaluateFigure(f);
    ASSERT_TRUE(r.ok()) << f.id << ": " << r.status().message();
    EXPECT_TRUE(std::isfinite(r->simulated) && r->simulated > 0) << f.id;
    // A speedup's error is on its gain: published − 1 is what it is measured against.
    const double base = f.measure == "speedup" ? f.published - 1 : f.published;
    EXPECT_DOUBLE_EQ(r->error_pct, 100 * (r->simulated - f.published) / base);
    // No figure moved past its regression guard (15% unless its note says why more); the
    // guard is no accuracy claim: within_goal alone counts that.
    EXPECT_FALSE(r->past_guard()) << f.id << ": " << r->error_pct << "% against a guard of "
                                  << f.tolerance_pct << "%";
    EXPECT_EQ(r->within_goal(), std::fabs(r->error_pct) <= 15) << f.id;
    results.push_back(*r);
  }
  const std::string table = PublishedTable(results);
  std::cout << table;  // the errors, for the log
  for (const FigureResult& r : results) EXPECT_NE(table.find(r.figure.id), std::string::npos);
  const auto json = PublishedJson(results);
  ASSERT_EQ(json["figures"].size(), 63u);
  for (const auto& f : json["figures"]) {
    for (const char* field : {"id", "figure", "source", "scenario", "published", "simulated",
                              "error_pct", "unit", "measure"}) {
      EXPECT_TRUE(f.contains(field)) << field;
    }
  }
  EXPECT_TRUE(json.contains("mean_abs_error_pct"));
  // The counts add up, and every figure outside the goal is named in the summary with its
  // error: three of the four migration stalls (#43219 −57.5%, TensorRT-LLM −88%, V2-Lite −15.5%).
  const int within = json["within_goal"].get<int>(), outside = json["outside_goal"].get<int>();
  EXPECT_EQ(within + outside, 63);
  // Each kind of figure is counted on its own line (issue 65: the headline mixed 32 kernel
  // figures with those that decide balancing questions), and the kinds add up to the whole.
  int counted_figures = 0, within_by_category = 0;
  for (const auto& c : json["categories"]) {
    const int n = c["figures"].get<int>(), in = c["within_goal"].get<int>();
    counted_figures += n;
    within_by_category += in;
    int counted = 0;
    for (const auto& f : json["figures"]) counted += f["category"] == c["category"];
    EXPECT_EQ(counted, n) << c["category"];
    EXPECT_GT(n, 0) << c["category"];
    EXPECT_NE(table.find(fmt::format(": {} of {} within the 15% goal, mean |error| {:.1f}%\n", in,
                                     n, c["mean_abs_error_pct"].get<double>())),
              std::string::npos)
        << c["category"] << table;
  }
  EXPECT_EQ(counted_figures, 63);
  EXPECT_EQ(within_by_category, within);
  for (const char* kind : {"kernels", "serving_step", "load", "gain", "rearrangement"}) {
    EXPECT_NE(json["categories"].dump().find(std::string("\"") + kind + "\""), std::string::npos)
        << kind;
  }
  EXPECT_GE(outside, 3);
  EXPECT_NE(table.find(std::to_string(within) + " of 63 figures within the 15% accuracy goal; " +
                       std::to_string(outside) + " outside it"),
            std::string::npos)
      << table;
  for (const FigureResult& r : results) {
    EXPECT_EQ(json["figures"][&r - results.data()]["within_goal"].get<bool>(), r.within_goal());
    const bool listed = table.find("outside the goal: " + r.figure.id + " ") != std::string::npos;
    EXPECT_EQ(listed, !r.within_goal()) << r.figure.id;
  }
  for (const char* id :
       {"vllm-r1-nvfp4-gb200-ep32-sync-stall-nixl", "trtllm-r1-fp4-bulk-update-host-pool",
        "vllm-v2-lite-h100-dp8-rebalance-gpu-time"}) {
    EXPECT_NE(std::find(json["outside_goal_ids"].begin(), json["outside_goal_ids"].end(), id),
              json["outside_goal_ids"].end())
        << id;
  }
}

// A figure counts within the 15% goal by its error alone: a widened tolerance (a regression
// guard) or a note explaining the gap never moves it inside. Before, the summary said "62
// within the tolerance each is held to", −93% stalls included.
TEST(Published, SummaryCountsTheGoalNotTheGuard) {
  const auto result = [](const char* id, double error_pct, double tolerance_pct, const char* note) {
    FigureResult r;
    r.figure.id = id;
    r.figure.unit = "s";
    r.figure.published = 1;
    r.figure.tolerance_pct = tolerance_pct;
    r.figure.note = note;
    r.simulated = 1 + error_pct / 100;
    r.error_pct = error_pct;
    return r;
  };
  const std::vector<FigureResult> results = {
      result("close", -14.9, 15, ""), result("exactly-15", 15, 15, ""),
      result("stall", -93.3, 97, "orchestration no source prices"),
      result("fast-prefill", 29.0, 45, "an exposed dispatch the model hides"),
      result("regressed", 20, 15, "")};
  struct Case {
    const char* id;
    bool within_goal, past_guard;
  };
  const Case cases[] = {{"close", true, false},
                        {"exactly-15", true, false},
                        {"stall", false, false},
                        {"fast-prefill", false, false},
                        {"regressed", false, true}};
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_EQ(results[i].within_goal(), cases[i].within_goal) << cases[i].id;
    EXPECT_EQ(results[i].past_guard(), cases[i].past_guard) << cases[i].id;
  }
  const std::string table = PublishedTable(results);
  EXPECT_NE(table.find("mean |error| 34.4%; 2 of 5 figures within the 15% accuracy goal; 3 "
                       "outside it"),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("within the tolerance"), std::string::npos) << table;
  for (const char* line : {"outside the goal: stall ", "outside the goal: fast-prefill ",
                           "outside the goal: regressed ",
                           "past its regression guard: regressed +20.0% (tolerance_pct 15)"}) {
    EXPECT_NE(table.find(line), std::string::npos) << line << "\n" << table;
  }
  EXPECT_NE(table.find("-93.3%"), std::string::npos);
  EXPECT_EQ(table.find("outside the goal: close"), std::string::npos);
  const auto json = PublishedJson(results);
  EXPECT_EQ(json["within_goal"], 2);
  EXPECT_EQ(json["outside_goal"], 3);
  EXPECT_EQ(json["accuracy_goal_pct"], 15);
  EXPECT_EQ(json["outside_goal_ids"],
            nlohmann::ordered_json::array({"stall", "fast-prefill", "regressed"}));
  EXPECT_EQ(json["past_guard_ids"], nlohmann::ordered_json::array({"regressed"}));
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_EQ(json["figures"][i]["within_goal"], cases[i].within_goal) << cases[i].id;
    EXPECT_EQ(json["figures"][i]["past_guard"], cases[i].past_guard) << cases[i].id;
  }
}

class FiguresFile : public ::testing::Test {
 protected:
  std::string Write(const std::string& text) {
    const std::string path =
        (std::filesystem::temp_directory_path() /
         ("eplb_figures_" +
          std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + ".yaml"))
            .string();
    std::ofstream(path) << text;
    paths_.push_back(path);
    return path;
  }
  void TearDown() override {
    for (const auto& p : paths_) std::filesystem::remove(p);
  }
  std::vector<std::string> paths_;
};

TEST_F(FiguresFile, ErrorsNameTheLineFieldAndValidValues) {
  const std::string head =
      "figures:\n  - id: a\n    figure: x\n    source: y\n    scenario: s.yaml\n    unit: us\n"
      "    published: 10\n";
  const struct {
    std::string tail, expect;
  } cases[] = {
      {"    measure: speed\n", "figures[0].measure is 'speed'; valid measures: dispatch_gbps"},
      {"    measure: dispatch_us\n    tokens: 128\n    mode: fast\n", "valid values: bulk"},
      {"    measure: dispatch_us\n    mode: normal\n", "has no 'tokens'"},
      {"    measure: dispatch_us\n    tokens: 1.5\n    mode: normal\n", "whole number"},
      {"    measure: dispatch_us\n    tokens: 8\n    mode: normal\n    colour: red\n",
       "unknown field 'figures[0].colour'"},
      {"    measure: prefill_input_tokens_per_node_s\n    cache_hit: 1\n", "below 1"},
  };
  for (const auto& c : cases) {
    const std::string path = Write(head + c.tail);
    auto r = LoadPublishedFigures(path);
    ASSERT_FALSE(r.ok()) << c.tail;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().message();
    EXPECT_EQ(r.status().message().rfind(path, 0), 0u) << r.status().message();
  }
  EXPECT_FALSE(LoadPublishedFigures(Write("figures: []\n")).ok());
  EXPECT_FALSE(LoadPublishedFigures(Write("[1, 2]\n")).ok());
  EXPECT_FALSE(LoadPublishedFigures(Write("figures: [{id: a\n")).ok());
}

// A figure's numbers are normal and within their documented ranges (published.h), refused at
// load with the file, the figure, the field, the value and the range: a denormal or a number
// near the largest double made the error % an infinity (JSON null) that exited 0.
TEST_F(FiguresFile, NumbersOutsideTheirRangesAreRefusedAtLoad) {
  const std::string head =
      "figures:\n  - id: fig-a\n    figure: x\n    source: y\n    scenario: s.yaml\n"
      "    unit: us\n";
  const std::string a2a = "    measure: dispatch_us\n    tokens: 128\n    mode: normal\n";
  const std::string range = "expected a number from 1e-06 to 1e+12";
  const struct {
    std::string tail, expect;
  } cases[] = {
      {a2a + "    published: 4.9e-324\n", "published (figure 'fig-a') is '4.9e-324'; " + range},
      {a2a + "    published: 2.2e-308\n", "is '2.2e-308'; " + range},
      {a2a + "    published: 1e308\n", "published (figure 'fig-a') is '1e308'; " + range},
      {a2a + "    published: 1e13\n", "is '1e13'; " + range},
      {a2a + "    published: 1e-7\n", "is '1e-7'; " + range},
      {a2a + "    published: 0\n", "is '0'; " + range},
      {a2a + "    published: -3\n", "is '-3'; " + range},
      {a2a + "    published: .nan\n", "is '.nan'; " + range},
      {a2a + "    published: .inf\n", "is '.inf'; " + range},
      {a2a + "    published: 10\n    tolerance_pct: 1e308\n",
       "tolerance_pct (figure 'fig-a') is '1e308'; expected a number from 0 to 1000"},
      {a2a + "    published: 10\n    tolerance_pct: 4.9e-324\n", "is '4.9e-324'; expected a"},
      {"    measure: dispatch_us\n    tokens: 4.9e-324\n    mode: normal\n    published: 10\n",
       "tokens (figure 'fig-a') is '4.9e-324'; expected a number from 1 to 1073741824"},
      {"    measure: prefill_input_tokens_per_node_s\n    cache_hit: 4.9e-324\n"
       "    published: 10\n",
       "cache_hit (figure 'fig-a') is '4.9e-324'; expected a number from 0 to 1"},
      {"    measure: speedup\n    versus: [eplb.policy=static]\n    published: 1.0004\n",
       "published (figure 'fig-a') is 1.0004; a speedup's error is on its gain"},
  };
  for (const auto& c : cases) {
    const std::string path = Write(head + c.tail);
    auto r = LoadPublishedFigures(path);
    ASSERT_FALSE(r.ok()) << c.tail;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().message();
    EXPECT_EQ(r.status().message().rfind(path + ":", 0), 0u) << r.status().message();
  }
  // The ends of the ranges are in them.
  for (const char* published : {"1e-6", "1e12"}) {
    auto r = LoadPublishedFigures(Write(head + a2a + "    published: " + published + "\n"));
    EXPECT_TRUE(r.ok()) << published << ": " << r.status().message();
  }
}

// Two GPUs of two slots, one layer whose load [400, 300, 200, 100] the trace replays unchanged:
// `static` keeps experts 0 and 1 together (700 against 300 tokens), deepseek packs 400 + 100
// and 300 + 200. The simple compute model makes a step 100 µs + 1 µs per token of the busiest
// GPU, and links fast enough that the all-to-all costs nothing measurable.
TEST_F(FiguresFile, RatioMeasuresMatchTheirHandComputedAnswers) {
  const std::string load =
      (std::filesystem::temp_directory_path() / "eplb_ratio_load.csv").string();
  std::ofstream(load) << "400,300,200,100\n";
  paths_.push_back(load);
  const std::string scenario =
      (std::filesystem::temp_directory_path() / "eplb_ratio_scenario.yaml").string();
  std::ofstream(scenario)
      << "name: ratio\n"
         "model: {layers: 1, experts: 4, groups: 1, top_k: 1, hidden: 8, activation_bytes: 1}\n"
         "cluster: {nodes: 1, gpus_per_node: 2, nvlink: {bandwidth_gbps: 1.0e6, latency_us: 0}}\n"
         "compute: {model: simple, attention_us: 100, layer_fixed_us: 0, per_token_us: 1,\n"
         "          micro_batches: 1, all_to_all: bulk}\n"
         "workload: {kind: trace, trace: eplb_ratio_load.csv, noise: false}\n"
         "eplb: {num_redundant_experts: 0, policy: deepseek}\n";
  paths_.push_back(scenario);
  const std::string figures = Write(
      "figures:\n"
      "  - {id: speedup, figure: x, source: y, scenario: " +
      scenario +
      ", measure: speedup, unit: x, published: 1.3, versus: [eplb.policy=static]}\n"
      "  - {id: before, figure: x, source: y, scenario: " +
      scenario +
      ", measure: imbalance_ratio, unit: '', published: 0.4, set: [eplb.policy=static]}\n"
      "  - {id: after, figure: x, source: y, scenario: " +
      scenario + ", measure: imbalance_ratio, unit: '', published: 0.1}\n" +
      // TensorRT-LLM's spreads (n − 1): GPUs 700 and 300 under `static`, 500 and 500 after;
      // slots (one expert each) 400, 300, 200, 100 either way, the hottest 0.6 over their mean.
      "  - {id: gpus-before, figure: x, source: y, scenario: " + scenario +
      ", measure: gpu_load_std, unit: t, published: 250, set: [eplb.policy=static]}\n" +
      "  - {id: gpus-after, figure: x, source: y, scenario: " + scenario +
      ", measure: gpu_load_std, unit: t, published: 1}\n" +
      "  - {id: slots, figure: x, source: y, scenario: " + scenario +
      ", measure: slot_load_std, unit: t, published: 100}\n" +
      "  - {id: hottest-slot, figure: x, source: y, scenario: " + scenario +
      ", measure: slot_imbalance_ratio, unit: x, published: 0.5}\n");
  auto list = LoadPublishedFigures(figures);
  ASSERT_TRUE(list.ok()) << list.status().message();
  ASSERT_EQ(list->size(), 7u);
  const double want[] = {(100.0 + 700) / (100.0 + 500),
                         (700.0 - 500) / 500,
                         0.0,
                         std::sqrt(2 * 200.0 * 200 / 1),
                         0.0,
                         std::sqrt((150.0 * 150 + 50 * 50 + 50 * 50 + 150 * 150) / 3),
                         0.6};
  for (size_t i = 0; i < 7; ++i) {
    auto r = EvaluateFigure((*list)[i]);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_NEAR(r->simulated, want[i], 1e-6) << (*list)[i].id;
    // The speedup's error is on the gain: 1/3 against 0.3 is +11.1%, where the ratios differ
    // by 2.6%; the others' on the value.
    const double error[] = {100 * (800.0 / 600 - 1.3) / 0.3,
                            100 * (0.4 - 0.4) / 0.4,
                            100 * (0.0 - 0.1) / 0.1,
                            100 * (want[3] - 250) / 250,
                            -100,
                            100 * (want[5] - 100) / 100,
                            100 * (0.6 - 0.5) / 0.5};
    EXPECT_NEAR(r->error_pct, error[i], 1e-6) << (*list)[i].id;
  }
  // A speedup published as 1 has no gain to hold an error against.
  auto flat = LoadPublishedFigures(Write(
      "figures:\n  - {id: a, figure: x, source: y, scenario: s.yaml, measure: speedup, unit: x, "
      "published: 1, versus: [eplb.policy=static]}\n"));
  ASSERT_FALSE(flat.ok());
  EXPECT_NE(flat.status().message().find("published (figure 'a') is 1; a speedup's error is on "
                                         "its gain, published − 1, so it must differ from 1 by "
                                         "at least 0.001"),
            std::string::npos)
      << flat.status().message();
  // versus: belongs to a speedup, and a speedup needs one.
  auto lone = LoadPublishedFigures(Write(
      "figures:\n  - {id: a, figure: x, source: y, scenario: s.yaml, measure: speedup, unit: x, "
      "published: 1.2}\n"));
  ASSERT_FALSE(lone.ok());
  EXPECT_NE(lone.status().message().find("measures a speedup but has no versus:"),
            std::string::npos)
      << lone.status().message();
}

}  // namespace
}  // namespace eplb
