// The GPU backend. Without a GPU the GPU tests skip, naming what is missing; the sizing logic
// runs everywhere. On a GPU: random migrations executed by the core's rearranger with every
// mode the machine allows, every slot checked bit-exact on the device at every step boundary;
// cancellation; the commit's event protocol; errors that name the call and the memory.
#include <atomic>
#include <map>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "device_backend.h"
#include "device_run.h"
#include "eplb/migrate/rearranger.h"
#include "eplb/migrate/weight_pattern.h"
#include "test_util.h"

namespace eplb::device {
namespace {

using testing::Drift;
using testing::EachLayerIsOneOf;
using testing::MakeTopology;
using testing::RandomPlacement;

// The GPUs to test on, or a skip that says why there are none.
#define REQUIRE_GPUS(n)                                                                          \
  do {                                                                                           \
    auto count_ = CountDevices();                                                                \
    if (!count_.ok()) GTEST_SKIP() << "needs a CUDA GPU: " << count_.status().message();         \
    if (*count_ < (n)) GTEST_SKIP() << "needs " << (n) << " GPUs, this machine has " << *count_; \
  } while (0)

TEST(DeviceSizing, FitExpertBytesStaysInTheBudgetOnPageMultiples) {
  // 100 buffers in 80% of 1 GB: 8 MB each, rounded down to 4 KiB.
  EXPECT_EQ(FitExpertBytes(44040192, 100, 1000000000, 0.8), 7999488);
  // Never more than asked.
  EXPECT_EQ(FitExpertBytes(8192, 100, 1000000000, 0.8), 8192);
  // Too little memory even for 4 KiB experts.
  EXPECT_EQ(FitExpertBytes(44040192, 1000000, 1000000000, 0.8), 0);
  std::mt19937_64 rng(1);
  for (int i = 0; i < 1000; ++i) {
    const int64_t wanted = static_cast<int64_t>(rng() % (1ULL << 30));
    const int64_t buffers = 1 + static_cast<int64_t>(rng() % 100000);
    const size_t free = rng() % (1ULL << 38);
    const int64_t fit = FitExpertBytes(wanted, buffers, free, 0.8);
    if (fit == 0) continue;
    EXPECT_EQ(fit % 4096, 0);
    EXPECT_LE(fit, std::max<int64_t>(wanted, 4096));
    EXPECT_LE(static_cast<double>(fit) * static_cast<double>(buffers),
              0.8 * static_cast<double>(free));
  }
}

TEST(DeviceSizing, VirtualRanksShareOneGpu) {
  Scenario s;
  s.model.layers = 10;
  s.model.experts = 16;
  s.eplb.num_redundant_experts = 16;
  s.cluster.nodes = 2;
  s.cluster.gpus_per_node = 4;
  s.eplb.staging_layers = 2;
  // 32 slots over 8 GPUs = 4 per GPU; (10 layers + 2 staging) × 4.
  EXPECT_EQ(SlotBuffersPerGpu(s, DeviceMode::kNccl), 48);
  EXPECT_EQ(SlotBuffersPerGpu(s, DeviceMode::kVirtual), 48 * 8);
  s.eplb.use_async = false;  // stop the world stages every layer
  EXPECT_EQ(SlotBuffersPerGpu(s, DeviceMode::kNccl), (10 + 10) * 4);
}

struct Migration {
  Topology topology;
  Placement old_p, new_p;
  RearrangerOptions options;
};

Migration RandomMigration(std::mt19937_64& rng, int max_ranks, int64_t expert_bytes) {
  const int gpn = 1 + static_cast<int>(rng() % std::min(4, max_ranks));
  const int nodes = 1 + static_cast<int>(rng() % std::max(1, std::min(2, max_ranks / gpn)));
  const int per_gpu = 2 + static_cast<int>(rng() % 3);
  Topology topo = MakeTopology(nodes, gpn, per_gpu, expert_bytes);
  const int layers = 2 + static_cast<int>(rng() % 5);
  const int experts = std::max(1, topo.num_slots() - static_cast<int>(rng() % 4));
  Placement old_p = RandomPlacement(rng, layers, topo.num_slots(), experts);
  Placement new_p = Drift(rng, old_p, 0.4);
  RearrangerOptions o;
  o.layers_per_step = 1 + static_cast<int>(rng() % 2);
  o.staging_layers = 1 + static_cast<int>(rng() % 2);
  o.sync = rng() % 4 == 0;
  o.sender_rule = rng() % 2 ? SenderRule::kLocal : SenderRule::kVllm;
  o.schedule = rng() % 2 ? ScheduleStrategy::kBest : ScheduleStrategy::kSingleBatch;
  return {topo, old_p, new_p, o};
}

// Runs a migration to the end (or to a cancellation after `cancel_after` boundaries), checking
// on the device at every step boundary that the weights equal the routing table in force.
void Execute(const Migration& m, DeviceMode mode, int cancel_after = -1) {
  DeviceConfig config;
  config.mode = mode;
  config.num_layers = m.old_p.num_layers();
  config.staging_buffers = m.options.sync ? m.old_p.num_layers() : m.options.staging_layers;
  auto backend = DeviceBackend::Create(m.topology, config);
  ASSERT_TRUE(backend.ok()) << backend.status().message();
  DeviceBackend& device = **backend;
  ASSERT_TRUE(device.Fill(m.old_p).ok());
  ASSERT_TRUE(device.Verify(m.old_p).ok());
  Rearranger rearranger(device, m.topology, m.options);
  ASSERT_TRUE(rearranger.Start(m.old_p, m.new_p).ok());
  int boundaries = 0;
  while (rearranger.in_progress()) {
    if (boundaries == cancel_after) {
      rearranger.Cancel();
      break;
    }
    ASSERT_TRUE(device.RunEmulatedStep(20e-6).ok());
    auto committed = rearranger.OnStepBoundary();
    ASSERT_TRUE(committed.ok()) << committed.status().message();
    ASSERT_TRUE(EachLayerIsOneOf(rearranger.placement(), m.old_p, m.new_p));
    const Status v = device.Verify(rearranger.placement());
    ASSERT_TRUE(v.ok()) << v.message();
    ++boundaries;
  }
  const Status v = device.Verify(rearranger.placement());
  ASSERT_TRUE(v.ok()) << v.message();
  if (cancel_after < 0) {
    EXPECT_EQ(rearranger.placement(), m.new_p);
  }
}

TEST(DeviceBackend, RandomMigrationsOnVirtualRanksAreBitExact) {
  REQUIRE_GPUS(1);
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    SCOPED_TRACE(trial);
    const Migration m = RandomMigration(rng, 8, 8 * (1 + static_cast<int64_t>(rng() % 8192)));
    Execute(m, DeviceMode::kVirtual);
    if (HasFatalFailure()) return;
  }
}

TEST(DeviceBackend, RandomMigrationsOverNcclAreBitExact) {
  REQUIRE_GPUS(1);
  if (!HaveNccl()) GTEST_SKIP() << "built without NCCL";
  const int gpus = *CountDevices();
  std::mt19937_64 rng(12);
  for (int trial = 0; trial < 10; ++trial) {
    SCOPED_TRACE(trial);
    Migration m = RandomMigration(rng, gpus, 8 * (1 + static_cast<int64_t>(rng() % 8192)));
    if (m.topology.num_ranks() > gpus) continue;  // NCCL runs one rank per GPU
    Execute(m, DeviceMode::kNccl);
    if (HasFatalFailure()) return;
  }
}

TEST(DeviceBackend, CancellationLeavesEveryLayerWhollyOldOrNew) {
  REQUIRE_GPUS(1);
  std::mt19937_64 rng(13);
  for (int trial = 0; trial < 30; ++trial) {
    SCOPED_TRACE(trial);
    Migration m = RandomMigration(rng, 8, 64 * 1024);
    m.options.sync = false;
    Execute(m, DeviceMode::kVirtual, static_cast<int>(rng() % 6));
    if (HasFatalFailure()) return;
  }
}

// Large experts, no host wait between the commit and the check: the check kernel runs on the
// main stream right behind the commit, so it reads the new weights only if the commit made
// that stream wait for the staging copies (the "staged" event). Run under compute-sanitizer by
// device/check.sh.
TEST(DeviceBackend, TheForegroundNeverReadsAStagedBufferEarly) {
  REQUIRE_GPUS(1);
  std::mt19937_64 rng(14);
  const Topology topo = MakeTopology(1, 4, 4, 8 << 20);
  const Placement old_p = RandomPlacement(rng, 4, topo.num_slots(), 6);  // many replicas
  const Placement new_p = Drift(rng, old_p, 0.2);
  DeviceConfig config;
  config.num_layers = 4;
  config.staging_buffers = 2;
  auto backend = DeviceBackend::Create(topo, config);
  ASSERT_TRUE(backend.ok()) << backend.status().message();
  DeviceBackend& device = **backend;
  ASSERT_TRUE(device.Fill(old_p).ok());
  RearrangerOptions o;
  o.staging_layers = 2;
  Rearranger rearranger(device, topo, o);
  rearranger.on_layer_committed.Connect([&](const LayerEvent& e) {
    const Status v = device.Verify(rearranger.placement(), e.layer);
    EXPECT_TRUE(v.ok()) << v.message();
  });
  ASSERT_TRUE(rearranger.Start(old_p, new_p).ok());
  while (rearranger.in_progress()) {
    ASSERT_TRUE(device.RunEmulatedStep(100e-6).ok());
    ASSERT_TRUE(rearranger.OnStepBoundary().ok());
  }
  EXPECT_EQ(rearranger.placement(), new_p);
}

// The `consumed` protocol: steps launched without waiting, so that each commit happens while the
// step before it still reads the weights the commit swaps out, and the workers then stage the
// next layer into that very buffer. Every step's checksum must equal the XOR of the weights of
// the placement it was launched under: a worker that wrote the buffer before the step had read
// it would change it. Large experts make the reads long against a worker's start.
TEST(DeviceBackend, AStepReadingACommittedBufferIsNeverOverwritten) {
  REQUIRE_GPUS(1);
  std::mt19937_64 rng(16);
  const int64_t expert_bytes = 32 << 20;
  const Topology topo = MakeTopology(1, 2, 4, expert_bytes);
  const Placement old_p = RandomPlacement(rng, 4, topo.num_slots(), 6);
  const Placement new_p = Drift(rng, old_p, 0.5);
  DeviceConfig config;
  config.num_layers = 4;
  config.staging_buffers = 1;
  auto backend = DeviceBackend::Create(topo, config);
  if (!backend.ok()) GTEST_SKIP() << backend.status().message();  // e.g. not enough memory
  DeviceBackend& device = **backend;
  ASSERT_TRUE(device.Fill(old_p).ok());
  std::map<std::pair<int, int>, uint64_t> expert_xor;  // (layer, expert): XOR of its words
  const auto expected = [&](const Placement& p) {
    std::vector<uint64_t> sums(static_cast<size_t>(topo.num_ranks()), 0);
    for (int layer = 0; layer < p.num_layers(); ++layer) {
      for (int slot = 0; slot < topo.num_slots(); ++slot) {
        const int expert = p.expert_at(layer, slot);
        auto [it, fresh] = expert_xor.try_emplace({layer, expert}, 0);
        for (uint64_t w = 0; fresh && w < static_cast<uint64_t>(expert_bytes / 8); ++w) {
          it->second ^= PatternWord(layer, expert, w);
        }
        sums[static_cast<size_t>(slot / topo.slots_per_gpu())] ^= it->second;
      }
    }
    return sums;
  };
  for (int layer = 0; layer < old_p.num_layers(); ++layer) {
    for (int slot = 0; slot < topo.num_slots(); ++slot) {
      if (old_p.expert_at(layer, slot) == kEmptySlot || new_p.expert_at(layer, slot) == kEmptySlot)
        GTEST_SKIP() << "an empty slot's bytes are not a pattern";
    }
  }
  RearrangerOptions o;
  o.staging_layers = 1;
  Rearranger rearranger(device, topo, o);
  ASSERT_TRUE(rearranger.Start(old_p, new_p).ok());
  while (rearranger.in_progress()) {
    const std::vector<uint64_t> want = expected(rearranger.placement());
    ASSERT_TRUE(device.RunEmulatedStep(1e-3, /*wait=*/false).ok());
    ASSERT_TRUE(rearranger.OnStepBoundary().ok());  // commits while the step reads
    auto got = device.TakeStepChecksums();
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ(*got, want);
  }
  EXPECT_EQ(rearranger.placement(), new_p);
}

// The NCCL round code on one GPU: a one-rank communicator sending to itself, and a cancellation
// that aborts it, after which the next rearrangement gets a new communicator that works.
TEST(DeviceBackend, NcclRoundsToSelfAndAnAbortedCommunicatorIsReplaced) {
  REQUIRE_GPUS(1);
  if (!HaveNccl()) GTEST_SKIP() << "built without NCCL";
  const Topology topo = MakeTopology(1, 1, 4, 1 << 20);
  Placement p = *Placement::Create(2, {{0, 1, 0, 1}});
  DeviceConfig config;
  config.mode = DeviceMode::kNccl;
  config.num_layers = 1;
  auto backend = DeviceBackend::Create(topo, config);
  ASSERT_TRUE(backend.ok()) << backend.status().message();
  DeviceBackend& device = **backend;
  ASSERT_TRUE(device.MergesLanes());
  ASSERT_TRUE(device.Fill(p).ok());
  // Slot 1 (expert 1) to slot 2, through NCCL: rank 0 sends to and receives from itself.
  const std::vector<Transfer> transfers = {{1, 0, 1, 0, 2, 1 << 20, LinkClass::kNvlink}};
  Round round;
  round.flows.push_back({0, 0, 1 << 20, {0}});
  const StagingTarget target{0, 0, 0};
  const auto one_round = [&]() -> Status {
    Status result;
    device.StartWorker(0, [&] { result = device.ExecuteRound(target, round, transfers); });
    device.JoinWorkers();
    return result;
  };
  const Status sent = one_round();
  ASSERT_TRUE(sent.ok()) << sent.message();
  const std::vector<int32_t> slots = {2};
  ASSERT_TRUE(device.CommitLayer(target, slots).ok());
  const Placement moved = *Placement::Create(2, {{0, 1, 1, 1}});
  const Status v = device.Verify(moved);
  ASSERT_TRUE(v.ok()) << v.message();
  // Cancelled while the worker runs: its round fails as Cancelled, aborting its communicator,
  // and reports no transfer.
  std::atomic<int> reported{0};
  device.on_transfer.Connect([&](const TransferRecord&) { ++reported; });
  std::atomic<bool> go{false};
  Status cancelled;
  device.StartWorker(0, [&] {
    while (!go) std::this_thread::yield();
    cancelled = device.ExecuteRound(target, round, transfers);
  });
  device.AbortTransfers();
  go = true;
  device.JoinWorkers();
  ASSERT_TRUE(device.EndRearrangement().ok());  // as the rearranger ends a cancelled one
  EXPECT_EQ(cancelled.code(), Status::Code::kCancelled) << cancelled.message();
  EXPECT_EQ(reported, 0);
  // The next rearrangement replaces the aborted communicator, and its rounds work. Its
  // transfers carry the GPU's span of their round, on the run's clock: within the host's.
  ASSERT_TRUE(device.BeginRearrangement().ok());
  TransferRecord record{};
  device.on_transfer.Connect([&](const TransferRecord& t) { record = t; });
  const double before = device.Now();
  const Status again = one_round();
  const double after = device.Now();
  EXPECT_TRUE(again.ok()) << again.message();
  EXPECT_EQ(reported, 1);
  EXPECT_LE(before - 1e-4, record.start_s);
  EXPECT_LE(record.start_s, record.end_s);
  EXPECT_LE(record.end_s, after + 1e-4);
}

TEST(DeviceBackend, ErrorsNameTheMemoryAndTheRank) {
  REQUIRE_GPUS(1);
  const Topology huge = MakeTopology(1, 8, 64, int64_t{1} << 32);
  DeviceConfig config;
  config.num_layers = 64;
  auto backend = DeviceBackend::Create(huge, config);
  ASSERT_FALSE(backend.ok());
  EXPECT_NE(backend.status().message().find("GiB free"), std::string::npos)
      << backend.status().message();
  const Topology odd = MakeTopology(1, 2, 2, 1001);
  auto unaligned = DeviceBackend::Create(odd, config);
  ASSERT_FALSE(unaligned.ok());
  EXPECT_NE(unaligned.status().message().find("multiple of 8"), std::string::npos);
  if (HaveNccl()) {
    config.mode = DeviceMode::kNccl;
    config.num_layers = 1;
    const Topology many = MakeTopology(1, 64, 2, 4096);
    auto nccl = DeviceBackend::Create(many, config);
    ASSERT_FALSE(nccl.ok());
    EXPECT_NE(nccl.status().message().find("one rank per GPU"), std::string::npos);
  }
}

TEST(DeviceBackend, AWrongSlotIsNamed) {
  REQUIRE_GPUS(1);
  std::mt19937_64 rng(15);
  const Topology topo = MakeTopology(1, 2, 3, 4096);
  const Placement p = RandomPlacement(rng, 2, topo.num_slots(), 4);
  DeviceConfig config;
  config.num_layers = 2;
  auto backend = DeviceBackend::Create(topo, config);
  ASSERT_TRUE(backend.ok()) << backend.status().message();
  ASSERT_TRUE((*backend)->Fill(p).ok());
  // Claim layer 1 holds another placement: the first differing slot is reported.
  const Placement other = Drift(rng, p, 0.0);
  if (other == p) GTEST_SKIP() << "drift kept the placement";
  const Status v = (*backend)->Verify(other);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.message().find("should hold expert"), std::string::npos) << v.message();
}

}  // namespace
}  // namespace eplb::device
