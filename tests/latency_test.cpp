// Latency as an engine's users see it, and statistics over a measured window: a stop-the-world
// rearrangement's stall is in the latency of the step it delayed, and the warm-up on the initial
// placement is no part of any run's numbers. Simulated, so every time is deterministic.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "eplb/io/run_folder.h"
#include "eplb/io/scenario_file.h"
#include "eplb/reports/report.h"
#include "host_run.h"
#include "sim_run.h"

namespace eplb {
namespace {

using testing::SimulateTiny;

// Each step's latency is the time from the previous step's end to its own: the latencies add
// up to the run's clock, and the stall at a boundary is in the latency of the step after it.
TEST(Latency, AStopTheWorldStallIsInTheLatencyOfTheStepItDelayed) {
  const RunResult run = SimulateTiny({"eplb.use_async=false", "run.steps=260"});
  double clock = 0, largest_stall = 0;
  int stalled_step = -1;
  for (const StepRecord& s : run.steps) {
    clock += s.latency_s;
    EXPECT_NEAR(clock, s.start_s + s.step_s, 1e-9) << "step " << s.step;
    EXPECT_GE(s.latency_s, s.step_s - 1e-12);
    if (s.stalled_s > largest_stall) largest_stall = s.stalled_s, stalled_step = s.step;
  }
  ASSERT_GT(largest_stall, 0) << "a stop-the-world rearrangement stalls its boundary";
  const StepRecord& delayed = run.steps[static_cast<size_t>(stalled_step + 1)];
  EXPECT_NEAR(delayed.latency_s, largest_stall + delayed.step_s, 1e-9);

  RunSummary summary = Summarize(run);
  MeasureSteps(run, 0, summary);  // every step, the first rearrangement's stall among them
  EXPECT_EQ(summary.latency_s.worst_step, stalled_step + 1);
  EXPECT_NEAR(summary.latency_s.max, largest_stall + delayed.step_s, 1e-9);
  // The step time is the step as the backend ran it: the stall is not in it.
  EXPECT_LT(summary.step_time_s.max, summary.latency_s.max - largest_stall / 2);
}

// Every wait between steps is a stall and is counted once: the policy, the engine's
// once-per-rearrangement host work (vLLM's policy and maps on the main thread) and the
// stop-the-world wait are each in the step stall, the rearrangement's and the latency (issue 65:
// the once work was in the latency and not in stalled_s). summary.json's stalled_s is the
// measured window's, so that its latency adds up.
TEST(Latency, EveryWaitBetweenStepsIsTheStallTheLatencyCarries) {
  const RunResult run =
      SimulateTiny({"eplb.use_async=false", "run.steps=260", "migration.engine=vllm"});
  double stalled = 0, waited = 0, rearrangements_stalled = 0, once = 0;
  for (const StepRecord& s : run.steps) {
    stalled += s.stalled_s;
    waited += s.latency_s - s.step_s;
  }
  for (const RearrangementRecord& r : run.rearrangements) {
    rearrangements_stalled += r.stalled_s;
    once += r.engine_once_s;
    EXPECT_GT(r.stalled_s, r.engine_once_s) << "step " << r.step;
  }
  ASSERT_GT(once, 0);
  // The last step's boundary is in no step's latency.
  EXPECT_NEAR(waited, stalled - run.steps.back().stalled_s, 1e-9);
  EXPECT_NEAR(rearrangements_stalled, stalled, 1e-9);

  const RunSummary summary = Summarize(run);
  const auto from = static_cast<size_t>(summary.measured.from_step);
  ASSERT_GT(from, 0u);
  double window_waited = 0;
  for (size_t i = from; i < run.steps.size(); ++i) {
    window_waited += run.steps[i].latency_s - run.steps[i].step_s;
  }
  ASSERT_GT(window_waited, 0) << "a rearrangement stalls inside the window";
  EXPECT_LE(window_waited, waited + 1e-12);
  EXPECT_NEAR(summary.stalled_s, window_waited, 1e-9);
  const double n = static_cast<double>(summary.measured.steps);
  EXPECT_NEAR(summary.latency_s.mean * n, summary.step_time_s.mean * n + summary.stalled_s, 1e-9);
  // A comparison measures a summary read back over its own window: measuring again adds nothing.
  RunSummary again = summary;
  MeasureSteps(run, static_cast<int>(summary.measured.from_step), again);
  EXPECT_NEAR(again.stalled_s, summary.stalled_s, 1e-12);
  EXPECT_NEAR(again.slowed_s, summary.slowed_s, 1e-12);
}

// Asynchronously the same rearrangements stall nothing: latency is the step time.
TEST(Latency, AnAsynchronousRunHasNoStallInItsLatency) {
  const RunResult run = SimulateTiny({"eplb.use_async=true", "run.steps=260"});
  for (const StepRecord& s : run.steps) {
    EXPECT_EQ(s.stalled_s, 0);
    EXPECT_NEAR(s.latency_s, s.step_s, 1e-12) << "step " << s.step;
  }
  const RunSummary summary = Summarize(run);
  EXPECT_NEAR(summary.latency_s.p99, summary.step_time_s.p99, 1e-12);
}

// first_rearrangement (the default) measures from the second step after the first finished
// rearrangement's last commit, the first whose latency holds nothing of leaving the initial
// placement; first_commit from the step after the first commit; a step from it; a run that
// never commits (a static placement) from its first step. The window's rules are the loop's and
// the summary's, whatever the backend: these run on the host backend (SimGrid allows one
// simulation per process).
RunResult RunTinyOnHost(std::vector<std::string> overrides) {
  auto scenario = LoadScenarioFile(std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml", overrides);
  EXPECT_TRUE(scenario.ok()) << scenario.status().message();
  auto run = testing::RunOnHost(*scenario);
  EXPECT_TRUE(run.ok()) << run.status().message();
  return std::move(run)->result;
}

TEST(MeasuredWindow, StartsOnceTheFirstRearrangementIsOverOrWhereTheScenarioSays) {
  const RunResult rebalanced = RunTinyOnHost({"run.steps=260"});
  ASSERT_FALSE(rebalanced.commits.empty());
  ASSERT_FALSE(rebalanced.rearrangements.empty());
  const RearrangementRecord& first_rearrangement = rebalanced.rearrangements.front();
  ASSERT_GE(first_rearrangement.end_s, 0);
  // Its last commit: the layers it changed are the first commits of the run.
  ASSERT_GT(first_rearrangement.layers, 1);
  const CommitRecord& last_commit =
      rebalanced.commits[static_cast<size_t>(first_rearrangement.layers - 1)];
  EXPECT_NEAR(last_commit.time_s, first_rearrangement.end_s, 1e-12);
  const int first = last_commit.step + 2;
  EXPECT_GE(first, rebalanced.commits.front().step + 2);
  const RunSummary summary = Summarize(rebalanced);
  EXPECT_EQ(summary.measured.rule, "first_rearrangement");
  EXPECT_EQ(summary.measured.from_step, first);
  EXPECT_EQ(summary.measured.steps, 260 - first);
  double sum = 0;
  for (int i = first; i < 260; ++i) sum += rebalanced.steps[static_cast<size_t>(i)].step_s;
  EXPECT_NEAR(summary.step_time_s.mean, sum / (260 - first), 1e-12);

  // The same run under the other rule (a host run's commits vary with the machine's load).
  RunResult by_commit = rebalanced;
  by_commit.scenario.run.measure_from = RunSpec::kFromFirstCommit;
  const RunSummary from_commit = Summarize(by_commit);
  EXPECT_EQ(from_commit.measured.rule, "first_commit");
  EXPECT_EQ(from_commit.measured.from_step, rebalanced.commits.front().step + 1);

  const RunSummary from_step = Summarize(RunTinyOnHost({"run.steps=260", "run.measure_from=10"}));
  EXPECT_EQ(from_step.measured.rule, "step");
  EXPECT_EQ(from_step.measured.from_step, 10);

  const RunResult fixed = RunTinyOnHost({"run.steps=260", "eplb.policy=static"});
  EXPECT_TRUE(fixed.commits.empty());
  EXPECT_EQ(Summarize(fixed).measured.from_step, 0);

  // A comparison measures every run over one window: the latest of their own.
  std::vector<LabelledRun> runs(2);
  runs[0].label = "static";
  runs[0].folder.run = fixed;
  runs[1].label = "deepseek";
  runs[1].folder.run = rebalanced;
  EXPECT_EQ(CommonMeasuredFrom(runs), first);
}

TEST(MeasuredWindow, ABadMeasureFromIsRefusedNamingTheField) {
  for (const char* bad : {"run.measure_from=-1", "run.measure_from=400", "run.measure_from=soon",
                          "run.measure_from=1.5"}) {
    auto s = LoadScenarioFile(std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml", {bad});
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.status().message().find("expected first_rearrangement, first_commit, or a step in "
                                        "0..399 (run.steps − 1) where the run's statistics begin"),
              std::string::npos)
        << s.status().message();
  }
}

}  // namespace
}  // namespace eplb
