// The one-GPU model (sim/one_gpu.h): its calibration file, and simulated spans that follow its
// parameters. SimGrid allows one simulation per process: a comparison of two runs runs each in
// a child process of its own.
#include "one_gpu.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>

#include "eplb/io/run_folder.h"
#include "eplb/io/scenario_file.h"
#include "eplb/usecases/validation.h"

namespace eplb {
namespace {

using sim::OneGpuModel;

// A model whose copy link alone limits the bytes (streams far faster) and costs nothing else.
OneGpuModel BytesOnly(double copy_gbps) {
  OneGpuModel m;
  m.copy_gbps = copy_gbps;
  m.stream_gbps = 1e6;
  m.local_copy_gbps = 1e6;
  return m;
}

// What the tests read of one simulated run.
struct Spans {
  double rearrangement_s = 0;  // first transfer start to last transfer end, rearrangement 0
  double start_gap_s = 0;      // rearrangement 0's start to its first transfer's start
  double commit_gap_s = 0;     // its last transfer's end to its last commit
  double bytes = 0;            // its transfers' bytes
  double max_step_s = 0;
  double layer_s = 0;  // Σ over its layers of each layer's first transfer start to last end
  int transfers = 0;
  int receivers = 0;  // ranks receiving in it
};

Scenario Tiny(const std::vector<std::string>& extra = {}) {
  // Stop-the-world: every layer stages at once, so the copies never wait for a step boundary.
  std::vector<std::string> overrides = {"eplb.use_async=false", "run.steps=140", "model.hidden=1"};
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  auto s = LoadScenarioFile(std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml", overrides);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return *s;
}

Spans Measure(const RunResult& run) {
  Spans s;
  if (run.rearrangements.empty()) return s;
  const RearrangementRecord& r = run.rearrangements.front();
  const double next = run.rearrangements.size() > 1 ? run.rearrangements[1].start_s : 1e300;
  double first = 1e300, last = -1e300;
  std::map<int, int> receivers;
  for (const TransferRecord& t : run.transfers) {
    if (t.start_s < r.start_s || t.start_s >= next) continue;
    first = std::min(first, t.start_s);
    last = std::max(last, t.end_s);
    s.bytes += static_cast<double>(t.bytes);
    ++s.transfers;
    ++receivers[t.dst_rank];
  }
  s.receivers = static_cast<int>(receivers.size());
  std::map<int, std::pair<double, double>> layers;
  for (const TransferRecord& t : run.transfers) {
    if (t.start_s < r.start_s || t.start_s >= next) continue;
    auto [it, added] = layers.try_emplace(t.layer, t.start_s, t.end_s);
    it->second = {std::min(it->second.first, t.start_s), std::max(it->second.second, t.end_s)};
  }
  for (const auto& [layer, span] : layers) s.layer_s += span.second - span.first;
  s.rearrangement_s = last - first;
  s.start_gap_s = first - r.start_s;
  s.commit_gap_s = r.end_s - last;
  for (const StepRecord& step : run.steps) s.max_step_s = std::max(s.max_step_s, step.step_s);
  return s;
}

// Simulates `scenario` on `model` in a child process and returns what Measure reads of it.
Spans SimulateInChild(const Scenario& scenario, const OneGpuModel& model) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    auto run = sim::SimulateOnOneGpu(scenario, model);
    Spans s;
    if (run.ok()) s = Measure(*run);
    const ssize_t written = write(fds[1], &s, sizeof s);
    _exit(run.ok() && written == static_cast<ssize_t>(sizeof s) ? 0 : 1);
  }
  close(fds[1]);
  Spans s;
  EXPECT_EQ(read(fds[0], &s, sizeof s), static_cast<ssize_t>(sizeof s));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the simulation failed";
  return s;
}

TEST(OneGpuModel, DoublingTheCopyRateHalvesTheMigration) {
  const Scenario tiny = Tiny();
  const Spans slow = SimulateInChild(tiny, BytesOnly(10));
  const Spans fast = SimulateInChild(tiny, BytesOnly(20));
  ASSERT_GT(slow.transfers, 0);
  EXPECT_EQ(slow.transfers, fast.transfers);
  EXPECT_NEAR(fast.rearrangement_s, slow.rearrangement_s / 2, slow.rearrangement_s * 1e-6);
  // All ranks' copies cross the one link: the migration takes its bytes over that link's rate.
  EXPECT_NEAR(slow.rearrangement_s, slow.bytes / 10e9, slow.rearrangement_s * 1e-6);
}

TEST(OneGpuModel, TheRanksShareTheGpusCopyRate) {
  // Each rank's stream at 10 GB/s: on one GPU whose copies together reach 10 GB/s the ranks
  // take turns; on one whose copies reach far more, they receive side by side.
  const Scenario tiny = Tiny();
  OneGpuModel shared = BytesOnly(10);
  shared.stream_gbps = 10;
  OneGpuModel apart = shared;
  apart.copy_gbps = 1e6;
  const Spans one = SimulateInChild(tiny, shared);
  const Spans many = SimulateInChild(tiny, apart);
  ASSERT_GT(one.receivers, 1);
  EXPECT_NEAR(one.rearrangement_s, one.bytes / 10e9, one.rearrangement_s * 1e-6);
  EXPECT_LT(many.rearrangement_s, one.rearrangement_s * 0.8);
}

TEST(OneGpuModel, StartAndCommitCostsComeOnTheCaller) {
  const Scenario tiny = Tiny();
  OneGpuModel costly = BytesOnly(10);
  costly.start_us = 700;
  costly.commit_us = 300;
  const Spans plain = SimulateInChild(tiny, BytesOnly(10));
  const Spans priced = SimulateInChild(tiny, costly);
  EXPECT_NEAR(priced.start_gap_s - plain.start_gap_s, 700e-6, 1e-9);
  // Stop-the-world commits every changed layer at one boundary, one after another.
  EXPECT_NEAR(priced.commit_gap_s - plain.commit_gap_s, tiny.model.layers * 300e-6, 1e-9);
  EXPECT_NEAR(priced.rearrangement_s, plain.rearrangement_s, plain.rearrangement_s * 1e-6);
}

TEST(OneGpuModel, RoundsPayTheirStartUp) {
  const Scenario tiny = Tiny();
  OneGpuModel rounds = BytesOnly(10);
  rounds.round_us = 50;
  const Spans plain = SimulateInChild(tiny, BytesOnly(10));
  const Spans priced = SimulateInChild(tiny, rounds);
  // The first round's start-up comes before the first transfer; later ones inside the span.
  EXPECT_NEAR(priced.start_gap_s - plain.start_gap_s, 50e-6, 1e-9);
  EXPECT_GT(priced.rearrangement_s, plain.rearrangement_s);
}

TEST(OneGpuModel, StepsReadTheWeightsOverTheSharedLink) {
  // Asynchronous: the steps go on while the layers move.
  const Scenario tiny = Tiny({"eplb.use_async=true"});
  const double read_bytes = static_cast<double>(tiny.model.layers) * tiny.num_slots() *
                            static_cast<double>(tiny.model.expert_bytes);
  OneGpuModel reads = BytesOnly(10);
  reads.step_read_gbps = 1;  // far slower than the step model: the reads set each step's time
  const Spans plain = SimulateInChild(tiny, BytesOnly(10));
  const Spans slowed = SimulateInChild(tiny, reads);
  EXPECT_LT(plain.max_step_s, read_bytes / 1e9);
  EXPECT_NEAR(slowed.max_step_s, read_bytes / 1e9, read_bytes / 1e9 * 0.5);
  EXPECT_GE(slowed.max_step_s, read_bytes / 1e9 * (1 - 1e-9));
  // A migration beside the steps shares the link with their reads: each layer's bytes take
  // longer than on a link of its own.
  EXPECT_GT(slowed.rearrangement_s, plain.rearrangement_s);
  EXPECT_GT(slowed.layer_s, plain.layer_s * 1.01);
}

// What eplb validate does after its device run, on a recorded measurement: a run folder written
// by a one-GPU simulation stands for the device run, and the same scenario simulated with the
// copy rate doubled must come out half as long per transfer and per layer (the bytes alone set
// them), while each rearrangement's start to last commit keeps its start and commits.
TEST(OneGpuModel, ValidateOnARecordedMeasurementComparesTheSameIntervals) {
  const Scenario tiny = Tiny();
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("one-gpu-" + std::to_string(getpid()))).string();
  OneGpuModel measured_model = BytesOnly(10);
  measured_model.start_us = 400;
  measured_model.commit_us = 100;
  const pid_t pid = fork();
  if (pid == 0) {
    auto run = sim::SimulateOnOneGpu(tiny, measured_model);
    _exit(run.ok() && WriteRunFolder(dir, *run).ok() ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  auto recorded = ReadRunFolder(dir);
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(recorded.ok()) << recorded.status().message();

  OneGpuModel faster = measured_model;
  faster.copy_gbps = 20;
  auto simulated = sim::SimulateOnOneGpu(tiny, faster);
  ASSERT_TRUE(simulated.ok()) << simulated.status().message();
  const Validation v = CompareTimings(recorded->run, *simulated);
  ASSERT_GT(v.layers.size(), 0u);
  EXPECT_EQ(v.unmatched_measured + v.unmatched_simulated, 0);
  // Times in the folder keep 9 significant digits.
  for (const TransferTiming& t : v.transfers) EXPECT_NEAR(t.error_pct, -50, 1e-3);
  for (const LayerTiming& l : v.layers) EXPECT_NEAR(l.error_pct, -50, 1e-3);
  ASSERT_FALSE(v.walls.empty());
  const LayerTiming& wall = v.walls.front();
  const double fixed = 400e-6 + tiny.model.layers * 100e-6;
  EXPECT_GT(wall.error_pct, -50);
  EXPECT_LT(wall.error_pct, 0);
  // Start to last commit: the fixed costs, the first layer's bytes, the rest (all bytes at
  // one rate, stop-the-world): halving the bytes' time leaves the fixed part.
  EXPECT_NEAR(wall.simulated_s - fixed, (wall.measured_s - fixed) / 2, wall.measured_s * 0.05);
}

TEST(OneGpuModel, CalibrationFilesAreCheckedNamingFileKeyAndValue) {
  const OneGpuModel base = BytesOnly(10);
  struct Case {
    const char* json;
    const char* error;  // empty: accepted
  };
  const Case cases[] = {
      {R"({"copy_gbps": 1700, "start_us": 1000})", ""},
      {R"({})", ""},
      {R"({"copy_gbps": 0})",
       "cal.json: copy_gbps is 0; it must be a finite number above 0 (a rate the device run "
       "measured)"},
      {R"({"commit_us": -1})",
       "cal.json: commit_us is -1; it must be a finite number of at least 0"},
      {R"({"round_ms": 3})",
       "cal.json: unknown key 'round_ms'; the keys are copy_gbps, "
       "stream_gbps, local_copy_gbps, round_us, start_us, commit_us, "
       "step_read_gbps"},
      {R"({"start_us": "1 ms"})", "cal.json: start_us is \"1 ms\"; expected a number"},
      {R"([1, 2])", "cal.json: expected a JSON object with some of the keys copy_gbps"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.json);
    auto model = sim::ParseOneGpuModel(nlohmann::json::parse(c.json), "cal.json", base);
    if (std::string(c.error).empty()) {
      ASSERT_TRUE(model.ok()) << model.status().message();
    } else {
      ASSERT_FALSE(model.ok());
      EXPECT_NE(model.status().message().find(c.error), std::string::npos)
          << model.status().message();
    }
  }
  auto model = sim::ParseOneGpuModel(nlohmann::json::parse(R"({"copy_gbps": 1700})"), "f", base);
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(model->copy_gbps, 1700);
  EXPECT_EQ(model->stream_gbps, base.stream_gbps);  // the base's where the file says nothing
  EXPECT_EQ(sim::OneGpuModelJson(*model)["copy_gbps"], 1700);
}

TEST(OneGpuModel, LoadsTheFileOneGpuCalibrationWrites) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("one-gpu-" + std::to_string(getpid()) + ".json"))
          .string();
  {
    std::ofstream f(path);
    f << R"({"start_us": 1000.0, "commit_us": 300.0, "copy_gbps": 1660.0,)"
      << R"( "step_read_gbps": 1900.0})"
      << "\n";
  }
  auto model = sim::LoadOneGpuModel(path, BytesOnly(10));
  std::filesystem::remove(path);
  ASSERT_TRUE(model.ok()) << model.status().message();
  EXPECT_EQ(model->start_us, 1000);
  EXPECT_EQ(model->copy_gbps, 1660);
  EXPECT_EQ(model->stream_gbps, 1e6);  // the probes' (the base) where the file says nothing
  auto missing = sim::LoadOneGpuModel(path, BytesOnly(10));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(path), std::string::npos);
}

TEST(OneGpuModel, OnOneGpuKeepsTheTopologyAndSetsTheLinks) {
  const Scenario tiny = Tiny();
  OneGpuModel m = BytesOnly(1700);
  m.stream_gbps = 900;
  m.round_us = 40;
  const Scenario one = sim::OnOneGpu(tiny, m);
  EXPECT_EQ(one.num_gpus(), tiny.num_gpus());
  EXPECT_EQ(one.cluster.nvlink.bandwidth_gbps, 900);
  EXPECT_EQ(one.cluster.nic.latency_us, 40);
  EXPECT_EQ(one.cluster.hbm_gbps, m.local_copy_gbps);
}

}  // namespace
}  // namespace eplb
