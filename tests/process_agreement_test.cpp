// Ranks spanning processes (the device backend under MPI), played by two threads over one
// HostBackend (process_backend.h): a round with a rank of the failed process waits for it, as
// NCCL's sends and receives do, until the transfers are aborted. When one process's first
// round fails, in a stop-the-world rearrangement or an async one, both processes must stop with
// an error, neither may hang in a collective the other never reaches, and every layer stays
// old. A hang is found by running the two in a child process with an alarm.
#include <sys/wait.h>
#include <unistd.h>

#include <random>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "eplb/migrate/host_backend.h"
#include "eplb/migrate/rearranger.h"
#include "process_backend.h"
#include "test_util.h"

namespace eplb {
namespace {

using testing::Drift;
using testing::MakeTopology;
using testing::ProcessBackend;
using testing::RandomPlacement;
using testing::SharedGate;

// Runs both processes' rearrangements and exits 0 when each stopped with its error and left every
// layer old; a hang is the alarm's to end.
[[noreturn]] void RunBothProcesses(bool stop_the_world, int64_t staging_budget) {
  alarm(60);
  const Topology topology = MakeTopology(2, 2, 3, 4096);
  std::mt19937_64 rng(3);
  const int layers = 4;
  const Placement current = RandomPlacement(rng, layers, topology.num_slots(), 8);
  const Placement target = Drift(rng, current, 0.2);
  HostBackend weights(topology, layers, layers, 4096);
  weights.Fill(current);
  SharedGate gate(2);
  ProcessBackend failing(weights, gate, 0, 2, /*fail_at=*/0);
  ProcessBackend waiting(weights, gate, 1, 2, /*fail_at=*/-1);
  RearrangerOptions options;
  options.sync = stop_the_world;
  options.staging_layers = layers;
  options.max_staging_bytes = staging_budget;
  Status result[2];
  bool old[2] = {false, false};
  const auto run = [&](ProcessBackend& backend, int process) {
    Rearranger rearranger(backend, topology, options);
    result[process] = rearranger.Start(current, target);
    while (result[process].ok() && rearranger.in_progress()) {
      auto committed = rearranger.OnStepBoundary();
      if (!committed.ok()) result[process] = committed.status();
    }
    old[process] = rearranger.placement() == current;
  };
  std::thread first(run, std::ref(failing), 0), second(run, std::ref(waiting), 1);
  first.join();
  second.join();
  const bool ok = result[0].message().find("GPU lost") != std::string::npos &&
                  result[1].message().find("another process") != std::string::npos && old[0] &&
                  old[1];
  if (!ok) {
    fmt::print(stderr, "process 0: {} (layers old: {}); process 1: {} (layers old: {})\n",
               result[0].message(), old[0], result[1].message(), old[1]);
  }
  _exit(ok ? 0 : 1);
}

void ExpectBothStop(bool stop_the_world, int64_t staging_budget) {
  const pid_t child = fork();
  if (child == 0) RunBothProcesses(stop_the_world, staging_budget);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_FALSE(WIFSIGNALED(status)) << "the processes hung (signal " << WTERMSIG(status) << ")";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(ProcessAgreement, AFailedProcessStopsAStopTheWorldRearrangementEverywhere) {
  ExpectBothStop(/*stop_the_world=*/true, /*staging_budget=*/0);
}

// With a staging budget, stop-the-world commits layer by layer (Rearranger::CommitAll).
TEST(ProcessAgreement, AFailedProcessStopsABudgetedStopTheWorldRearrangementEverywhere) {
  ExpectBothStop(/*stop_the_world=*/true, /*staging_budget=*/3 * 4096);
}

TEST(ProcessAgreement, AFailedProcessStopsAnAsyncRearrangementEverywhere) {
  ExpectBothStop(/*stop_the_world=*/false, /*staging_budget=*/0);
}

}  // namespace
}  // namespace eplb
