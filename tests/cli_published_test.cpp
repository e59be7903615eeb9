// `eplb a2a` and `eplb validate --published` end to end: on the core alone, with or without the
// GPU and simulator parts.
#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_fixture.h"
#include "test_util.h"

namespace eplb {
namespace {

TEST_F(CliTest, ValidatePublishedPrintsAndWritesEveryFigure) {
  const std::string out = (dir_ / "published").string();
  const CliRun r = Eplb(std::string("validate --published --figures ") + EPLB_SCENARIO_DIR +
                        "/published/figures.yaml --out " + out + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  // --json: the document on stdout, the table for people on stderr.
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc, nlohmann::json::parse(testing::ReadFile(out + "/published.json")));
  ASSERT_EQ(doc["figures"].size(), 63u);
  const std::string table = testing::ReadFile(out + "/published.txt");
  EXPECT_NE(r.err.find(table), std::string::npos);
  for (const auto& f : doc["figures"]) {
    EXPECT_NE(table.find(f["id"].get<std::string>()), std::string::npos);
    EXPECT_GT(f["simulated"].get<double>(), 0);
  }
  // The summary counts figures within the 15% goal and names each outside it with its error,
  // whatever its tolerance (three of the four migration stalls among them).
  int within = 0;
  for (const auto& f : doc["figures"]) {
    const bool in = std::fabs(f["error_pct"].get<double>()) <= 15;
    EXPECT_EQ(f["within_goal"].get<bool>(), in) << f["id"];
    within += in;
    const std::string listed = "outside the goal: " + f["id"].get<std::string>() + " ";
    EXPECT_EQ(table.find(listed) != std::string::npos, !in) << f["id"];
  }
  EXPECT_EQ(doc["within_goal"].get<int>(), within);
  EXPECT_EQ(doc["outside_goal"].get<int>(), 63 - within);
  EXPECT_NE(table.find(fmt::format("{} of 63 figures within the 15% accuracy goal; {} outside it",
                                   within, 63 - within)),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("within the tolerance"), std::string::npos);
  EXPECT_NE(table.find("outside the goal: vllm-v2-lite-h100-dp8-rebalance-gpu-time"),
            std::string::npos);
  EXPECT_TRUE(fs::exists(out + "/manifest.tsv"));
}

TEST_F(CliTest, ValidatePublishedNamesABadFiguresFile) {
  const CliRun missing = Eplb("validate --published --figures " + (dir_ / "none.yaml").string());
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("none.yaml"), std::string::npos) << missing.err;
  const std::string bad = Write("f.yaml", "figures:\n  - id: a\n    measure: x\n");
  const CliRun r = Eplb("validate --published --figures " + bad);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(bad + ":2:"), std::string::npos) << r.err;
}

// A user's figures whose numbers would give an error % or a simulated value that is not a
// number: refused (exit 2), naming the figure and the field or setting, and no folder written.
// Before, each exited 0 with "+inf%" or "MoE -nan" and `"error_pct": null` in published.json.
TEST_F(CliTest, ValidatePublishedRefusesFiguresThatAreNotFiniteNumbers) {
  const std::string scenario = std::string(EPLB_SCENARIO_DIR) + "/published/h800-deepseek-v3.yaml";
  const auto figure = [&](const std::string& file, const std::string& set,
                          const std::string& measure, const std::string& published) {
    return Write(file,
                 "figures:\n  - id: mine\n    figure: x\n    source: y\n"
                 "    scenario: " +
                     scenario + "\n    set: [" + set + "]\n    measure: " + measure +
                     "\n    unit: u\n    published: " + published + "\n" +
                     (measure == "dispatch_gbps" ? "    tokens: 4096\n    mode: normal\n" : ""));
  };
  const std::string ep8 = "cluster.nodes=1, model.groups=1, model.topk_groups=1";
  const std::string decode =
      "cluster.nodes=18, compute.stage=decode, compute.kv_length=4989, "
      "workload.tokens_per_step=12672, compute.all_to_all=low-latency";
  const struct {
    std::string name, file, expected;
  } cases[] = {
      {"denormal", figure("denormal.yaml", ep8, "dispatch_gbps", "4.9e-324"),
       "denormal.yaml:9:16: figures[0].published (figure 'mine') is '4.9e-324'; expected a number "
       "from "
       "1e-06 to 1e+12"},
      {"near the largest double", figure("huge.yaml", ep8, "dispatch_gbps", "1e308"),
       "figures[0].published (figure 'mine') is '1e308'; expected a number from 1e-06 to 1e+12"},
      // Settings within their ranges whose step would overflow: refused with the figure and
      // the setting, by the scenario's own check or, failing that, by the figure's.
      {"an overflowing step",
       figure("overflow.yaml", decode + ", compute.hbm_efficiency=4.9e-324",
              "decode_output_tokens_per_user_s", "20"),
       "figure mine (" + scenario + ", set: [" + decode + ", compute.hbm_efficiency=4.9e-324]): "},
  };
  for (const auto& c : cases) {
    const std::string out = (dir_ / "published").string();
    const CliRun r = Eplb("validate --published --figures " + c.file + " --out " + out + " --json");
    EXPECT_EQ(r.code, 2) << c.name << ": " << r.err;
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << c.name << ": " << r.err;
    EXPECT_EQ(r.err.find("inf%"), std::string::npos) << c.name << ": " << r.err;
    EXPECT_EQ(r.err.find("-nan"), std::string::npos) << c.name << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << c.name << ": " << r.out;
    EXPECT_FALSE(fs::exists(out)) << c.name;
  }
}

TEST_F(CliTest, A2aPrintsTimeAndBottleneckBandwidth) {
  const std::string scenario = std::string(EPLB_SCENARIO_DIR) +
                               "/published/h800-deepseek-v3.yaml --set cluster.nodes=1 " +
                               "--set model.groups=1 --set eplb.num_redundant_experts=0";
  const CliRun json = Eplb("a2a " + scenario + " --mode normal --json");
  ASSERT_EQ(json.code, 0) << json.err;
  const auto doc = nlohmann::json::parse(json.out);
  EXPECT_EQ(doc["bottleneck"], "NVL");
  EXPECT_EQ(doc["tokens_per_gpu"], 4096);
  EXPECT_NEAR(doc["dispatch_gbps"].get<double>(),
              doc["dispatch_counted_bytes"].get<double>() / doc["dispatch_us"].get<double>() / 1e3,
              1e-9 * doc["dispatch_gbps"].get<double>());
  const CliRun text = Eplb("a2a " + scenario + " --mode low-latency");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("128 tokens per GPU, low-latency kernels"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("dispatch"), std::string::npos);
  const CliRun bad = Eplb("a2a --mode fast");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("valid modes: bulk, normal, low-latency"), std::string::npos) << bad.err;
  EXPECT_EQ(Eplb("a2a --tokens 0").code, 2);
}

TEST_F(CliTest, RebalancePlacesAroundLostGpus) {
  const std::string load = Write("load.json", "[[90,132,40,61,104,165,39,4,73,56,183,86]]");
  const CliRun r = Eplb("rebalance --policy fault-tolerant --load " + load +
                        " --replicas 16 --nodes 2 --gpus 8 --lost-ranks 5,3");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto row = nlohmann::json::parse(r.out)["phy2log"][0];
  ASSERT_EQ(row.size(), 16u);
  for (size_t s = 0; s < 16; ++s) {
    const bool lost = s / 2 == 3 || s / 2 == 5;
    EXPECT_EQ(row[s].get<int>() == -1, lost) << s;
  }
  const CliRun refused =
      Eplb("rebalance --load " + load + " --replicas 16 --gpus 8 --lost-ranks 1 --policy static");
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.err.find("policy static: it cannot place around lost GPUs"), std::string::npos)
      << refused.err;
}

#ifdef EPLB_HAVE_SIM
// Per step of a run folder's metrics.csv: step_s (the third column).
std::vector<double> StepTimes(const std::string& metrics) {
  std::vector<double> out;
  std::istringstream in(metrics);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string step, time, step_s;
    std::getline(fields, step, ',');
    std::getline(fields, time, ',');
    std::getline(fields, step_s, ',');
    out.push_back(std::stod(step_s));
  }
  return out;
}

TEST_F(CliTest, FaultsSlowStepsWhileTheyLast) {
  const std::string tiny =
      std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml --no-trace --set run.steps=60";
  const CliRun healthy = Eplb("run " + tiny + " --out " + (dir_ / "healthy").string());
  ASSERT_EQ(healthy.code, 0) << healthy.err;
  const CliRun faulty =
      Eplb("run " + tiny +
           " --set 'faults=[{kind: straggler, step: 10, until: 20, rank: 1, factor: 3}, "
           "{kind: link_degraded, step: 30, until: 40, node: 1, link: nic, factor: 10}]' --out " +
           (dir_ / "faulty").string());
  ASSERT_EQ(faulty.code, 0) << faulty.err;
  const auto a = StepTimes(testing::ReadFile((dir_ / "healthy/metrics.csv").string()));
  const auto b = StepTimes(testing::ReadFile((dir_ / "faulty/metrics.csv").string()));
  ASSERT_EQ(a.size(), 60u);
  ASSERT_EQ(b.size(), 60u);
  for (size_t i = 0; i < 60; ++i) {
    const bool during = (i >= 10 && i < 20) || (i >= 30 && i < 40);
    if (during) {
      EXPECT_GT(b[i], 1.2 * a[i]) << "step " << i;
    } else {
      EXPECT_DOUBLE_EQ(b[i], a[i]) << "step " << i;
    }
  }
  // summary.json says when each held and what its steps cost against the steps before it.
  const auto summary =
      nlohmann::json::parse(testing::ReadFile((dir_ / "faulty/summary.json").string()));
  ASSERT_EQ(summary["faults"].size(), 2u);
  const auto& straggler = summary["faults"][0];
  EXPECT_EQ(straggler["kind"], "straggler");
  EXPECT_EQ(straggler["steps"], 10);
  double during = 0, before = 0;
  for (size_t i = 0; i < 10; ++i) before += b[i] / 10, during += b[10 + i] / 10;
  EXPECT_NEAR(straggler["step_time_mean_s"].get<double>(), during, 1e-12);
  EXPECT_NEAR(straggler["baseline_step_time_mean_s"].get<double>(), before, 1e-12);
  EXPECT_EQ(summary["faults"][1]["until"], 40);
  EXPECT_TRUE(
      nlohmann::json::parse(testing::ReadFile((dir_ / "healthy/summary.json").string()))["faults"]
          .empty());
  // The resolved scenario keeps the faults.
  EXPECT_NE(testing::ReadFile((dir_ / "faulty/scenario.yaml").string())
                .find("{kind: link_degraded, step: 30, until: 40, node: 1, link: nic, factor: 10}"),
            std::string::npos);
}
TEST_F(CliTest, CompareShowsWhatASingleFailureWouldCostEachPolicy) {
  // Room for two replicas of every expert: fault-tolerant survives any node lost; deepseek,
  // which replicates only the hottest, does not.
  const std::string out = (dir_ / "cmp").string();
  const CliRun r = Eplb(std::string("compare ") + EPLB_SCENARIO_DIR +
                        "/tiny.yaml --no-trace --set run.steps=120 --set "
                        "eplb.num_redundant_experts=16 --policies deepseek,fault-tolerant "
                        "--set 'faults=[{kind: straggler, step: 40, until: 60, rank: 2, "
                        "factor: 2}]' --out " +
                        out);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(testing::ReadFile(out + "/comparison.json"));
  ASSERT_EQ(doc["policies"].size(), 2u);
  const auto& deepseek = doc["policies"][0];
  const auto& tolerant = doc["policies"][1];
  EXPECT_EQ(tolerant["label"], "fault-tolerant");
  EXPECT_EQ(tolerant["node_failure_tokens_lost"].get<double>(), 0);
  EXPECT_EQ(tolerant["gpu_failure_tokens_lost"].get<double>(), 0);
  EXPECT_EQ(tolerant["node_failure_reload_bytes"].get<double>(), 0);
  EXPECT_GT(deepseek["node_failure_tokens_lost"].get<double>(), 0);
  EXPECT_GT(deepseek["node_failure_reload_bytes"].get<double>(), 0);
  EXPECT_GE(deepseek["node_failure_tokens_lost"].get<double>(),
            deepseek["gpu_failure_tokens_lost"].get<double>());
  // The report shades the fault's steps on the per-step charts.
  const std::string html = testing::ReadFile(out + "/report.html");
  EXPECT_NE(html.find(R"(<rect class="fault-span" data-start="40" data-end="60")"),
            std::string::npos);
  // One seed: no spread to print.
  EXPECT_EQ(r.out.find("±"), std::string::npos) << r.out;
}

// The rows of a run over several seeds: each number the mean of the seeds' (two seeds: the
// middle of their range) with its spread.
void ExpectMeansWithSpread(const nlohmann::json& row) {
  EXPECT_EQ(row["seeds"], 2) << row;
  ASSERT_TRUE(row.contains("spread")) << row;
  for (const char* key : {"balancedness_mean", "step_time_mean_s", "latency_p99_s"}) {
    const auto& range = row["spread"][key];
    EXPECT_NEAR(row[key].get<double>(), (range[0].get<double>() + range[1].get<double>()) / 2,
                1e-12)
        << key;
    EXPECT_LE(range[0].get<double>(), range[1].get<double>()) << key;
  }
  EXPECT_LT(row["spread"]["balancedness_mean"][0].get<double>(),
            row["spread"]["balancedness_mean"][1].get<double>())
      << "the seeds should change the workload";
}

// A line of the terminal table: its cell of each number reads "mean ± half the range".
void ExpectPlusMinusOnEveryLine(const std::string& text, const std::string& start) {
  size_t lines = 0;
  for (size_t at = text.find("\n" + start); at != std::string::npos;
       at = text.find("\n" + start, at + 1)) {
    const std::string line = text.substr(at + 1, text.find('\n', at + 1) - at - 1);
    EXPECT_GE(static_cast<size_t>(std::count(line.begin(), line.end(), '\xb1')), 5u) << line;
    ++lines;
  }
  EXPECT_GT(lines, 0u) << start << " in " << text;
}

// sweep --seeds: each point once per seed (points/I/seed-S), a row per point holding the mean
// with its spread and the seeds (sweep.json and sweep.csv), bands over seeds in the report's
// plots, and ± in every table. Before, `sweep --seeds` was refused as an unknown option.
TEST_F(CliTest, SweepOverSeedsReportsMeansWithSpreadAndBands) {
  const std::string out = (dir_ / "sweep").string();
  const CliRun r = Eplb(std::string("sweep ") + EPLB_SCENARIO_DIR +
                        "/tiny.yaml --set run.steps=300 --vary eplb.step_interval=100,200 "
                        "--seeds 1,2 --no-trace --jobs 2 --json --out " +
                        out);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["points"].size(), 2u);
  for (const auto& row : doc["points"]) ExpectMeansWithSpread(row);
  for (const char* run : {"points/0/seed-1", "points/0/seed-2", "points/1/seed-2"}) {
    const auto summary =
        nlohmann::json::parse(testing::ReadFile(out + "/" + run + "/summary.json"));
    EXPECT_EQ(summary["steps"], 300) << run;
  }
  // Each seed's own numbers are the spread's ends.
  std::vector<double> balance;
  for (const char* seed : {"seed-1", "seed-2"}) {
    const auto summary =
        nlohmann::json::parse(testing::ReadFile(out + "/points/1/" + seed + "/summary.json"));
    balance.push_back(summary["balancedness"]["mean"].get<double>());
  }
  EXPECT_NEAR(doc["points"][1]["spread"]["balancedness_mean"][0].get<double>(),
              std::min(balance[0], balance[1]), 1e-6);
  EXPECT_NEAR(doc["points"][1]["spread"]["balancedness_mean"][1].get<double>(),
              std::max(balance[0], balance[1]), 1e-6);
  const std::string csv = testing::ReadFile(out + "/sweep.csv");
  const std::string header = csv.substr(0, csv.find('\n'));
  for (const char* column : {",seeds", ",balancedness_mean.seed_min", ",balancedness_mean.seed_max",
                             ",latency_p99_s.seed_max"}) {
    EXPECT_NE(header.find(column), std::string::npos) << column << " in " << header;
  }
  const std::string html = testing::ReadFile(out + "/report.html");
  EXPECT_NE(html.find(R"(<polygon class="band")"), std::string::npos);
  EXPECT_NE(html.find("<small>± "), std::string::npos);
  EXPECT_NE(html.find("once per seed (2 seeds)"), std::string::npos);
  // --json: the table for people on stderr, ± in each number of each point's line.
  ExpectPlusMinusOnEveryLine(r.err, "0  ");
  ExpectPlusMinusOnEveryLine(r.err, "1  ");
  EXPECT_NE(r.err.find("each number: the mean over 2 seeds (1, 2) ± half the range"),
            std::string::npos)
      << r.err;

  const std::string tiny = std::string("sweep ") + EPLB_SCENARIO_DIR + "/tiny.yaml ";
  ExpectErrors({
      {"not a seed", tiny + "--vary eplb.step_interval=100,200 --seeds 1,x",
       "--seeds: 'x' is not a seed"},
      {"twice", tiny + "--vary eplb.step_interval=100,200 --seeds 1,1", "--seeds names '1' twice"},
      {"seeds twice over", tiny + "--vary run.seed=1,2 --seeds 3,4",
       "--vary run.seed and --seeds both name the seeds"},
  });
}

// compare --seeds: the terminal table prints the spread the report shows, mean ± half range.
TEST_F(CliTest, CompareTablePrintsTheSpreadOverSeeds) {
  const CliRun r = Eplb(std::string("compare ") + EPLB_SCENARIO_DIR +
                        "/tiny.yaml --policies static,deepseek --seeds 1,2 --set run.steps=300 "
                        "--no-trace --jobs 2 --out " +
                        (dir_ / "cmp").string());
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectPlusMinusOnEveryLine(r.out, "static ");
  ExpectPlusMinusOnEveryLine(r.out, "deepseek ");
  EXPECT_NE(r.out.find("each number: the mean over 2 seeds ± half the range"), std::string::npos)
      << r.out;
  const auto doc =
      nlohmann::json::parse(testing::ReadFile((dir_ / "cmp/comparison.json").string()));
  for (const auto& row : doc["policies"]) {
    EXPECT_EQ(row["seeds"], 2);
    // The table's balancedness cell is the row's mean ± half its range, as printed.
    const auto& range = row["spread"]["balancedness_mean"];
    const std::string cell = fmt::format("{:.4f} ± {:.4f}", row["balancedness_mean"].get<double>(),
                                         (range[1].get<double>() - range[0].get<double>()) / 2);
    EXPECT_NE(r.out.find(cell), std::string::npos) << cell << " in " << r.out;
  }
}
#endif

#ifdef EPLB_HAVE_SIM
// issue 56: a comparison whose runs paid an engine's orchestration shows where a rearrangement's
// time goes (a stacked bar per run) and keeps each part in comparison.json; eplb's own profile
// pays none and the report has no such figure.
TEST_F(CliTest, CompareShowsWhereARearrangementsTimeGoes) {
  const std::string scenario = std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml";
  const std::string vllm = (dir_ / "vllm").string();
  const CliRun r = Eplb("compare " + scenario +
                        " --policies deepseek,replicate-lpt --set run.steps=300"
                        " --set migration.engine=vllm --set migration.transport=nixl"
                        " --set eplb.use_async=false --out " +
                        vllm);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(vllm + "/figures/rearrangement-cost.svg"));
  EXPECT_NE(testing::ReadFile(vllm + "/report.html").find("Where a rearrangement's time goes"),
            std::string::npos);
  const auto doc = nlohmann::json::parse(testing::ReadFile(vllm + "/comparison.json"));
  bool found = false;
  for (const auto& run : doc.items()) {
    if (!run.value().is_array()) continue;
    for (const auto& row : run.value()) {
      if (!row.is_object() || !row.contains("engine_host_s")) continue;
      found = true;
      const double parts =
          row["engine_once_s"].get<double>() + row["engine_planning_s"].get<double>() +
          row["engine_transfer_s"].get<double>() + row["engine_barrier_s"].get<double>() +
          row["engine_polling_s"].get<double>() + row["engine_writeback_s"].get<double>();
      EXPECT_GT(row["engine_barrier_s"].get<double>(), 0);
      EXPECT_NEAR(row["engine_host_s"].get<double>(), parts, 1e-12);
      const auto summary = nlohmann::json::parse(
          testing::ReadFile(vllm + "/" + row["label"].get<std::string>() + "/summary.json"));
      EXPECT_DOUBLE_EQ(summary["rearrangements"]["engine_s_mean"]["barrier"].get<double>(),
                       row["engine_barrier_s"].get<double>());
    }
  }
  EXPECT_TRUE(found) << doc.dump();

  const std::string own = (dir_ / "eplb").string();
  ASSERT_EQ(
      Eplb("compare " + scenario + " --policies deepseek --set run.steps=300 --out " + own).code,
      0);
  EXPECT_FALSE(fs::exists(own + "/figures/rearrangement-cost.svg"));
}
#endif

}  // namespace
}  // namespace eplb
