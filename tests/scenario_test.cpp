// Scenario files: defaults, overrides, the shipped scenarios, and one test per kind of error,
// each checking that the message names the file, line and field.
#include "eplb/engine/scenario.h"
#include "eplb/io/scenario_file.h"

#include <filesystem>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "eplb/base/file_io.h"
#include "eplb/engine/workload.h"
#include "test_util.h"

namespace eplb {
namespace {

std::string Err(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  auto s = ParseScenario(yaml, "s.yaml", overrides);
  return s.ok() ? "ok" : s.status().message();
}

TEST(Scenario, DefaultsDescribeDeepSeekV3PrefillEp32) {
  auto s = ParseScenario(DefaultScenarioText(), "default");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->name, "deepseek-v3-prefill-ep32");
  EXPECT_EQ(s->num_gpus(), 32);
  EXPECT_EQ(s->num_slots(), 288);
  EXPECT_EQ(s->topology().slots_per_gpu(), 9);
  // Effective bandwidths: nominal × efficiency, NIC limited by PCIe when slower.
  EXPECT_DOUBLE_EQ(s->topology().link(LinkClass::kNvlink).bandwidth_bytes_per_s, 450e9 * 0.8);
  EXPECT_DOUBLE_EQ(s->topology().link(LinkClass::kNic).bandwidth_bytes_per_s, 45e9);
  // An empty file takes every default, which are the same scenario.
  auto empty = ParseScenario("", "empty.yaml");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(ScenarioToYaml(*empty).substr(0, 200), ScenarioToYaml(*s).substr(0, 200));
}

// The migration section: a transport by name, and the host pool only with a host backup.
TEST(Scenario, MigrationFieldsNameTheirValidValues) {
  EXPECT_EQ(Err("migration: {transport: nixl, max_staging_gb: 2}\n"), "ok");
  EXPECT_EQ(Err("migration: {transport: rdma}\n"),
            "s.yaml:1:24: migration.transport is 'rdma'; valid values: nccl, nixl, gloo, "
            "host_pool");
  EXPECT_NE(Err("migration: {transport: host_pool}\ncluster: {backup: storage}\n")
                .find("migration.transport is 'host_pool', which reads the weights from host "
                      "memory, but cluster.backup is 'storage'"),
            std::string::npos);
  EXPECT_NE(Err("migration: {max_staging_gb: -1}\n").find("migration.max_staging_gb"),
            std::string::npos);
  EXPECT_NE(Err("migration: {transport: nixl, sms: 8}\n")
                .find("migration.sms is 8 but migration.transport 'nixl' moves the weights on "
                      "copy engines or the CPU, not on SMs; valid: 0"),
            std::string::npos);
  EXPECT_NE(Err("migration: {sms: 132}\n").find("compute must keep at least one (valid: 0 to 131)"),
            std::string::npos);
  EXPECT_EQ(Err("migration: {sms: 8}\n"), "ok");
}

TEST(Scenario, SharedSwitchAndFabricLimitEachGpusShare) {
  auto s =
      ParseScenario("", "t", {"cluster.nvswitch_gbps=1800", "cluster.fabric_oversubscription=3"});
  ASSERT_TRUE(s.ok()) << s.status().message();
  // 1800 GB/s over 8 GPUs: 225 GB/s each, below 450 × 0.8; NIC 45 GB/s shared 3 ways.
  EXPECT_DOUBLE_EQ(s->topology().link(LinkClass::kNvlink).bandwidth_bytes_per_s, 225e9);
  EXPECT_DOUBLE_EQ(s->topology().link(LinkClass::kNic).bandwidth_bytes_per_s, 15e9);
  EXPECT_EQ(Err("cluster:\n  fabric_oversubscription: 0.5\n"),
            "s.yaml:2:28: cluster.fabric_oversubscription is 0.5; it must be within [1, 1000]");
}

TEST(Scenario, ResolvedYamlRoundTrips) {
  auto s =
      ParseScenario(DefaultScenarioText(), "default",
                    {"cluster.nic.bandwidth_gbps=100", "eplb.policy=deepseek", "eplb.dispatch=lp"});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->eplb.dispatch, Dispatch::kLp);
  auto again = ParseScenario(ScenarioToYaml(*s), "resolved");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(ScenarioToYaml(*again), ScenarioToYaml(*s));
  EXPECT_DOUBLE_EQ(again->cluster.nic.bandwidth_gbps, 100);
}

TEST(Scenario, OverridesSetAnyField) {
  auto s = ParseScenario(
      "name: x\n", "s.yaml",
      {"run.steps=50", "workload.phases=[{step: 10, shuffle: 0.2}]", "eplb.use_async=false"});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->run.steps, 50);
  ASSERT_EQ(s->workload.phases.size(), 1u);
  EXPECT_EQ(s->workload.phases[0].step, 10);
  EXPECT_FALSE(s->eplb.use_async);
}

TEST(Scenario, UnknownFieldNamesLineColumnAndValidFields) {
  EXPECT_EQ(Err("model:\n  layers: 4\n  expertz: 16\n").substr(0, 62),
            "s.yaml:3:3: unknown field 'model.expertz'; valid fields here: ");
}

TEST(Scenario, WrongTypeNamesTheField) {
  EXPECT_EQ(Err("cluster:\n  nodes: four\n"),
            "s.yaml:2:10: cluster.nodes is 'four'; expected an integer");
  EXPECT_EQ(Err("eplb:\n  use_async: maybe\n"),
            "s.yaml:2:14: eplb.use_async is 'maybe'; expected true or false");
  EXPECT_EQ(Err("model: 3\n"), "s.yaml:1:8: model is '3'; expected a map of fields");
}

TEST(Scenario, ImpossibleValuesSayWhatIsValid) {
  EXPECT_EQ(Err("cluster:\n  nodes: 0\n"),
            "s.yaml:2:10: cluster.nodes is 0; valid values are 1..65536");
  EXPECT_EQ(Err("cluster:\n  nvlink: {efficiency: 1.5}\n"),
            "s.yaml:2:24: cluster.nvlink.efficiency is 1.5; it must be above 0 and at most 1");
  EXPECT_EQ(Err("workload:\n  popularity: pareto\n"),
            "s.yaml:2:15: workload.popularity is 'pareto'; valid values: lognormal, zipf");
  EXPECT_EQ(Err("eplb:\n  dispatch: waterfill\n"),
            "s.yaml:2:13: eplb.dispatch is 'waterfill'; valid values: even, random, lp");
  EXPECT_EQ(Err("eplb:\n  num_redundant_experts: 30\n"),
            "s.yaml:2:26: eplb.num_redundant_experts is 30: 256 experts + 30 redundant = 286 slots "
            "do not "
            "divide over 32 GPUs; valid values are 32 plus multiples of 32");
  EXPECT_EQ(Err("model:\n  groups: 7\n"),
            "s.yaml:2:11: model.groups is 7; it must divide model.experts (256)");
  EXPECT_EQ(Err("eplb:\n  policy: oracle\n"),
            "s.yaml:2:11: eplb.policy is 'oracle'; unknown policy 'oracle'; " +
                testing::ValidPoliciesText());
  EXPECT_EQ(Err("workload:\n  kind: trace\n"),
            "s.yaml:2:9: workload.kind is 'trace' but workload.trace names no file");
}

TEST(Scenario, FaultsReadBackAndTheirErrorsNameTheField) {
  auto s = ParseScenario(
      "faults:\n"
      "  - {kind: straggler, step: 10, until: 20, rank: 3, factor: 2}\n"
      "  - {kind: link_degraded, step: 5, node: 1, link: nvlink, factor: 4}\n",
      "s.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s->faults.size(), 2u);
  EXPECT_EQ(s->faults[0].kind, FaultKind::kStraggler);
  EXPECT_EQ(s->faults[0].rank, 3);
  EXPECT_TRUE(s->faults[0].active_at(19) && !s->faults[0].active_at(20));
  EXPECT_EQ(s->faults[1].link, LinkClass::kNvlink);
  EXPECT_TRUE(s->faults[1].active_at(1 << 30));  // no `until`: to the end of the run
  auto again = ParseScenario(ScenarioToYaml(*s), "resolved");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(ScenarioToYaml(*again), ScenarioToYaml(*s));

  // Losses and scales: read back, and refused where no policy could recover from them.
  auto lossy = ParseScenario(
      "model: {experts: 32}\nfaults:\n  - {kind: gpu_lost, step: 3, rank: 1}\n"
      "  - {kind: node_lost, step: 9, node: 3}\n  - {kind: scale, step: 20, gpus: 24}\n",
      "s.yaml");
  ASSERT_TRUE(lossy.ok()) << lossy.status().message();
  EXPECT_EQ(lossy->faults[1].kind, FaultKind::kNodeLost);
  EXPECT_EQ(lossy->faults[1].first_rank(8), 24);
  EXPECT_EQ(lossy->faults[2].gpus, 24);
  EXPECT_TRUE(lossy->faults[0].is_loss() && lossy->faults[2].changes_ranks());
  auto lossy_again = ParseScenario(ScenarioToYaml(*lossy), "resolved");
  ASSERT_TRUE(lossy_again.ok()) << lossy_again.status().message();
  EXPECT_EQ(ScenarioToYaml(*lossy_again), ScenarioToYaml(*lossy));
  EXPECT_EQ(
      Err("eplb: {policy: migration-aware}\nfaults:\n  - {kind: gpu_lost, step: 3, rank: 1}\n"),
      "s.yaml:3:5: eplb.policy is 'migration-aware', which cannot place around lost or idle "
      "GPUs; the policies that can: deepseek, replicate-lpt, timeseries, fault-tolerant");
  EXPECT_EQ(Err("faults:\n  - {kind: node_lost, step: 3}\n"),
            "s.yaml:2:5: faults[0] (node_lost) needs the node it loses");
  EXPECT_EQ(Err("faults:\n  - {kind: gpu_lost, step: 3, rank: 1, until: 5}\n"),
            "s.yaml:2:40: unknown field 'faults[0].until'; valid fields here: kind, rank, step");
  EXPECT_EQ(Err("faults:\n  - {kind: scale, step: 3, gpus: 33}\n"),
            "s.yaml:2:34: faults[0].gpus is 33; the cluster has 1..32 GPUs");
  EXPECT_EQ(Err("faults:\n  - {kind: scale, step: 3, gpus: 8}\n"),
            "s.yaml:2:5: faults[0] (scale at step 3) leaves 8 live GPUs × 9 slots for 256 "
            "experts; every expert needs a slot");
  EXPECT_EQ(Err("cluster: {initial_gpus: 40}\n"),
            "s.yaml:1:25: cluster.initial_gpus is 40; the cluster has 1..32 GPUs (0: all)");
  EXPECT_EQ(Err("faults:\n  - {kind: straggler, step: 3, until: 3, rank: 1, factor: 2}\n"),
            "s.yaml:2:39: faults[0].until is 3; it must be after faults[0].step (3)");
  EXPECT_EQ(Err("faults:\n  - {kind: straggler, step: 3, rank: 32, factor: 2}\n"),
            "s.yaml:2:38: faults[0].rank is 32; the cluster's ranks are 0..31");
  EXPECT_EQ(Err("faults:\n  - {kind: link_degraded, step: 3, node: 4}\n"),
            "s.yaml:2:42: faults[0].node is 4; the cluster's nodes are 0..3");
  EXPECT_EQ(Err("faults:\n  - {kind: straggler, step: 3, factor: 2}\n"),
            "s.yaml:2:5: faults[0] (straggler) needs the rank it hits");
  EXPECT_EQ(Err("faults:\n  - {kind: link_degraded, rank: 1, node: 0}\n"),
            "s.yaml:2:5: faults[0] (link_degraded) needs either a rank or a node, not both");
  EXPECT_EQ(Err("faults:\n  - {kind: straggler, rank: 1, factor: 0.5}\n"),
            "s.yaml:2:40: faults[0].factor is 0.5; it must be within [1, 1000]");
  EXPECT_EQ(Err("faults:\n  - {kind: straggler, rank: 1, factor: 1e308}\n"),
            "s.yaml:2:40: faults[0].factor is 1e+308; it must be within [1, 1000]");
  // Faults that would do nothing, or twice: a loss of a GPU already lost (alone or in its node)
  // or idle, a scale to the GPUs already serving, two slowdowns compounding on one target.
  const std::string two = "faults:\n  - {kind: gpu_lost, step: 3, rank: 1}\n";
  EXPECT_EQ(Err(two + "  - {kind: gpu_lost, step: 3, rank: 1}\n"),
            "s.yaml:3:5: faults[1] (gpu_lost at step 3) loses no serving GPU: GPU 1 is already "
            "lost (GPUs 0..31 serve); remove it");
  EXPECT_EQ(Err("model: {experts: 32}\nfaults:\n  - {kind: node_lost, step: 3, node: 0}\n"
                "  - {kind: gpu_lost, step: 9, rank: 7}\n"),
            "s.yaml:4:5: faults[1] (gpu_lost at step 9) loses no serving GPU: GPU 7 is already "
            "lost (GPUs 0..31 serve); remove it");
  EXPECT_EQ(Err("model: {experts: 32}\nfaults:\n  - {kind: scale, step: 3, gpus: 24}\n"
                "  - {kind: gpu_lost, step: 9, rank: 30}\n"),
            "s.yaml:4:5: faults[1] (gpu_lost at step 9) loses no serving GPU: GPU 30 is idle then "
            "(GPUs 0..23 serve); remove it");
  EXPECT_EQ(Err("model: {experts: 32}\nfaults:\n  - {kind: scale, step: 3, gpus: 24}\n"
                "  - {kind: scale, step: 9, gpus: 24}\n"),
            "s.yaml:4:5: faults[1] (scale at step 9) changes nothing: 24 GPUs serve then; remove "
            "it");
  EXPECT_EQ(Err("faults:\n  - {kind: straggler, step: 3, rank: 1, factor: 2}\n"
                "  - {kind: straggler, step: 5, until: 9, rank: 1, factor: 2}\n"),
            "s.yaml:3:5: faults[1] (straggler) hits what faults[0] hits over the same steps; give "
            "one fault with the combined factor");
  // One after the other, or on different targets: both kept.
  EXPECT_TRUE(ParseScenario("faults:\n  - {kind: straggler, step: 3, until: 5, rank: 1}\n"
                            "  - {kind: straggler, step: 5, rank: 1}\n"
                            "  - {kind: link_degraded, step: 3, rank: 1, link: nic}\n"
                            "  - {kind: link_degraded, step: 3, rank: 1, link: nvlink}\n",
                            "s.yaml")
                  .ok());
  EXPECT_NE(Err("faults:\n  - {kind: straggler, rank: 1, link: nic}\n")
                .find("unknown field 'faults[0].link'"),
            std::string::npos);
  EXPECT_NE(Err("faults: {kind: straggler}\n").find("faults is a map; expected a list"),
            std::string::npos);
}

TEST(Scenario, SyntaxErrorsAndBadOverrides) {
  EXPECT_NE(Err("model:\n  layers: [1, 2\n").find("not valid YAML"), std::string::npos);
  EXPECT_EQ(Err("", {"cluster.nodes"}), "--set 'cluster.nodes': expected key.path=value");
  EXPECT_EQ(Err("", {"cluster.nodes=0"}),
            "s.yaml (--set cluster.nodes): cluster.nodes is 0; valid values are 1..65536");
  EXPECT_EQ(Err("cluster:\n  nodes: 2\n", {"cluster.nodes.count=2"}),
            "--set 'cluster.nodes.count=2': 'nodes' is not a map of fields");
  EXPECT_EQ(Err("", {"clusterr.nodes=2"})
                .rfind("s.yaml (--set clusterr.nodes): unknown field 'clusterr'; valid", 0),
            0u)
      << Err("", {"clusterr.nodes=2"});
}

// Hostile and ambiguous input, one row per kind: each is refused naming the file, the line and
// what would be valid; none is read in a way its author did not mean.
TEST(Scenario, HostileInputTable) {
  struct Case {
    const char* name;
    std::string yaml;
    std::vector<std::string> overrides;
    std::string expected;  // a part of the message
  };
  const std::vector<Case> cases = {
      {"duplicate key",
       "model:\n  layers: 2\n  layers: 3\n",
       {},
       "s.yaml:3:3: 'layers' is given twice (also at line 2)"},
      {"duplicate section", "run: {steps: 2}\nrun: {steps: 3}\n", {}, "'run' is given twice"},
      {"second document", "name: a\n---\nname: b\n", {}, "s.yaml:2: a second YAML document"},
      {"octal-looking integer",
       "model:\n  layers: 010\n",
       {},
       "s.yaml:2:11: model.layers is '010'; write integers in plain decimal"},
      {"hex integer", "run:\n  steps: 0x10\n", {}, "run.steps is '0x10'; write integers"},
      {"deep flow nesting",
       "model: " + std::string(5000, '[') + std::string(5000, ']'),
       {},
       "not valid YAML"},
      // Plain text is not quoted: the path may name any file (/etc/passwd).
      {"not a map", "hello\n", {}, "s.yaml:1:1: the file is plain text; a scenario is a map"},
      {"bytes that overflow",
       "model:\n  expert_bytes: 9223372036854775807\n",
       {},
       "model.expert_bytes is 9223372036854775807; valid values are 1..1099511627776"},
      {"bytes whose total overflows",
       "model:\n  layers: 100000\n  expert_bytes: 1099511627776\n",
       {},
       "beyond what eplb counts"},
      {"too many GPUs",
       "cluster:\n  nodes: 20000\n  gpus_per_node: 1024\n",
       {},
       "20000 × 1024 = 20480000 GPUs; eplb models at most 65536"},
      {"infinite rate",
       "cluster:\n  hbm_gbps: 1e300\n",
       {},
       "cluster.hbm_gbps is 1e+300; it must be above 0 and at most 1000000"},
      {"NaN", "compute:\n  per_token_us: .nan\n", {}, "expected a number"},
      {"a key that is a list (found by fuzzing)",
       "model:\n  ? [a, b]\n  : 1\n",
       {},
       "s.yaml:2:5: a key is a list; keys are names or numbers"},
      {"an alias inside its own anchor (found by fuzzing)",
       "model: &a [*a]\n",
       {},
       "nested more than 64 deep"},
      {"aliases multiplying a small text",
       "a: &a [1,2,3,4,5,6,7,8,9]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
       "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
       "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
       "g: [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n",
       {},
       "more than a million YAML nodes"},
      {"a stray comma (found by fuzzing: yaml-cpp's LoadAll loops on it)",
       ",\n",
       {},
       "s.yaml:1: not valid YAML here: it reads as nothing"},
      {"a document after an end marker",
       "name: a\n...\nname: b\n",
       {},
       "s.yaml:3: a second YAML document"},
      {"duplicate key in --set", "", {"model={layers: 2, layers: 3}"}, "'layers' is given twice"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string message = Err(c.yaml, c.overrides);
    EXPECT_NE(message.find(c.expected), std::string::npos) << message;
  }
}

TEST(Scenario, AMapOverrideSetsOnlyItsFields) {
  auto s = ParseScenario("model:\n  experts: 64\n  groups: 4\n", "s.yaml", {"model={layers: 2}"});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->model.layers, 2);
  EXPECT_EQ(s->model.experts, 64);
  EXPECT_EQ(s->model.groups, 4);
}

TEST(Scenario, AnEmptyFileOrAFolderIsAnError) {
  const std::string dir = ::testing::TempDir() + "scenario-empty";
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(WriteTextFile(dir + "/empty.yaml", "# only a comment\n").ok());
  auto empty = LoadScenarioFile(dir + "/empty.yaml");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("no scenario in it"), std::string::npos);
  auto folder = LoadScenarioFile(dir);
  ASSERT_FALSE(folder.ok());
  EXPECT_EQ(folder.status().message(), dir + " is a folder; expected a regular file");
  auto device = LoadScenarioFile("/dev/zero");
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().message(), "/dev/zero is a character device; expected a regular file");
}

// A run too large for the machine is refused before it starts, naming the fields behind it.
TEST(Scenario, ARunTooLargeForMemoryIsRefusedNamingItsFields) {
  auto s = ParseScenario("", "s.yaml", {"run.steps=2147483647"});
  ASSERT_TRUE(s.ok()) << s.status().message();
  const Status fits = CheckRunFitsInMemory(*s, int64_t{24} << 30);
  ASSERT_FALSE(fits.ok());
  EXPECT_NE(fits.message().find("comes from run.steps"), std::string::npos) << fits.message();
  EXPECT_NE(fits.message().find("more than the 24 GiB it may use"), std::string::npos)
      << fits.message();
  auto window = ParseScenario("", "s.yaml", {"eplb.window_size=1000000", "model.experts=65536"});
  ASSERT_TRUE(window.ok()) << window.status().message();
  const Status w = CheckRunFitsInMemory(*window, int64_t{24} << 30);
  EXPECT_NE(w.message().find("eplb.window_size × model.layers × model.experts"), std::string::npos)
      << w.message();
  // The default scenario fits easily.
  auto plain = ParseScenario("", "s.yaml");
  EXPECT_TRUE(CheckRunFitsInMemory(*plain, int64_t{2} << 30).ok());
}

TEST(Scenario, ShippedScenariosParseAndBuildTheirWorkloads) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(EPLB_SCENARIO_DIR)) {
    if (entry.path().extension() != ".yaml") continue;
    SCOPED_TRACE(entry.path().string());
    auto s = LoadScenarioFile(entry.path().string());
    ASSERT_TRUE(s.ok()) << s.status().message();
    auto w = MakeWorkload(*s);
    ASSERT_TRUE(w.ok()) << w.status().message();
    LoadMatrix load;
    (*w)->Next(load);
    EXPECT_EQ(load.rows(), s->model.layers);
    EXPECT_EQ(load.cols(), s->model.experts);
    EXPECT_TRUE(ValidateLoad(load).ok());
    ++count;
  }
  EXPECT_GE(count, 6);
}

TEST(Scenario, TraceErrorsNameTheFileAndShape) {
  const std::string dir = EPLB_SCENARIO_DIR;
  auto s = LoadScenarioFile(dir + "/qwen3-30b-a3b-replay.yaml", {"model.layers=26"});
  ASSERT_TRUE(s.ok());
  auto w = MakeWorkload(*s);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find(
                "qwen3-30b-a3b-prefill.json: the load has 48 layers but the scenario's "
                "model.layers is 26"),
            std::string::npos)
      << w.status().message();
  auto missing = LoadScenarioFile(dir + "/qwen3-30b-a3b-replay.yaml", {"workload.trace=nope.json"});
  ASSERT_TRUE(missing.ok());
  EXPECT_NE(MakeWorkload(*missing).status().message().find("nope.json: cannot open"),
            std::string::npos);
}

TEST(Workload, GeneratorIsDeterministicSkewedAndDrifts) {
  auto s = ParseScenario(
      "", "d",
      {"model.layers=3", "model.experts=64", "model.groups=8", "eplb.num_redundant_experts=0",
       "cluster.nodes=1", "workload.phases=[{step: 5, shuffle: 1.0}]"});
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto a = MakeWorkload(*s), b = MakeWorkload(*s);
  LoadMatrix la, lb, first;
  for (int i = 0; i < 5; ++i) {
    (*a)->Next(la);
    (*b)->Next(lb);
    ASSERT_EQ(la, lb);
    if (i == 0) first = la;
    // Tokens × top-k assignments per layer, up to sampling noise.
    EXPECT_NEAR(la.row(0).sum(), 16384.0 * 8, 16384.0 * 8 * 0.02);
  }
  EXPECT_GT(first.row(0).maxCoeff(), 3 * first.row(0).mean());  // log-normal skew
  (*a)->Next(la);                                               // step 5: the hot set moves
  Eigen::Index hot_before, hot_after;
  first.row(0).maxCoeff(&hot_before);
  la.row(0).maxCoeff(&hot_after);
  EXPECT_NE(hot_before, hot_after);
}

// Uniform popularity, so every count has the same mean: the counts' spread over 50 layers × 64
// experts is their variance, Poisson's (the mean) plus mean² · (e^{σ²} − 1) / N for N sequences
// that route alike, plus mean² · (e^{σ²} − 1) for the step's own movement.
TEST(Workload, SequencesThatRouteAlikeAndTheStepsMovementSpreadTheCountsByTheirVariance) {
  const auto spread = [](std::vector<std::string> more) {
    more.insert(more.end(), {"model.layers=50", "model.experts=64", "model.groups=8",
                             "eplb.num_redundant_experts=0", "cluster.nodes=1", "workload.sigma=0",
                             "workload.drift=0"});
    auto s = ParseScenario("", "d", more);
    EXPECT_TRUE(s.ok()) << s.status().message();
    LoadMatrix load;
    (*MakeWorkload(*s))->Next(load);
    const double mean = load.mean();
    return std::pair{mean, (load.array() - mean).square().mean()};
  };
  const double expected_mean = 16384.0 * 8 / 64;
  const auto [mean, poisson] = spread({});
  EXPECT_NEAR(mean, expected_mean, 0.01 * expected_mean);
  EXPECT_NEAR(poisson, expected_mean, 0.1 * expected_mean);
  // Four prompts of 4,096 tokens at σ = 0.67: a standard deviation of ~38% of the mean, where
  // 16,384 independent tokens spread 2%.
  const double four = expected_mean + expected_mean * expected_mean * std::expm1(0.67 * 0.67) / 4;
  EXPECT_NEAR(spread({"workload.sequence_tokens=4096"}).second, four, 0.1 * four);
  const double many = expected_mean + expected_mean * expected_mean * std::expm1(0.67 * 0.67) / 64;
  EXPECT_NEAR(spread({"workload.sequence_tokens=256"}).second, many, 0.1 * many);
  // No noise: every count is its expectation, sequences or not; σ = 0: tokens route on their own.
  EXPECT_EQ(spread({"workload.sequence_tokens=4096", "workload.noise=false"}).second, 0);
  EXPECT_NEAR(spread({"workload.sequence_tokens=4096", "workload.sequence_sigma=0"}).second,
              expected_mean, 0.1 * expected_mean);
  // The step's own movement (workload.step_sigma) adds mean² · (e^{σ²} − 1) whatever the
  // step's tokens, on top of the sequences': σ = 0.3 spreads the counts ~31% of the mean where
  // sampling alone spreads them 2%.
  const double moved = expected_mean + expected_mean * expected_mean * std::expm1(0.3 * 0.3);
  EXPECT_NEAR(spread({"workload.step_sigma=0.3"}).second, moved, 0.1 * moved);
  const double both = moved + expected_mean * expected_mean * std::expm1(0.67 * 0.67) / 4;
  EXPECT_NEAR(spread({"workload.step_sigma=0.3", "workload.sequence_tokens=4096"}).second, both,
              0.1 * both);
  EXPECT_EQ(spread({"workload.step_sigma=0.3", "workload.noise=false"}).second, 0);
  // A sequence brings at most a step's tokens.
  auto big = ParseScenario("", "d", {"workload.sequence_tokens=20000"});
  ASSERT_FALSE(big.ok());
  EXPECT_NE(
      big.status().message().find("workload.sequence_tokens is 20000 but a step runs 16384 tokens"),
      std::string::npos)
      << big.status().message();
}

// A rate inside its field's range can still make a time overflow or outgrow a simulated clock:
// each is refused at load, naming the field, before any of its times reaches SimGrid.
TEST(Scenario, RatesWhoseTimesOverflowAreRefusedNamingTheField) {
  struct Case {
    std::vector<std::string> set;
    std::string expected;
  };
  const Case cases[] = {
      {{"cluster.nvlink.bandwidth_gbps=4.9e-324"},
       "cluster.nvlink.bandwidth_gbps is 5e-324, below the smallest normal number"},
      {{"compute.model=roofline", "compute.hbm_efficiency=4.9e-324"},
       "compute.hbm_efficiency is 5e-324, below the smallest normal number"},
      {{"cluster.nvlink.bandwidth_gbps=1e-310"},
       "cluster.nvlink.bandwidth_gbps is 1e-310, below the smallest normal number"},
      {{"cluster.nvlink.bandwidth_gbps=1e-300"},
       "cluster.nvlink.bandwidth_gbps is 1e-300: one expert (44040192 bytes) over NVLink would "
       "take 4.4e+298 s; eplb simulates times of at most 1e+07 s, so raise it"},
      {{"cluster.nic.efficiency=1e-300"}, "cluster.nic.efficiency is 1e-300: one expert"},
      {{"cluster.storage_read_gbps=1e-12"}, "cluster.storage_read_gbps is 1e-12: one expert"},
      {{"compute.model=roofline", "compute.hbm_efficiency=1e-300"},
       "compute.hbm_efficiency is 1e-300: one step of the workload's tokens spread "
       "evenly over the experts would take"},
      {{"compute.model=roofline", "compute.flops_efficiency=1e-300"},
       "compute.flops_efficiency is 1e-300: one step"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.set.back());
    auto s = ParseScenario("", "s.yaml", c.set);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.status().message().find(c.expected), std::string::npos) << s.status().message();
  }
  // The smallest rates a real scenario might set still load.
  EXPECT_TRUE(ParseScenario("", "s.yaml", {"cluster.nic.bandwidth_gbps=0.001"}).ok());
}

// A spread moves popularity, never the number of tokens: over the whole range of the sequences'
// and the step's spreads, every layer of every step routes exactly tokens × top_k assignments,
// in whole counts, none above the step's tokens (a token reaches an expert once).
TEST(Workload, SpreadsMovePopularityNeverTheNumberOfTokens) {
  for (const char* sequence_sigma : {"0", "0.3", "0.67", "1", "2", "5", "20"}) {
    for (const char* step_sigma : {"0", "1"}) {
      SCOPED_TRACE(fmt::format("sequence_sigma {}, step_sigma {}", sequence_sigma, step_sigma));
      auto s = ParseScenario(
          "", "d",
          {"model.layers=4", "model.experts=64", "model.groups=8", "model.top_k=8",
           "eplb.num_redundant_experts=0", "cluster.nodes=1", "workload.sequence_tokens=1024",
           std::string("workload.sequence_sigma=") + sequence_sigma,
           std::string("workload.step_sigma=") + step_sigma});
      ASSERT_TRUE(s.ok()) << s.status().message();
      auto w = MakeWorkload(*s);
      ASSERT_TRUE(w.ok());
      LoadMatrix load;
      for (int step = 0; step < 20; ++step) {
        (*w)->Next(load);
        for (Eigen::Index l = 0; l < load.rows(); ++l) {
          ASSERT_EQ(load.row(l).sum(), 16384.0 * 8) << "step " << step << ", layer " << l;
          ASSERT_LE(load.row(l).maxCoeff(), 16384.0);
          ASSERT_GE(load.row(l).minCoeff(), 0.0);
          ASSERT_TRUE((load.row(l).array() == load.row(l).array().round()).all());
        }
      }
    }
  }
}

}  // namespace
}  // namespace eplb
