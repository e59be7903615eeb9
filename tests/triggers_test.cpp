// The triggers engines add to vLLM's interval (engine/eplb_loop.h): TensorRT-LLM's decayed
// statistics, ATOM's and SGLang's balance gate, and SGLang's stop-the-world chunks, each on the
// tiny scenario run by the loop on the host backend (real threads moving real bytes).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "eplb/engine/workload.h"
#include "eplb/io/scenario_file.h"
#include "eplb/model/metrics.h"
#include "host_run.h"

namespace eplb {
namespace {

Scenario Tiny(std::vector<std::string> overrides = {}) {
  overrides.push_back("run.steps=260");  // rearrangements after steps 24, 124 and 224
  auto s = LoadScenarioFile(std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml", overrides);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return *s;
}

testing::HostRun RunLoop(const Scenario& s) {
  auto run = testing::RunOnHost(s);
  EXPECT_TRUE(run.ok()) << run.status().message();
  EXPECT_TRUE(run->verified.ok()) << run->verified.message();
  EXPECT_TRUE(run->commits_verified.ok()) << run->commits_verified.message();
  return std::move(run).value();
}

// The loads the loop saw, step by step: the workload is a function of the scenario alone.
std::vector<LoadMatrix> Loads(const Scenario& s) {
  auto workload = MakeWorkload(s);
  EXPECT_TRUE(workload.ok());
  std::vector<LoadMatrix> out(static_cast<size_t>(s.run.steps));
  for (LoadMatrix& load : out) (*workload)->Next(load);
  return out;
}

TEST(Triggers, DecayedStatisticsAreEachStepsLoadDecayedSinceTheLastRearrangement) {
  const Scenario s = Tiny({"eplb.statistics=decayed", "eplb.decay=0.9"});
  const testing::HostRun run = RunLoop(s);
  const std::vector<LoadMatrix> loads = Loads(s);
  const auto& rearrangements = run.result.rearrangements;
  ASSERT_EQ(rearrangements.size(), 3u);
  int since = 0;  // the first step after the previous rearrangement
  for (const RearrangementRecord& r : rearrangements) {
    LoadMatrix expected = LoadMatrix::Zero(s.model.layers, s.model.experts);
    for (int t = since; t <= r.step; ++t) expected = expected * 0.9 + loads[static_cast<size_t>(t)];
    for (int l = 0; l < s.model.layers; ++l) {
      for (int e = 0; e < s.model.experts; ++e) {
        const double got = r.window_load[static_cast<size_t>(l * s.model.experts + e)];
        ASSERT_NEAR(got, expected(l, e), 1e-4 * (1 + expected(l, e)))
            << "rearrangement after step " << r.step << ", layer " << l << ", expert " << e;
      }
    }
    since = r.step + 1;
  }
}

TEST(Triggers, LayerBalancednessIsEachLayersMeanOverMax) {
  LoadMatrix gpu_loads(3, 3);
  gpu_loads << 1, 3, 2,  //
      2, 2, 2,           //
      0, 0, 0;
  EXPECT_EQ(LayerBalancedness(gpu_loads, {}), (std::vector<double>{2.0 / 3, 1.0, 1.0}));
  // GPU 2 excluded: layer 0 is {1, 3}.
  const std::vector<int> excluded = {2};
  EXPECT_EQ(LayerBalancedness(gpu_loads, excluded), (std::vector<double>{2.0 / 3, 1.0, 1.0}));
  gpu_loads(0, 2) = 9;
  EXPECT_EQ(LayerBalancedness(gpu_loads, {})[0], (13.0 / 3) / 9);
  EXPECT_EQ(LayerBalancedness(gpu_loads, excluded)[0], 2.0 / 3);
}

TEST(Triggers, TheBalanceGateHoldsWhileThePlacementIsBalancedEnough) {
  const testing::HostRun plain = RunLoop(Tiny());
  ASSERT_EQ(plain.result.rearrangements.size(), 3u);
  EXPECT_EQ(plain.result.held_rearrangements, 0);
  for (const char* gate : {"window_min", "window_mean", "step_mean"}) {
    SCOPED_TRACE(gate);
    const std::string g = std::string("eplb.balancedness_gate=") + gate;
    // Balancedness is at most 1: a gate at 2 never holds, at 0 always does.
    const testing::HostRun open = RunLoop(Tiny({g, "eplb.min_balancedness=2"}));
    EXPECT_EQ(open.result.rearrangements.size(), 3u);
    EXPECT_EQ(open.result.held_rearrangements, 0);
    const testing::HostRun shut = RunLoop(Tiny({g, "eplb.min_balancedness=0"}));
    EXPECT_TRUE(shut.result.rearrangements.empty());
    EXPECT_EQ(shut.result.held_rearrangements, 3);
  }
  // The window's least layer balancedness under the first placement, from the window the first
  // rearrangement saw: a gate just above it lets the rearrangement start, just at it holds it.
  const RearrangementRecord& first = plain.result.rearrangements.front();
  const Scenario s = Tiny();
  LoadMatrix window(s.model.layers, s.model.experts);
  for (int l = 0; l < s.model.layers; ++l) {
    for (int e = 0; e < s.model.experts; ++e)
      window(l, e) = first.window_load[static_cast<size_t>(l * s.model.experts + e)];
  }
  const Placement initial = *Placement::Initial(s.model.layers, s.model.experts, s.num_slots());
  const std::vector<double> layers = LayerBalancedness(GpuLoads(window, initial, s.topology()), {});
  const double least = *std::min_element(layers.begin(), layers.end());
  ASSERT_LT(least, 1.0);
  const testing::HostRun above =
      RunLoop(Tiny({fmt::format("eplb.min_balancedness={}", least + 1e-3)}));
  ASSERT_FALSE(above.result.rearrangements.empty());
  EXPECT_EQ(above.result.rearrangements.front().step, first.step);
  const testing::HostRun at =
      RunLoop(Tiny({fmt::format("eplb.min_balancedness={}", least - 1e-3)}));
  EXPECT_GE(at.result.held_rearrangements, 1);
  if (!at.result.rearrangements.empty()) {
    EXPECT_GT(at.result.rearrangements.front().step, first.step);
  }
}

TEST(Triggers, ChunksMoveOnePerStepFromTheStepAfterThePolicyAndReachTheSamePlacement) {
  const testing::HostRun whole = RunLoop(Tiny({"eplb.use_async=false"}));
  const testing::HostRun chunked =
      RunLoop(Tiny({"eplb.use_async=false", "eplb.layers_per_chunk=1"}));
  const auto& r = chunked.result.rearrangements;
  ASSERT_EQ(r.size(), whole.result.rearrangements.size());
  ASSERT_FALSE(r.empty());
  // The first rearrangement saw the same window, so its policy chose the same placement.
  const int step = r.front().step;
  EXPECT_EQ(step, whole.result.rearrangements.front().step);
  std::vector<std::vector<int32_t>> chunk_rows(4), whole_rows(4);
  for (const CommitRecord& c : whole.result.commits) {
    if (c.step != step) continue;
    whole_rows[static_cast<size_t>(c.layer)] = c.phy2log;
  }
  int moved = 0;
  for (const CommitRecord& c : chunked.result.commits) {
    if (c.step > step + 4) break;
    // Layer l is chunk l: it moves at the boundary of step + 1 + l, which waits for it.
    EXPECT_EQ(c.step, step + 1 + c.layer) << "layer " << c.layer;
    EXPECT_GT(chunked.result.steps[static_cast<size_t>(c.step)].stalled_s, 0.0);
    chunk_rows[static_cast<size_t>(c.layer)] = c.phy2log;
    ++moved;
  }
  EXPECT_GT(moved, 0);
  EXPECT_EQ(chunk_rows, whole_rows);
  EXPECT_EQ(r.front().layers, whole.result.rearrangements.front().layers);
  EXPECT_GE(r.front().end_s, r.front().start_s);
  // One chunk of every layer is the plain stop-the-world.
  const testing::HostRun one = RunLoop(Tiny({"eplb.use_async=false", "eplb.layers_per_chunk=4"}));
  for (const CommitRecord& c : one.result.commits) {
    if (c.step <= step + 4) {
      EXPECT_EQ(c.step, step);
    }
  }
}

TEST(Triggers, ChunksNeedTheStopTheWorldProtocol) {
  auto s =
      LoadScenarioFile(std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml", {"eplb.layers_per_chunk=2"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("eplb.layers_per_chunk is 2 but eplb.use_async is true"),
            std::string::npos)
      << s.status().message();
}

}  // namespace
}  // namespace eplb
