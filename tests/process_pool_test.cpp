// base/process_pool.h: jobs in child processes, their progress seen by the parent, failures
// named.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "eplb/base/process_pool.h"

namespace eplb {
namespace {

ProcessJob Steps(std::string name, int64_t steps, bool fail = false) {
  return {std::move(name), steps, [steps, fail](std::atomic<int64_t>& done) {
            for (int64_t s = 1; s <= steps; ++s) done.store(s);
            return fail ? Status::InvalidArgument("as asked") : Status::Ok();
          }};
}

TEST(ProcessPool, RunsEveryJobInAChildAndReportsTheStepsItCounted) {
  std::vector<ProcessJob> jobs = {Steps("a", 3), Steps("b", 5), Steps("c", 0)};
  // A job's side effects are the child's: this process's memory is untouched.
  int touched = 0;
  jobs.push_back({"d", 1, [&touched](std::atomic<int64_t>& done) {
                    touched = 1;
                    done.store(1);
                    return Status::Ok();
                  }});
  int finals = 0, calls = 0;
  std::vector<JobProgress> last;
  const Status s = RunInChildProcesses(jobs, 2, [&](const std::vector<JobProgress>& p, bool final) {
    ASSERT_EQ(p.size(), jobs.size());
    // The first report comes before any child runs; no report shows more than 2 running.
    const auto running = std::count_if(
        p.begin(), p.end(), [](const JobProgress& j) { return j.state == JobState::kRunning; });
    EXPECT_LE(running, calls == 0 ? 0 : 2);
    ++calls;
    finals += final ? 1 : 0;
    last = p;
  });
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(finals, 1);
  EXPECT_EQ(touched, 0);
  ASSERT_EQ(last.size(), 4u);
  const std::vector<int64_t> steps = {3, 5, 0, 1};
  for (size_t i = 0; i < last.size(); ++i) {
    EXPECT_EQ(last[i].name, jobs[i].name);
    EXPECT_EQ(last[i].total_steps, jobs[i].total_steps);
    EXPECT_EQ(last[i].done_steps, steps[i]) << last[i].name;
    EXPECT_EQ(last[i].state, JobState::kDone) << last[i].name;
  }
}

TEST(ProcessPool, NamesTheJobsThatFailedAndRunsTheRest) {
  // A crash fails its job only; the files show that every other job ran.
  const std::string mark = ::testing::TempDir() + "eplb_pool_" + std::to_string(getpid());
  std::vector<ProcessJob> jobs = {Steps("fine", 2),
                                  Steps("refused", 2, /*fail=*/true),
                                  {"crashes", 1,
                                   [](std::atomic<int64_t>&) -> Status {
                                     raise(SIGKILL);
                                     return Status::Ok();
                                   }},
                                  {"writes", 1, [mark](std::atomic<int64_t>& done) {
                                     std::ofstream(mark) << "ran";
                                     done.store(1);
                                     return Status::Ok();
                                   }}};
  std::vector<JobProgress> last;
  const Status s =
      RunInChildProcesses(jobs, 1, [&](const std::vector<JobProgress>& p, bool) { last = p; });
  ASSERT_FALSE(s.ok());
  // A crash is no fault of the input: the whole is a failed run, not bad input.
  EXPECT_EQ(s.code(), Status::Code::kInternal);
  EXPECT_NE(s.message().find("refused"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("crashes"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("fine"), std::string::npos) << s.message();
  ASSERT_EQ(last.size(), 4u);
  EXPECT_EQ(last[0].state, JobState::kDone);
  EXPECT_EQ(last[1].state, JobState::kFailed);
  EXPECT_EQ(last[2].state, JobState::kFailed);
  EXPECT_EQ(last[3].state, JobState::kDone);
  std::ifstream in(mark);
  std::string text;
  in >> text;
  EXPECT_EQ(text, "ran");
  std::remove(mark.c_str());
}

// Jobs that fail together are named in the jobs' order, whichever ends first: a study's error
// reads the same on every run.
TEST(ProcessPool, NamesTheFailedJobsInTheirOrder) {
  const auto slow_failure = [](const char* name, int ms) {
    return ProcessJob{name, 1, [ms](std::atomic<int64_t>&) -> Status {
                        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
                        return Status::Internal("no");
                      }};
  };
  const std::vector<ProcessJob> jobs = {slow_failure("first", 300), slow_failure("second", 0)};
  const Status s = RunInChildProcesses(jobs, 2, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "failed: first, second");
}

// When every failed job failed on its input (a user's policy program, a file it read), the
// whole is bad input too, as one job failing in the foreground would be: the user can fix it.
TEST(ProcessPool, JobsFailingOnTheirInputAreBadInput) {
  const std::vector<ProcessJob> jobs = {Steps("fine", 1), Steps("refused", 1, /*fail=*/true),
                                        Steps("also refused", 1, /*fail=*/true)};
  const Status s = RunInChildProcesses(jobs, 2, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(s.is_bad_input());
  EXPECT_EQ(s.message(), "failed: refused, also refused");
}

TEST(ProcessPool, NoJobsIsSuccessWithAFirstAndAFinalReport) {
  std::vector<bool> finals;
  EXPECT_TRUE(RunInChildProcesses({}, 0, [&](const std::vector<JobProgress>& p, bool final) {
                EXPECT_TRUE(p.empty());
                finals.push_back(final);
              }).ok());
  EXPECT_EQ(finals, (std::vector<bool>{false, true}));
}

}  // namespace
}  // namespace eplb
