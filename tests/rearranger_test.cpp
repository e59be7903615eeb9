// The async rearrangement protocol on the host backend: real bytes move, every slot ends
// bit-identical to its expert's weights, unchanged slots are never written, and at every step
// boundary (and after a cancellation) each layer is wholly old or wholly new.
#include "eplb/migrate/rearranger.h"

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "eplb/migrate/forwarding_backend.h"
#include "eplb/migrate/host_backend.h"
#include "process_backend.h"
#include "test_util.h"

namespace eplb {
namespace {

using testing::Drift;
using testing::EachLayerIsOneOf;
using testing::MakeTopology;
using testing::ProcessBackend;
using testing::RandomPlacement;
using testing::SharedGate;

constexpr size_t kExpertBytes = 256;

struct Case {
  int nodes, gpus_per_node, per_rank, layers, experts;
  RearrangerOptions options;
  bool merge_lanes = false;  // one worker per rank, as the GPU backend under NCCL
};

// What one NCCL communicator per rank needs of the ExecuteRound calls (each run as one group,
// operations matched per peer in issue order): for every pair of ranks, the calls of A that
// involve B and those of B that involve A pair up in order with matching operations (A's sends
// are B's receives), and no cycle of such meetings exists, or the ranks would deadlock.
void ExpectDeadlockFreeMatchingOrder(const HostBackend& backend, int ranks, size_t transfers) {
  std::vector<std::vector<std::vector<HostBackend::PeerOp>>> groups(ranks);
  std::vector<int> first(ranks + 1, 0);  // node id of (rank, call) = first[rank] + call
  size_t sends = 0;
  for (int r = 0; r < ranks; ++r) {
    groups[r] = backend.peer_groups(r);
    first[r + 1] = first[r] + static_cast<int>(groups[r].size());
    for (const auto& group : groups[r]) {
      for (const auto& op : group) sends += op.send ? 1 : 0;
    }
  }
  // The record is whole: every planned transfer was sent once.
  ASSERT_EQ(sends, transfers);
  std::vector<int> parent(first[ranks]);
  std::iota(parent.begin(), parent.end(), 0);
  const std::function<int(int)> find = [&](int x) {
    return parent[x] == x ? x : parent[x] = find(parent[x]);
  };
  for (int a = 0; a < ranks; ++a) {
    for (int b = a + 1; b < ranks; ++b) {
      // Each rank's calls that involve the other, with the operations toward it.
      const auto with = [&](int self, int peer) {
        std::vector<std::pair<int, std::vector<HostBackend::PeerOp>>> out;
        for (size_t i = 0; i < groups[self].size(); ++i) {
          std::vector<HostBackend::PeerOp> ops;
          for (const auto& op : groups[self][i]) {
            if (op.peer == peer) ops.push_back(op);
          }
          if (!ops.empty()) out.emplace_back(static_cast<int>(i), std::move(ops));
        }
        return out;
      };
      const auto ab = with(a, b), ba = with(b, a);
      ASSERT_EQ(ab.size(), ba.size()) << "ranks " << a << " and " << b;
      for (size_t k = 0; k < ab.size(); ++k) {
        // A's k-th call with B meets B's k-th call with A: A's sends are B's receives.
        const auto& from_a = ab[k].second;
        const auto& from_b = ba[k].second;
        ASSERT_EQ(from_a.size(), from_b.size()) << "ranks " << a << " and " << b << ", call " << k;
        for (size_t o = 0; o < from_a.size(); ++o) {
          ASSERT_EQ(from_a[o].layer, from_b[o].layer);
          ASSERT_EQ(from_a[o].expert, from_b[o].expert);
          ASSERT_NE(from_a[o].send, from_b[o].send);
        }
        parent[find(first[a] + ab[k].first)] = find(first[b] + ba[k].first);
      }
    }
  }
  // A meeting must finish before each participant's next call: those edges must be acyclic.
  const int n = first[ranks];
  std::vector<std::vector<int>> next(n);
  std::vector<int> indegree(n, 0);
  for (int r = 0; r < ranks; ++r) {
    for (size_t i = 0; i + 1 < groups[r].size(); ++i) {
      const int u = find(first[r] + static_cast<int>(i)),
                v = find(first[r] + static_cast<int>(i) + 1);
      next[u].push_back(v);
      ++indegree[v];
    }
  }
  std::vector<int> ready;
  int meetings = 0, done = 0;
  for (int x = 0; x < n; ++x) {
    if (find(x) != x) continue;
    ++meetings;
    if (indegree[x] == 0) ready.push_back(x);
  }
  while (!ready.empty()) {
    const int u = ready.back();
    ready.pop_back();
    ++done;
    for (int v : next[u]) {
      if (--indegree[v] == 0) ready.push_back(v);
    }
  }
  EXPECT_EQ(done, meetings) << "the ranks' calls wait on each other in a cycle: a deadlock";
}

// Runs one rearrangement to completion, checking the invariants at every step boundary.
void RunToCompletion(const Case& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const Topology topo = MakeTopology(c.nodes, c.gpus_per_node, c.per_rank);
  const Placement old_p = RandomPlacement(rng, c.layers, topo.num_slots(), c.experts);
  const Placement new_p = Drift(rng, old_p, 0.5);
  HostBackend backend(topo, c.layers,
                      c.options.sync ? c.layers : std::max(1, c.options.staging_layers),
                      kExpertBytes);
  backend.Fill(old_p);
  backend.set_merge_lanes(c.merge_lanes);
  backend.record_peer_groups(c.merge_lanes);
  std::vector<const uint8_t*> data_before;
  for (int l = 0; l < c.layers; ++l) {
    for (int s = 0; s < topo.num_slots(); ++s) data_before.push_back(backend.slot_data(l, s));
  }

  Rearranger rearranger(backend, topo, c.options);
  std::mutex mu;
  std::vector<int> committed_order;
  std::atomic<int> rounds{0};
  rearranger.on_layer_committed.Connect([&](const LayerEvent& e) {
    std::lock_guard lock(mu);
    committed_order.push_back(e.layer);
  });
  rearranger.on_round.Connect([&](const RoundEvent& e) {
    EXPECT_LE(e.start_s, e.end_s);
    ++rounds;
  });
  ASSERT_TRUE(rearranger.Start(old_p, new_p).ok());
  int steps = 0;
  while (rearranger.in_progress()) {
    auto committed = rearranger.OnStepBoundary();
    ASSERT_TRUE(committed.ok()) << committed.status().message();
    if (c.options.sync) {
      ASSERT_TRUE(committed->empty() || committed->size() == rearranger.plans().size());
    } else {
      ASSERT_LE(static_cast<int>(committed->size()), c.options.layers_per_step);
    }
    // The routing table in force always matches the weights inference would read.
    ASSERT_TRUE(EachLayerIsOneOf(rearranger.placement(), old_p, new_p));
    const Status v = backend.Verify(rearranger.placement());
    ASSERT_TRUE(v.ok()) << v.message();
    ++steps;
    std::this_thread::sleep_for(std::chrono::microseconds(50));  // an inference step
  }
  EXPECT_EQ(rearranger.placement(), new_p);
  const Status v = backend.Verify(new_p);
  ASSERT_TRUE(v.ok()) << v.message();
  // Unchanged slots were never written and still hold the same buffer.
  for (int l = 0; l < c.layers; ++l) {
    for (int s = 0; s < topo.num_slots(); ++s) {
      if (old_p.expert_at(l, s) == new_p.expert_at(l, s)) {
        ASSERT_EQ(backend.writes(l, s), 0) << "layer " << l << " slot " << s;
        ASSERT_EQ(backend.slot_data(l, s),
                  data_before[static_cast<size_t>(l) * topo.num_slots() + s]);
      } else {
        ASSERT_EQ(backend.writes(l, s), 1);
      }
    }
  }
  std::vector<int> expected;
  for (const LayerPlan& p : rearranger.plans()) expected.push_back(p.layer);
  EXPECT_EQ(committed_order, expected);
  if (c.merge_lanes) {
    size_t transfers = 0;
    for (const LayerPlan& p : rearranger.plans()) transfers += p.transfers.size();
    ExpectDeadlockFreeMatchingOrder(backend, topo.num_ranks(), transfers);
  }
  if (!c.options.sync) {
    EXPECT_GE(steps, static_cast<int>((expected.size() + c.options.layers_per_step - 1) /
                                      c.options.layers_per_step));
  }
  // What each rank held staged at once: every layer it wrote, never more than the budget; one
  // layer at a time with one staging buffer, and all of them together when stop-the-world has
  // room for them.
  const std::vector<int64_t> peaks = rearranger.TakeStagingPeaks();
  ASSERT_EQ(peaks.size(), static_cast<size_t>(topo.num_ranks()));
  const int64_t budget = c.options.max_staging_bytes;
  std::vector<int64_t> largest(peaks.size(), 0), all(peaks.size(), 0);
  bool binds = false;  // some rank cannot hold every layer at once
  for (int r = 0; r < topo.num_ranks(); ++r) {
    for (const LayerPlan& p : rearranger.plans()) {
      // The topology's expert size, not the host buffers': the protocol counts the model's bytes.
      const int64_t bytes = static_cast<int64_t>(p.written_slots[r].size()) * topo.expert_bytes();
      largest[r] = std::max(largest[r], bytes);
      all[r] += bytes;
    }
    binds = binds || (budget > 0 && all[r] > budget);
  }
  for (int r = 0; r < topo.num_ranks(); ++r) {
    SCOPED_TRACE(::testing::Message() << "rank " << r);
    EXPECT_GE(peaks[r], largest[r]);
    EXPECT_LE(peaks[r], all[r]);
    if (budget > 0) {
      EXPECT_LE(peaks[r], budget);
    }
    if (!c.options.sync && c.options.staging_layers == 1) {
      EXPECT_EQ(peaks[r], largest[r]);
    }
    if (c.options.sync && !binds) {
      EXPECT_EQ(peaks[r], all[r]);
    }
  }
  EXPECT_EQ(rearranger.TakeStagingPeaks(), std::vector<int64_t>(peaks.size(), 0));
}

RearrangerOptions Options(int per_step, int staging, bool sync, SenderRule rule,
                          ScheduleStrategy strategy) {
  RearrangerOptions o;
  o.layers_per_step = per_step;
  o.staging_layers = staging;
  o.sync = sync;
  o.sender_rule = rule;
  o.schedule = strategy;
  return o;
}

TEST(Rearranger, AsyncOneLayerPerStepMovesTheRightBytes) {
  RunToCompletion(
      {2, 4, 4, 6, 20, Options(1, 1, false, SenderRule::kLocal, ScheduleStrategy::kBest)}, 1);
}

TEST(Rearranger, SeveralLayersPerStepAndStagingBuffers) {
  RunToCompletion(
      {2, 2, 3, 8, 9, Options(2, 3, false, SenderRule::kVllm, ScheduleStrategy::kGreedyPairs)}, 2);
  RunToCompletion(
      {1, 4, 2, 5, 6, Options(3, 2, false, SenderRule::kLocal, ScheduleStrategy::kSingleBatch)}, 3);
}

TEST(Rearranger, SyncModeCommitsEverythingAtOnce) {
  RunToCompletion(
      {2, 4, 3, 5, 17, Options(1, 1, true, SenderRule::kLocal, ScheduleStrategy::kBest)}, 4);
}

// A random shape and options: 1..max_nodes nodes, min_layers..min_layers+5 layers,
// 1..max_staging staging buffers, stop-the-world one time in sync_one_in.
Case RandomCase(std::mt19937_64& rng, int max_nodes, int min_layers, int max_staging,
                int sync_one_in) {
  const int nodes = 1 + static_cast<int>(rng() % max_nodes), gpn = 1 + static_cast<int>(rng() % 4);
  const int per = 1 + static_cast<int>(rng() % 4),
            layers = min_layers + static_cast<int>(rng() % 6);
  const int experts = std::max(1, nodes * gpn * per - static_cast<int>(rng() % 3));
  return Case{nodes,
              gpn,
              per,
              layers,
              experts,
              Options(1 + static_cast<int>(rng() % 3), 1 + static_cast<int>(rng() % max_staging),
                      rng() % sync_one_in == 0, rng() % 2 ? SenderRule::kLocal : SenderRule::kVllm,
                      static_cast<ScheduleStrategy>(rng() % 3))};
}

// A staging budget of one to three layers' worth of a rank's slots (the most a layer can write
// on a rank), async with several buffers and stop-the-world: each rank stays within it, and
// stop-the-world still commits every layer at the one boundary.
TEST(Rearranger, AStagingBudgetBoundsWhatEachRankHoldsStaged) {
  std::mt19937_64 rng(25);
  for (int trial = 0; trial < 40; ++trial) {
    Case c = RandomCase(rng, 2, 2, 4, 3);
    c.options.max_staging_bytes =
        MakeTopology(c.nodes, c.gpus_per_node, c.per_rank).expert_bytes() * c.per_rank *
        (1 + static_cast<int64_t>(rng() % 3));
    SCOPED_TRACE(::testing::Message() << "trial " << trial);
    RunToCompletion(c, rng());
  }
}

TEST(Rearranger, RandomConfigurations) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 40; ++trial) {
    const int nodes = 1 + static_cast<int>(rng() % 3), gpn = 1 + static_cast<int>(rng() % 4);
    const int per = 1 + static_cast<int>(rng() % 4), layers = 1 + static_cast<int>(rng() % 6);
    const int experts = std::max(1, nodes * gpn * per - static_cast<int>(rng() % 3));
    const auto rule = rng() % 2 ? SenderRule::kLocal : SenderRule::kVllm;
    const auto strategy = static_cast<ScheduleStrategy>(rng() % 3);
    const Case c{nodes,
                 gpn,
                 per,
                 layers,
                 experts,
                 Options(1 + static_cast<int>(rng() % 3), 1 + static_cast<int>(rng() % 3),
                         rng() % 5 == 0, rule, strategy)};
    SCOPED_TRACE(::testing::Message() << "trial " << trial);
    RunToCompletion(c, rng());
  }
}

// One worker per rank running both lanes' rounds merged: the same bytes land, and every pair
// of ranks issues its sends and receives in matching order (what one NCCL communicator needs).
TEST(Rearranger, MergedLanesKeepEveryPairOfRanksInStep) {
  std::mt19937_64 rng(15);
  for (int trial = 0; trial < 30; ++trial) {
    Case c = RandomCase(rng, 3, 1, 3, 5);
    c.merge_lanes = true;
    SCOPED_TRACE(::testing::Message() << "trial " << trial);
    RunToCompletion(c, rng());
  }
}

TEST(Rearranger, CancellationLeavesEveryLayerWhollyOldOrNew) {
  std::mt19937_64 rng(6);
  for (int trial = 0; trial < 60; ++trial) {
    const Topology topo = MakeTopology(2, 3, 3);
    const Placement old_p = RandomPlacement(rng, 8, topo.num_slots(), 15);
    const Placement new_p = Drift(rng, old_p, 0.3);
    HostBackend backend(topo, 8, 2, kExpertBytes);
    backend.Fill(old_p);
    Rearranger rearranger(backend, topo,
                          Options(1, 2, false, SenderRule::kLocal, ScheduleStrategy::kBest));
    ASSERT_TRUE(rearranger.Start(old_p, new_p).ok());
    const int cancel_after = static_cast<int>(rng() % 8);
    for (int step = 0; step < cancel_after && rearranger.in_progress(); ++step) {
      ASSERT_TRUE(rearranger.OnStepBoundary().ok());
      if (rng() % 2) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
    }
    rearranger.Cancel();
    EXPECT_FALSE(rearranger.in_progress());
    ASSERT_TRUE(EachLayerIsOneOf(rearranger.placement(), old_p, new_p));
    const Status v = backend.Verify(rearranger.placement());
    ASSERT_TRUE(v.ok()) << v.message();
    // A placement is valid by construction; check it round-trips through validation.
    ASSERT_TRUE(
        Placement::Create(15, topo.num_slots(), rearranger.placement().phy2log_flat()).ok());
    // Nothing moves after the cancellation.
    ASSERT_TRUE(rearranger.OnStepBoundary()->empty());
  }
}

// A backend whose rounds fail after a while, as a lost GPU would make them.
class FailingBackend final : public ForwardingBackend {
 public:
  FailingBackend(HostBackend& inner, int fail_at) : ForwardingBackend(inner), fail_at_(fail_at) {}
  Status ExecuteRound(const StagingTarget& t, const Round& r,
                      std::span<const Transfer> tr) override {
    if (calls_++ == fail_at_) return Status::IoError("peer unreachable");
    return ForwardingBackend::ExecuteRound(t, r, tr);
  }

 private:
  std::atomic<int> calls_{0};
  const int fail_at_;
};

TEST(Rearranger, AWorkerErrorStopsTheRearrangementAndIsReportedOnce) {
  std::mt19937_64 rng(8);
  const Topology topo = MakeTopology(2, 2, 3);
  const Placement old_p = RandomPlacement(rng, 6, topo.num_slots(), 10);
  const Placement new_p = RandomPlacement(rng, 6, topo.num_slots(), 10);
  HostBackend host(topo, 6, 1, kExpertBytes);
  host.Fill(old_p);
  FailingBackend backend(host, 12);
  Rearranger rearranger(backend, topo,
                        Options(1, 1, false, SenderRule::kLocal, ScheduleStrategy::kBest));
  ASSERT_TRUE(rearranger.Start(old_p, new_p).ok());
  Status error;
  while (rearranger.in_progress()) {
    auto r = rearranger.OnStepBoundary();
    if (!r.ok()) error = r.status();
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  ASSERT_FALSE(error.ok());
  EXPECT_NE(error.message().find("peer unreachable"), std::string::npos) << error.message();
  EXPECT_NE(error.message().find("rank "), std::string::npos) << error.message();
  EXPECT_TRUE(EachLayerIsOneOf(rearranger.placement(), old_p, new_p));
  EXPECT_TRUE(host.Verify(rearranger.placement()).ok());
}

// Records the lifecycle calls in order, and how many workers run when the rearrangement ends.
class LifecycleBackend final : public ForwardingBackend {
 public:
  explicit LifecycleBackend(HostBackend& inner) : ForwardingBackend(inner) {}
  Status BeginRearrangement() override {
    calls.push_back("begin");
    return ForwardingBackend::BeginRearrangement();
  }
  void StartWorker(int rank, std::function<void()> body) override {
    if (calls.back() != "start") calls.push_back("start");
    ++running_;
    ForwardingBackend::StartWorker(rank, [this, body = std::move(body)] {
      body();
      --running_;
    });
  }
  void AbortTransfers() override {
    calls.push_back("abort");
    ForwardingBackend::AbortTransfers();
  }
  void JoinWorkers() override {
    calls.push_back("join");
    ForwardingBackend::JoinWorkers();
  }
  Status EndRearrangement() override {
    calls.push_back("end");
    running_at_end = running_.load();
    return end_error;
  }
  Status ExecuteRound(const StagingTarget& t, const Round& r,
                      std::span<const Transfer> tr) override {
    if (fail_rounds) return Status::IoError("peer unreachable");
    return ForwardingBackend::ExecuteRound(t, r, tr);
  }

  std::vector<std::string> calls;
  int running_at_end = -1;
  Status end_error;
  bool fail_rounds = false;

 private:
  std::atomic<int> running_{0};
};

// Begin before the first worker, End after the last is joined: once each per rearrangement,
// however it ends; an End that fails is reported by the boundary that ended the rearrangement.
TEST(Rearranger, EveryRearrangementBeginsAndEndsOnceAroundItsWorkers) {
  std::mt19937_64 rng(12);
  const Topology topo = MakeTopology(2, 2, 3);
  const Placement old_p = RandomPlacement(rng, 4, topo.num_slots(), 10);
  const Placement new_p = RandomPlacement(rng, 4, topo.num_slots(), 10);
  const Placement next_p = RandomPlacement(rng, 4, topo.num_slots(), 10);
  const std::vector<std::string> whole{"begin", "start", "join", "end"};
  const std::vector<std::string> stopped{"begin", "start", "abort", "join", "end"};
  for (int how = 0; how < 4; ++how) {  // committed, cancelled, failed, failing to end
    HostBackend host(topo, 4, 1, kExpertBytes);
    host.Fill(old_p);
    LifecycleBackend backend(host);
    backend.fail_rounds = how == 2;
    if (how == 3) backend.end_error = Status::IoError("could not release the buffers");
    Rearranger rearranger(backend, topo,
                          Options(1, 1, false, SenderRule::kLocal, ScheduleStrategy::kBest));
    // Nothing to move: nothing begins.
    ASSERT_TRUE(rearranger.Start(old_p, old_p).ok());
    EXPECT_TRUE(backend.calls.empty());
    ASSERT_TRUE(rearranger.Start(old_p, new_p).ok()) << "case " << how;
    Status error;
    if (how == 1) {
      rearranger.Cancel();
    } else {
      auto committed = rearranger.CommitAll();
      if (!committed.ok()) error = committed.status();
    }
    EXPECT_FALSE(rearranger.in_progress());
    EXPECT_EQ(backend.calls, how == 0 || how == 3 ? whole : stopped) << "case " << how;
    EXPECT_EQ(backend.running_at_end, 0) << "case " << how;
    const std::string expected = how == 2   ? "peer unreachable"
                                 : how == 3 ? "could not release the buffers"
                                            : "";
    EXPECT_EQ(error.ok(), expected.empty()) << "case " << how << ": " << error.message();
    EXPECT_NE(error.message().find(expected), std::string::npos) << error.message();
    // A second rearrangement after any ending runs whole.
    backend.calls.clear();
    backend.fail_rounds = false;
    backend.end_error = Status::Ok();
    ASSERT_TRUE(rearranger.Start(rearranger.placement(), next_p).ok()) << "case " << how;
    ASSERT_TRUE(rearranger.CommitAll().ok()) << "case " << how;
    EXPECT_EQ(rearranger.placement(), next_p) << "case " << how;
    EXPECT_EQ(backend.calls, whole) << "case " << how;
    EXPECT_TRUE(host.Verify(next_p).ok());
  }
}

// Every process commits the same layers at the same boundaries, and the shared memory ends
// bit-exact; a failure in one process stops every process.
TEST(Rearranger, RanksSpanningProcessesAgreeOnEveryCommit) {
  std::mt19937_64 rng(10);
  for (int trial = 0; trial < 20; ++trial) {
    const int processes = 2 + static_cast<int>(rng() % 3);
    const Topology topo = MakeTopology(2, 3, 3);
    const Placement old_p = RandomPlacement(rng, 6, topo.num_slots(), 14);
    const Placement new_p = Drift(rng, old_p, 0.3);
    const bool fail = trial % 4 == 3;
    const bool sync = trial % 5 == 4;
    HostBackend host(topo, 6, sync ? 6 : 2, kExpertBytes);
    host.Fill(old_p);
    SharedGate gate(processes);
    std::vector<std::vector<std::vector<int>>> commits(static_cast<size_t>(processes));
    std::vector<Status> errors(static_cast<size_t>(processes));
    std::vector<Placement> final_placement(static_cast<size_t>(processes), old_p);
    std::vector<std::thread> foregrounds;
    for (int p = 0; p < processes; ++p) {
      foregrounds.emplace_back([&, p] {
        std::mt19937_64 jitter(static_cast<uint64_t>(trial * 16 + p));  // one per thread
        ProcessBackend backend(host, gate, p, processes, fail && p == 1 ? 5 : -1);
        Rearranger rearranger(backend, topo,
                              Options(1 + trial % 2, sync ? 1 : 2, sync, SenderRule::kLocal,
                                      ScheduleStrategy::kBest));
        ASSERT_TRUE(rearranger.Start(old_p, new_p).ok());
        EXPECT_EQ(backend.begins(), rearranger.in_progress() ? 1 : 0);
        while (rearranger.in_progress()) {
          auto committed = rearranger.OnStepBoundary();
          if (!committed.ok()) {
            errors[p] = committed.status();
            break;
          }
          commits[p].push_back(*committed);
          std::this_thread::sleep_for(std::chrono::microseconds(jitter() % 2 ? 30 : 0));
        }
        final_placement[p] = rearranger.placement();
      });
    }
    for (auto& f : foregrounds) f.join();
    for (int p = 1; p < processes; ++p) {
      EXPECT_EQ(commits[p], commits[0]) << "trial " << trial << ", process " << p;
      EXPECT_EQ(final_placement[p], final_placement[0]);
    }
    if (fail) {
      for (int p = 0; p < processes; ++p) EXPECT_FALSE(errors[p].ok()) << "process " << p;
      EXPECT_NE(errors[1].message().find("GPU lost"), std::string::npos) << errors[1].message();
      EXPECT_NE(errors[0].message().find("another process"), std::string::npos);
    } else {
      for (const Status& e : errors) EXPECT_TRUE(e.ok()) << e.message();
      EXPECT_EQ(final_placement[0], new_p);
    }
    EXPECT_TRUE(EachLayerIsOneOf(final_placement[0], old_p, new_p));
    const Status v = host.Verify(final_placement[0]);
    EXPECT_TRUE(v.ok()) << v.message();
  }
}

TEST(Rearranger, RejectsBadOptionsAndOverlappingStarts) {
  const Topology topo = MakeTopology(1, 2, 2);
  std::mt19937_64 rng(9);
  const Placement a = RandomPlacement(rng, 3, 4, 3), b = RandomPlacement(rng, 3, 4, 3);
  HostBackend backend(topo, 3, 1, kExpertBytes);
  Rearranger too_deep(backend, topo,
                      Options(1, 2, false, SenderRule::kLocal, ScheduleStrategy::kBest));
  EXPECT_EQ(too_deep.Start(a, b).message(),
            "staging layers is 2; the backend has staging buffers for 1..1 layers");
  Rearranger sync(backend, topo, Options(1, 1, true, SenderRule::kLocal, ScheduleStrategy::kBest));
  ASSERT_FALSE(a == b);
  EXPECT_NE(sync.Start(a, b).message().find("sync mode stages all"), std::string::npos);
  RearrangerOptions tight = Options(1, 1, false, SenderRule::kLocal, ScheduleStrategy::kBest);
  tight.max_staging_bytes = topo.expert_bytes() - 1;  // less than any written slot
  Rearranger no_room(backend, topo, tight);
  EXPECT_NE(no_room.Start(a, b).message().find("but the staging budget is " +
                                               std::to_string(topo.expert_bytes() - 1) +
                                               " bytes per rank"),
            std::string::npos)
      << no_room.Start(a, b).message();
  Rearranger ok(backend, topo, Options(1, 1, false, SenderRule::kLocal, ScheduleStrategy::kBest));
  backend.Fill(a);
  ASSERT_TRUE(ok.Start(a, b).ok());
  ASSERT_TRUE(ok.in_progress());
  EXPECT_EQ(ok.Start(a, b).message(), "a rearrangement is already in progress");
  ok.Cancel();
}

}  // namespace
}  // namespace eplb
