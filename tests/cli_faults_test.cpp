// Lost GPUs and elastic scaling end to end: `eplb run` and `eplb compare` on the tiny scenario
// with room for two replicas per expert (16 experts, 32 slots on 2 nodes × 2 GPUs), and what the
// run folder says about each fault.
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_fixture.h"
#include "eplb/io/run_folder.h"
#include "test_util.h"

namespace eplb {
namespace {

// Every test here runs the simulator; a build without it has none of them.
#ifdef EPLB_HAVE_SIM

// A CSV as one map per line, column name to text.
std::vector<std::map<std::string, std::string>> ReadCsv(const std::string& path) {
  std::istringstream in(testing::ReadFile(path));
  std::string line;
  std::getline(in, line);
  std::vector<std::string> header;
  std::stringstream hs(line);
  for (std::string h; std::getline(hs, h, ',');) header.push_back(h);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    std::stringstream ls(line);
    std::map<std::string, std::string> row;
    size_t i = 0;
    for (std::string v; std::getline(ls, v, ',') && i < header.size(); ++i) row[header[i]] = v;
    rows.push_back(std::move(row));
  }
  return rows;
}

// The placement in force at the end of a run: placements.jsonl's last row of each layer.
std::map<int, std::vector<int>> FinalRows(const std::string& dir) {
  std::istringstream in(testing::ReadFile(dir + "/placements.jsonl"));
  std::map<int, std::vector<int>> rows;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    rows[j["layer"].get<int>()] = j["phy2log"].get<std::vector<int>>();
  }
  return rows;
}

// `command` on the tiny scenario with room for two replicas per expert, then `settings`,
// writing `out`.
std::string OnTiny(const std::string& command, const std::string& settings,
                   const std::string& out) {
  return command + " " + EPLB_SCENARIO_DIR +
         "/tiny.yaml --no-trace --set eplb.num_redundant_experts=16 " + settings + " --out " + out;
}

// Node 1 lost at step 126, half way through the second rearrangement (it starts after step 124
// and commits a layer per step).
const char* kNodeLost = "--set 'faults=[{kind: node_lost, step: 126, node: 1}]'";

TEST_F(CliTest, ANodeLostMidRearrangementIsCancelledRecoveredAndReported) {
  const std::string out = (dir_ / "lost").string();
  const CliRun r = Eplb(OnTiny("run", kNodeLost, out));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("  fault          node_lost at step 126: 2 GPUs serve, recovered in "),
            std::string::npos)
      << r.out;
  const auto rearrangements = ReadCsv(out + "/rearrangements.csv");
  ASSERT_GE(rearrangements.size(), 3u);
  EXPECT_EQ(rearrangements[1].at("step"), "124");
  EXPECT_EQ(rearrangements[1].at("cancelled"), "1");
  EXPECT_EQ(rearrangements[1].at("end_s"), "-1");
  EXPECT_EQ(rearrangements[2].at("step"), "126");
  EXPECT_EQ(rearrangements[2].at("reason"), "recovery");
  const int64_t reloaded = std::stoll(rearrangements[2].at("bytes_reloaded"));
  EXPECT_GT(reloaded, 0);
  EXPECT_EQ(reloaded % 1048576, 0);  // whole experts

  const auto summary = nlohmann::json::parse(testing::ReadFile(out + "/summary.json"));
  ASSERT_EQ(summary["faults"].size(), 1u);
  const auto& fault = summary["faults"][0];
  const auto& recovery = fault["recovery"];
  EXPECT_EQ(fault["kind"], "node_lost");
  EXPECT_EQ(recovery["bytes_reloaded"].get<int64_t>(), reloaded);
  EXPECT_EQ(recovery["cancelled_rearrangement"], 1);
  EXPECT_EQ(recovery["serving_gpus"], 2);
  EXPECT_GT(recovery["recovery_s"].get<double>(), 0);
  const int until = fault["until"].get<int>();
  EXPECT_GT(until, 126);

  // Tokens are dropped from the loss until the recovery's last commit, never before or after;
  // the node's GPUs serve no more.
  const auto metrics = ReadCsv(out + "/metrics.csv");
  ASSERT_EQ(metrics.size(), 400u);
  double dropped = 0;
  for (int i = 0; i < 400; ++i) {
    const double lost = std::stod(metrics[static_cast<size_t>(i)].at("tokens_lost"));
    dropped += lost;
    EXPECT_EQ(metrics[static_cast<size_t>(i)].at("serving_gpus"), i < 126 ? "4" : "2") << i;
    if (i < 126 || i >= until) {
      EXPECT_EQ(lost, 0) << "step " << i;
    }
  }
  EXPECT_GT(std::stod(metrics[126].at("tokens_lost")), 0);
  EXPECT_NEAR(recovery["tokens_lost"].get<double>(), dropped, 1e-6 * dropped);

  // After recovery every expert of every layer has a replica, none on the lost node's slots.
  for (const auto& [layer, row] : FinalRows(out)) {
    ASSERT_EQ(row.size(), 32u);
    std::vector<int> replicas(16, 0);
    for (size_t s = 0; s < 32; ++s) {
      if (s >= 16) {
        EXPECT_EQ(row[s], -1) << "layer " << layer << " slot " << s;
      } else if (row[s] >= 0) {
        ++replicas[static_cast<size_t>(row[s])];
      }
    }
    for (int e = 0; e < 16; ++e) EXPECT_GE(replicas[static_cast<size_t>(e)], 1) << e;
  }
}

TEST_F(CliTest, WaitingForRecoveryStallsTheBatchAndDropsNothing) {
  const std::string out = (dir_ / "wait").string();
  const CliRun r =
      Eplb(OnTiny("run", std::string("--set eplb.lost_tokens=wait ") + kNodeLost, out));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto metrics = ReadCsv(out + "/metrics.csv");
  for (const auto& m : metrics) EXPECT_EQ(std::stod(m.at("tokens_lost")), 0) << m.at("step");
  const auto summary = nlohmann::json::parse(testing::ReadFile(out + "/summary.json"));
  const auto& recovery = summary["faults"][0]["recovery"];
  EXPECT_GT(std::stod(metrics[126].at("stalled_s")), 0);
  EXPECT_NEAR(recovery["stalled_s"].get<double>(), std::stod(metrics[126].at("stalled_s")), 1e-9);
  EXPECT_EQ(recovery["tokens_stalled"].get<double>(), 1024);  // the batch that waited
  EXPECT_EQ(summary["faults"][0]["steps"], 0);                // no step ran without experts
}

TEST_F(CliTest, CompareShowsWhatLosingANodeCostEachPolicy) {
  const std::string out = (dir_ / "compare").string();
  const CliRun r =
      Eplb(OnTiny("compare", std::string("--policies deepseek,fault-tolerant ") + kNodeLost, out));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("recovery s"), std::string::npos) << r.out;
  const auto doc = nlohmann::json::parse(testing::ReadFile(out + "/comparison.json"));
  ASSERT_EQ(doc["policies"].size(), 2u);
  const auto& deepseek = doc["policies"][0];
  const auto& tolerant = doc["policies"][1];
  // Two replicas of every expert on different nodes: nothing to reload, no token dropped.
  EXPECT_EQ(tolerant["fault_bytes_reloaded"].get<double>(), 0);
  EXPECT_EQ(tolerant["fault_tokens_lost"].get<double>(), 0);
  EXPECT_GT(deepseek["fault_bytes_reloaded"].get<double>(), 0);
  EXPECT_GT(deepseek["fault_tokens_lost"].get<double>(), 0);
  const std::string html = testing::ReadFile(out + "/report.html");
  EXPECT_NE(html.find("data-key=\"fault_tokens_lost\""), std::string::npos);
}

TEST_F(CliTest, ScalingOutThenInServesOnTheGpusAskedFor) {
  const std::string out = (dir_ / "scale").string();
  const CliRun r = Eplb(OnTiny("run",
                               "--set cluster.initial_gpus=2 --set 'faults=[{kind: scale, step: "
                               "50, gpus: 4}, {kind: scale, step: 300, gpus: 2}]'",
                               out));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto metrics = ReadCsv(out + "/metrics.csv");
  for (int i = 0; i < 400; ++i) {
    EXPECT_EQ(metrics[static_cast<size_t>(i)].at("serving_gpus"), i >= 50 && i < 300 ? "4" : "2")
        << i;
    EXPECT_EQ(std::stod(metrics[static_cast<size_t>(i)].at("tokens_lost")), 0) << i;
    // While the removed GPUs drain they still take tokens, and the mean is over them too: a
    // balancedness over 1 or a negative imbalance would mean the mean left them out.
    const double balancedness = std::stod(metrics[static_cast<size_t>(i)].at("balancedness"));
    EXPECT_GT(balancedness, 0) << i;
    EXPECT_LE(balancedness, 1) << i;
    EXPECT_GE(std::stod(metrics[static_cast<size_t>(i)].at("imbalance_ratio")), 0) << i;
  }
  // Read back whole by eplb's own reader (which refuses such values).
  auto folder = ReadRunFolder(out);
  EXPECT_TRUE(folder.ok()) << folder.status().message();
  const auto rearrangements = ReadCsv(out + "/rearrangements.csv");
  int scales = 0;
  for (const auto& row : rearrangements) {
    if (row.at("reason") != "scale") continue;
    ++scales;
    EXPECT_NE(row.at("end_s"), "-1");          // the drain and the fill complete
    EXPECT_EQ(row.at("bytes_reloaded"), "0");  // the removed GPUs send their experts away
  }
  EXPECT_EQ(scales, 2);
  // Back on two GPUs: ranks 2 and 3 empty, every expert on ranks 0 and 1.
  for (const auto& [layer, row] : FinalRows(out)) {
    std::vector<int> replicas(16, 0);
    for (size_t s = 0; s < 32; ++s) {
      if (s >= 16) {
        EXPECT_EQ(row[s], -1) << "layer " << layer << " slot " << s;
      } else if (row[s] >= 0) {
        ++replicas[static_cast<size_t>(row[s])];
      }
    }
    for (int e = 0; e < 16; ++e) EXPECT_GE(replicas[static_cast<size_t>(e)], 1);
  }
}

TEST_F(CliTest, LossesNeedAPolicyThatPlacesAroundLostGpus) {
  const CliRun r = Eplb(OnTiny("run",
                               "--set eplb.policy=migration-aware --set 'faults=[{kind: gpu_lost, "
                               "step: 10, rank: 1}]'",
                               (dir_ / "refused").string()));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("eplb.policy is 'migration-aware', which cannot place around lost or idle "
                       "GPUs; the policies that can: deepseek, replicate-lpt, timeseries, "
                       "fault-tolerant"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "refused"));
}

#endif  // EPLB_HAVE_SIM

}  // namespace
}  // namespace eplb
