// ThreadWorkers: every body gets a thread at once, threads are kept between rearrangements,
// JoinAll waits for every body.
#include "eplb/migrate/thread_workers.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
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

// The OS threads the bodies of one RunMeeting ran on.
std::set<std::thread::id> MeetingThreads(ThreadWorkers& workers, int n) {
  Meeting meeting(n);
  std::mutex mu;
  std::set<std::thread::id> ids;
  for (int i = 0; i < n; ++i) {
    workers.Start([&] {
      {
        std::lock_guard lock(mu);
        ids.insert(std::this_thread::get_id());
      }
      EXPECT_TRUE(meeting.Arrive());
    });
  }
  workers.JoinAll();
  return ids;
}

TEST(ThreadWorkers, ThreadsAreKeptForTheNextRoundAndAddedWhenTooFew) {
  ThreadWorkers workers;
  const auto first = MeetingThreads(workers, 4);
  EXPECT_EQ(first.size(), 4u);
  EXPECT_EQ(MeetingThreads(workers, 4), first);  // the same threads, none made
  EXPECT_EQ(workers.threads(), 4u);
  const auto more = MeetingThreads(workers, 9);
  EXPECT_EQ(more.size(), 9u);  // five more, so that all nine meet
  EXPECT_TRUE(std::includes(more.begin(), more.end(), first.begin(), first.end()));
  EXPECT_EQ(workers.threads(), 9u);
  const auto few = MeetingThreads(workers, 2);
  EXPECT_TRUE(std::includes(more.begin(), more.end(), few.begin(), few.end()));
  EXPECT_EQ(workers.threads(), 9u);
}

// Counts its live copies; those on a worker's thread die slowly (the foreground's at once): a
// JoinAll that returned before the bodies' captures were destroyed would still count some.
class SlowToDie {
 public:
  explicit SlowToDie(std::atomic<int>* live)
      : live_(live), foreground_(std::this_thread::get_id()) {
    ++*live_;
  }
  SlowToDie(const SlowToDie& other) : live_(other.live_), foreground_(other.foreground_) {
    ++*live_;
  }
  SlowToDie& operator=(const SlowToDie&) = delete;
  ~SlowToDie() {
    if (std::this_thread::get_id() != foreground_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    --*live_;
  }

 private:
  std::atomic<int>* live_;
  std::thread::id foreground_;
};

TEST(ThreadWorkers, JoinAllWaitsForEveryBodyAndItsCaptures) {
  ThreadWorkers workers;
  workers.JoinAll();  // nothing started: returns at once
  for (int round = 0; round < 10; ++round) {
    std::atomic<int> done{0}, live{0};
    {
      const SlowToDie capture(&live);
      for (int i = 0; i < 6; ++i) workers.Start([&done, capture] { ++done; });
    }
    // The foreground's copies are gone; the bodies' die on their threads.
    workers.JoinAll();
    ASSERT_EQ(done.load(), 6);
    ASSERT_EQ(live.load(), 0) << "round " << round;
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
