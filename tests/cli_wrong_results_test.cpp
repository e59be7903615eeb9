// Input that once ran to a wrong result reported as success: each is now refused, naming the
// file or option, the value and what is valid; and numbers that do not exist, shown as absent
// rather than 0 (issue 65, "wrong results reported as success", "numbers that still mislead").
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_fixture.h"
#include "eplb/base/file_io.h"
#include "eplb/io/output_folders.h"

namespace eplb {
namespace {

// A placement row of tiny.yaml's 16 experts over 20 slots.
const std::string kRow = "[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,0,1,2,3]";
const std::string kMap = "[" + kRow + "," + kRow + "," + kRow + "," + kRow + "]";

TEST_F(CliTest, InputThatRanToAWrongResultIsRefused) {
  const std::string tiny = std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml";
  const std::string five_gpus =
      Write("five-gpus.json", "{\"phy2log\": " + kMap + ", \"num_gpus\": 5, \"num_nodes\": 1}");
  const std::string two_steps =
      Write("two-steps.jsonl", "{\"step\": 10, \"step\": 20, \"phy2log\": " + kMap + "}\n");
  const std::string nul = Write("nul.jsonl", "{\"step\": 10, \"phy2log\": " + kMap + "}" +
                                                 std::string(1, '\0') + "{\"step\": 30}\n");
  ExpectErrors({
      {"empty seeds in compare", "compare " + tiny + " --seeds ''", "the value is empty"},
      {"empty seeds in sweep", "sweep " + tiny + " --vary run.steps=10,20 --seeds ''",
       "the value is empty"},
      {"empty policies", "compare " + tiny + " --policies ''", "the value is empty"},
      {"two policies for one run",
       "run " + tiny + " --set eplb.policy=deepseek --policy-command '/usr/bin/python3 x.py'",
       "--set 'eplb.policy=deepseek' and --policy-command name two policies for one run"},
      {"a placement for another cluster", "run " + tiny + " --policy-replay " + five_gpus,
       "recorded for 5 GPUs on 1 nodes; the scenario has 4 GPUs on 2 nodes"},
      {"a key twice", "run " + tiny + " --policy-replay " + two_steps,
       "two-steps.jsonl:1:14: not valid here: the key 'step' appears twice in one object"},
      {"a NUL byte", "run " + tiny + " --policy-replay " + nul, "not valid JSON: a NUL byte"},
      // A name becomes a comparison's folder: refused when given, not when written.
      {"a recording named ..", "compare " + tiny + " --policy-replay '..=" + five_gpus + "'",
       "--policy-replay: the policy name '..' cannot name the folder of its runs"},
      {"expert bytes past what a plan counts",
       "plan --old " + Write("old.json", "{\"phy2log\": " + kMap + "}") + " --new " +
           Write("new.json", "{\"phy2log\": " + kMap + "}") +
           " --gpus 4 --nodes 2 --expert-bytes 2000000000000",
       "--expert-bytes 2000000000000: "},
      {"a program named .", "compare " + tiny + " --policy-command '.=/usr/bin/python3 x.py'",
       "--policy-command: the policy name '.' cannot name the folder of its runs"},
  });
  // Work without bound is refused before the first step, not at the first rearrangement.
  const CliRun cubic = Eplb("run " + tiny +
                            " --set eplb.policy=topology-aware --set model.experts=4096"
                            " --set eplb.num_redundant_experts=0 --out " +
                            (dir_ / "cubic").string());
  EXPECT_EQ(cubic.code, 2) << cubic.err;
  EXPECT_NE(cubic.err.find("eplb.policy topology-aware: topology-aware placement of 4 layers × "
                           "4096 items over 4 ranks"),
            std::string::npos)
      << cubic.err;
  EXPECT_EQ(cubic.err.find("step 0/"), std::string::npos) << cubic.err;
  EXPECT_FALSE(fs::exists(dir_ / "cubic"));
  // The same policy named both ways is one wish, not two.
  const CliRun same = Eplb("run " + tiny + " --set run.steps=10 --set eplb.policy=mine --out " +
                           (dir_ / "same").string() + " --policy-command 'mine=/usr/bin/python3 " +
                           EPLB_SOURCE_DIR + "/tools/policy/policy_client.py'");
  EXPECT_EQ(same.code, 0) << same.err;
}

// A study folder whose document was forged (its manifest recomputed) describes no study eplb
// wrote: refused, naming the document and what does not hold.
class ForgedStudyTest : public CliTest {
 protected:
  // A folder of `kind` holding `document` as `json_name` and a run folder's manifest under each
  // of `runs`, with a manifest that checks out.
  std::string Study(const std::string& name, const char* kind, const char* json_name,
                    const std::string& document, const std::vector<std::string>& runs) {
    const std::string dir = (dir_ / name).string();
    Write(name + "/" + json_name, document);
    for (const std::string& r : runs) Write(name + "/" + r + "/manifest.tsv", "x");
    EXPECT_TRUE(WriteFolderManifest(dir, kind).ok());
    return dir;
  }
};

TEST_F(ForgedStudyTest, AForgedStudyDocumentIsRefused) {
  const auto comparison = [&](const std::string& name, const std::string& doc,
                              const std::vector<std::string>& runs) {
    auto read = ReadComparisonFolder(
        Study(name, kComparisonFolderKind, folder_file::kComparisonJson, doc, runs));
    return read.ok() ? std::string("read as valid") : read.status().message();
  };
  const auto sweep = [&](const std::string& name, const std::string& doc,
                         const std::vector<std::string>& runs) {
    auto read = ReadSweepFolder(Study(name, kSweepFolderKind, folder_file::kSweepJson, doc, runs));
    return read.ok() ? std::string("read as valid") : read.status().message();
  };
  const std::string v = "\"format_version\": 1, ";
  EXPECT_NE(comparison("c1", "{}", {"static"}).find("no format_version"), std::string::npos);
  EXPECT_NE(comparison("c2", "{" + v + "\"scenario\": \"x\"}", {"static"})
                .find("policies is missing; expected a non-empty array"),
            std::string::npos);
  EXPECT_NE(comparison("c3",
                       "{" + v +
                           "\"policies\": [{\"label\": \"deepseek\"}, "
                           "{\"label\": \"deepseek\"}]}",
                       {"deepseek"})
                .find("policy label 'deepseek' is given twice"),
            std::string::npos);
  EXPECT_NE(comparison("c4", "{\"format_version\": -1, \"policies\": [{\"label\": \"static\"}]}",
                       {"static"})
                .find("format_version is -1; expected a whole number"),
            std::string::npos);
  EXPECT_EQ(comparison("c5", "{" + v + "\"policies\": [{\"label\": \"static\"}]}", {"static"}),
            "read as valid");
  EXPECT_NE(sweep("s1", "{}", {"points/0"}).find("no format_version"), std::string::npos);
  EXPECT_NE(sweep("s2", "{" + v + "\"points\": [{}, {}, {}, {}, {}, {}]}", {"points/0", "points/1"})
                .find("sweep.json lists 6 points, but points/2/ holds no run folder"),
            std::string::npos);
  EXPECT_NE(sweep("s3", "{" + v + "\"points\": [{}]}", {"points/0", "points/1"})
                .find("sweep.json lists 1 points, but the folder holds run folders of 2"),
            std::string::npos);
  EXPECT_EQ(sweep("s4", "{" + v + "\"points\": [{}, {}]}", {"points/0", "points/1/seed-3"}),
            "read as valid");
}

#ifdef EPLB_HAVE_SIM
// A number that does not exist for a run is absent, never 0 (issue 65): a run that never
// rearranges has no balance after a rearrangement, no bound on a window it never saw, no bytes
// per rearrangement and no last window to price a failure on. null in sweep.json and
// comparison.json (its spread over seeds too), empty in the CSVs, "—" in the terminal's and the
// report's tables; a point with no value is drawn nowhere.
TEST_F(CliTest, ANumberThatDoesNotExistIsAbsentNotZero) {
  const std::string out = (dir_ / "sweep").string();
  const CliRun sweep = Eplb(std::string("sweep ") + EPLB_SCENARIO_DIR +
                            "/tiny.yaml --vary eplb.step_interval=50,1000 --seeds 1,2 --set "
                            "run.steps=120 --no-trace --out " +
                            out);
  ASSERT_EQ(sweep.code, 0) << sweep.err;
  const auto doc = nlohmann::json::parse(testing::ReadFile(out + "/sweep.json"));
  const auto& moved = doc["points"][0];
  const auto& never = doc["points"][1];
  ASSERT_EQ(never["rearrangements"], 0);  // a count of none is 0, and exists
  ASSERT_GT(moved["rearrangements"].get<int>(), 0);
  for (const char* key :
       {"following_balancedness", "window_balancedness_after", "window_balancedness_bound",
        "window_gap_to_bound", "bytes_per_rearrangement", "transfers_per_rearrangement",
        "rearrangement_makespan_s", "policy_ms", "gpu_failure_tokens_lost",
        "node_failure_tokens_lost", "node_failure_reload_bytes", "recovery_s"}) {
    SCOPED_TRACE(key);
    EXPECT_TRUE(never[key].is_null()) << never[key];
    EXPECT_TRUE(never["spread"][key][0].is_null());
    if (std::string(key) != "recovery_s") {  // nothing was lost
      EXPECT_TRUE(moved[key].is_number()) << moved[key];
    }
  }
  EXPECT_TRUE(never["balancedness_mean"].is_number());

  // sweep.csv: the column is there, the cell empty.
  const std::string csv = testing::ReadFile(out + "/sweep.csv");
  const std::string header = csv.substr(0, csv.find('\n'));
  size_t column = 0;
  for (size_t at = 0; at <= header.find(",following_balancedness,"); ++at)
    column += header[at] == ',';
  size_t at = csv.find("\n1,") + 1;
  std::string cell;
  for (size_t c = 0; c <= column; ++c) {
    const size_t end = csv.find_first_of(",\n", at);
    cell = csv.substr(at, end - at);
    at = end + 1;
  }
  EXPECT_EQ(cell, "");

  // The tables: "—" in the terminal's row of point 1, and in the report's.
  const size_t row = sweep.out.find("\n1 ");
  ASSERT_NE(row, std::string::npos) << sweep.out;
  EXPECT_NE(sweep.out.substr(row, sweep.out.find('\n', row + 1) - row).find("—"), std::string::npos)
      << sweep.out;
  const std::string html = testing::ReadFile(out + "/report.html");
  EXPECT_NE(html.find(R"(<td data-key="following_balancedness">—</td>)"), std::string::npos);
  EXPECT_EQ(html.find("nan"), std::string::npos);
}

// Per-rearrangement numbers are over the rearrangements the measured window holds, as every
// per-step number is the window's (issue 65: 'GB / rearr.' held the first rearrangement, which
// leaves the initial placement, while the window did not).
TEST_F(CliTest, PerRearrangementNumbersAreOverTheWindowsRearrangements) {
  const std::string out = (dir_ / "cmp").string();
  const CliRun cmp = Eplb(std::string("compare ") + EPLB_SCENARIO_DIR +
                          "/tiny.yaml --policies migration-aware --no-trace --out " + out);
  ASSERT_EQ(cmp.code, 0) << cmp.err;
  const auto row =
      nlohmann::json::parse(testing::ReadFile(out + "/comparison.json"))["policies"][0];
  const auto summary =
      nlohmann::json::parse(testing::ReadFile(out + "/migration-aware/summary.json"));
  const int from = summary["measured"]["from_step"].get<int>();
  std::istringstream csv(testing::ReadFile(out + "/migration-aware/rearrangements.csv"));
  std::string line, cell;
  std::getline(csv, line);
  std::vector<std::string> header;
  for (std::istringstream h(line); std::getline(h, cell, ',');) header.push_back(cell);
  const auto column = [&](const char* name) {
    return static_cast<size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  double bytes = 0, held = 0, all = 0;
  while (std::getline(csv, line)) {
    std::vector<std::string> cells;
    for (std::istringstream r(line); std::getline(r, cell, ',');) cells.push_back(cell);
    ++all;
    if (std::stoi(cells[column("step")]) + 1 < from) continue;
    ++held;
    bytes += std::stod(cells[column("bytes_nvlink")]) + std::stod(cells[column("bytes_nic")]);
  }
  ASSERT_GT(held, 0);
  ASSERT_LT(held, all) << "the first rearrangement is before the window";
  EXPECT_EQ(row["rearrangements"].get<double>(), held);
  EXPECT_NEAR(row["bytes_per_rearrangement"].get<double>(), bytes / held, 1e-6);
}
#endif

}  // namespace
}  // namespace eplb
