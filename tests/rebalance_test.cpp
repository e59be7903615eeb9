// RebalanceRecordedLoad (usecases/rebalance.h): what a policy is handed for a recorded load, the
// one definition that `eplb rebalance` and eplb.rebalance share.
#include "eplb/usecases/rebalance.h"

#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "eplb/policy/deepseek.h"
#include "eplb/policy/policy.h"
#include "test_util.h"

namespace eplb {
namespace {

// What the recording policy was last handed.
struct Seen {
  LoadMatrix window;
  std::vector<LoadMatrix> chunks;
  double window_steps = 0;
  double migration_weight = 0;
  int num_groups = 0;
  std::vector<int> lost;
  bool had_current = false;
};
Seen seen;

// Places expert s % E in slot s, and notes its input.
class RecordingPolicy final : public Policy {
 public:
  std::string_view name() const override { return "recording"; }
  Result<Placement> Rebalance(const PolicyInput& in) override {
    seen.window = in.load;
    seen.chunks.assign(in.window_chunks.begin(), in.window_chunks.end());
    seen.window_steps = in.tuning.window_steps;
    seen.migration_weight = in.tuning.weight;
    seen.num_groups = in.num_groups;
    seen.lost.assign(in.lost_ranks.begin(), in.lost_ranks.end());
    seen.had_current = in.current != nullptr;
    return Placement::Initial(static_cast<int>(in.load.rows()), static_cast<int>(in.load.cols()),
                              in.topology.num_slots());
  }
};

class Rebalance : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Once per process, whatever --gtest_repeat says: the registry refuses a name twice.
    static const Status registered = RegisterPolicy({"recording", "notes what it is handed", [] {
                                                       return std::make_unique<RecordingPolicy>();
                                                     }});
    ASSERT_TRUE(registered.ok()) << registered.message();
  }
};

LoadSeries Steps(int count, int layers, int experts, uint64_t seed) {
  std::mt19937_64 rng(seed);
  LoadSeries series;
  for (int t = 0; t < count; ++t) series.steps.push_back(testing::RandomLoad(rng, layers, experts));
  return series;
}

TEST_F(Rebalance, APolicyGetsTheSumAndUpToMaxChunksOfConsecutiveSteps) {
  const LoadSeries load = Steps(5, 2, 4, 1);
  const Topology topo = testing::MakeTopology(1, 2, 3);
  RebalanceOptions options;
  options.max_chunks = 2;
  auto done = RebalanceRecordedLoad("recording", load, topo, options);
  ASSERT_TRUE(done.ok()) << done.status().message();
  const LoadMatrix sum =
      load.steps[0] + load.steps[1] + load.steps[2] + load.steps[3] + load.steps[4];
  EXPECT_EQ(seen.window, sum);
  EXPECT_EQ(done->window, sum);
  // Five steps in chunks of three: steps 0-2, then 3-4.
  ASSERT_EQ(seen.chunks.size(), 2u);
  EXPECT_EQ(seen.chunks[0], load.steps[0] + load.steps[1] + load.steps[2]);
  EXPECT_EQ(seen.chunks[1], load.steps[3] + load.steps[4]);
  EXPECT_EQ(seen.window_steps, 5);
  EXPECT_EQ(seen.num_groups, 1);
  EXPECT_FALSE(seen.had_current);
  EXPECT_GE(done->policy_ms, 0);
  // One step is a window with no time in it: no chunks.
  ASSERT_TRUE(RebalanceRecordedLoad("recording", Steps(1, 2, 4, 2), topo, options).ok());
  EXPECT_TRUE(seen.chunks.empty());
  EXPECT_EQ(seen.window_steps, 1);
}

TEST_F(Rebalance, ACallerThatSummedTheStepsItselfSaysHowManyThereWere) {
  const LoadSeries raw = Steps(5, 2, 4, 6);
  const Topology topo = testing::MakeTopology(1, 2, 3);
  RebalanceOptions options;
  options.max_chunks = 2;
  ASSERT_TRUE(RebalanceRecordedLoad("recording", raw, topo, options).ok());
  const Seen from_raw = seen;
  // The same five steps handed as the two chunks LoadSeries::Chunks cuts.
  LoadSeries summed;
  summed.steps = raw.Chunks(2);
  options.window_steps = 5;
  ASSERT_TRUE(RebalanceRecordedLoad("recording", summed, topo, options).ok());
  EXPECT_EQ(seen.window, from_raw.window);
  EXPECT_EQ(seen.chunks, from_raw.chunks);
  EXPECT_EQ(seen.window_steps, 5);
  // All five in one chunk: a window over time still, so the policy gets that chunk.
  summed.steps = raw.Chunks(1);
  options.max_chunks = 1;
  ASSERT_TRUE(RebalanceRecordedLoad("recording", summed, topo, options).ok());
  ASSERT_EQ(seen.chunks.size(), 1u);
  EXPECT_EQ(seen.chunks[0], raw.Total());
  options.window_steps = -1;
  EXPECT_FALSE(RebalanceRecordedLoad("recording", summed, topo, options).ok());
}

TEST_F(Rebalance, OptionsComeAfterTheWindowLengthAndLostRanksAreSorted) {
  const LoadSeries load = Steps(4, 1, 4, 3);
  const Topology topo = testing::MakeTopology(1, 4, 2);
  const Placement current = *Placement::Initial(1, 4, 8);
  RebalanceOptions options;
  options.current = &current;
  options.num_groups = 2;
  options.policy_options = {{"window_steps", "100"}, {"migration_weight", "2.5"}};
  options.lost_ranks = {3, 1};
  ASSERT_TRUE(RebalanceRecordedLoad("recording", load, topo, options).ok());
  EXPECT_EQ(seen.window_steps, 100);
  EXPECT_EQ(seen.migration_weight, 2.5);
  EXPECT_EQ(seen.num_groups, 2);
  EXPECT_EQ(seen.lost, (std::vector<int>{1, 3}));
  EXPECT_TRUE(seen.had_current);
}

TEST_F(Rebalance, DeepSeekGetsWhatItsOwnCallGives) {
  const LoadSeries load = Steps(3, 6, 16, 4);
  const Topology topo = testing::MakeTopology(2, 4, 3);
  RebalanceOptions options;
  options.num_groups = 4;
  auto done = RebalanceRecordedLoad("deepseek", load, topo, options);
  ASSERT_TRUE(done.ok()) << done.status().message();
  EXPECT_EQ(done->placement, *RebalanceDeepSeek(load.Total(), 24, 4, 2, 8));
}

TEST_F(Rebalance, ErrorsNameThePolicyTheOptionOrTheLoad) {
  const LoadSeries load = Steps(2, 1, 4, 5);
  const Topology topo = testing::MakeTopology(1, 2, 2);
  auto unknown = RebalanceRecordedLoad("magic", load, topo);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown policy 'magic'"), std::string::npos);

  RebalanceOptions bad_option;
  bad_option.policy_options = {{"speed", "3"}};
  auto option = RebalanceRecordedLoad("deepseek", load, topo, bad_option);
  ASSERT_FALSE(option.ok());
  EXPECT_NE(option.status().message().find("unknown policy option 'speed'"), std::string::npos);

  RebalanceOptions lost;
  lost.lost_ranks = {1};
  auto refused = RebalanceRecordedLoad("static", load, topo, lost);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message().rfind("policy static: ", 0), 0u)
      << refused.status().message();

  EXPECT_FALSE(RebalanceRecordedLoad("deepseek", LoadSeries{}, topo).ok());
  RebalanceOptions no_chunks;
  no_chunks.max_chunks = 0;
  EXPECT_FALSE(RebalanceRecordedLoad("deepseek", load, topo, no_chunks).ok());
}

}  // namespace
}  // namespace eplb
