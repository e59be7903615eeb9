// The command line's conventions for scripts and long work: --json documents on stdout, the
// tool and format version in what eplb writes, `eplb policies`, policy options, progress lines
// on stderr, and scenario dumps with the shortest reals that read back.
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_fixture.h"
#include "eplb/io/run_folder.h"
#include "eplb/policy/policy.h"
#include "test_util.h"

namespace eplb {
namespace {

TEST_F(CliTest, PoliciesListsEveryRegisteredPolicy) {
  const CliRun r = Eplb("policies --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  const std::vector<PolicyInfo> registered = RegisteredPolicies();
  ASSERT_EQ(doc.size(), registered.size());
  for (size_t i = 0; i < registered.size(); ++i) {
    EXPECT_EQ(doc[i]["name"], registered[i].name);
    EXPECT_EQ(doc[i]["summary"], registered[i].summary);
    // Whose "ours" would be is unknown to a reader of `eplb policies`: the summary names it.
    const std::string summary = registered[i].summary;
    EXPECT_EQ(summary.find("ours"), std::string::npos) << summary;
    ASSERT_EQ(doc[i]["options"].size(), registered[i].options.size()) << registered[i].name;
    for (const auto& option : doc[i]["options"]) {
      // Every listed option is one rebalance --option takes.
      PolicyTuning cost;
      const std::string name = option["name"];
      EXPECT_TRUE(SetPolicyOption(name, "3", cost).ok()) << name;
      EXPECT_FALSE(option["scenario_field"].get<std::string>().empty()) << name;
    }
  }
  const CliRun text = Eplb("policies");
  ASSERT_EQ(text.code, 0) << text.err;
  for (const PolicyInfo& p : registered) {
    EXPECT_NE(text.out.find(p.name + " "), std::string::npos) << p.name;
    for (const std::string& o : p.options) EXPECT_NE(text.out.find(o), std::string::npos);
  }
}

// docs/policies.md's table is the registry's, row by row: each policy described once.
TEST(PolicyDocs, TheDocsTableIsTheRegistrys) {
  const std::string doc = testing::ReadFile(std::string(EPLB_SOURCE_DIR) + "/docs/policies.md");
  const size_t table = doc.find("| name | what it does |");
  ASSERT_NE(table, std::string::npos) << "docs/policies.md: no policy table";
  std::istringstream lines(doc.substr(table));
  std::string line;
  std::getline(lines, line);  // the header
  std::getline(lines, line);  // |---|---|
  std::vector<std::pair<std::string, std::string>> rows;
  while (std::getline(lines, line) && line.rfind("| `", 0) == 0) {
    const size_t name_end = line.find("` | ");
    ASSERT_NE(name_end, std::string::npos) << line;
    ASSERT_TRUE(line.ends_with(" |")) << line;
    rows.emplace_back(line.substr(3, name_end - 3),
                      line.substr(name_end + 4, line.size() - name_end - 6));
  }
  const std::vector<PolicyInfo> registered = RegisteredPolicies();
  ASSERT_EQ(rows.size(), registered.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].first, registered[i].name);
    EXPECT_EQ(rows[i].second, registered[i].summary)
        << "docs/policies.md's row for " << registered[i].name << " and the registry differ";
  }
}

// A user's program and a recording register like every policy: "external" and "recorded" are
// known before they are given (a run folder naming them reads back), not listed, and refuse to
// run; an option a policy reads is one PolicyOptions() describes.
TEST(PolicyRegistry, ProgramsAndRecordingsRegisterLikeEveryPolicy) {
  for (const char* placeholder : {"external", "recorded"}) {
    ASSERT_TRUE(FindPolicy(placeholder).has_value()) << placeholder;
    EXPECT_TRUE(FindPolicy(placeholder)->placeholder) << placeholder;
    EXPECT_FALSE(FindPolicy(placeholder)->listed) << placeholder;
    for (const PolicyInfo& p : RegisteredPolicies()) EXPECT_NE(p.name, placeholder);
    EXPECT_TRUE(MakePolicy(placeholder).ok()) << placeholder;
  }
  PolicyInfo unknown_option{"reads-what",
                            "reads an option nobody describes",
                            [] { return std::unique_ptr<Policy>(); },
                            {"no_such_option"}};
  EXPECT_FALSE(RegisterPolicy(unknown_option).ok());
  EXPECT_FALSE(FindPolicy("reads-what").has_value());
  for (const PolicyOption& o : PolicyOptions()) {
    PolicyTuning tuning;
    EXPECT_TRUE(SetPolicyOption(o.name, "3", tuning).ok()) << o.name;
    EXPECT_EQ(o.real != nullptr ? tuning.*(o.real) : tuning.*(o.integer), 3) << o.name;
    EXPECT_FALSE(o.DefaultText().empty()) << o.name;
  }
}

TEST_F(CliTest, RebalanceTakesPolicyOptionsAndRefusesUnknownOnes) {
  const std::string args = "rebalance --load " + ReadmeLoad() +
                           " --replicas 16 --groups 4 --nodes 2 --gpus 8 --policy incremental";
  // With no moves allowed, incremental keeps the initial placement: slot s holds expert s % 12.
  const CliRun kept = Eplb(args + " --option max_moves_per_layer=0");
  ASSERT_EQ(kept.code, 0) << kept.err;
  EXPECT_EQ(nlohmann::json::parse(kept.out)["phy2log"][0].dump(),
            "[0,1,2,3,4,5,6,7,8,9,10,11,0,1,2,3]");
  const CliRun moved = Eplb(args + " --option max_moves_per_layer=8");
  ASSERT_EQ(moved.code, 0) << moved.err;
  EXPECT_NE(nlohmann::json::parse(moved.out)["phy2log"][0].dump(),
            "[0,1,2,3,4,5,6,7,8,9,10,11,0,1,2,3]");
  ExpectErrors({
      {"unknown", args + " --option speed=3", "unknown policy option 'speed'; the options are"},
      {"no value", args + " --option migration_weight", "expected NAME=VALUE"},
      {"negative", args + " --option migration_weight=-1", "must be a number of at least 0"},
      {"not an integer", args + " --option max_moves_per_layer=2.5", "must be an integer"},
  });
}

TEST(PolicyOptions, SetEachField) {
  PolicyTuning cost;
  ASSERT_TRUE(SetPolicyOption("migration_weight", "0.5", cost).ok());
  ASSERT_TRUE(SetPolicyOption("serve_steps", "100", cost).ok());
  ASSERT_TRUE(SetPolicyOption("seconds_per_token", "2e-7", cost).ok());
  ASSERT_TRUE(SetPolicyOption("window_steps", "10", cost).ok());
  ASSERT_TRUE(SetPolicyOption("max_moves_per_layer", "3", cost).ok());
  EXPECT_EQ(cost.weight, 0.5);
  EXPECT_EQ(cost.serve_steps, 100);
  EXPECT_EQ(cost.seconds_per_token, 2e-7);
  EXPECT_EQ(cost.window_steps, 10);
  EXPECT_EQ(cost.max_moves_per_layer, 3);
  EXPECT_FALSE(SetPolicyOption("serve_steps", "nan", cost).ok());
  EXPECT_FALSE(SetPolicyOption("serve_steps", "0", cost).ok());
}

#ifdef EPLB_HAVE_SIM
// stdout carries the folder's document alone; the lines for people and the progress go to
// stderr, which is not a terminal here, so progress comes as whole lines.
TEST_F(CliTest, JsonPrintsTheFoldersDocumentOnStdout) {
  const std::string tiny = std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml";
  const std::string run_dir = (dir_ / "run").string();
  const CliRun run = Eplb("run " + tiny + " --no-trace --json --out " + run_dir);
  ASSERT_EQ(run.code, 0) << run.err;
  const auto summary = nlohmann::json::parse(run.out);
  EXPECT_EQ(summary, nlohmann::json::parse(testing::ReadFile(run_dir + "/summary.json")));
  EXPECT_EQ(summary["tool"], ToolVersion());
  EXPECT_EQ(summary["format_version"], kFolderFormatVersion);
  EXPECT_NE(run.err.find("tiny: 400 steps"), std::string::npos) << run.err;

  const std::string cmp_dir = (dir_ / "cmp").string();
  const CliRun cmp =
      Eplb("compare " + tiny + " --policies static,deepseek --no-trace --json --out " + cmp_dir);
  ASSERT_EQ(cmp.code, 0) << cmp.err;
  const auto comparison = nlohmann::json::parse(cmp.out);
  EXPECT_EQ(comparison, nlohmann::json::parse(testing::ReadFile(cmp_dir + "/comparison.json")));
  EXPECT_EQ(comparison["tool"], ToolVersion());
  EXPECT_EQ(comparison["policies"].size(), 2u);
  EXPECT_NE(cmp.err.find("report: "), std::string::npos);

  const std::string sweep_dir = (dir_ / "sweep").string();
  const CliRun sweep =
      Eplb("sweep " + tiny + " --vary eplb.num_redundant_experts=0,4 --no-trace --json --out " +
           sweep_dir);
  ASSERT_EQ(sweep.code, 0) << sweep.err;
  const auto points = nlohmann::json::parse(sweep.out);
  EXPECT_EQ(points, nlohmann::json::parse(testing::ReadFile(sweep_dir + "/sweep.json")));
  EXPECT_EQ(points["format_version"], kFolderFormatVersion);
  EXPECT_EQ(points["points"].size(), 2u);
}

TEST_F(CliTest, ProgressLinesWhenStderrIsNotATerminal) {
  const std::string tiny = std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml";
  const CliRun run = Eplb("run " + tiny + " --no-trace --out " + (dir_ / "run").string());
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.err.find("eplb run: tiny: step 0/400 (0%)\n"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("eplb run: tiny: step 400/400 (100%), done in "), std::string::npos)
      << run.err;
  EXPECT_EQ(run.err.find('\r'), std::string::npos);    // no redrawing in a log
  EXPECT_EQ(run.err.find("\x1b"), std::string::npos);  // nor terminal escapes

  const CliRun cmp = Eplb("compare " + tiny + " --policies static,deepseek --jobs 1 --no-trace " +
                          "--out " + (dir_ / "cmp").string());
  ASSERT_EQ(cmp.code, 0) << cmp.err;
  for (const char* policy : {"static", "deepseek"}) {
    const std::string line = std::string("eplb compare: ") + policy + ": step 400/400 (100%), done";
    EXPECT_NE(cmp.err.find(line), std::string::npos) << cmp.err;
  }
  EXPECT_NE(cmp.err.find("eplb compare: 2 of 2 jobs ended"), std::string::npos) << cmp.err;

  const CliRun sweep = Eplb("sweep " + tiny + " --vary run.steps=50,60 --no-trace --out " +
                            (dir_ / "sweep").string());
  ASSERT_EQ(sweep.code, 0) << sweep.err;
  EXPECT_NE(sweep.err.find("eplb sweep: point 0: step 50/50 (100%), done"), std::string::npos)
      << sweep.err;
  EXPECT_NE(sweep.err.find("eplb sweep: point 1: step 60/60 (100%), done"), std::string::npos)
      << sweep.err;
}

// --seeds: each policy once per seed; the rows are means over seeds with their spread, and the
// report draws a dot per seed and bands over seeds.
TEST_F(CliTest, CompareOverSeedsReportsMeansAndSpread) {
  const std::string out = (dir_ / "seeds").string();
  const CliRun r = Eplb(std::string("compare ") + EPLB_SCENARIO_DIR +
                        "/tiny.yaml --policies static,deepseek --seeds 3,4 --set run.steps=1200 "
                        "--no-trace --json --out " +
                        out);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["policies"].size(), 2u);
  const std::string html = testing::ReadFile(out + "/report.html");
  // Every run is measured over one window: from the latest of the runs' own first steps.
  int64_t from = 0;
  for (const auto& row : doc["policies"]) {
    for (const char* seed : {"seed-3", "seed-4"}) {
      const auto summary = nlohmann::json::parse(testing::ReadFile(
          out + "/" + row["label"].get<std::string>() + "/" + seed + "/summary.json"));
      from = std::max(from, summary["measured"]["from_step"].get<int64_t>());
    }
  }
  EXPECT_GT(from, 0) << "deepseek's first commit ends the warm-up";
  for (const auto& row : doc["policies"]) {
    const std::string label = row["label"];
    EXPECT_EQ(row["seeds"], 2);
    std::vector<double> balance;
    for (const char* seed : {"seed-3", "seed-4"}) {
      // The mean of metrics.csv's balancedness (6 decimals) over the window.
      std::istringstream metrics(
          testing::ReadFile(out + "/" + label + "/" + seed + "/metrics.csv"));
      std::string line;
      std::getline(metrics, line);
      double sum = 0;
      int64_t n = 0;
      for (int64_t step = 0; std::getline(metrics, line); ++step) {
        if (step < from) continue;
        std::istringstream cells(line);
        std::string balancedness;  // the fifth column
        for (int column = 0; column < 5; ++column) std::getline(cells, balancedness, ',');
        sum += std::stod(balancedness);
        ++n;
      }
      balance.push_back(sum / static_cast<double>(n));
    }
    EXPECT_NEAR(row["balancedness_mean"].get<double>(), (balance[0] + balance[1]) / 2, 1e-6);
    EXPECT_NEAR(row["spread"]["balancedness_mean"][0].get<double>(),
                std::min(balance[0], balance[1]), 1e-6);
    EXPECT_NEAR(row["spread"]["balancedness_mean"][1].get<double>(),
                std::max(balance[0], balance[1]), 1e-6);
    EXPECT_NE(balance[0], balance[1]) << "the seeds should change the workload";
    // The trade-off scatter: a dot per seed.
    const std::string scatter = testing::ReadFile(out + "/figures/balance-vs-bytes.svg");
    size_t dots = 0;
    for (size_t at = scatter.find("<circle class=\"point\" data-series=\"" + label + "\"");
         at != std::string::npos;
         at = scatter.find("<circle class=\"point\" data-series=\"" + label + "\"", at + 1)) {
      ++dots;
    }
    EXPECT_EQ(dots, 2u) << label;
    EXPECT_NE(html.find("<polygon class=\"band\" data-series=\"" + label + "\""),
              std::string::npos);
  }
  EXPECT_NE(html.find("<small>± "), std::string::npos);
  EXPECT_NE(html.find("once per seed"), std::string::npos);
  const std::string csv = testing::ReadFile(out + "/comparison.csv");
  EXPECT_EQ(csv.find("spread"), std::string::npos);
  EXPECT_NE(csv.find(",seeds"), std::string::npos);

  ExpectErrors({
      {"not a seed", std::string("compare ") + EPLB_SCENARIO_DIR + "/tiny.yaml --seeds 1,x",
       "--seeds: 'x' is not a seed"},
      {"twice", std::string("compare ") + EPLB_SCENARIO_DIR + "/tiny.yaml --seeds 1,1", "--seeds"},
      {"signed", std::string("compare ") + EPLB_SCENARIO_DIR + "/tiny.yaml --seeds 1,+2",
       "--seeds: '+2' is not a seed"},
      {"minus zero", std::string("compare ") + EPLB_SCENARIO_DIR + "/tiny.yaml --seeds -0",
       "--seeds: '-0' is not a seed"},
      {"spaced", std::string("compare ") + EPLB_SCENARIO_DIR + "/tiny.yaml --seeds '1, 2'",
       "--seeds: ' 2' is not a seed"},
      {"too large",
       std::string("compare ") + EPLB_SCENARIO_DIR + "/tiny.yaml --seeds 99999999999999999999",
       "--seeds: '99999999999999999999' is not a seed"},
      {"map layer", std::string("compare ") + EPLB_SCENARIO_DIR + "/tiny.yaml --map-layer 9",
       "--map-layer is 9; the scenario's model has layers 0..3"},
      {"map step", std::string("compare ") + EPLB_SCENARIO_DIR + "/tiny.yaml --map-step 400",
       "--map-step is 400; the run has steps 0..399"},
  });
}

// Reals in a resolved scenario are the shortest text that reads back to the same value.
TEST_F(CliTest, ResolvedScenarioWritesShortestReals) {
  const std::string out = (dir_ / "run").string();
  const CliRun r = Eplb(std::string("run ") + EPLB_SCENARIO_DIR +
                        "/tiny.yaml --no-trace --set cluster.nvlink.efficiency=0.8 " +
                        "--set compute.per_token_us=0.05 --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string yaml = testing::ReadFile(out + "/scenario.yaml");
  EXPECT_NE(yaml.find("efficiency: 0.8\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("per_token_us: 0.05\n"), std::string::npos) << yaml;
  EXPECT_EQ(yaml.find("0000000"), std::string::npos) << yaml;
}
#endif

}  // namespace
}  // namespace eplb
