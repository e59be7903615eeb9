// Ranks split between "processes" as MPI would split them, played by threads sharing one host
// backend's memory: each process's backend executes its own ranks only (rank % processes), and
// the gate is the minimum over the processes (a barrier of `parties`), as MPI_Allreduce would
// give. A round with a rank of a process that has failed waits for it, as NCCL's sends and
// receives wait for a peer that never posts, until the transfers are aborted.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "eplb/migrate/forwarding_backend.h"
#include "eplb/migrate/host_backend.h"

namespace eplb::testing {

class SharedGate {
 public:
  explicit SharedGate(int parties) : parties_(parties) {}
  int Agree(int value) {
    std::unique_lock lock(mu_);
    const int round = round_;
    min_ = arrived_ == 0 ? value : std::min(min_, value);
    if (++arrived_ == parties_) {
      result_ = min_;
      arrived_ = 0;
      ++round_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return round_ != round; });
    }
    ++calls_;
    return result_;
  }
  int calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }
  // Some process's round failed: its peers' rounds with it will never complete.
  void MarkFailed() { failed_ = true; }
  bool failed() const { return failed_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  const int parties_;
  int arrived_ = 0, round_ = 0, min_ = 0, result_ = 0, calls_ = 0;
  std::atomic<bool> failed_{false};
};

class ProcessBackend final : public ForwardingBackend {
 public:
  // `fail_at`: the number of this process's rounds after which one fails ("GPU lost"); −1 never.
  ProcessBackend(HostBackend& host, SharedGate& gate, int process, int processes, int fail_at)
      : ForwardingBackend(host),
        gate_(gate),
        process_(process),
        processes_(processes),
        fail_at_(fail_at) {}
  ~ProcessBackend() override { JoinWorkers(); }
  bool IsLocal(int rank) const override { return rank % processes_ == process_; }
  int AgreeOnStagedLayers(int staged_here) override { return gate_.Agree(staged_here); }
  std::unique_ptr<Monitor> NewMonitor() override { return NewThreadMonitor(); }
  // A collective, as the device backend's: every process must reach it, workers or not.
  Status BeginRearrangement() override {
    EXPECT_TRUE(workers_.empty()) << "a worker started before the rearrangement began";
    ++begins_;
    return gate_.Agree(1) == 1 ? Status::Ok() : Status::Unavailable("begin");
  }
  Status EndRearrangement() override {
    EXPECT_TRUE(workers_.empty()) << "the rearrangement ended before its workers were joined";
    std::lock_guard lock(mu_);
    aborted_ = false;
    return Status::Ok();
  }
  int begins() const { return begins_; }
  // This process's workers only: each process joins its own.
  void StartWorker(int rank, std::function<void()> body) override {
    EXPECT_TRUE(IsLocal(rank)) << "worker of rank " << rank << " started in process " << process_;
    EXPECT_EQ(begins_, 1) << "worker of rank " << rank << " started before the rearrangement began";
    workers_.emplace_back(std::move(body));
  }
  void JoinWorkers() override {
    for (auto& w : workers_) w.join();
    workers_.clear();
  }
  void AbortTransfers() override {
    std::lock_guard lock(mu_);
    aborted_ = true;
    cv_.notify_all();
  }
  Status ExecuteRound(const StagingTarget& t, const Round& r,
                      std::span<const Transfer> tr) override {
    EXPECT_TRUE(IsLocal(t.rank));
    if (calls_++ == fail_at_) {
      gate_.MarkFailed();
      return Status::IoError("GPU lost");
    }
    for (const Flow& flow : r.flows) {
      const int peer = flow.src_rank == t.rank ? flow.dst_rank : flow.src_rank;
      const bool mine = flow.src_rank == t.rank || flow.dst_rank == t.rank;
      if (mine && !IsLocal(peer) && gate_.failed()) {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return aborted_; });
        return Status::Cancelled("aborted while waiting for a rank of a failed process");
      }
    }
    return ForwardingBackend::ExecuteRound(t, r, tr);
  }
  Status CopyLocal(const StagingTarget& t, std::span<const LocalCopy> c) override {
    EXPECT_TRUE(IsLocal(t.rank));
    return ForwardingBackend::CopyLocal(t, c);
  }
  Status CommitLayer(const StagingTarget& t, std::span<const int32_t> s) override {
    EXPECT_TRUE(IsLocal(t.rank)) << "commit of rank " << t.rank << " in process " << process_;
    return ForwardingBackend::CommitLayer(t, s);
  }

 private:
  SharedGate& gate_;
  const int process_, processes_, fail_at_;
  std::atomic<int> calls_{0};
  int begins_ = 0;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool aborted_ = false;
};

}  // namespace eplb::testing
