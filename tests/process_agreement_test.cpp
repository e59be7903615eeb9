// Ranks spanning processes (the device backend under MPI), played by two threads: each runs one
// process's rearranger over half the ranks of one HostBackend, and the two agree through a
// two-party all-reduce. A round with a rank of the other process waits for that process, as
// NCCL's sends and receives do, until the transfers are aborted. When one process's workers
// fail during a stop-the-world rearrangement, both processes must stop with an error at the
// same boundary, neither may hang in a collective the other never reaches, and every layer
// stays old.
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "eplb/migrate/host_backend.h"
#include "eplb/migrate/rearranger.h"
#include "eplb/migrate/thread_workers.h"
#include "forwarding_backend.h"
#include "test_util.h"

namespace eplb {
namespace {

using testing::Drift;
using testing::MakeTopology;
using testing::RandomPlacement;

// MPI_Allreduce(MIN) between two parties: each call returns when both have made their call of
// the same number.
class TwoPartyMin {
 public:
  int Reduce(int value) {
    std::unique_lock lock(mu_);
    const uint64_t generation = generation_;
    min_ = arrived_ == 0 ? value : std::min(min_, value);
    if (++arrived_ == 2) {
      result_ = min_;
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return result_;
    }
    cv_.wait(lock, [&] { return generation_ != generation; });
    return result_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;
  int arrived_ = 0, min_ = 0, result_ = 0;
};

class ProcessBackend final : public testing::ForwardingBackend {
 public:
  ProcessBackend(HostBackend& weights, int first_rank, int end_rank, TwoPartyMin& agreement,
                 bool fails)
      : ForwardingBackend(weights),
        first_(first_rank),
        end_(end_rank),
        agreement_(agreement),
        fails_(fails) {}

  bool IsLocal(int rank) const override { return rank >= first_ && rank < end_; }
  int AgreeOnStagedLayers(int staged_here) override { return agreement_.Reduce(staged_here); }
  // This process's workers only: the other process joins its own.
  void StartWorker(int /*rank*/, std::function<void()> body) override {
    workers_.Start(std::move(body));
  }
  void JoinWorkers() override { workers_.JoinAll(); }
  void AbortTransfers() override {
    std::lock_guard lock(mu_);
    aborted_ = true;
    cv_.notify_all();
  }
  Status BeginLayer(const StagingTarget& target) override {
    if (fails_) return Status::Internal(fmt::format("rank {}: injected failure", target.rank));
    return ForwardingBackend::BeginLayer(target);
  }
  Status ExecuteRound(const StagingTarget& target, const Round& round,
                      std::span<const Transfer> transfers) override {
    for (const Flow& flow : round.flows) {
      const int peer = flow.src_rank == target.rank ? flow.dst_rank : flow.src_rank;
      if ((flow.src_rank == target.rank || flow.dst_rank == target.rank) && !IsLocal(peer)) {
        // The failed process never posts its half: only an abort ends the wait.
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return aborted_; });
        return Status::Cancelled(
            fmt::format("rank {}: aborted waiting for rank {}", target.rank, peer));
      }
    }
    return ForwardingBackend::ExecuteRound(target, round, transfers);
  }

 private:
  const int first_, end_;
  TwoPartyMin& agreement_;
  const bool fails_;
  ThreadWorkers workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool aborted_ = false;
};

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
  TwoPartyMin agreement;
  ProcessBackend failing(weights, 0, 2, agreement, /*fails=*/true);
  ProcessBackend waiting(weights, 2, 4, agreement, /*fails=*/false);
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
  const bool ok = result[0].message().find("injected failure") != std::string::npos &&
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
