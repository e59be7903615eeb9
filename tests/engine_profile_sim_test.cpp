// Engine profiles on the simulated clock (migrate/engine_profile.h): a synchronous
// rearrangement's host work is stall, in the latency of the step it delayed; in async mode each
// step while a rearrangement is in flight pays the engine's per-step check. Deterministic.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "eplb/io/run_folder.h"
#include "eplb/io/scenario_file.h"
#include "eplb/migrate/engine_profile.h"
#include "sim_run.h"

namespace eplb {
namespace {

using testing::SimulateTiny;

double TotalStall(const RunResult& run) {
  double s = 0;
  for (const StepRecord& r : run.steps) s += r.stalled_s;
  return s;
}

// One simulation per test: SimGrid configures its engine once per process (ctest runs each
// test in its own).
TEST(EngineProfileSim, ASyncRearrangementsHostWorkIsStall) {
  const RunResult vllm =
      SimulateTiny({"eplb.use_async=false", "run.steps=260", "migration.engine=vllm"});
  ASSERT_FALSE(vllm.rearrangements.empty());
  double once = 0, stalled = 0;
  for (const RearrangementRecord& r : vllm.rearrangements) {
    EXPECT_GT(r.engine_once_s, 0);
    EXPECT_GT(r.engine_planning_s + r.engine_transfer_s + r.engine_writeback_s, 0);
    EXPECT_EQ(r.slowed_s, 0);  // nothing runs beside a stopped world
    once += r.engine_once_s;
    stalled += r.stalled_s;
  }
  // The once-per-rearrangement work runs on the blocked boundary, and the boundary waits for
  // the workers' per-layer host work too; each rearrangement carries its boundary's stall.
  EXPECT_GT(TotalStall(vllm), once);
  EXPECT_NEAR(stalled, TotalStall(vllm), 1e-12);
}

// summary.json's engine_s_mean: each part's mean over the completed rearrangements, as
// rearrangements.csv holds them.
TEST(EngineProfileSim, TheSummaryMeansTheBreakdown) {
  const RunResult vllm =
      SimulateTiny({"eplb.use_async=false", "run.steps=260", "migration.engine=vllm",
                    "migration.transport=nixl", "migration.batching=true"});
  const RunSummary s = Summarize(vllm);
  double once = 0, barrier = 0, done = 0;
  for (const RearrangementRecord& r : vllm.rearrangements) {
    if (r.end_s < 0) continue;
    once += r.engine_once_s;
    barrier += r.engine_barrier_s;
    ++done;
  }
  ASSERT_GT(done, 0);
  EXPECT_DOUBLE_EQ(s.rearrangements.engine_s_mean.once, once / done);
  EXPECT_DOUBLE_EQ(s.rearrangements.engine_s_mean.barrier, barrier / done);
  EXPECT_GT(s.rearrangements.engine_s_mean.barrier, 0);
  EXPECT_GT(s.rearrangements.engine_s_mean.total(), s.rearrangements.engine_s_mean.once);
}

TEST(EngineProfileSim, TheEplbProfileAddsNothing) {
  const RunResult eplb = SimulateTiny({"eplb.use_async=false", "run.steps=260"});
  ASSERT_FALSE(eplb.rearrangements.empty());
  for (const RearrangementRecord& r : eplb.rearrangements) {
    EXPECT_EQ(r.engine_once_s + r.engine_planning_s + r.engine_transfer_s + r.engine_barrier_s +
                  r.engine_polling_s + r.engine_writeback_s,
              0);
  }
}

TEST(EngineProfileSim, AsyncStepsPayThePerStepCheckWhileInFlight) {
  const RunResult vllm =
      SimulateTiny({"eplb.use_async=true", "run.steps=260", "migration.engine=vllm"});
  const auto scenario = LoadScenarioFile(std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml");
  ASSERT_TRUE(scenario.ok());
  const double overhead = AsyncStepOverheadS(Engine::kVllm, scenario->num_gpus());
  ASSERT_GT(overhead, 0);
  int in_flight = 0;
  for (const StepRecord& s : vllm.steps) {
    if (s.bytes_in_flight <= 0) continue;
    ++in_flight;
    // Beyond the same step on idle links: at least the engine's per-step check.
    EXPECT_GE(s.step_s, s.idle_s + overhead - 1e-12) << "step " << s.step;
  }
  EXPECT_GT(in_flight, 0);
}

// The step that applies a layer waits for the main thread's move_to_workspace: async
// rearrangements now stall between steps by the apply's host work, each layer's slowest rank,
// and by nothing with eplb's own backend.
TEST(EngineProfileSim, AsyncApplyingALayerDelaysItsStep) {
  const RunResult vllm =
      SimulateTiny({"eplb.use_async=true", "run.steps=260", "migration.engine=vllm"});
  const auto scenario = LoadScenarioFile(std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml");
  ASSERT_TRUE(scenario.ok());
  const int slots_per_gpu = scenario->num_slots() / scenario->num_gpus();
  const WorkerCosts w =
      WorkerCostsOf(Engine::kVllm, scenario->migration.transport, scenario->model.expert_tensors,
                    slots_per_gpu, scenario->num_slots(), scenario->num_gpus(), {.async = true});
  ASSERT_GT(w.apply_per_layer_s, 0);
  int finished = 0, planned = 0;  // layers committed by the finished rearrangements; at most
  double once = 0;                // the policy and maps on the main thread as each starts
  for (const RearrangementRecord& r : vllm.rearrangements) {
    planned += r.layers;
    if (r.end_s >= 0) finished += r.layers;
    once += r.engine_once_s;
  }
  ASSERT_GT(finished, 0);
  ASSERT_GT(once, 0);
  // Each applied layer costs at least its fixed part, at most every slot of a rank written;
  // each start, its once-per-rearrangement work.
  const double stall = TotalStall(vllm);
  EXPECT_GE(stall, once + finished * w.apply_per_layer_s - 1e-12);
  EXPECT_LE(stall,
            once + planned * (w.apply_per_layer_s + w.apply_per_row_s * slots_per_gpu) + 1e-9);
}

// Each rearrangement's cost to serving, in rearrangements.csv: the boundaries it blocked and its
// steps' time beyond idle links, which add up to the steps' own (no faults here).
TEST(EngineProfileSim, EachRearrangementCarriesWhatItsStepsPaid) {
  const RunResult vllm =
      SimulateTiny({"eplb.use_async=true", "run.steps=260", "migration.engine=vllm"});
  double stalled = 0, slowed = 0;
  for (const RearrangementRecord& r : vllm.rearrangements) {
    EXPECT_GT(r.stalled_s, 0) << "step " << r.step;  // each layer's apply on the main thread
    EXPECT_GT(r.slowed_s, 0) << "step " << r.step;
    stalled += r.stalled_s;
    slowed += r.slowed_s;
  }
  double steps_stalled = 0, steps_slowed = 0;
  for (const StepRecord& s : vllm.steps) {
    steps_stalled += s.stalled_s;
    if (s.bytes_in_flight > 0) steps_slowed += std::max(0.0, s.step_s - s.idle_s);
  }
  EXPECT_NEAR(stalled, steps_stalled, 1e-12);
  EXPECT_NEAR(slowed, steps_slowed, 1e-12);
}

}  // namespace
}  // namespace eplb
