// PlanPlacementChange and PlanPlacementFiles (usecases/plan.h): the one planning that
// `eplb plan` and eplb.plan share.
#include "eplb/usecases/plan.h"

#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_util.h"

namespace eplb {
namespace {

Topology Cluster(int slots, int gpus, int nodes) {
  return *Topology::FromReplicas(slots, nodes, gpus, TopologyConfig{});
}

// The totals are the layers' schedules added; the comparison is there only when asked for, and
// its entry for the chosen strategy is the chosen schedule's makespan.
TEST(PlanUseCase, TotalsAddTheLayersSchedules) {
  std::mt19937_64 rng(7);
  const Placement old_p = testing::RandomPlacement(rng, 4, 16, 12);
  const Placement new_p = testing::Drift(rng, old_p, 0.5);
  const Topology topology = Cluster(16, 8, 2);
  for (const bool compare : {false, true}) {
    PlanOptions options;
    options.compare_schedules = compare;
    const Result<PlannedMigration> m = PlanPlacementChange(old_p, new_p, topology, options);
    ASSERT_TRUE(m.ok()) << m.status().message();
    ASSERT_EQ(m->plans.size(), m->schedules.size());
    EXPECT_EQ(m->num_layers, 4);
    EXPECT_EQ(m->schedule, ScheduleStrategy::kBest);
    EXPECT_EQ(m->sender_rule, SenderRule::kLocal);
    int rounds = 0;
    double makespan = 0;
    size_t transfers = 0;
    PerLink<int64_t> bytes;
    for (size_t i = 0; i < m->plans.size(); ++i) {
      rounds += m->schedules[i].num_rounds();
      makespan += m->schedules[i].makespan_s;
      transfers += m->plans[i].transfers.size();
      for (LinkClass link : kLinkClasses) bytes[link] += m->schedules[i].bytes[link];
    }
    EXPECT_EQ(m->rounds, rounds);
    EXPECT_DOUBLE_EQ(m->makespan_s, makespan);
    EXPECT_EQ(m->transfers, transfers);
    EXPECT_GT(transfers, 0u);
    EXPECT_EQ(m->bytes[LinkClass::kNic], bytes[LinkClass::kNic]);
    const double best = m->strategy_makespan_s[static_cast<int>(ScheduleStrategy::kBest)];
    EXPECT_DOUBLE_EQ(best, compare ? makespan : 0.0);
  }
}

// vLLM's preserve_intragpu_slots: experts that stay on a GPU keep their slots.
TEST(PlanUseCase, PreservingSlotsLeavesNoLocalCopies) {
  const Placement old_p = *Placement::Create(8, {{0, 1, 2, 3, 4, 5, 6, 7}});
  const Placement new_p = *Placement::Create(8, {{1, 5, 0, 4, 6, 2, 7, 3}});
  PlanOptions options;
  const Result<PlannedMigration> moved = PlanPlacementChange(old_p, new_p, Cluster(8, 2, 1));
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(moved->transfers, 4u);
  EXPECT_EQ(moved->local_copies, 4u);
  options.preserve_slots = true;
  const Result<PlannedMigration> kept =
      PlanPlacementChange(old_p, new_p, Cluster(8, 2, 1), options);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->transfers, 4u);
  EXPECT_EQ(kept->local_copies, 0u);
}

TEST(PlanUseCase, ErrorsNameWhatIsWrong) {
  const Placement four = *Placement::Create(4, {{0, 1, 2, 3}});
  const Placement six = *Placement::Create(4, {{0, 1, 2, 3, 0, 1}});
  const Topology topology = Cluster(4, 2, 1);
  PlanOptions named;
  named.old_name = "a.json";
  named.new_name = "b.json";
  PlanOptions rule;
  rule.sender_rule = "nearest";
  PlanOptions schedule;
  schedule.schedule = "magic";
  PlanFilesRequest missing;
  missing.old_path = "/no/such.json";
  missing.new_path = "/no/other.json";
  struct Case {
    const char* name;
    Status status;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"shape", PlanPlacementChange(four, six, topology).status(),
       "old has 1 layers × 4 slots but new has 1 × 6; they must match"},
      {"named shape", PlanPlacementChange(four, six, topology, named).status(),
       "a.json has 1 layers × 4 slots but b.json has 1 × 6; they must match"},
      {"sender rule", PlanPlacementChange(four, four, topology, rule).status(), "nearest"},
      {"schedule", PlanPlacementChange(four, four, topology, schedule).status(), "magic"},
      {"missing file", PlanPlacementFiles(missing).status(), "/no/such.json: cannot open"},
  };
  for (const Case& c : cases) {
    EXPECT_FALSE(c.status.ok()) << c.name;
    EXPECT_NE(c.status.message().find(c.expected), std::string::npos)
        << c.name << ": " << c.status.message();
  }
}

// The file entry takes the cluster from the files when the request leaves it out.
TEST(PlanUseCase, FilesGiveTheClusterTheyRecord) {
  const std::string dir = ::testing::TempDir();
  const std::string old_path = dir + "/plan_usecase_old.json";
  const std::string new_path = dir + "/plan_usecase_new.json";
  std::ofstream(old_path) << R"({"phy2log": [[0,1,2,3]], "num_gpus": 2, "num_nodes": 2})";
  std::ofstream(new_path) << R"({"phy2log": [[3,2,1,0]]})";
  PlanFilesRequest request;
  request.old_path = old_path;
  request.new_path = new_path;
  const Result<PlannedMigration> m = PlanPlacementFiles(request);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_GT(m->bytes[LinkClass::kNic], 0);  // two nodes: every move crosses a NIC
  request.gpus = 4;
  EXPECT_NE(
      PlanPlacementFiles(request).status().message().find("was made for 2 GPUs but --gpus is 4"),
      std::string::npos);
  request.gpus = 0;
  request.options.old_name = "ignored";
  std::ofstream(new_path) << R"({"phy2log": [[3,2,1,0,1,2]]})";
  EXPECT_NE(PlanPlacementFiles(request).status().message().find(old_path + " has 1 layers"),
            std::string::npos);
}

}  // namespace
}  // namespace eplb
