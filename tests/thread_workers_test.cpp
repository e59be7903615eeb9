// ThreadWorkers: every body gets a thread at once, threads are kept between rearrangements,
// JoinAll waits for every body.
#include "eplb/migrate/thread_workers.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

namespace eplb {
namespace {

// A barrier the bodies meet at; false when `expected` bodies never all arrived (a body queued
// behind another instead of running beside it), after a generous wait rather than a hang.
class Meeting {
 public:
  explicit Meeting(int expected) : expected_(expected) {}
  bool Arrive() {
    std::unique_lock lock(mu_);
    if (++arrived_ == expected_) cv_.notify_all();
    return cv_.wait_for(lock, std::chrono::seconds(30), [this] { return arrived_ >= expected_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int expected_;
  int arrived_ = 0;
};

// Starts `n` bodies that wait for each other; returns how many met all the others.
int RunMeeting(ThreadWorkers& workers, int n) {
  Meeting meeting(n);
  std::atomic<int> met{0};
  for (int i = 0; i < n; ++i) {
    workers.Start([&] {
      if (meeting.Arrive()) ++met;
    });
  }
  workers.JoinAll();
  return met.load();
}

TEST(ThreadWorkers, BodiesThatWaitForEachOtherAllRunAtOnce) {
  ThreadWorkers workers;
  EXPECT_EQ(RunMeeting(workers, 16), 16);
}

TEST(ThreadWorkers, ThreadsAreKeptForTheNextRoundAndAddedWhenTooFew) {
  ThreadWorkers workers;
  EXPECT_EQ(RunMeeting(workers, 4), 4);
  EXPECT_EQ(workers.threads(), 4u);
  EXPECT_EQ(RunMeeting(workers, 4), 4);
  EXPECT_EQ(workers.threads(), 4u);  // reused, none made
  EXPECT_EQ(RunMeeting(workers, 9), 9);
  EXPECT_EQ(workers.threads(), 9u);  // five more, so that all nine meet
  EXPECT_EQ(RunMeeting(workers, 2), 2);
  EXPECT_EQ(workers.threads(), 9u);
}

TEST(ThreadWorkers, JoinAllWaitsForEveryBodyAndItsCaptures) {
  ThreadWorkers workers;
  workers.JoinAll();  // nothing started: returns at once
  for (int round = 0; round < 50; ++round) {
    std::atomic<int> done{0};
    auto token = std::make_shared<int>(round);
    for (int i = 0; i < 6; ++i) {
      workers.Start([&done, token] {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        ++done;
      });
    }
    workers.JoinAll();
    ASSERT_EQ(done.load(), 6);
    // The bodies' copies of `token` were destroyed before JoinAll returned.
    ASSERT_EQ(token.use_count(), 1);
  }
}

TEST(ThreadWorkers, DestructorWaitsForRunningBodies) {
  std::atomic<int> done{0};
  {
    ThreadWorkers workers;
    for (int i = 0; i < 3; ++i) {
      workers.Start([&done] {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        ++done;
      });
    }
  }
  EXPECT_EQ(done.load(), 3);
}

}  // namespace
}  // namespace eplb
