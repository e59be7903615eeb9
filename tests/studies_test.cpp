// studies/studies.h: comparisons and sweeps as library calls. Every simulation runs in a child
// process, so this process runs no SimGrid engine and may run several studies.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "eplb/base/file_io.h"
#include "eplb/io/output_folders.h"
#include "eplb/io/run_folder.h"
#include "eplb/io/scenario_file.h"
#include "eplb/studies/studies.h"
#include "simulation.h"

namespace eplb {
namespace {

namespace fs = std::filesystem;

const std::string kTiny = std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml";

class Studies : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           (std::string("eplb_studies_") +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" +
            std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

studies::ComparisonSpec TinyComparison(const std::string& out) {
  studies::ComparisonSpec spec;
  spec.runner = sim::SimulateToFolder;
  spec.scenario = *LoadScenarioFile(kTiny, {"run.steps=300"});
  spec.policies = {"static", "deepseek"};
  spec.out = out;
  spec.jobs = 2;
  return spec;
}

TEST_F(Studies, ComparisonRunsEveryPolicyAndSeedIntoOneFolder) {
  studies::ComparisonSpec spec = TinyComparison(Path("cmp"));
  spec.seeds = {3, 4};
  std::vector<JobProgress> last;
  int finals = 0;
  auto result = studies::RunComparison(spec, [&](const std::vector<JobProgress>& p, bool final) {
    last = p;
    finals += final;
  });
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->dir, Path("cmp"));
  EXPECT_EQ(finals, 1);
  ASSERT_EQ(last.size(), 4u);  // policies outermost, then seeds
  EXPECT_EQ(last[0].name, "static seed 3");
  EXPECT_EQ(last[3].name, "deepseek seed 4");
  for (const JobProgress& p : last) {
    EXPECT_EQ(p.state, JobState::kDone) << p.name;
    EXPECT_EQ(p.done_steps, 300) << p.name;
  }
  // One row per policy, a mean over its seeds; the same rows as comparison.json holds.
  ASSERT_EQ(result->rows.size(), 2u);
  EXPECT_EQ(result->rows[0]["label"], "static");
  EXPECT_EQ(result->rows[1]["label"], "deepseek");
  EXPECT_EQ(result->rows[1]["seeds"], 2);
  const nlohmann::json doc = ReadJson(Path("cmp/comparison.json"));
  EXPECT_EQ(doc["scenario"], "tiny");
  EXPECT_EQ(doc["policies"].dump(), nlohmann::json(result->rows).dump());
  for (const char* run : {"static/seed-3", "static/seed-4", "deepseek/seed-3", "deepseek/seed-4"})
    EXPECT_TRUE(ReadFolderManifest(Path("cmp/") + run).ok()) << run;
  EXPECT_TRUE(ReadFolderManifest(Path("cmp")).ok());
  EXPECT_TRUE(fs::exists(Path("cmp/report.html")));
  // Rebalancing beats experts in order on this skewed workload.
  EXPECT_GT(result->rows[1]["balancedness_mean"].get<double>(),
            result->rows[0]["balancedness_mean"].get<double>());
}

// A spec changed one way, and the error it must get.
template <typename Spec>
struct BadSpec {
  const char* name;
  std::function<void(Spec&)> change;
  const char* error;
};

// `call` on `base` changed by each case must fail with the case's error.
template <typename Spec, typename Call>
void ExpectEachRefused(const Spec& base, const std::vector<BadSpec<Spec>>& cases, Call call) {
  for (const BadSpec<Spec>& c : cases) {
    Spec spec = base;
    c.change(spec);
    const Status s = call(spec);
    ASSERT_FALSE(s.ok()) << c.name;
    EXPECT_NE(s.message().find(c.error), std::string::npos) << c.name << ": " << s.message();
  }
}

TEST_F(Studies, ComparisonRefusesABadSpecBeforeWritingAnything) {
  using Case = BadSpec<studies::ComparisonSpec>;
  const std::vector<Case> cases = {
      {"no policy", [](auto& s) { s.policies.clear(); }, "--policies names no policy"},
      {"unknown",
       [](auto& s) {
         s.policies = {"static", "nope"};
       },
       "nope"},
      {"twice",
       [](auto& s) {
         s.policies = {"static", "static"};
       },
       "names 'static' twice"},
      {"seed twice",
       [](auto& s) {
         s.seeds = {7, 7};
       },
       "--seeds names '7' twice"},
      {"map layer", [](auto& s) { s.report.map_layer = 4; }, "layers 0..3"},
      {"map step", [](auto& s) { s.report.map_step = 300; }, "steps 0..299"},
      // Its partial folder would be written inside it.
      {"out is .", [](auto& s) { s.out = "."; }, "names no folder of its own"},
      {"out is ..", [](auto& s) { s.out = "a/../.."; }, "names no folder of its own"},
  };
  ExpectEachRefused(TinyComparison(Path("cmp")), cases, [&](const studies::ComparisonSpec& spec) {
    const Status s = studies::RunComparison(spec).status();
    EXPECT_FALSE(fs::exists(Path("cmp")));
    return s;
  });
}

// What `eplb run` refuses at load, a study refuses before its first simulation starts, naming
// the policy or point: not after every other run ran (exit 1 where `run` exits 2).
TEST_F(Studies, ARunThatWouldFailIsRefusedBeforeAnyRuns) {
  using Case = BadSpec<studies::ComparisonSpec>;
  const std::vector<Case> cases = {
      // Valid under deepseek; static cannot place around the lost GPU.
      {"policy cannot recover",
       [](auto& s) {
         s.scenario = *LoadScenarioFile(kTiny, {"run.steps=60", "eplb.num_redundant_experts=16",
                                                "faults=[{kind: gpu_lost, step: 30, rank: 1}]"});
         s.policies = {"deepseek", "static"};
       },
       "--policies static: "},
      {"policy cannot recover, seeds",
       [](auto& s) {
         s.scenario = *LoadScenarioFile(kTiny, {"run.steps=60", "eplb.num_redundant_experts=16",
                                                "faults=[{kind: gpu_lost, step: 30, rank: 1}]"});
         s.policies = {"deepseek", "static"};
         s.seeds = {1, 2};
       },
       "--policies static seed 1: "},
      {"too large for memory", [](auto& s) { s.scenario.run.steps = 2000000000; },
       "--policies static: "},
      {"missing trace",
       [this](auto& s) {
         s.scenario.workload.kind = "trace";
         s.scenario.workload.trace = Path("missing.csv");
       },
       "missing.csv"},
  };
  const std::vector<const char*> reasons = {
      "eplb.policy is 'static', which cannot place around lost or idle GPUs",
      "eplb.policy is 'static', which cannot place around lost or idle GPUs",
      "this run would need about", "--policies static: "};
  size_t i = 0;
  ExpectEachRefused(TinyComparison(Path("cmp")), cases, [&](const studies::ComparisonSpec& spec) {
    int reports = 0;
    const Status s = studies::RunComparison(spec, [&](const auto&, bool) { ++reports; }).status();
    // Bad input, as `run` says it (exit 2), not a failed run.
    EXPECT_TRUE(s.code() == Status::Code::kInvalidArgument || s.code() == Status::Code::kIoError)
        << s.message();
    EXPECT_NE(s.message().find(reasons[i++]), std::string::npos) << s.message();
    EXPECT_EQ(reports, 0) << "a simulation started: " << s.message();
    // Nothing of it is left, finished or not.
    EXPECT_TRUE(fs::is_empty(dir_));
    return s;
  });
}

// A link the user put in a comparison folder is theirs: a second comparison into the folder is
// refused, naming the link, and the link stays.
TEST_F(Studies, AUsersLinkInAComparisonFolderIsNeverDeleted) {
  studies::ComparisonSpec spec = TinyComparison(Path("cmp"));
  spec.policies = {"static"};
  ASSERT_TRUE(studies::RunComparison(spec).ok());
  fs::create_symlink("report.html", Path("cmp/my-shortcut.html"));
  auto again = studies::RunComparison(spec);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("my-shortcut.html"), std::string::npos)
      << again.status().message();
  EXPECT_TRUE(fs::is_symlink(Path("cmp/my-shortcut.html")));
  EXPECT_TRUE(fs::exists(Path("cmp/report.html")));
}

studies::SweepSpec TinySweep(const std::string& out) {
  studies::SweepSpec spec;
  spec.runner = sim::SimulateToFolder;
  spec.scenario_path = kTiny;
  spec.overrides = {"run.steps=200"};
  spec.vary = {{"cluster.nodes", {"1", "2"}}, {"workload.sigma", {"0.5", "1.5"}}};
  spec.policies = {"static", "deepseek"};
  spec.out = out;
  spec.jobs = 2;
  return spec;
}

TEST_F(Studies, SweepPlansTheCrossProductPoliciesInnermost) {
  auto plan = studies::PlanSweep(TinySweep(Path("sweep")));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->keys, (std::vector<std::string>{"cluster.nodes", "workload.sigma"}));
  ASSERT_EQ(plan->points.size(), 8u);
  // The last key varies fastest, the policies faster still.
  const auto& p5 = plan->points[5];
  EXPECT_EQ(p5.values, (std::vector<std::string>{"2", "0.5"}));
  EXPECT_EQ(p5.policy, "deepseek");
  EXPECT_EQ(p5.scenario.cluster.nodes, 2);
  EXPECT_DOUBLE_EQ(p5.scenario.workload.sigma, 0.5);
  EXPECT_EQ(p5.scenario.eplb.policy, "deepseek");
  EXPECT_EQ(p5.scenario.run.steps, 200);
  EXPECT_EQ(plan->points[2].values, (std::vector<std::string>{"1", "1.5"}));
  EXPECT_EQ(plan->points[2].policy, "static");
  EXPECT_EQ(plan->dir, Path("sweep"));
}

TEST_F(Studies, SweepRefusesABadSpecNamingWhatIsWrong) {
  using Case = BadSpec<studies::SweepSpec>;
  const std::vector<Case> cases = {
      {"value twice",
       [](auto& s) {
         s.vary[0].second = {"1", "1"};
       },
       "--vary cluster.nodes names '1' twice"},
      {"one value spelt twice",
       [](auto& s) {
         s.vary[1].second = {"0.5", "5e-1"};
       },
       "--vary: point 0 (cluster.nodes=1, workload.sigma=0.5, static) and point 2 "
       "(cluster.nodes=1, workload.sigma=5e-1, static) are the same scenario"},
      {"key twice", [](auto& s) { s.vary[1].first = "cluster.nodes"; },
       "--vary names 'cluster.nodes' twice"},
      {"no values", [](auto& s) { s.vary[1].second.clear(); }, "--vary 'workload.sigma'"},
      {"policy both ways",
       [](auto& s) {
         s.vary.push_back({"eplb.policy", {"static"}});
       },
       "give them once"},
      {"unknown policy", [](auto& s) { s.policies = {"nope"}; }, "--policies: "},
      {"too many",
       [](auto& s) {
         std::vector<std::string> seeds;
         for (int i = 0; i < 5001; ++i) seeds.push_back(std::to_string(i));
         s.vary = {{"run.seed", seeds}};
       },
       "make 10002 points; a sweep runs at most 10000"},
      // Points 0-3 are nodes=1 (two sigmas × two policies); the first with -3 is point 4.
      {"bad value",
       [](auto& s) {
         s.vary[0].second = {"1", "-3"};
       },
       "point 4: "},
      // Valid fields whose run `eplb run` refuses before it starts: refused when planned.
      {"too large for memory",
       [](auto& s) {
         s.vary = {{"run.steps", {"20", "2000000000"}}};
       },
       "point 2 (run.steps=2000000000, static): "},
      {"memory, the reason",
       [](auto& s) {
         s.vary = {{"run.steps", {"20", "2000000000"}}};
       },
       "this run would need about"},
      {"missing trace",
       [this](auto& s) {
         s.vary = {{"workload.kind", {"generator", "trace"}}};
         s.overrides.push_back("workload.trace=" + Path("missing.csv"));
       },
       "point 2 (workload.kind=trace, static): "},
      {"seed twice",
       [](auto& s) {
         s.seeds = {3, 3};
       },
       "--seeds names '3' twice"},
      {"seeds both ways",
       [](auto& s) {
         s.vary = {{"run.seed", {"1", "2"}}};
         s.seeds = {3, 4};
       },
       "--vary run.seed and --seeds both name the seeds"},
      {"too many runs",
       [](auto& s) {
         std::vector<std::string> steps;
         for (int i = 0; i < 1251; ++i) steps.push_back(std::to_string(20 + i));
         s.vary = {{"run.steps", steps}};
         s.seeds = {1, 2, 3, 4};
       },
       "--vary, --policies and --seeds make 10008 runs (points × seeds); a sweep runs at most"},
  };
  ExpectEachRefused(TinySweep(Path("sweep")), cases, [](const studies::SweepSpec& spec) {
    return studies::PlanSweep(spec).status();
  });
}

// Values past 2^53, one apart in the doubles' spacing: the tables keep them exactly, and the
// report's axes (whose tick step is below that spacing) end.
TEST_F(Studies, ASweepOverHugeIntegersKeepsThemAndEnds) {
  studies::SweepSpec spec = TinySweep(Path("sweep"));
  spec.overrides = {"run.steps=20"};
  spec.vary = {{"run.seed", {"10000000000000000", "10000000000000002"}}};
  spec.policies = {"static"};
  auto plan = studies::PlanSweep(spec);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  auto done = studies::RunSweep(*plan, Launch{});
  ASSERT_TRUE(done.ok()) << done.status().message();
  const nlohmann::json doc = ReadJson(Path("sweep/sweep.json"));
  EXPECT_EQ(doc["points"][1]["run.seed"].get<int64_t>(), int64_t{10000000000000002});
  auto csv = ReadTextFile(Path("sweep/sweep.csv"));
  ASSERT_TRUE(csv.ok());
  EXPECT_NE(csv->find("\n1,10000000000000002,"), std::string::npos) << *csv;
}

// Two processes of a launch, one after the other (a Slurm array's tasks may run so): the first
// leaves its points in the shared folder, the second runs the rest and writes the folder.
TEST_F(Studies, SweepOverALaunchIsWrittenByTheLastProcessToFinish) {
  studies::SweepSpec spec = TinySweep(Path("sweep"));
  spec.policies = {"deepseek"};
  auto plan = studies::PlanSweep(spec);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->points.size(), 4u);
  Launch first{LaunchKind::kSlurmArray, 0, 2};
  auto one = studies::RunSweep(*plan, first);
  ASSERT_TRUE(one.ok()) << one.status().message();
  EXPECT_FALSE(one->wrote_folder);
  EXPECT_EQ(one->finished, 1);
  EXPECT_FALSE(fs::exists(Path("sweep")));
  EXPECT_TRUE(fs::exists(Path("sweep.shared-partial/points/2")));
  EXPECT_FALSE(fs::exists(Path("sweep.shared-partial/points/1")));
  // Another sweep may not join this one's folder.
  studies::SweepSpec other = spec;
  other.vary[1].second = {"0.5", "2.5"};
  auto other_plan = studies::PlanSweep(other);
  ASSERT_TRUE(other_plan.ok());
  auto refused = studies::RunSweep(*other_plan, Launch{LaunchKind::kSlurmArray, 1, 2});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("holds the points of another sweep"),
            std::string::npos);
  auto two = studies::RunSweep(*plan, Launch{LaunchKind::kSlurmArray, 1, 2});
  ASSERT_TRUE(two.ok()) << two.status().message();
  EXPECT_TRUE(two->wrote_folder);
  EXPECT_EQ(two->finished, 2);
  EXPECT_FALSE(fs::exists(Path("sweep.shared-partial")));
  ASSERT_TRUE(ReadFolderManifest(Path("sweep")).ok());
  const nlohmann::json doc = ReadJson(Path("sweep/sweep.json"));
  ASSERT_EQ(doc["points"].size(), 4u);
  EXPECT_EQ(doc["points"][3]["cluster.nodes"], 2);
  EXPECT_EQ(doc["points"][3]["workload.sigma"], 1.5);
  EXPECT_EQ(doc["points"][3]["policy"], "deepseek");
  // A launch of more processes than points is refused before anything runs.
  auto wide = studies::RunSweep(*plan, Launch{LaunchKind::kMpi, 0, 5});
  ASSERT_FALSE(wide.ok());
  EXPECT_NE(wide.status().message().find("launch at most one process per point"),
            std::string::npos);
}

// --seeds: a point runs once per seed (one seed: every point runs with it), and over a launch
// run j is point j / seeds, seed j mod seeds; the last process writes a row per point, the mean
// over its seeds with their spread.
TEST_F(Studies, SweepOverSeedsRunsEachPointOncePerSeed) {
  studies::SweepSpec spec = TinySweep(Path("sweep"));
  spec.seeds = {7};
  auto one = studies::PlanSweep(spec);
  ASSERT_TRUE(one.ok()) << one.status().message();
  EXPECT_TRUE(one->seeds.empty());
  for (const auto& p : one->points) EXPECT_EQ(p.scenario.run.seed, 7u);
  spec.seeds = {1, 2};
  auto plan = studies::PlanSweep(spec);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->seeds, (std::vector<uint64_t>{1, 2}));
  ASSERT_EQ(plan->points.size(), 8u);
  // 8 points × 2 seeds: a process per run at most.
  auto wide = studies::RunSweep(*plan, Launch{LaunchKind::kMpi, 0, 17});
  ASSERT_FALSE(wide.ok());
  EXPECT_NE(wide.status().message().find("the sweep has 16 runs (8 points × 2 seeds): launch at "
                                         "most one process per run"),
            std::string::npos)
      << wide.status().message();

  spec.overrides = {"run.steps=40"};
  spec.vary = {{"cluster.nodes", {"2"}}};
  spec.policies = {"deepseek"};
  auto small = studies::PlanSweep(spec);
  ASSERT_TRUE(small.ok()) << small.status().message();
  auto first = studies::RunSweep(*small, Launch{LaunchKind::kSlurmArray, 0, 2});
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_TRUE(fs::exists(Path("sweep.shared-partial/points/0/seed-1")));
  EXPECT_FALSE(fs::exists(Path("sweep.shared-partial/points/0/seed-2")));
  auto last = studies::RunSweep(*small, Launch{LaunchKind::kSlurmArray, 1, 2});
  ASSERT_TRUE(last.ok()) << last.status().message();
  EXPECT_TRUE(last->wrote_folder);
  const nlohmann::json doc = ReadJson(Path("sweep/sweep.json"));
  ASSERT_EQ(doc["points"].size(), 1u);
  const auto& row = doc["points"][0];
  EXPECT_EQ(row["seeds"], 2);
  double sum = 0;
  for (const char* seed : {"seed-1", "seed-2"}) {
    const nlohmann::json summary =
        ReadJson(Path(std::string("sweep/points/0/") + seed + "/summary.json"));
    auto yaml = ReadTextFile(Path(std::string("sweep/points/0/") + seed + "/scenario.yaml"));
    ASSERT_TRUE(yaml.ok());
    EXPECT_NE(yaml->find(std::string("  seed: ") + seed[5] + "\n"), std::string::npos) << seed;
    sum += summary["step_time_s"]["mean"].get<double>();
  }
  EXPECT_NEAR(row["step_time_mean_s"].get<double>(), sum / 2, 1e-6 * sum);
  EXPECT_NEAR(row["step_time_mean_s"].get<double>(),
              (row["spread"]["step_time_mean_s"][0].get<double>() +
               row["spread"]["step_time_mean_s"][1].get<double>()) /
                  2,
              1e-12);
}

// A study's folder read back through its one reader (io/output_folders.h): each policy's or
// point's runs as its manifest lists them, at the paths the module gives.
TEST_F(Studies, StudyFoldersAreReadBackThroughTheirReader) {
  studies::ComparisonSpec spec = TinyComparison(Path("cmp"));
  spec.scenario.run.steps = 40;
  spec.seeds = {3, 4};
  ASSERT_TRUE(studies::RunComparison(spec).ok());
  auto cmp = ReadComparisonFolder(Path("cmp"));
  ASSERT_TRUE(cmp.ok()) << cmp.status().message();
  EXPECT_EQ(cmp->document["scenario"], "tiny");
  ASSERT_EQ(cmp->runs.size(), 2u);
  EXPECT_EQ(cmp->runs[1].name, "deepseek");
  EXPECT_TRUE(cmp->runs[1].found);
  EXPECT_EQ(cmp->runs[1].seeds, (std::vector<uint64_t>{3, 4}));
  EXPECT_EQ(ComparisonRunPath("deepseek", 4), "deepseek/seed-4");
  EXPECT_TRUE(ReadRunFolder(Path("cmp/") + ComparisonRunPath("deepseek", 4)).ok());
  auto wrong = ReadSweepFolder(Path("cmp"));
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("an eplb comparison folder, not a sweep folder"),
            std::string::npos)
      << wrong.status().message();

  studies::SweepSpec sweep = TinySweep(Path("sweep"));
  sweep.overrides = {"run.steps=40"};
  sweep.vary = {{"cluster.nodes", {"1", "2"}}};
  sweep.policies = {"deepseek"};
  sweep.seeds = {1, 2};
  auto plan = studies::PlanSweep(sweep);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_TRUE(studies::RunSweep(*plan, Launch{}).ok());
  auto read = ReadSweepFolder(Path("sweep"));
  ASSERT_TRUE(read.ok()) << read.status().message();
  ASSERT_EQ(read->runs.size(), 2u);
  EXPECT_EQ(read->runs[1].name, "1");
  EXPECT_EQ(read->runs[1].seeds, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(SweepRunPath(1, 2), "points/1/seed-2");
  EXPECT_EQ(SweepRunPath(1, std::nullopt), "points/1");
  EXPECT_TRUE(ReadRunFolder(Path("sweep/") + SweepRunPath(1, 2)).ok());
}

// A study runs its scenarios with the runner it is given, and none without one.
TEST_F(Studies, AStudyRunsItsScenariosWithTheRunnerItIsGiven) {
  studies::ComparisonSpec spec = TinyComparison(Path("cmp"));
  spec.runner = nullptr;
  auto none = studies::RunComparison(spec);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no runner"), std::string::npos)
      << none.status().message();
  studies::SweepSpec sweep = TinySweep(Path("sweep"));
  sweep.runner = nullptr;
  EXPECT_FALSE(studies::PlanSweep(sweep).ok());
  EXPECT_FALSE(fs::exists(Path("cmp")));

  // A runner of our own runs each policy (in a child, whose error it prints); the study fails
  // naming them, and leaves no folder.
  spec = TinyComparison(Path("cmp"));
  spec.runner = [](const Scenario& s, const std::string&, const RunFolderOptions&,
                   std::atomic<int64_t>*) {
    return Status::Unavailable("this runner runs no " + s.eplb.policy);
  };
  auto refused = studies::RunComparison(spec);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("failed: static, deepseek"), std::string::npos)
      << refused.status().message();
  EXPECT_FALSE(fs::exists(Path("cmp")));
}

}  // namespace
}  // namespace eplb
