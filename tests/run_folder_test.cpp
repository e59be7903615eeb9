// The run folder: the loop on the host backend (no simulator needed), written and read back
// field by field, the column table that defines the files, and the reader's errors.
#include "eplb/io/run_folder.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <tuple>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "eplb/base/file_io.h"
#include "eplb/io/scenario_file.h"
#include "host_run.h"

namespace eplb {
namespace {

namespace fs = std::filesystem;
using testing::RunOnHost;

Scenario Tiny(std::vector<std::string> overrides = {}) {
  overrides.push_back("run.steps=260");
  auto s = LoadScenarioFile(std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml", overrides);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return *s;
}

class TempDir {
 public:
  TempDir() : path_(fs::temp_directory_path() / ("eplb-run-folder-" + std::to_string(getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

// The loop runs on the host backend: bytes really move, and every transfer is reported.
TEST(HostRun, AsyncAndStopTheWorldMoveTheRightBytes) {
  for (const char* async : {"true", "false"}) {
    SCOPED_TRACE(std::string("use_async=") + async);
    auto run = RunOnHost(Tiny({std::string("eplb.use_async=") + async}));
    ASSERT_TRUE(run.ok()) << run.status().message();
    EXPECT_TRUE(run->verified.ok()) << run->verified.message();
    const RunResult& r = run->result;
    ASSERT_EQ(r.steps.size(), 260u);
    ASSERT_GE(r.rearrangements.size(), 2u);
    int64_t reported_bytes = 0, recorded_bytes = 0, recorded_transfers = 0;
    for (const TransferRecord& t : r.transfers) {
      reported_bytes += t.bytes;
      EXPECT_LE(t.start_s, t.end_s);
    }
    for (const RearrangementRecord& rr : r.rearrangements) {
      if (rr.end_s < 0) continue;  // unfinished at the end of the run: its transfers may be too
      recorded_transfers += rr.transfers;
      recorded_bytes += rr.bytes.sum();
    }
    EXPECT_GE(reported_bytes, recorded_bytes);
    EXPECT_GE(static_cast<int64_t>(r.transfers.size()), recorded_transfers);
    EXPECT_GT(recorded_transfers, 0);
    if (std::string(async) == "false") {
      for (const RearrangementRecord& rr : r.rearrangements) EXPECT_GE(rr.end_s, rr.start_s);
    }
  }
}

// What `device-run --fail-rank R --at STEP` does on GPUs, on the host backend: the rank is lost
// in the middle of a rearrangement, recovery copies and reloads real bytes, and every layer holds
// its experts' weights after every commit and at the end.
TEST(HostRun, ALostGpuIsRecoveredWithEveryLayerCheckedAfterEachCommit) {
  for (const std::string policy :
       {"deepseek", "replicate-lpt", "fault-tolerant", "deepseek recovery=repair"}) {
    SCOPED_TRACE(policy);
    const bool repair = policy.find("repair") != std::string::npos;
    const Scenario s =
        Tiny({"eplb.num_redundant_experts=16", "eplb.policy=" + policy.substr(0, policy.find(' ')),
              std::string("eplb.recovery=") + (repair ? "repair" : "rebalance"),
              "faults=[{kind: gpu_lost, step: 126, rank: 2}]"});
    auto run = RunOnHost(s);
    ASSERT_TRUE(run.ok()) << run.status().message();
    EXPECT_TRUE(run->commits_verified.ok()) << run->commits_verified.message();
    EXPECT_TRUE(run->verified.ok()) << run->verified.message();
    const RunResult& r = run->result;
    const auto recovery = std::find_if(
        r.rearrangements.begin(), r.rearrangements.end(),
        [](const RearrangementRecord& x) { return x.reason == RearrangeReason::kRecovery; });
    ASSERT_NE(recovery, r.rearrangements.end());
    EXPECT_EQ(recovery->step, 126);
    EXPECT_GE(recovery->end_s, recovery->start_s);
    // After it, rank 2's slots (16..23) hold nothing in any committed layer.
    for (const CommitRecord& c : r.commits) {
      if (c.step < 126) continue;
      for (int slot = 16; slot < 24; ++slot) EXPECT_EQ(c.phy2log[slot], kEmptySlot);
    }
    const RunSummary summary = Summarize(r);
    ASSERT_EQ(summary.faults.size(), 1u);
    EXPECT_TRUE(summary.faults[0].changes_ranks);
    EXPECT_EQ(summary.faults[0].bytes_reloaded, recovery->bytes_reloaded);
    if (policy == "fault-tolerant") {
      EXPECT_EQ(recovery->bytes_reloaded, 0);
    }
    if (repair) {
      // Only the lost experts move, from the backup: nothing is copied between GPUs.
      EXPECT_EQ(recovery->bytes.sum(), 0);
      EXPECT_EQ(recovery->transfers, 0);
    }
  }
}

// Within what the column's format keeps: 9 significant digits or 6 decimals.
void ExpectClose(double written, double read, const char* what) {
  EXPECT_NEAR(written, read, std::max(1e-6, std::abs(written) * 1e-8)) << what;
}

TEST(RunFolder, WhatIsWrittenIsReadBackFieldByField) {
  // With a fault, so that summary.json's faults are read back too (the host backend runs them:
  // its step times follow the step model's).
  Scenario tiny = Tiny();
  tiny.faults = {{FaultKind::kStraggler, 5, 9, 1, -1, LinkClass::kNic, 2}};
  auto host = RunOnHost(tiny);
  ASSERT_TRUE(host.ok()) << host.status().message();
  const RunResult& w = host->result;
  TempDir tmp;
  ASSERT_TRUE(WriteRunFolder(tmp / "run", w).ok());
  auto read = ReadRunFolder(tmp / "run");
  ASSERT_TRUE(read.ok()) << read.status().message();
  const RunResult& r = read->run;

  EXPECT_EQ(ScenarioToYaml(r.scenario), ScenarioToYaml(w.scenario));
  EXPECT_EQ(r.backend, "host");
  EXPECT_EQ(r.skipped_rearrangements, w.skipped_rearrangements);
  EXPECT_DOUBLE_EQ(r.wall_s, w.wall_s);
  EXPECT_EQ(r.peak_rss_bytes, w.peak_rss_bytes);

  // Per-layer balance: spans that cover the run in order, every layer, 6 decimals kept.
  ASSERT_FALSE(w.layer_balance.empty());
  ASSERT_EQ(r.layer_balance.size(), w.layer_balance.size());
  int next_step = 0;
  for (size_t i = 0; i < w.layer_balance.size(); ++i) {
    const LayerBalanceSpan &a = w.layer_balance[i], &b = r.layer_balance[i];
    EXPECT_EQ(b.first_step, next_step);
    EXPECT_EQ(b.first_step, a.first_step);
    EXPECT_EQ(b.last_step, a.last_step);
    next_step = b.last_step + 1;
    ASSERT_EQ(b.balancedness.size(), static_cast<size_t>(w.scenario.model.layers));
    // Half the sixth decimal, and the float the reader holds it in (2^-24 of a value below 1).
    for (size_t l = 0; l < a.balancedness.size(); ++l)
      EXPECT_NEAR(b.balancedness[l], a.balancedness[l], 5e-7 + 6e-8);
  }
  EXPECT_EQ(next_step, static_cast<int>(w.steps.size()));

  ASSERT_EQ(r.steps.size(), w.steps.size());
  for (size_t i = 0; i < w.steps.size(); ++i) {
    const StepRecord &a = w.steps[i], &b = r.steps[i];
    EXPECT_EQ(a.step, b.step);
    ExpectClose(a.start_s, b.start_s, "time_s");
    ExpectClose(a.step_s, b.step_s, "step_s");
    ExpectClose(a.idle_s, b.idle_s, "idle_step_s");
    ExpectClose(a.balancedness, b.balancedness, "balancedness");
    ExpectClose(a.imbalance_ratio, b.imbalance_ratio, "imbalance_ratio");
    EXPECT_EQ(a.bytes_in_flight, b.bytes_in_flight);
    ExpectClose(a.stalled_s, b.stalled_s, "stalled_s");
  }
  ASSERT_EQ(r.transfers.size(), w.transfers.size());
  for (size_t i = 0; i < w.transfers.size(); ++i) {
    const TransferRecord &a = w.transfers[i], &b = r.transfers[i];
    EXPECT_EQ(std::tie(a.layer, a.expert, a.src_rank, a.dst_rank, a.bytes, a.link),
              std::tie(b.layer, b.expert, b.src_rank, b.dst_rank, b.bytes, b.link));
    ExpectClose(a.start_s, b.start_s, "start_s");
    ExpectClose(a.end_s, b.end_s, "end_s");
  }
  ASSERT_EQ(r.rearrangements.size(), w.rearrangements.size());
  const std::vector<double> following = FollowingBalancedness(w);
  for (size_t i = 0; i < w.rearrangements.size(); ++i) {
    const RearrangementRecord &a = w.rearrangements[i], &b = r.rearrangements[i];
    EXPECT_EQ(std::tie(a.step, a.layers, a.transfers, a.bytes),
              std::tie(b.step, b.layers, b.transfers, b.bytes));
    ExpectClose(a.start_s, b.start_s, "start_s");
    ExpectClose(a.end_s, b.end_s, "end_s");
    ExpectClose(a.predicted_makespan_s, b.predicted_makespan_s, "predicted_makespan_s");
    ExpectClose(a.lower_bound_s, b.lower_bound_s, "lower_bound_s");
    EXPECT_NEAR(a.policy_ms, b.policy_ms, 5e-4);
    ExpectClose(a.window_balancedness_before, b.window_balancedness_before, "before");
    ExpectClose(a.window_balancedness_after, b.window_balancedness_after, "after");
    ExpectClose(a.window_balancedness_bound, b.window_balancedness_bound, "bound");
    ExpectClose(following[i], read->following_balancedness[i], "following_balancedness");
    EXPECT_EQ(a.window_load, b.window_load);  // floats, written shortest and exact
  }
  EXPECT_TRUE(read->has_loads);
  ASSERT_EQ(r.commits.size(), w.commits.size());
  for (size_t i = 0; i < w.commits.size(); ++i) {
    EXPECT_EQ(r.commits[i].step, w.commits[i].step);
    EXPECT_EQ(r.commits[i].layer, w.commits[i].layer);
    EXPECT_EQ(r.commits[i].phy2log, w.commits[i].phy2log);
    ExpectClose(w.commits[i].time_s, r.commits[i].time_s, "commit time_s");
  }
  auto initial =
      Placement::Initial(w.scenario.model.layers, w.scenario.model.experts, w.scenario.num_slots());
  ASSERT_EQ(read->initial_phy2log.size(), static_cast<size_t>(w.scenario.model.layers));
  for (int l = 0; l < w.scenario.model.layers; ++l) {
    const auto row = initial->phy2log(l);
    EXPECT_EQ(read->initial_phy2log[l], std::vector<int32_t>(row.begin(), row.end()));
  }

  // The summary, typed, equals the one computed from what was written.
  const RunSummary a = Summarize(w), &b = read->summary;
  EXPECT_EQ(a.scenario, b.scenario);
  EXPECT_EQ(a.steps, b.steps);
  EXPECT_DOUBLE_EQ(a.step_time_s.p99, b.step_time_s.p99);
  EXPECT_DOUBLE_EQ(a.balancedness.mean, b.balancedness.mean);
  EXPECT_EQ(a.rearrangements.started, b.rearrangements.started);
  EXPECT_EQ(a.rearrangements.completed, b.rearrangements.completed);
  EXPECT_EQ(a.bytes_moved_nvlink, b.bytes_moved_nvlink);
  EXPECT_EQ(a.bytes_moved_nic, b.bytes_moved_nic);
  EXPECT_EQ(a.transfers, b.transfers);
  ASSERT_EQ(a.faults.size(), 1u);
  ASSERT_EQ(b.faults.size(), 1u);
  for (size_t i = 0; i < a.faults.size(); ++i) {
    EXPECT_EQ(a.faults[i].kind, b.faults[i].kind);
    EXPECT_EQ(a.faults[i].until, b.faults[i].until);
    EXPECT_DOUBLE_EQ(a.faults[i].step_time_mean_s, b.faults[i].step_time_mean_s);
  }
}

// The table defines the files: every CSV's header is its columns' names, in order, and every
// column says what it means.
TEST(RunFolder, TheColumnTableDefinesEveryCsvHeader) {
  auto host = RunOnHost(Tiny());
  ASSERT_TRUE(host.ok());
  TempDir tmp;
  ASSERT_TRUE(WriteRunFolder(tmp / "run", host->result).ok());
  int csv_files = 0;
  for (const RunFolderFile& file : RunFolderFiles()) {
    SCOPED_TRACE(std::string(file.name));
    EXPECT_TRUE(fs::exists(tmp / ("run/" + std::string(file.name))));
    if (file.columns.empty()) continue;
    ++csv_files;
    std::vector<std::string_view> names;
    for (const RunFolderColumn& c : file.columns) {
      names.push_back(c.name);
      EXPECT_FALSE(c.meaning.empty()) << c.name;
    }
    const std::string header = fmt::format("{}", fmt::join(names, ","));
    auto text = ReadTextFile(tmp / ("run/" + std::string(file.name)));
    ASSERT_TRUE(text.ok());
    EXPECT_EQ(text->substr(0, text->find('\n')), header);
  }
  EXPECT_EQ(csv_files, 5);
  // And the writer writes no file the table does not describe.
  const auto written = std::distance(fs::directory_iterator(tmp / "run"), fs::directory_iterator());
  EXPECT_EQ(static_cast<size_t>(written), RunFolderFiles().size());
}

// The typed tables (what the Python module reads) come from the parse that checks the folder:
// every CSV file in RunFolderFiles' order, its columns in the file's order and types, and the
// values the records hold.
TEST(RunFolder, TypedTablesHoldWhatTheRecordsHold) {
  Scenario tiny = Tiny();
  tiny.faults = {{FaultKind::kStraggler, 5, 9, 1, -1, LinkClass::kNic, 2}};
  auto host = RunOnHost(tiny);
  ASSERT_TRUE(host.ok());
  TempDir tmp;
  ASSERT_TRUE(WriteRunFolder(tmp / "run", host->result).ok());
  auto folder = ReadRunFolder(tmp / "run");
  auto tables = ReadRunFolderTables(tmp / "run");
  ASSERT_TRUE(folder.ok() && tables.ok()) << tables.status().message();
  std::vector<const RunFolderFile*> expected;
  for (const RunFolderFile& file : RunFolderFiles()) {
    if (!file.columns.empty()) expected.push_back(&file);
  }
  ASSERT_EQ(tables->size(), expected.size());
  const RunResult& run = folder->run;
  using Kind = RunFolderTable::Column::Kind;
  for (size_t t = 0; t < tables->size(); ++t) {
    const RunFolderTable& table = (*tables)[t];
    EXPECT_EQ(table.file, expected[t]->name);
    ASSERT_EQ(table.columns.size(), expected[t]->columns.size()) << table.file;
    for (size_t c = 0; c < table.columns.size(); ++c)
      EXPECT_EQ(table.columns[c].name, expected[t]->columns[c].name);
  }
  auto column = [&](size_t t, std::string_view name) -> const RunFolderTable::Column& {
    for (const auto& c : (*tables)[t].columns) {
      if (c.name == name) return c;
    }
    ADD_FAILURE() << name;
    return (*tables)[t].columns[0];
  };
  const auto& step = column(0, "step");
  const auto& balancedness = column(0, "balancedness");
  ASSERT_EQ(step.kind, Kind::kInteger);
  ASSERT_EQ(balancedness.kind, Kind::kReal);
  ASSERT_EQ(step.integers.size(), run.steps.size());
  for (size_t i = 0; i < run.steps.size(); ++i) {
    EXPECT_EQ(step.integers[i], run.steps[i].step);
    EXPECT_DOUBLE_EQ(balancedness.reals[i], run.steps[i].balancedness);
  }
  const auto& bytes = column(1, "bytes");
  const auto& link = column(1, "link");
  ASSERT_EQ(link.kind, Kind::kText);
  ASSERT_FALSE(run.transfers.empty());
  ASSERT_EQ(bytes.integers.size(), run.transfers.size());
  for (size_t i = 0; i < run.transfers.size(); ++i) {
    EXPECT_EQ(bytes.integers[i], run.transfers[i].bytes);
    EXPECT_EQ(link.texts[i], LinkClassName(run.transfers[i].link));
  }
  const auto& reason = column(2, "reason");
  ASSERT_EQ(reason.texts.size(), run.rearrangements.size());
  for (size_t i = 0; i < run.rearrangements.size(); ++i)
    EXPECT_EQ(reason.texts[i], RearrangeReasonName(run.rearrangements[i].reason));
}

// Rewrites DIR's manifest for the files now there, as WriteFolderAtomically would have.
void Restamp(const std::string& dir) {
  ASSERT_TRUE(WriteFolderManifest(dir, "run").ok());
}

// Each kind of damage is an error naming the file and the line, never a crash or a half-read
// folder. The manifest is restamped after each damage, as a faulty writer would have done, so
// that what is tested is each file's own reader.
TEST(RunFolder, DamagedFilesAreErrorsNamingFileAndLine) {
  auto host = RunOnHost(Tiny());
  ASSERT_TRUE(host.ok());
  TempDir tmp;
  const std::string good = tmp / "good";
  ASSERT_TRUE(WriteRunFolder(good, host->result).ok());
  struct Case {
    const char* name;
    const char* file;
    const char* content;  // nullptr: remove the file
    const char* expected;
  };
  const Case cases[] = {
      {"no-summary", "summary.json", nullptr, "summary.json: cannot open"},
      {"summary-field", "summary.json", "{\"scenario\": \"tiny\"}",
       "summary.json: field 'backend' is missing"},
      {"later-format", "summary.json",
       "{\"tool\": \"eplb 9.0\", \"format_version\": 99, \"scenario\": \"tiny\"}",
       "summary.json: format_version is 99, written by a later eplb (eplb 9.0)"},
      {"format-not-integer", "summary.json", "{\"format_version\": \"1\"}",
       "summary.json: field 'format_version' is \"1\"; expected an integer"},
      {"short-line", "transfers.csv",
       "layer,expert,src_rank,dst_rank,bytes,link,start_s,end_s\n0,1,0,1,100,nvlink\n",
       "transfers.csv:2: 6 fields, expected 8"},
      {"bad-link", "transfers.csv",
       "layer,expert,src_rank,dst_rank,bytes,link,start_s,end_s\n0,1,0,1,100,pcie,0,1\n",
       "transfers.csv:2: link 'pcie': valid values are nvlink, nic"},
      {"junk-number", "transfers.csv",
       "layer,expert,src_rank,dst_rank,bytes,link,start_s,end_s\n0,1,0,1,100junk,nic,0,1\n",
       "transfers.csv:2: bytes '100junk' is not an integer"},
      {"rank-outside", "transfers.csv",
       "layer,expert,src_rank,dst_rank,bytes,link,start_s,end_s\n0,1,0,9,100,nic,0,1\n",
       "transfers.csv:2: layer 0 / ranks 0 -> 9 outside"},
      {"nan-time", "metrics.csv",
       "step,time_s,step_s,idle_step_s,balancedness,imbalance_ratio,bytes_in_flight,stalled_s\n"
       "0,nan,1,1,1,0,0,0\n",
       "metrics.csv:2: time_s 'nan' is not a finite number"},
      {"bad-header", "metrics.csv", "step,time\n1,2\n", "metrics.csv:1: the header should be"},
      {"bad-placement", "placements.jsonl", "{\"step\": -1, \"layer\": 0, \"phy2log\": [1,2\n",
       "placements.jsonl:1:"},
      {"no-initial", "placements.jsonl", "", "no initial placement (step -1) for layer 0"},
      {"loads-missing-a-line", "loads.jsonl", "", "loads.jsonl: 0 lines for the "},
      {"bad-load", "loads.jsonl", "{\"step\": 24, \"time_s\": 0, \"load\": [[1]]}\n",
       "loads.jsonl:1: load is not 4 layers × 16 experts"},
      // Found by fuzzing: nlohmann's get<int>() of 1e60 is undefined behaviour.
      {"real-step", "placements.jsonl",
       "{\"step\": 1.13e60, \"time_s\": 0, \"layer\": 0, \"phy2log\": []}\n",
       "placements.jsonl:1: 'step' is 1.13e+60; expected an integer within -1..2147483647"},
      {"load-beyond-float", "loads.jsonl", "{\"step\": 24, \"time_s\": 0, \"load\": [[1e300]]}\n",
       "loads.jsonl:1: load is not 4 layers × 16 experts"},
      // Values the writer never writes.
      {"ends-before-start", "transfers.csv",
       "layer,expert,src_rank,dst_rank,bytes,link,start_s,end_s\n0,1,0,1,100,nic,2,1\n",
       "transfers.csv:2: end_s 1 is before start_s 2"},
      {"negative-bytes", "transfers.csv",
       "layer,expert,src_rank,dst_rank,bytes,link,start_s,end_s\n0,1,0,1,-5,nic,0,1\n",
       "transfers.csv:2: bytes is -5"},
      // Times outside the run's span (260 steps of well under a second each): the viewer would
      // scale its timeline to them.
      {"transfer-ends-past-the-run", "transfers.csv",
       "layer,expert,src_rank,dst_rank,bytes,link,start_s,end_s\n0,1,0,1,5,nic,0,1e300\n",
       "transfers.csv:2: end_s 1e+300 is past the run's end"},
      {"transfer-starts-past-the-run", "transfers.csv",
       "layer,expert,src_rank,dst_rank,bytes,link,start_s,end_s\n0,1,0,1,5,nic,0,0.001\n"
       "0,2,0,1,5,nic,1e6,1e6\n",
       "transfers.csv:3: end_s 1000000 is past the run's end"},
      {"transfer-ends-at-infinity", "transfers.csv",
       "layer,expert,src_rank,dst_rank,bytes,link,start_s,end_s\n0,1,0,1,5,nic,0,inf\n",
       "transfers.csv:2: end_s 'inf' is not a finite number"},
      {"expert-outside", "transfers.csv",
       "layer,expert,src_rank,dst_rank,bytes,link,start_s,end_s\n0,99,0,1,5,nic,0,1\n",
       "transfers.csv:2: expert 99 is outside the scenario's 0..15"},
      {"steps-out-of-order", "metrics.csv",
       "step,time_s,step_s,idle_step_s,balancedness,imbalance_ratio,bytes_in_flight,stalled_s\n"
       "1,0,1,1,1,1,0,0\n",
       "metrics.csv:2: step 1 where step 0 comes next"},
      {"balancedness-above-1", "metrics.csv",
       "step,time_s,step_s,idle_step_s,balancedness,imbalance_ratio,bytes_in_flight,stalled_s\n"
       "0,0,1,1,1.5,1,0,0\n",
       "metrics.csv:2: balancedness 1.5 is outside [0, 1]"},
      {"negative-step-time", "metrics.csv",
       "step,time_s,step_s,idle_step_s,balancedness,imbalance_ratio,bytes_in_flight,stalled_s\n"
       "0,0,-1,1,1,1,0,0\n",
       "metrics.csv:2: step_s is -1; it is never negative"},
      // Files that contradict summary.json: a file cut at a line boundary parses.
      // One step as long as the whole run, so that the transfers (as late as a slow build's host
      // run makes them) lie within it and the step count is what is wrong.
      {"fewer-steps", "metrics.csv",
       "step,time_s,step_s,idle_step_s,balancedness,imbalance_ratio,bytes_in_flight,stalled_s\n"
       "0,0,1000,1,1,1,0,0\n",
       "metrics.csv has 1 steps but summary.json says 260"},
      {"fewer-rearrangements", "rearrangements.csv", nullptr, "rearrangements.csv: cannot open"},
      {"layer-skipped", "layer_balancedness.csv",
       "first_step,last_step,layer,balancedness\n0,0,0,0.5\n0,0,2,0.5\n",
       "layer_balancedness.csv:3: layer 2 where layer 1 comes next"},
      {"layer-balance-above-1", "layer_balancedness.csv",
       "first_step,last_step,layer,balancedness\n0,0,0,1.5\n",
       "layer_balancedness.csv:2: balancedness 1.5 is outside [0, 1]"},
      {"memory-rank-skipped", "gpu_memory.csv",
       "rearrangement,step,rank,staging_peak_bytes,peak_memory_bytes\n0,24,1,0,0\n",
       "gpu_memory.csv:2: rank 1 where rank 0 comes next"},
      {"memory-beyond-rearrangements", "gpu_memory.csv",
       "rearrangement,step,rank,staging_peak_bytes,peak_memory_bytes\n7,24,0,0,0\n",
       "gpu_memory.csv:2: rearrangement 7 where one of 0..2 comes next"},
      {"memory-wrong-step", "gpu_memory.csv",
       "rearrangement,step,rank,staging_peak_bytes,peak_memory_bytes\n0,25,0,0,0\n",
       "gpu_memory.csv:2: step 25 but rearrangements.csv has rearrangement 0 at step 24"},
      {"memory-not-resident-plus-staged", "gpu_memory.csv",
       "rearrangement,step,rank,staging_peak_bytes,peak_memory_bytes\n0,24,0,5,5\n",
       "gpu_memory.csv:2: peak_memory_bytes 5 is not the scenario's resident"},
      {"memory-ranks-cut", "gpu_memory.csv",
       "rearrangement,step,rank,staging_peak_bytes,peak_memory_bytes\n",
       "gpu_memory.csv: its largest staging_peak_bytes is 0 but summary.json"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string dir = tmp / c.name;
    fs::copy(good, dir);
    if (c.content == nullptr) {
      fs::remove(dir + "/" + c.file);
    } else {
      std::ofstream(dir + "/" + c.file, std::ios::trunc) << c.content;
    }
    Restamp(dir);
    auto read = ReadRunFolder(dir);
    ASSERT_FALSE(read.ok());
    EXPECT_NE(read.status().message().find(c.expected), std::string::npos)
        << read.status().message();
  }
  EXPECT_EQ(ReadRunFolder(tmp / "absent").status().code(), Status::Code::kNotFound);
  // A round in flight when the last step ended records its transfers after the run's end: within
  // TransferEndLimit (the run's length or 1 s past it, whichever is more; the host run's length is
  // its wall time, longer under a sanitizer) they are read.
  const StepRecord& last = host->result.steps.back();
  const double end = last.start_s + last.step_s + last.stalled_s;
  const double slack = end > 1 ? end : 1.0;
  for (const auto& [name, end_s, ok] : {std::tuple{"in-flight-at-the-end", end + 0.9 * slack, true},
                                        {"past-the-limit", end + 1.1 * slack, false}}) {
    SCOPED_TRACE(name);
    const std::string dir = tmp / name;
    fs::copy(good, dir);
    std::ofstream(dir + "/transfers.csv", std::ios::trunc)
        << "layer,expert,src_rank,dst_rank,bytes,link,start_s,end_s\n"
        << fmt::format("0,1,0,1,5,nic,{},{}\n", end - 1e-3, end_s);
    Restamp(dir);
    EXPECT_EQ(ReadRunFolder(dir).ok(), ok) << ReadRunFolder(dir).status().message();
  }
}

// Without restamping, the manifest catches what no single file's reader can: a file cut at a
// line boundary, one removed, a folder never finished.
TEST(RunFolder, TheManifestRefusesUnfinishedAndChangedFolders) {
  auto host = RunOnHost(Tiny());
  ASSERT_TRUE(host.ok());
  TempDir tmp;
  const std::string good = tmp / "good";
  ASSERT_TRUE(WriteRunFolder(good, host->result).ok());
  ASSERT_TRUE(ReadRunFolder(good).ok());
  const auto damaged = [&](const std::string& name,
                           const std::function<void(const std::string&)>& damage) {
    const std::string dir = tmp / name;
    fs::copy(good, dir);
    damage(dir);
    auto read = ReadRunFolder(dir);
    EXPECT_FALSE(read.ok()) << name;
    return read.ok() ? std::string() : read.status().message();
  };
  const std::string cut = damaged("cut", [](const std::string& dir) {
    auto text = ReadTextFile(dir + "/metrics.csv");
    ASSERT_TRUE(text.ok());
    const std::string head = text->substr(0, text->find('\n', text->find('\n') + 1) + 1);
    std::ofstream(dir + "/metrics.csv", std::ios::trunc) << head;
  });
  EXPECT_NE(cut.find("metrics.csv is "), std::string::npos) << cut;
  EXPECT_NE(cut.find("truncated or changed"), std::string::npos) << cut;
  const std::string gone =
      damaged("gone", [](const std::string& dir) { fs::remove(dir + "/trace.json"); });
  EXPECT_NE(gone.find("lists trace.json, which is missing"), std::string::npos) << gone;
  const std::string unfinished =
      damaged("unfinished", [](const std::string& dir) { fs::remove(dir + "/manifest.tsv"); });
  EXPECT_NE(unfinished.find("not a finished run folder (no manifest.tsv"), std::string::npos)
      << unfinished;
  // Another run's file of the same size (here: one digit changed) is caught by its checksum.
  const std::string swapped = damaged("swapped", [](const std::string& dir) {
    auto text = ReadTextFile(dir + "/metrics.csv");
    ASSERT_TRUE(text.ok());
    std::string other = *text;
    const size_t digit = other.find_last_of("0123456789");
    other[digit] = other[digit] == '1' ? '2' : '1';
    std::ofstream(dir + "/metrics.csv", std::ios::trunc) << other;
  });
  EXPECT_NE(swapped.find("metrics.csv has checksum"), std::string::npos) << swapped;
  // Folders written before checksums (manifest v1, sizes only) are still read.
  const std::string v1_dir = tmp / "v1";
  fs::copy(good, v1_dir);
  {
    auto manifest = ReadTextFile(v1_dir + "/manifest.tsv");
    ASSERT_TRUE(manifest.ok());
    std::string v1 = "# eplb folder manifest v1\n";
    std::istringstream lines(*manifest);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("# ", 0) == 0) continue;
      if (line.rfind("file\t", 0) == 0) line = line.substr(0, line.rfind('\t'));
      v1 += line + "\n";
    }
    std::ofstream(v1_dir + "/manifest.tsv", std::ios::trunc) << v1;
  }
  EXPECT_TRUE(ReadRunFolder(v1_dir).ok());
  const std::string partial = damaged("good.partial-4242", [](const std::string&) {});
  EXPECT_NE(partial.find("an unfinished run folder"), std::string::npos) << partial;
}

// summary.json of DIR changed by `change`, and the manifest restamped: what is tested is the
// summary's reader, not the manifest.
void EditSummary(const std::string& dir, const std::function<void(nlohmann::json&)>& change) {
  auto text = ReadTextFile(dir + "/summary.json");
  ASSERT_TRUE(text.ok());
  nlohmann::json summary = nlohmann::json::parse(*text);
  change(summary);
  std::ofstream(dir + "/summary.json", std::ios::trunc) << summary.dump(2);
  Restamp(dir);
}

// A folder eplb did not write as it is (tampered with, or assembled by hand) is refused whole,
// the error naming the file and, for summary.json, the field, its value and what is valid. The
// same checks are Python's (python/tests/test_hardening.py), which calls this reader.
TEST(RunFolder, TamperedFoldersAreRefusedNamingFileAndField) {
  auto host = RunOnHost(Tiny());
  ASSERT_TRUE(host.ok());
  TempDir tmp;
  const std::string good = tmp / "good";
  ASSERT_TRUE(WriteRunFolder(good, host->result).ok());
  ASSERT_TRUE(ReadRunFolder(good).ok());
  using Json = nlohmann::json;
  struct Case {
    const char* name;
    std::function<void(const std::string&)> tamper;
    const char* expected;
  };
  const Case cases[] = {
      // The manifest vouches only for the files it lists: the rest must not be there.
      {"manifest-lists-no-files",
       [](const std::string& dir) {
         std::ofstream(dir + "/manifest.tsv", std::ios::trunc)
             << "# eplb folder manifest v2\nkind\trun\n";
       },
       "gpu_memory.csv, layer_balancedness.csv, loads.jsonl and 7 more are not listed in "
       "manifest.tsv: the folder was changed after eplb wrote it"},
      {"unlisted-file",
       [](const std::string& dir) { std::ofstream(dir + "/notes.txt") << "mine\n"; },
       "unlisted-file: notes.txt is not listed in manifest.tsv"},
      {"unlisted-file-in-a-subfolder",
       [](const std::string& dir) {
         fs::create_directories(dir + "/extra");
         std::ofstream(dir + "/extra/x.csv") << "1\n";
       },
       "extra/x.csv is not listed in manifest.tsv"},
      // The same bytes through a link: sizes and checksums agree, the link is still refused,
      // before anything is read through it.
      {"symbolic-link",
       [&](const std::string& dir) {
         const std::string elsewhere = tmp / "elsewhere.yaml";
         fs::rename(dir + "/scenario.yaml", elsewhere);
         fs::create_symlink(elsewhere, dir + "/scenario.yaml");
       },
       "scenario.yaml is a symbolic link; eplb writes none"},
      {"manifest-is-a-link",
       [&](const std::string& dir) {
         const std::string elsewhere = tmp / "elsewhere.tsv";
         fs::rename(dir + "/manifest.tsv", elsewhere);
         fs::create_symlink(elsewhere, dir + "/manifest.tsv");
       },
       "manifest.tsv is a symbolic link; eplb writes none"},
      {"another-kind",
       [](const std::string& dir) { ASSERT_TRUE(WriteFolderManifest(dir, "comparison").ok()); },
       "an eplb comparison folder, not a run folder"},
      // summary.json's numbers, each in its range (summary_json.cpp's field table).
      {"balancedness-5",
       [](const std::string& dir) {
         EditSummary(dir, [](Json& s) { s["balancedness"]["mean"] = 5; });
       },
       "summary.json: field 'balancedness.mean' is 5; a balancedness is within [0, 1]"},
      {"negative-step-time",
       [](const std::string& dir) {
         EditSummary(dir, [](Json& s) { s["step_time_s"]["max"] = -1.0; });
       },
       "summary.json: field 'step_time_s.max' is -1.0; it is never negative"},
      {"nan-as-a-string",
       [](const std::string& dir) {
         EditSummary(dir, [](Json& s) { s["latency_s"]["p99"] = "NaN"; });
       },
       "summary.json: field 'latency_s.p99' is \"NaN\"; expected a number"},
      // A number no double holds is refused by the JSON parser, before any range.
      {"beyond-a-double",
       [](const std::string& dir) {
         EditSummary(dir, [](Json& s) { s["wall_s"] = 1; });
         auto text = ReadTextFile(dir + "/summary.json");
         ASSERT_TRUE(text.ok());
         std::string changed = *text;
         const size_t at = changed.find("\"wall_s\": 1");
         ASSERT_NE(at, std::string::npos);
         changed.replace(at, 11, "\"wall_s\": 1e400");
         std::ofstream(dir + "/summary.json", std::ios::trunc) << changed;
         Restamp(dir);
       },
       "number overflow parsing '1e400' (numbers must be within the range of a double"},
      {"negative-count",
       [](const std::string& dir) {
         EditSummary(dir, [](Json& s) { s["rearrangements"]["skipped"] = -3; });
       },
       "summary.json: field 'rearrangements.skipped' is -3; it is never negative"},
      // Read into an int64 it would wrap to a negative count.
      {"count-beyond-int64",
       [](const std::string& dir) {
         EditSummary(dir, [](Json& s) { s["transfers"] = uint64_t{1} << 63; });
       },
       "summary.json: field 'transfers' is 9223372036854775808; expected an integer within [0, "
       "9223372036854775807]"},
      {"negative-memory",
       [](const std::string& dir) {
         EditSummary(dir, [](Json& s) { s["gpu_memory"]["kv_cache_bytes"] = -1e9; });
       },
       "summary.json: field 'gpu_memory.kv_cache_bytes' is -1000000000.0; it is never negative"},
      {"least-above-the-mean",
       [](const std::string& dir) {
         EditSummary(dir, [](Json& s) {
           s["balancedness"]["mean"] = 0.5;
           s["balancedness"]["min"] = 0.75;
         });
       },
       "summary.json: field 'balancedness.min' is 0.75, above field 'balancedness.mean' (0.5)"},
      {"fault-step-negative",
       [](const std::string& dir) {
         EditSummary(dir, [](Json& s) {
           s["faults"] = Json::array({{{"kind", "slow_link"},
                                       {"step", -4},
                                       {"until", 10},
                                       {"start_s", 0},
                                       {"end_s", 1},
                                       {"steps", 10},
                                       {"step_time_mean_s", 1},
                                       {"baseline_step_time_mean_s", 1}}});
         });
       },
       "summary.json: faults[0]: field 'step' is -4; it is never negative"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string dir = tmp / c.name;
    fs::copy(good, dir);
    c.tamper(dir);
    auto read = ReadRunFolder(dir);
    ASSERT_FALSE(read.ok());
    EXPECT_NE(read.status().message().find(c.expected), std::string::npos)
        << read.status().message();
  }
  // Folders from before a field was written still read: each later object and field removed.
  const std::string older = tmp / "older";
  fs::copy(good, older);
  EditSummary(older, [](Json& s) {
    for (const char* later : {"measured", "latency_s", "inter_token_latency_s", "gpu_memory",
                              "faults", "format_version"})
      s.erase(later);
    s["rearrangements"].erase("held");
  });
  auto read = ReadRunFolder(older);
  EXPECT_TRUE(read.ok()) << read.status().message();
  // What eplb writes at the edges of each range is read: times of 0 (a backend whose clock did
  // not move), a balancedness of exactly 1 and 0, a recovery not within the run (-1).
  const std::string edges = tmp / "edges";
  fs::copy(good, edges);
  EditSummary(edges, [](Json& s) {
    s["step_time_s"] = {{"mean", 0}, {"p50", 0}, {"p99", 0}, {"max", 0}};
    s["balancedness"] = {{"mean", 1}, {"min", 0}};
    s["wall_s"] = 0;
  });
  read = ReadRunFolder(edges);
  EXPECT_TRUE(read.ok()) << read.status().message();
}

}  // namespace
}  // namespace eplb
