// A GPU's memory under a scenario (engine/gpu_memory.h): the resident terms by hand, the
// scenarios refused because they cannot fit, and the staging budget held by the loop on the host
// backend (real threads moving real bytes) and recorded in the run folder.
#include "eplb/engine/gpu_memory.h"

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "eplb/io/run_folder.h"
#include "eplb/io/scenario_file.h"
#include "host_run.h"

namespace eplb {
namespace {

Scenario Load(const std::string& file, std::vector<std::string> overrides = {}) {
  auto s = LoadScenarioFile(std::string(EPLB_SCENARIO_DIR) + "/" + file, overrides);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? *s : Scenario{};
}

// A scenario that parses but that CheckGpuMemory (what every run checks first) refuses.
std::string Refusal(const std::string& file, std::vector<std::string> overrides) {
  const Scenario s = Load(file, overrides);
  const Status status = CheckGpuMemory(s);
  EXPECT_FALSE(status.ok()) << "accepted with " << ::testing::PrintToString(overrides);
  EXPECT_EQ(status.message().rfind(s.source + ": ", 0), 0u) << status.message();
  return status.message();
}

// DeepSeek-V3 prefill at EP32 on H200s, the default scenario, term by term.
TEST(GpuMemory, TheDefaultScenarioTermByTerm) {
  const GpuMemory m = GpuMemoryOf(Load("deepseek-v3-prefill-ep32.yaml"));
  EXPECT_DOUBLE_EQ(m.capacity, 141e9);                      // the H200 preset
  EXPECT_DOUBLE_EQ(m.dense_weights, 15.6e9);                // 15.6e9 parameters in FP8
  EXPECT_DOUBLE_EQ(m.expert_weights, 58.0 * 9 * 44040192);  // 288 slots / 32 GPUs, 42 MiB each
  EXPECT_DOUBLE_EQ(m.kv_cache, 16384.0 / 32 * 70272);       // prefill: one position per token
  EXPECT_NEAR(m.reserved, 0.1 * 141e9, 1);                  // 1 − memory_utilization 0.9
  EXPECT_DOUBLE_EQ(m.staging_budget, m.headroom());
  EXPECT_NEAR(m.headroom(), 141e9 - 15.6e9 - 58.0 * 9 * 44040192 - 512.0 * 70272 - 14.1e9, 1);
  EXPECT_DOUBLE_EQ(m.largest_layer_staging, 9.0 * 44040192);
}

TEST(GpuMemory, DecodeHoldsEachSequencesContext) {
  const Scenario s =
      Load("deepseek-v3-prefill-ep32.yaml", {"compute.stage=decode", "compute.kv_length=4096",
                                             "workload.tokens_per_step=4096", "compute.gpu=H800"});
  const GpuMemory m = GpuMemoryOf(s);
  EXPECT_DOUBLE_EQ(m.capacity, 80e9);
  EXPECT_DOUBLE_EQ(m.kv_cache, 4096.0 / 32 * 4096 * 70272);  // 128 sequences of 4K per GPU
  // An explicit pool and capacity replace the defaults.
  const GpuMemory set = GpuMemoryOf(Load("deepseek-v3-prefill-ep32.yaml",
                                         {"cluster.kv_cache_gb=30", "cluster.gpu_memory_gb=96"}));
  EXPECT_DOUBLE_EQ(set.kv_cache, 30e9);
  EXPECT_DOUBLE_EQ(set.capacity, 96e9);
  EXPECT_NEAR(set.reserved, 9.6e9, 1);
}

TEST(GpuMemory, ScenariosThatCannotFitAreRefusedNamingTheField) {
  // DeepSeek-V3 on two GPUs: 144 slots of 42 MiB per layer on each.
  const std::string whole =
      Refusal("deepseek-v3-prefill-ep32.yaml", {"cluster.nodes=1", "cluster.gpus_per_node=2"});
  EXPECT_NE(whole.find("cluster.gpu_memory_gb"), std::string::npos) << whole;
  EXPECT_NE(whole.find("the model does not fit"), std::string::npos) << whole;
  EXPECT_NE(whole.find("144 slots per GPU"), std::string::npos) << whole;
  // A budget below one layer whose every slot changes: 9 × 44,040,192 bytes = 0.40 GB.
  const std::string layer =
      Refusal("deepseek-v3-prefill-ep32.yaml", {"migration.max_staging_gb=0.3"});
  EXPECT_NE(layer.find("the staging budget is 0.30 GB (migration.max_staging_gb)"),
            std::string::npos)
      << layer;
  EXPECT_NE(layer.find("cannot stage even one layer"), std::string::npos) << layer;
  EXPECT_NE(layer.find("raise migration.max_staging_gb to at least 0.40"), std::string::npos)
      << layer;
  // A budget beyond what the GPU has left.
  const std::string beyond =
      Refusal("deepseek-v3-prefill-ep32.yaml", {"migration.max_staging_gb=500"});
  EXPECT_NE(beyond.find("migration.max_staging_gb is 500 but a GPU has"), std::string::npos)
      << beyond;
  // Headroom too small for one layer, with no budget set: the capacity is named.
  const std::string tight = Refusal("deepseek-v3-prefill-ep32.yaml",
                                    {"cluster.gpu_memory_gb=43.3", "cluster.kv_cache_gb=0.2"});
  EXPECT_NE(tight.find("cannot stage even one layer"), std::string::npos) << tight;
  EXPECT_NE(tight.find("raise cluster.gpu_memory_gb"), std::string::npos) << tight;
  EXPECT_NE(tight.find("what is left of 43.30 GB"), std::string::npos) << tight;
  EXPECT_FALSE(LoadScenarioFile(std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml",
                                {"cluster.memory_utilization=0"})
                   .ok());
  EXPECT_TRUE(CheckGpuMemory(Load("deepseek-v3-prefill-ep32.yaml")).ok());
  // A run checks it first: nothing runs. tiny holds ~25 MB (2.7 MB dense, 21 MB of experts, 1 MB
  // of KV cache) and leaves 10% in reserve.
  auto run = testing::RunOnHost(Load("tiny.yaml", {"cluster.gpu_memory_gb=0.02", "run.steps=5"}));
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("the model does not fit"), std::string::npos)
      << run.status().message();
}

// Stop-the-world on the tiny scenario stages every changing layer at once, up to 4 layers × 5
// slots of 1 MiB per GPU; a budget of 6 MB holds each GPU to one layer at a time, and every
// rearrangement still completes at its boundary.
TEST(GpuMemory, TheLoopKeepsEachGpuWithinTheStagingBudget) {
  const std::vector<std::string> sync = {"eplb.use_async=false", "run.steps=260"};
  std::vector<std::string> budget = sync;
  budget.push_back("migration.max_staging_gb=0.006");
  auto free_run = testing::RunOnHost(Load("tiny.yaml", sync));
  auto held_run = testing::RunOnHost(Load("tiny.yaml", budget));
  ASSERT_TRUE(free_run.ok()) << free_run.status().message();
  ASSERT_TRUE(held_run.ok()) << held_run.status().message();
  ASSERT_TRUE(held_run->verified.ok()) << held_run->verified.message();
  ASSERT_TRUE(held_run->commits_verified.ok()) << held_run->commits_verified.message();
  const auto peak = [](const RunResult& run) {
    int64_t most = 0;
    for (const RearrangementRecord& r : run.rearrangements) {
      EXPECT_EQ(r.staging_peak_bytes.size(), 4u);
      for (int64_t b : r.staging_peak_bytes) most = std::max(most, b);
    }
    return most;
  };
  ASSERT_EQ(held_run->result.rearrangements.size(), 3u);
  EXPECT_GT(peak(free_run->result), 6'000'000) << "the budget would not bind";
  EXPECT_LE(peak(held_run->result), 6'000'000);
  EXPECT_GE(peak(held_run->result), 1 << 20);
  for (const RearrangementRecord& r : held_run->result.rearrangements) EXPECT_GE(r.end_s, 0);

  // The run folder keeps each GPU's peak and reads it back.
  const auto dir = std::filesystem::path(::testing::TempDir()) / "gpu-memory-run";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(WriteRunFolder(dir.string(), held_run->result).ok());
  auto read = ReadRunFolder(dir.string());
  ASSERT_TRUE(read.ok()) << read.status().message();
  for (size_t i = 0; i < read->run.rearrangements.size(); ++i) {
    EXPECT_EQ(read->run.rearrangements[i].staging_peak_bytes,
              held_run->result.rearrangements[i].staging_peak_bytes);
  }
  const GpuMemory m = GpuMemoryOf(held_run->result.scenario);
  EXPECT_EQ(read->summary.gpu_memory.staging_peak, peak(held_run->result));
  EXPECT_NEAR(read->summary.gpu_memory.peak,
              m.resident() + static_cast<double>(peak(held_run->result)), 1);
  EXPECT_DOUBLE_EQ(read->summary.gpu_memory.staging_budget, 6e6);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace eplb
