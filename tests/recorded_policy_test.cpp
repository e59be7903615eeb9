// Recorded placements replayed (policy/recorded_policy.h, io/recorded_placements.h): each input
// form is told by its content; every placement is checked as a policy's is, and a bad one is
// refused naming the file, the entry and what is wrong; a run folder's own placements replayed
// give that run's folder number for number.
#include "eplb/policy/recorded_policy.h"

#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_fixture.h"
#include "eplb/io/recorded_placements.h"
#include "folder_compare.h"
#include "test_util.h"

namespace eplb {
namespace {

// scenarios/tiny.yaml's shape: 4 layers of 16 experts on 2 nodes × 2 GPUs of 5 slots.
constexpr int kLayers = 4, kExperts = 16, kSlots = 20, kSteps = 400;

Topology Tiny() {
  return *Topology::Create({2, 2, 5});
}

// A valid tiny map, each layer's slots holding (s + shift) % 16.
std::string Map(int shift = 0, int layers = kLayers, int slots = kSlots) {
  std::vector<std::vector<int>> rows(static_cast<size_t>(layers));
  for (auto& row : rows) {
    for (int s = 0; s < slots; ++s) row.push_back((s + shift) % kExperts);
  }
  return nlohmann::json(rows).dump();
}

std::string Entry(int step, const std::string& map) {
  return fmt::format("{{\"step\": {}, \"phy2log\": {}}}", step, map);
}

Result<std::vector<Placement>> Checked(const std::string& text, int steps = kSteps,
                                       std::vector<int> idle = {}) {
  EPLB_ASSIGN_OR_RETURN(const Recording r, ParseRecording(text, "rec.jsonl", "mine"));
  return CheckRecording(r, Tiny(), kLayers, kExperts, steps, idle);
}

TEST(RecordedPlacements, EachFormIsToldByItsContent) {
  struct Case {
    std::string name, text;
    std::vector<int> steps;  // of the entries read
  };
  const std::vector<Case> cases = {
      {"JSON lines", Entry(24, Map(1)) + "\n\n" + Entry(124, Map(2)) + "\n", {24, 124}},
      {"a JSON array", "[" + Entry(-1, Map(3)) + ", " + Entry(50, Map(1)) + "]", {-1, 50}},
      {"one entry", Entry(7, Map()), {7}},
      {"engines' key in an entry",
       "{\"step\": 3, \"physical_to_logical_map\": " + Map(2) + "}",
       {3}},
      {"eplb's placement file", "{\"phy2log\": " + Map(1) + ", \"num_gpus\": 4}", {-1}},
      {"SGLang's --init-expert-location", "{\"physical_to_logical_map\": " + Map(5) + "}", {-1}},
      {"vLLM's map, bare", Map(4), {-1}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto r = ParseRecording(c.text, "rec.json", "mine");
    ASSERT_TRUE(r.ok()) << r.status().message();
    std::vector<int> steps;
    for (const RecordedEntry& e : r->entries) steps.push_back(e.step);
    EXPECT_EQ(steps, c.steps);
    const auto checked = CheckRecording(*r, Tiny(), kLayers, kExperts, kSteps);
    EXPECT_TRUE(checked.ok()) << checked.status().message();
  }
}

TEST(RecordedPlacements, BadFilesAreRefusedNamingTheEntryAndWhatIsValid) {
  struct Case {
    std::string name, text, expected;
  };
  const std::string placements_line =
      "{\"step\":-1,\"time_s\":0.0,\"layer\":0,\"phy2log\":[0,1]}\n"
      "{\"step\":-1,\"time_s\":0.0,\"layer\":1,\"phy2log\":[0,1]}\n";
  const std::vector<Case> cases = {
      {"not JSON", "-----BEGIN PRIVATE KEY-----\nabc\n", "rec.jsonl:1:"},
      {"SGLang's logical_count", "{\"logical_count\": [[1, 2]]}",
       "SGLang's logical_count form is a load"},
      {"a placements.jsonl outside its folder", placements_line,
       "rec.jsonl line 1: a run folder's placements.jsonl (one line per layer's commit), outside "
       "a finished run folder"},
      {"a line without step", Entry(3, Map()) + "\n{\"phy2log\": " + Map() + "}\n",
       "rec.jsonl line 2: expected an object with \"step\" and \"phy2log\""},
      {"an unknown field",
       Entry(3, Map()) + "\n{\"step\": 9, \"phy2log\": " + Map() + ", \"stpe\": 1}\n",
       "rec.jsonl line 2: unknown field 'stpe'; an entry holds \"step\" and \"phy2log\""},
      {"a step that is no integer", "{\"step\": 2.5, \"phy2log\": " + Map() + "}",
       "rec.jsonl line 1: step is 2.5; expected an integer"},
      {"a slot that is no expert id", Entry(3, "[[0, \"x\"]]"),
       "rec.jsonl line 1: phy2log[0][1] is \"x\"; expected an expert id (-1 for an empty slot)"},
      {"JSON of another kind", "{\"steps\": []}", "rec.jsonl: JSON that holds no recorded"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto r = ParseRecording(c.text, "rec.jsonl", "mine");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(c.expected), std::string::npos) << r.status().message();
  }
  // Not recognised, a file is not quoted.
  const auto key = ParseRecording("-----BEGIN PRIVATE KEY-----\nabc\n", "rec.jsonl", "mine");
  EXPECT_EQ(key.status().message().find("PRIVATE"), std::string::npos);
}

TEST(RecordedPlacements, EveryPlacementIsCheckedAgainstTheRun) {
  std::string missing = Map();  // expert 15 nowhere in layer 0
  {
    auto rows = nlohmann::json::parse(missing);
    for (auto& v : rows[0]) {
      if (v == 15) v = 0;
    }
    missing = rows.dump();
  }
  struct Case {
    std::string name, text, expected;
    std::vector<int> idle = {};
  };
  const std::vector<Case> cases = {
      {"too many layers", Entry(24, Map(0, 5)),
       "rec.jsonl line 1: the placement has 5 layers; the scenario's model has 4 (model.layers)"},
      {"too few slots", Entry(24, Map(0, 4, 16)),
       "rec.jsonl line 1: layer 0 has 16 slots; the scenario has 20 (4 GPUs × 5 slots: "
       "model.experts 16 + eplb.num_redundant_experts 4)"},
      {"an expert missing", Entry(24, missing),
       "rec.jsonl line 1: not a placement for the scenario's 16 experts: layer 0: logical "
       "expert 15 has no replica"},
      {"a step beyond the run", Entry(24, Map()) + "\n" + Entry(400, Map(1)),
       "rec.jsonl line 2: step 400 is beyond the run's 400 steps (run.steps)"},
      {"steps out of order", Entry(124, Map()) + "\n" + Entry(24, Map(1)),
       "rec.jsonl line 2: step 24 comes after step 124 (rec.jsonl line 1); steps must increase"},
      {"one step twice", Entry(24, Map()) + "\n" + Entry(24, Map(1)),
       "rec.jsonl line 2: step 24 comes after step 24"},
      {"the initial placement on an idle GPU",
       Entry(-1, Map()),
       "rec.jsonl line 1: the initial placement puts expert 15 in slot 15 of layer 0, on GPU 3, "
       "which does not serve at the start (cluster.initial_gpus)",
       {3}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto r = Checked(c.text, kSteps, c.idle);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(c.expected), std::string::npos) << r.status().message();
  }
  // An expert id beyond the model's.
  auto big = nlohmann::json::parse(Map());
  big[2][7] = 16;
  const auto r = Checked(Entry(24, big.dump()));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("phy2log[2][7] is 16; valid values are -1 (empty) or 0..15"),
            std::string::npos)
      << r.status().message();
}

TEST(RecordedPolicy, GivesTheRecordedPlacementAtItsStepAndRefusesOneOnALostGpu) {
  // 6 slots a GPU: one lost GPU leaves a slot for every expert.
  auto recording =
      ParseRecording(Entry(24, Map(1, 4, 24)) + "\n" + Entry(124, Map(2, 4, 24)) + "\n",
                     "rec.jsonl", "replayed-here");
  ASSERT_TRUE(recording.ok());
  ASSERT_TRUE(RegisterRecordedPolicy(*recording).ok());
  EXPECT_EQ(RecordedPolicyPathFor("replayed-here"), "rec.jsonl");
  // Registered like any policy; what only a replay needs is its own interface.
  const std::unique_ptr<Policy> made = std::move(MakePolicy("replayed-here")).value();
  auto* replay = dynamic_cast<SchedulingPolicy*>(made.get());
  ASSERT_NE(replay, nullptr);
  Policy& policy = *made;
  const Topology t = *Topology::Create({2, 2, 6});
  auto schedule = replay->Schedule(t, kLayers, kExperts, kSteps, {});
  ASSERT_TRUE(schedule.ok()) << schedule.status().message();
  EXPECT_TRUE(schedule->replays);
  EXPECT_EQ(schedule->steps, (std::vector<int>{24, 124}));
  EXPECT_FALSE(schedule->initial);
  const LoadMatrix load = LoadMatrix::Constant(kLayers, kExperts, 1.0);
  PolicyInput input{load, t};
  input.step = 24;
  auto p = policy.Rebalance(input);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->phy2log(0)[0], 1);
  // A fault asks at a step the recording has nothing for.
  input.step = 100;
  auto none = policy.Rebalance(input);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("the run asks for a placement at step 100"),
            std::string::npos)
      << none.status().message();
  // GPU 1 lost: the placement at 124 holds experts there.
  const std::vector<int> lost = {1};
  input.step = 124;
  input.lost_ranks = lost;
  auto refused = policy.Rebalance(input);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("rec.jsonl line 2: the placement puts expert 8 in "
                                            "slot 6 of layer 0, on GPU 1, which is lost"),
            std::string::npos)
      << refused.status().message();
  // Its name is a recording's now; a built-in's is refused.
  Recording other = *recording;
  other.name = "deepseek";
  EXPECT_NE(RegisterRecordedPolicy(other).message().find("is a built-in policy's name"),
            std::string::npos);
}

#ifdef EPLB_HAVE_SIM

class RecordedCliTest : public CliTest {};

TEST_F(RecordedCliTest, ARunFoldersOwnPlacementsReplayedGiveThatRunNumberForNumber) {
  const std::string tiny = std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml";
  const std::string theirs = (dir_ / "theirs").string();
  const CliRun a = Eplb("run " + tiny + " --no-trace --set eplb.policy=deepseek --out " + theirs);
  ASSERT_EQ(a.code, 0) << a.err;
  // The folder, and its placements.jsonl, each replayed.
  for (const std::string& given : {theirs, theirs + "/placements.jsonl"}) {
    SCOPED_TRACE(given);
    const std::string mine = (dir_ / ("mine" + std::to_string(given.size()))).string();
    const CliRun b =
        Eplb("run " + tiny + " --no-trace --out " + mine + " --policy-replay " + given);
    ASSERT_EQ(b.code, 0) << b.err;
    for (const auto& entry : fs::directory_iterator(theirs)) {
      const std::string file = entry.path().filename().string();
      SCOPED_TRACE(file);
      const std::string x = testing::ReadFile(mine + "/" + file);
      const std::string y = testing::ReadFile(theirs + "/" + file);
      if (file == "manifest.tsv") continue;  // the checksums of the files below
      if (file == "summary.json") {
        EXPECT_EQ(testing::WithoutWallClock(nlohmann::json::parse(x)),
                  testing::WithoutWallClock(nlohmann::json::parse(y)));
      } else if (file == "rearrangements.csv") {
        EXPECT_EQ(testing::DropColumn(x, "policy_ms"), testing::DropColumn(y, "policy_ms"));
      } else if (file == "scenario.yaml") {
        // The file is recorded, for the reader only.
        EXPECT_NE(x.find("policy: recorded  # placements replayed from a file, read only when "
                         "given again: --policy-replay '" +
                         given + "'"),
                  std::string::npos)
            << x;
      } else {
        EXPECT_EQ(x, y);
      }
    }
  }
  // A replayed folder reads back, and replays only when given again.
  const std::string again = (dir_ / "again").string();
  const CliRun c = Eplb("run " + (dir_ / "mine").string() + std::to_string(theirs.size()) +
                        "/scenario.yaml --out " + again);
  EXPECT_EQ(c.code, 2);
  EXPECT_NE(c.err.find("eplb.policy is 'recorded': placements replayed from a file"),
            std::string::npos)
      << c.err;
  EXPECT_FALSE(fs::exists(again));

  // compare: the recording beside the policy that made it, labelled by its name.
  const CliRun d = Eplb("compare " + tiny + " --no-trace --policies deepseek --out " +
                        (dir_ / "cmp").string() + " --policy-replay prod=" + theirs);
  ASSERT_EQ(d.code, 0) << d.err;
  const auto rows =
      nlohmann::json::parse(testing::ReadFile((dir_ / "cmp/comparison.json").string()));
  ASSERT_EQ(rows["policies"].size(), 2u);
  EXPECT_EQ(rows["policies"][1]["label"], "prod");
  EXPECT_EQ(rows["policies"][0]["balancedness_mean"], rows["policies"][1]["balancedness_mean"]);
  EXPECT_EQ(rows["policies"][0]["bytes_per_rearrangement"],
            rows["policies"][1]["bytes_per_rearrangement"]);
}

TEST_F(RecordedCliTest, ARunWithALostGpuReplayedGivesItsPlacementsAndTransfers) {
  // A GPU lost two steps into the second rearrangement: it is cancelled, and the recovery asks
  // the policy for the placement recorded at the fault's step.
  std::string tiny = testing::ReadFile(std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml");
  tiny.replace(tiny.find("num_redundant_experts: 4"), 24, "num_redundant_experts: 8");
  const std::string scenario =
      Write("faults.yaml", tiny + "faults:\n  - {kind: gpu_lost, step: 126, rank: 1}\n");
  const std::string theirs = (dir_ / "theirs").string(), mine = (dir_ / "mine").string();
  const CliRun a = Eplb("run " + scenario + " --no-trace --out " + theirs);
  ASSERT_EQ(a.code, 0) << a.err;
  const CliRun b =
      Eplb("run " + scenario + " --no-trace --out " + mine + " --policy-replay " + theirs);
  ASSERT_EQ(b.code, 0) << b.err;
  for (const std::string file : {"placements.jsonl", "transfers.csv"}) {
    EXPECT_EQ(testing::ReadFile(mine + "/" + file), testing::ReadFile(theirs + "/" + file)) << file;
  }
  EXPECT_NE(testing::ReadFile(theirs + "/rearrangements.csv").find("recovery"), std::string::npos);
}

TEST_F(RecordedCliTest, ASequenceRearrangesAtItsStepsAndStartsFromItsInitialPlacement) {
  const std::string tiny = std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml";
  const std::string file =
      Write("prod.jsonl", Entry(-1, Map(3)) + "\n" + Entry(10, Map(1)) + "\n" + Entry(150, Map(2)) +
                              "\n" + Entry(151, Map(5)) + "\n");
  const std::string out = (dir_ / "out").string();
  const CliRun r = Eplb("run " + tiny + " --no-trace --out " + out + " --policy-replay " + file);
  ASSERT_EQ(r.code, 0) << r.err;
  // The run starts from the recording's initial placement, with no migration.
  std::stringstream placements(testing::ReadFile(out + "/placements.jsonl"));
  std::string first;
  std::getline(placements, first);
  EXPECT_EQ(nlohmann::json::parse(first)["phy2log"].dump(),
            nlohmann::json::parse(Map(3))[0].dump());
  // Rearrangements at the recorded steps only; 151's is skipped, as 150's is still moving
  // (async, a layer per step), and counted.
  const auto summary = nlohmann::json::parse(testing::ReadFile(out + "/summary.json"));
  EXPECT_EQ(summary["rearrangements"]["started"], 2) << summary.dump(2);
  std::stringstream rearrangements(testing::ReadFile(out + "/rearrangements.csv"));
  std::string line;
  std::getline(rearrangements, line);  // the header
  std::vector<std::string> steps;
  while (std::getline(rearrangements, line)) steps.push_back(line.substr(0, line.find(',')));
  EXPECT_EQ(steps, (std::vector<std::string>{"10", "150"}));
}

TEST_F(RecordedCliTest, BadRecordingsFailWithTheirErrorAndLeaveNoFolder) {
  const std::string tiny = std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml";
  const std::string out = (dir_ / "out").string();
  const auto run = [&](const std::string& replay) {
    return "run " + tiny + " --no-trace --out " + out + " --policy-replay " + replay;
  };
  ExpectErrors({
      {"no such file", run((dir_ / "none.jsonl").string()), "none.jsonl"},
      {"a file of another kind", run(Write("key.pem", "-----BEGIN\n")),
       "key.pem: expected recorded placements (or a run folder)"},
      {"a .pt file that is none", run(Write("init.pt", "PK")),
       "init.pt: not a PyTorch archive (torch.save writes a zip file"},
      {"a step beyond the run", run(Write("late.jsonl", Entry(400, Map()) + "\n")),
       "late.jsonl line 1: step 400 is beyond the run's 400 steps (run.steps)"},
      {"shape", run(Write("shape.json", Entry(24, Map(0, 4, 16)))),
       "shape.json line 1: layer 0 has 16 slots; the scenario has 20"},
      {"an empty folder", run((dir_).string() + "/empty"), "empty"},
      {"a scenario given as a recording", run(std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml"),
       "tiny.yaml"},
      {"given twice to run", run(Write("a.jsonl", Entry(24, Map())) + " --policy-replay x.jsonl"),
       "--policy-replay is given more than once, or with --policy-command; a run has one "
       "policy"},
  });
  EXPECT_FALSE(fs::exists(out));
}

#endif  // EPLB_HAVE_SIM

}  // namespace
}  // namespace eplb
