// Simulated against measured transfer times (validation.h): matching, spans and error numbers.
#include "eplb/usecases/validation.h"

#include <random>

#include <gtest/gtest.h>

namespace eplb {
namespace {

TransferRecord T(int layer, int expert, int src, int dst, double start, double end) {
  return {layer, expert, src, dst, 1000, LinkClass::kNvlink, start, end};
}

RunResult MakeRun(std::vector<double> rearrangement_starts, std::vector<TransferRecord> transfers) {
  RunResult r;
  for (double s : rearrangement_starts) {
    RearrangementRecord rec{};
    rec.start_s = s;
    r.rearrangements.push_back(rec);
  }
  r.transfers = std::move(transfers);
  return r;
}

TEST(Validation, IdenticalRunsHaveNoError) {
  const RunResult a = MakeRun({0}, {T(0, 1, 0, 1, 0.1, 0.2), T(1, 2, 1, 0, 0.2, 0.4)});
  const Validation v = CompareTimings(a, a);
  ASSERT_EQ(v.transfers.size(), 2u);
  ASSERT_EQ(v.layers.size(), 2u);
  EXPECT_EQ(v.transfer_error.max_abs_pct, 0);
  EXPECT_EQ(v.layer_error.max_abs_pct, 0);
  EXPECT_EQ(v.unmatched_measured + v.unmatched_simulated, 0);
}

TEST(Validation, ErrorsAreRelativeToTheMeasurement) {
  // The simulator is 10% slow on every transfer, and starts layer 0's second transfer later.
  const RunResult measured =
      MakeRun({0}, {T(0, 1, 0, 1, 1.0, 2.0), T(0, 2, 1, 0, 1.0, 3.0), T(1, 3, 0, 1, 3.0, 4.0)});
  const RunResult simulated =
      MakeRun({0}, {T(0, 1, 0, 1, 1.0, 2.1), T(0, 2, 1, 0, 2.1, 4.3), T(1, 3, 0, 1, 4.3, 5.4)});
  const Validation v = CompareTimings(measured, simulated);
  ASSERT_EQ(v.transfers.size(), 3u);
  for (const TransferTiming& t : v.transfers) EXPECT_NEAR(t.error_pct, 10.0, 1e-9);
  ASSERT_EQ(v.layers.size(), 2u);
  // Layer 0 spans 1.0..3.0 measured and 1.0..4.3 simulated.
  EXPECT_NEAR(v.layers[0].measured_s, 2.0, 1e-12);
  EXPECT_NEAR(v.layers[0].simulated_s, 3.3, 1e-12);
  EXPECT_NEAR(v.layers[0].error_pct, 65.0, 1e-9);
  EXPECT_EQ(v.layers[0].transfers, 2);
  ASSERT_EQ(v.rearrangements.size(), 1u);
  EXPECT_NEAR(v.rearrangements[0].measured_s, 3.0, 1e-12);
  EXPECT_NEAR(v.rearrangements[0].simulated_s, 4.4, 1e-12);
  EXPECT_NEAR(v.layer_error.mean_abs_pct, (65.0 + 10.0) / 2, 1e-9);
  EXPECT_NEAR(v.layer_error.median_abs_pct, (65.0 + 10.0) / 2, 1e-9);
  EXPECT_NEAR(v.layer_error.max_abs_pct, 65.0, 1e-9);
}

TEST(Validation, TransfersAreMatchedWithinTheirRearrangement) {
  // The same (layer, expert, src, dst) in two rearrangements is two transfers.
  const RunResult measured = MakeRun({0, 10}, {T(0, 1, 0, 1, 1, 2), T(0, 1, 0, 1, 11, 13)});
  const RunResult simulated = MakeRun({0, 20}, {T(0, 1, 0, 1, 1, 3), T(0, 1, 0, 1, 21, 22)});
  const Validation v = CompareTimings(measured, simulated);
  ASSERT_EQ(v.transfers.size(), 2u);
  EXPECT_EQ(v.transfers[0].rearrangement, 0);
  EXPECT_NEAR(v.transfers[0].error_pct, 100.0, 1e-9);
  EXPECT_EQ(v.transfers[1].rearrangement, 1);
  EXPECT_NEAR(v.transfers[1].error_pct, -50.0, 1e-9);
}

TEST(Validation, UnmatchedTransfersAreCountedNotCompared) {
  const RunResult measured = MakeRun({0}, {T(0, 1, 0, 1, 1, 2), T(0, 5, 0, 1, 1, 2)});
  const RunResult simulated = MakeRun({0}, {T(0, 1, 0, 1, 1, 2), T(2, 7, 1, 0, 1, 2)});
  const Validation v = CompareTimings(measured, simulated);
  EXPECT_EQ(v.transfers.size(), 1u);
  EXPECT_EQ(v.unmatched_measured, 1);
  EXPECT_EQ(v.unmatched_simulated, 1);
  EXPECT_NE(ValidationTable(v).find("unmatched"), std::string::npos);
  const auto json = ValidationJson(v);
  EXPECT_EQ(json["summary"]["unmatched_measured"], 1);
  EXPECT_EQ(json["transfers"].size(), 1u);
}

TEST(Validation, WallsRunFromTheStartToTheLastCommitOfRearrangementsBothSidesFinished) {
  struct Case {
    double measured_end, simulated_end;
    bool simulated_cancelled;
    int walls;
    double error_pct;
  };
  const Case cases[] = {
      {2.0, 2.5, false, 1, 25.0},   // 2 s measured, 2.5 s simulated, both from t = 0
      {2.0, 1.0, false, 1, -50.0},  //
      {-1, 2.0, false, 0, 0},       // the device run ended before its last commit
      {2.0, -1, false, 0, 0},       // the simulation did
      {2.0, 2.0, true, 0, 0},       // cancelled on one side
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << c.measured_end << " " << c.simulated_end);
    RunResult measured = MakeRun({0}, {T(0, 1, 0, 1, 0.5, 1.0)});
    RunResult simulated = MakeRun({0}, {T(0, 1, 0, 1, 0.5, 1.2)});
    measured.rearrangements[0].end_s = c.measured_end;
    simulated.rearrangements[0].end_s = c.simulated_end;
    simulated.rearrangements[0].cancelled = c.simulated_cancelled;
    const Validation v = CompareTimings(measured, simulated);
    ASSERT_EQ(static_cast<int>(v.walls.size()), c.walls);
    EXPECT_EQ(v.wall_error.count, c.walls);
    if (c.walls == 0) continue;
    EXPECT_NEAR(v.walls[0].error_pct, c.error_pct, 1e-9);
    EXPECT_EQ(v.walls[0].transfers, 1);
    EXPECT_EQ(ValidationJson(v)["walls"].size(), 1u);
    EXPECT_NE(ValidationTable(v).find("rearrangement 0 start to last commit"), std::string::npos);
  }
}

// Property: scaling every simulated duration by k gives (k − 1) × 100% on every transfer and
// layer, whatever the transfers.
TEST(Validation, UniformScalingGivesUniformError) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 100; ++trial) {
    const double k = 0.5 + std::uniform_real_distribution<double>(0, 1.5)(rng);
    std::vector<TransferRecord> m, s;
    for (int layer = 0; layer < 5; ++layer) {
      for (int e = 0; e < 4; ++e) {
        const double start = std::uniform_real_distribution<double>(1, 2)(rng);
        const double d = std::uniform_real_distribution<double>(0.01, 0.5)(rng);
        m.push_back(T(layer, e, e % 2, 1 - e % 2, start, start + d));
        // The same schedule stretched by k about t = 0: durations and spans scale by k.
        s.push_back(T(layer, e, e % 2, 1 - e % 2, start * k, (start + d) * k));
      }
    }
    const Validation v = CompareTimings(MakeRun({0}, m), MakeRun({0}, s));
    ASSERT_EQ(v.transfers.size(), 20u);
    for (const TransferTiming& t : v.transfers) ASSERT_NEAR(t.error_pct, (k - 1) * 100, 1e-6);
    for (const LayerTiming& l : v.layers) ASSERT_NEAR(l.error_pct, (k - 1) * 100, 1e-6);
  }
}

}  // namespace
}  // namespace eplb
