// Engine profiles: the operations vLLM's code performs for a hand-computed rearrangement, per
// communicator, and the host time they add (migrate/engine_profile.h).
#include "eplb/migrate/engine_profile.h"

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "eplb/engine/workload.h"
#include "eplb/io/scenario_file.h"
#include "eplb/migrate/migration_pricing.h"
#include "eplb/migrate/schedule.h"
#include "eplb/policy/policy.h"

#include "test_util.h"

namespace eplb {
namespace {

using testing::MakeTopology;

// 1 node × 4 GPUs × 2 slots, 8 experts. Each of 2 layers moves 3 experts around a cycle:
// expert 1 rank 0 → 1, expert 3 rank 1 → 2, expert 5 rank 2 → 0; rank 3 keeps its own.
const std::vector<int32_t> kOld = {0, 1, 2, 3, 4, 5, 6, 7};
const std::vector<int32_t> kNew = {0, 5, 2, 1, 4, 3, 6, 7};
constexpr int kLayers = 2, kRanks = 4, kTensors = 4;  // FP8 block-quantized: 4 tensors

std::vector<RankLayerWork> Work() {
  const Topology topo = MakeTopology(1, kRanks, 2);
  auto plan = PlanLayer(0, kOld, kNew, topo, SenderRule::kVllm);
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  return WorkOfLayer(*plan, kOld, kRanks);
}

TEST(EngineProfile, WorkOfTheCycle) {
  const std::vector<RankLayerWork> work = Work();
  ASSERT_EQ(work.size(), 4u);
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE(r);
    EXPECT_EQ(work[r].slots, 2);
    EXPECT_EQ(work[r].held_experts, 2);
    EXPECT_EQ(work[r].sends, 1);
    EXPECT_EQ(work[r].receives, 1);
    EXPECT_EQ(work[r].local_moves, 0);
    EXPECT_EQ(work[r].send_peers, 1);
    EXPECT_EQ(work[r].recv_peers, 1);
  }
  EXPECT_EQ(work[3].sends + work[3].receives + work[3].local_moves, 0);
}

// Summed over the ranks and the 2 layers: what vLLM's rebalance_execute.py and
// eplb_communicator.py issue for 3 experts moved per layer, 4 tensors each.
struct Totals {
  int p2p_posts, batches, waits, syncs, barriers, nixl_calls, releases, polls, host_copies,
      writeback;
};
Totals Sum(Transport transport) {
  Totals t{};
  for (int layer = 0; layer < kLayers; ++layer) {
    for (const RankLayerWork& w : Work()) {
      const LayerOpCounts n = CountVllmLayerOps(transport, kTensors, w);
      t.p2p_posts += n.p2p_posts;
      t.batches += n.batches;
      t.waits += n.waits;

      t.syncs += n.stream_syncs;
      t.barriers += n.barriers;
      t.nixl_calls += n.nixl_calls;
      t.releases += n.nixl_releases;

      t.polls += n.polls;
      t.host_copies += n.host_copies;
      t.writeback += n.writeback_copies;
    }
  }
  return t;
}

TEST(EngineProfile, VllmOperationCountsPerCommunicator) {
  struct Case {
    Transport transport;
    Totals want;
  };
  // 2 layers × 3 experts × 4 tensors = 24 tensors sent and 24 received.
  const Case cases[] = {
      // torch_nccl: an isend and an irecv per tensor, one batch per rank that has any, a wait
      // per request; write-back copy_ per received row per tensor.
      {Transport::kNccl, {48, 6, 48, 0, 0, 0, 0, 0, 0, 24}},
      // NIXL (zero-copy READs): nothing on the sender; per received expert 6 NIXL calls
      // (get_xfer_descs x2, prep_xfer_dlist x2, make_prepped_xfer, transfer) and 3 releases;
      // one poll loop per receiving rank and layer; a monitored_barrier on every rank and layer.
      {Transport::kNixl, {0, 0, 0, 0, 8, 36, 18, 6, 0, 24}},
      // torch_gloo: .to("cpu") per tensor sent, empty_like and copy_ back per tensor received,
      // gloo isend/irecv per tensor with a wait each.
      {Transport::kGloo, {48, 6, 48, 6, 0, 0, 0, 0, 72, 24}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(TransportName(c.transport));
    const Totals got = Sum(c.transport);
    EXPECT_EQ(got.p2p_posts, c.want.p2p_posts);
    EXPECT_EQ(got.batches, c.want.batches);
    EXPECT_EQ(got.waits, c.want.waits);

    EXPECT_EQ(got.syncs, c.want.syncs);
    EXPECT_EQ(got.barriers, c.want.barriers);
    EXPECT_EQ(got.nixl_calls, c.want.nixl_calls);
    EXPECT_EQ(got.releases, c.want.releases);

    EXPECT_EQ(got.polls, c.want.polls);
    EXPECT_EQ(got.host_copies, c.want.host_copies);
    EXPECT_EQ(got.writeback, c.want.writeback);
  }
}

TEST(EngineProfile, PlanningCountsFollowTheHeldExperts) {
  // Rank 0 of the cycle: move_to_buffer's 33 calls and one np.isin; the send side's lookup over
  // the 2 experts it holds (3 + 22 + 10 each, two np.isin); the receive side's over its 1
  // expert (3 + 22 + 10, two np.isin); move_from_buffer's 6 + 12.
  const LayerOpCounts n = CountVllmLayerOps(Transport::kNccl, kTensors, Work()[0]);
  EXPECT_EQ(n.numpy_calls, 33 + 45 + 35 + 18);
  EXPECT_EQ(n.numpy_isins, 5);
  EXPECT_EQ(n.python_iters, 3 * 2 + 1 + 4 * 1);
}

TEST(EngineProfile, LayerTimeIsTheSlowestRanksAndItsBreakdownSums) {
  const OpCosts& c = VllmOpCosts();
  const std::vector<RankLayerWork> work = Work();
  const double links_s = 0.2e-3;
  // torch_nccl: ranks 0-2 do the same work; rank 0's host time by hand.
  const double planning = 131 * c.numpy_call_s + 5 * c.numpy_isin_s + 11 * c.python_iter_s;
  const double transfer = 8 * c.p2p_post_s + 8 * c.work_wait_s;
  const double writeback = 4 * c.torch_gpu_op_s;
  const LayerOrchestration nccl =
      PriceLayer(Engine::kVllm, Transport::kNccl, kTensors, work, links_s);
  EXPECT_DOUBLE_EQ(nccl.planning_s, planning);
  EXPECT_DOUBLE_EQ(nccl.transfer_s, transfer);
  EXPECT_DOUBLE_EQ(nccl.writeback_s, writeback);
  EXPECT_DOUBLE_EQ(nccl.barrier_s, 0);
  EXPECT_DOUBLE_EQ(nccl.total_s(), planning + transfer + writeback);

  // NIXL: the slowest rank's planning (the nccl planning plus set_transfer_context's 8 slots and
  // the descriptor loop's 4 tensors), its 6 calls, one whole poll period (0.2 ms of links <
  // 0.5 ms); monitored_barrier: 2 x 3 gloo messages at rank 0; then 3 releases and write-back.
  const LayerOrchestration nixl =
      PriceLayer(Engine::kVllm, Transport::kNixl, kTensors, work, links_s);
  EXPECT_DOUBLE_EQ(nixl.planning_s, planning + 12 * c.python_iter_s);
  // monitored_barrier: one operation's round trip, and rank 0's 2 x 3 messages a step each.
  EXPECT_DOUBLE_EQ(nixl.barrier_s, c.gloo_op_s + 6 * c.gloo_step_s);
  EXPECT_DOUBLE_EQ(nixl.polling_s, c.nixl_poll_period_s - links_s);
  EXPECT_DOUBLE_EQ(nixl.transfer_s, 6 * c.nixl_call_s + 3 * c.nixl_call_s);
  EXPECT_DOUBLE_EQ(nixl.writeback_s, 4 * c.torch_gpu_op_s);
  EXPECT_DOUBLE_EQ(nixl.total_s(), nixl.planning_s + nixl.transfer_s + nixl.barrier_s +
                                       nixl.polling_s + nixl.writeback_s);

  // eplb's own profile adds nothing to the transport's costs.
  EXPECT_DOUBLE_EQ(PriceLayer(Engine::kEplb, Transport::kNixl, kTensors, work, links_s).total_s(),
                   0);
}

// vLLM's migration batching (migration.batching): each execution restores the NIXL transfer
// context over the layer's 8 slots, polls at least one whole period and passes its own barrier.
TEST(EngineProfile, MigrationBatchingPaysEachExecution) {
  const OpCosts& c = VllmOpCosts();
  const std::vector<RankLayerWork> work = Work();
  const double links_s = 0.3e-3;
  const LayerOrchestration one =
      PriceLayer(Engine::kVllm, Transport::kNixl, kTensors, work, links_s);
  const LayerOrchestration three =
      PriceLayer(Engine::kVllm, Transport::kNixl, kTensors, work, links_s, 3);
  EXPECT_DOUBLE_EQ(three.barrier_s, 3 * one.barrier_s);
  EXPECT_DOUBLE_EQ(three.planning_s, one.planning_s + 2 * 8 * c.python_iter_s);
  // Each execution carries a third of the links' time and waits one whole period.
  EXPECT_DOUBLE_EQ(three.polling_s, 3 * (c.nixl_poll_period_s - links_s / 3));
  EXPECT_DOUBLE_EQ(three.transfer_s, one.transfer_s);
  // The simulator's workers: the barrier moves from the layer to each round.
  const WorkerCosts layer = WorkerCostsOf(Engine::kVllm, Transport::kNixl, kTensors, 2, 8, kRanks);
  const WorkerCosts rounds =
      WorkerCostsOf(Engine::kVllm, Transport::kNixl, kTensors, 2, 8, kRanks, {.batching = true});
  EXPECT_DOUBLE_EQ(layer.barrier_s, c.gloo_op_s + 6 * c.gloo_step_s);
  EXPECT_DOUBLE_EQ(layer.per_round_s, 0);
  EXPECT_DOUBLE_EQ(rounds.barrier_s, 0);
  EXPECT_DOUBLE_EQ(rounds.per_round_s, c.gloo_op_s + 6 * c.gloo_step_s + 8 * c.python_iter_s);
  // The context is restored once per execution, as PriceLayer counts it: not once more per layer.
  EXPECT_DOUBLE_EQ(rounds.per_layer_s, layer.per_layer_s - 8 * c.python_iter_s);
  // Over nccl batching adds no host call the counts price.
  EXPECT_DOUBLE_EQ(
      PriceLayer(Engine::kVllm, Transport::kNccl, kTensors, work, links_s, 3).total_s(),
      PriceLayer(Engine::kVllm, Transport::kNccl, kTensors, work, links_s).total_s());
}

// torch.distributed P2P ops, one per tensor per expert, cap what a rank receives (vLLM #28562);
// NIXL's reads and eplb's own groups are left to the links.
TEST(EngineProfile, PerTensorP2pOpsCapWhatARankReceives) {
  const double rate = VllmOpCosts().p2p_rank_bytes_per_s;
  EXPECT_NEAR(rate, 21.3e9, 0.1e9);
  EXPECT_DOUBLE_EQ(ReceiveBytesPerS(Engine::kVllm, Transport::kNccl), rate);
  EXPECT_DOUBLE_EQ(ReceiveBytesPerS(Engine::kSglang, Transport::kNccl), rate);
  EXPECT_DOUBLE_EQ(ReceiveBytesPerS(Engine::kVllm, Transport::kNixl), 0);
  EXPECT_DOUBLE_EQ(ReceiveBytesPerS(Engine::kEplb, Transport::kNccl), 0);
  EXPECT_DOUBLE_EQ(
      WorkerCostsOf(Engine::kVllm, Transport::kNccl, kTensors, 2, 8, kRanks).receive_bytes_per_s,
      rate);
}

TEST(EngineProfile, OncePerRearrangement) {
  const OpCosts& c = VllmOpCosts();
  const RearrangementOnce once = PriceOnce(Engine::kVllm, kLayers, 6, 8, EpShape{kRanks});
  EXPECT_DOUBLE_EQ(once.policy_s, c.policy_per_layer_slot_s * kLayers * 8);
  EXPECT_DOUBLE_EQ(once.maps_s, 8 * c.maps_per_slot_s + 5 * c.small_copy_s);
  EXPECT_DOUBLE_EQ(once.total_s(), once.window_reduce_s + once.policy_s + once.maps_s);
  EXPECT_DOUBLE_EQ(PriceOnce(Engine::kEplb, kLayers, 6, 8, EpShape{kRanks}).total_s(), 0);
}

TEST(EngineProfile, VllmReplacesTheTransportsCpuEstimates) {
  EXPECT_GT(CostOf(Transport::kNixl).per_layer_s, 0);
  EXPECT_EQ(CostOf(Transport::kNixl, Engine::kEplb).per_layer_s,
            CostOf(Transport::kNixl).per_layer_s);
  EXPECT_EQ(CostOf(Transport::kNixl, Engine::kVllm).per_layer_s, 0);
  EXPECT_EQ(CostOf(Transport::kNixl, Engine::kVllm).per_message_s, 0);
  EXPECT_EQ(CostOf(Transport::kGloo, Engine::kVllm).flow_bytes_per_s,
            CostOf(Transport::kGloo).flow_bytes_per_s);
}

// docs/transports.md's table is the code's: each transport's numbers are written once.
TEST(Transports, TheDocsTableIsPrintedFromTheCode) {
  const std::string doc =
      testing::ReadFile(std::string(EPLB_SCENARIO_DIR) + "/../docs/transports.md");
  const size_t start = doc.find("| transport | engine |");
  ASSERT_NE(start, std::string::npos) << "docs/transports.md: no transport table";
  size_t end = start;
  while (end < doc.size() && doc[end] == '|') end = doc.find('\n', end) + 1;
  EXPECT_EQ(doc.substr(start, end - start), TransportsMarkdown())
      << "docs/transports.md's table differs from the code's (migrate/transport.cpp); paste:\n"
      << TransportsMarkdown();
}

// The pricing a scenario builds pays what the transport and the engine say, once each.
TEST(MigrationPricing, TheTransportAndTheEngineArePricedOnce) {
  MigrationSetUp nixl{.transport = Transport::kNixl, .slots = 8, .ep = EpShape{kRanks}};
  const MigrationPricing eplb(nixl);
  EXPECT_EQ(eplb.LayerStartS(), CostOf(Transport::kNixl).per_layer_s);
  EXPECT_EQ(eplb.ReceivesS(3), 3 * CostOf(Transport::kNixl).per_message_s);
  EXPECT_EQ(eplb.OnceS(), 0);
  nixl.engine = Engine::kVllm;
  const MigrationPricing vllm(nixl);
  const WorkerCosts w =
      WorkerCostsOf(Engine::kVllm, Transport::kNixl, 4, 8 / kRanks, 8, kRanks, WorkerMode{});
  EXPECT_EQ(vllm.LayerStartS(), w.per_layer_s + w.barrier_s);  // vLLM's counts replace NIXL's
  EXPECT_EQ(vllm.ReceivesS(2), 2 * w.per_receive_s);
  EXPECT_GT(vllm.OnceS(), 0);
  EXPECT_EQ(vllm.InFlightStepS(), 0);  // only in async mode
  nixl.mode.async = true;
  EXPECT_EQ(MigrationPricing(nixl).InFlightStepS(), AsyncStepOverheadS(Engine::kVllm, kRanks));
  // gloo's flow cap, and vLLM's P2P receive rate shared among a rank's flows.
  EXPECT_EQ(MigrationPricing({.transport = Transport::kGloo}).FlowCapBytesPerS(4),
            CostOf(Transport::kGloo).flow_bytes_per_s);
  const MigrationPricing p2p({.engine = Engine::kVllm, .slots = 8, .ep = EpShape{kRanks}});
  EXPECT_EQ(p2p.FlowCapBytesPerS(2), VllmOpCosts().p2p_rank_bytes_per_s / 2);
}

TEST(EngineProfile, AsyncPaysAFlagAllReducePerStep) {
  // eplb_state.py's _all_ranks_buffer_ready on 4 ranks: a ring of 2 x 3 gloo messages, .item().
  const OpCosts& c = VllmOpCosts();
  EXPECT_DOUBLE_EQ(AsyncStepOverheadS(Engine::kVllm, kRanks),
                   c.gloo_op_s + 5 * c.gloo_step_s + c.torch_cpu_op_s);
  EXPECT_DOUBLE_EQ(AsyncStepOverheadS(Engine::kEplb, kRanks), 0);
  EXPECT_DOUBLE_EQ(AsyncStepOverheadS(Engine::kVllm, 1), 0);
}

// vLLM's async mode: the worker fills the buffer, the main thread applies the layer
// (move_to_workspace): an event wait and a recorded event, the row map to numpy (two CPU ops),
// one host-to-device copy and three copy_ into the maps, then a copy_ per written row per tensor.
TEST(EngineProfile, AsyncMovesTheWriteBackToTheMainThread) {
  const OpCosts& c = VllmOpCosts();
  const WorkerCosts sync = WorkerCostsOf(Engine::kVllm, Transport::kNixl, kTensors, 2, 8, kRanks);
  const WorkerCosts async =
      WorkerCostsOf(Engine::kVllm, Transport::kNixl, kTensors, 2, 8, kRanks, {.async = true});
  EXPECT_DOUBLE_EQ(sync.apply_per_layer_s + sync.apply_per_row_s, 0);
  EXPECT_DOUBLE_EQ(async.apply_per_layer_s, 2 * c.work_wait_s + 2 * c.torch_cpu_op_s +
                                                c.small_copy_s + 3 * c.torch_gpu_op_s);
  EXPECT_DOUBLE_EQ(async.apply_per_row_s, kTensors * c.torch_gpu_op_s);
  // The worker no longer writes back: a received expert and a local move each save a copy_
  // per tensor; what the rank sends and its layer's planning cost the same.
  EXPECT_NEAR(sync.per_receive_s - async.per_receive_s, kTensors * c.torch_gpu_op_s, 1e-15);
  EXPECT_NEAR(sync.per_local_copy_s - async.per_local_copy_s, kTensors * c.torch_gpu_op_s, 1e-15);
  EXPECT_DOUBLE_EQ(sync.per_send_s, async.per_send_s);
  EXPECT_DOUBLE_EQ(sync.per_layer_s, async.per_layer_s);
  // SGLang has no async mode and eplb no orchestration: nothing to apply.
  EXPECT_DOUBLE_EQ(
      WorkerCostsOf(Engine::kSglang, Transport::kNccl, kTensors, 2, 8, kRanks, {.async = true})
          .apply_per_row_s,
      0);
}

TEST(EngineProfile, SglangOperationCounts) {
  // Rank 0 of the cycle (2 slots, 8 layer slots, 2 experts held, 1 sent, 1 received): two
  // loops over its 2 slots; scans of 1 changed slot x 2 (same-gpu), 1 remote x 2 (free-rider)
  // and (1 received + 2 held) x 2 x 8 (_compute_comm_info); an isend and an irecv per tensor,
  // one batch, a wait each; a copy_ back per tensor.
  const LayerOpCounts n = CountSglangLayerOps(kTensors, Work()[0]);
  EXPECT_EQ(n.python_iters, 4);
  EXPECT_EQ(n.scan_elems, 2 + 2 + 48);
  EXPECT_EQ(n.p2p_posts, 8);
  EXPECT_EQ(n.batches, 1);
  EXPECT_EQ(n.waits, 8);
  EXPECT_EQ(n.writeback_copies, 4);
  EXPECT_EQ(n.barriers + n.nixl_calls + n.polls, 0);
  EXPECT_DOUBLE_EQ(AsyncStepOverheadS(Engine::kSglang, kRanks), 0);
}

// SGLang's once-per-update work on 2 layers of 6 experts in 8 slots, 4 ranks on 2 nodes, 4
// expert groups (hierarchical: 2 groups a node):
//   policy: packing the groups, 2 x 4 items into 2 nodes; replicating, (8 - 6) / 2 = 1 slot a
//   node x 6 ops; packing the slots, 2 x 8 items into 4 / 2 = 2 GPUs; 23 ops around them.
//   maps: per layer and expert (12) a synchronising copy, 5 ops and an iteration; per layer,
//   expert and rank (48) an iteration and a comprehension calling a function on each of 8 / 6
//   replicas; a setitem per
//   layer and slot (16); 8 small copies, 11 kernels and 2 synchronisations.
TEST(EngineProfile, SglangOncePerUpdate) {
  const OpCosts& c = VllmOpCosts();
  const RearrangementOnce once = PriceOnce(Engine::kSglang, 2, 6, 8, EpShape{4, 2, 4});
  EXPECT_DOUBLE_EQ(once.window_reduce_s, 7 * c.torch_gpu_op_s + c.small_copy_s);
  EXPECT_NEAR(once.policy_s,
              (23 + 6 * 1) * c.torch_cpu_op_s + 8 * (c.packing_item_s + 2 * c.packing_per_pack_s) +
                  16 * (c.packing_item_s + 2 * c.packing_per_pack_s),
              1e-15);
  EXPECT_NEAR(once.maps_s,
              12 * (c.small_copy_s + 5 * c.torch_cpu_op_s + c.python_iter_s) +
                  48 * (c.python_iter_s + 8.0 / 6.0 * c.python_call_scan_s) +
                  16 * c.torch_cpu_op_s + 8 * c.small_copy_s + 11 * c.torch_gpu_op_s +
                  2 * c.stream_sync_s,
              1e-15);
  // Without groups, or with one slot a GPU, the packing loops vanish.
  const RearrangementOnce flat = PriceOnce(Engine::kSglang, 2, 8, 8, EpShape{8, 1, 1});
  EXPECT_NEAR(flat.policy_s, 23 * c.torch_cpu_op_s, 1e-15);
  // DeepSeek-V3 at EP32 on 4 nodes (58 MoE layers, 288 slots, 8 groups): about a second, as
  // SGLang #7879 says of its CPU work (~1 s) and #13423 of the dispatch map alone (~1 s).
  const RearrangementOnce v3 = PriceOnce(Engine::kSglang, 58, 256, 288, EpShape{32, 4, 8});
  EXPECT_GT(v3.total_s(), 0.5);
  EXPECT_LT(v3.total_s(), 2.0);
}

TEST(EngineProfile, ParseNamesTheValidEngines) {
  EXPECT_EQ(*ParseEngine("vllm"), Engine::kVllm);
  EXPECT_EQ(*ParseEngine("eplb"), Engine::kEplb);
  EXPECT_EQ(*ParseEngine("sglang"), Engine::kSglang);
  const auto bad = ParseEngine("trtllm");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "engine 'trtllm' is not one of eplb, vllm, sglang");
}

TEST(EngineProfile, SglangMovesWeightsOverNcclOnly) {
  auto s = LoadScenarioFile(std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml",
                            {"migration.engine=sglang", "migration.transport=nixl"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find(
                "migration.engine is 'sglang', which moves the weights with torch.distributed "
                "P2P only, but migration.transport is 'nixl'; valid with sglang: nccl"),
            std::string::npos)
      << s.status().message();
  EXPECT_TRUE(
      LoadScenarioFile(std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml", {"migration.engine=sglang"})
          .ok());
}

TEST(EngineProfile, MigrationBatchingIsVllmsOption) {
  auto s =
      LoadScenarioFile(std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml", {"migration.batching=true"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("migration.batching is true, which is vLLM's option, but "
                                      "migration.engine is 'eplb'; valid: false, or "
                                      "migration.engine vllm"),
            std::string::npos)
      << s.status().message();
  auto ok = LoadScenarioFile(std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml",
                             {"migration.batching=true", "migration.engine=vllm"});
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_TRUE(ok->migration.batching);
}

}  // namespace
}  // namespace eplb

namespace eplb {
namespace {

// The published stall figures' set-ups (scenarios/published/figures.yaml), priced as
// validate --published prices them (links, per-layer transport costs, local copies) plus the
// engine's orchestration. Prints the breakdown the figures' notes quote; asserts only what the
// model must hold (the orchestration adds time; the breakdown sums).
struct StallParts {
  double links_s = 0, transport_s = 0, copies_s = 0;
  RearrangementOrchestration engine;
  double total_s() const { return links_s + transport_s + copies_s + engine.total_s(); }
};

StallParts PriceFigure(const std::string& scenario, const std::vector<std::string>& set) {
  auto s = LoadScenarioFile(std::string(EPLB_SCENARIO_DIR) + "/published/" + scenario, set);
  EXPECT_TRUE(s.ok()) << s.status().message();
  const TransportCost transport = CostOf(s->migration.transport, s->migration.engine);
  TopologyConfig links = s->topology().config();
  if (transport.flow_bytes_per_s > 0) {
    for (LinkSpec* l : {&links.nvlink, &links.nic}) {
      l->bandwidth_bytes_per_s = std::min(l->bandwidth_bytes_per_s, transport.flow_bytes_per_s);
    }
  }
  const Topology topology = *Topology::Create(links);
  auto workload = MakeWorkload(*s);
  const Placement initial = *Placement::Initial(s->model.layers, s->model.experts, s->num_slots());
  LoadMatrix step(s->model.layers, s->model.experts), window(s->model.layers, s->model.experts);
  window.setZero();
  for (int i = 0; i < 32; ++i) {
    (*workload)->Next(step);
    window += step;
  }
  auto policy = MakePolicy(s->eplb.policy);
  const Placement target =
      *(*policy)->Rebalance(PolicyInput{window, s->topology(), &initial, s->model.groups});
  const std::vector<LayerPlan> plans =
      *PlanMigration(initial, target, topology, s->eplb.sender_rule);
  StallParts out;
  std::vector<double> links_s;
  const int gpus = s->num_gpus();
  for (const LayerPlan& plan : plans) {
    std::vector<double> received(gpus, 0.0), messages(gpus, 0.0), copies(gpus, 0.0);
    for (const Transfer& t : plan.transfers) {
      received[t.dst_rank] += double(t.bytes);
      messages[t.dst_rank] += 1;
    }
    for (const LocalCopy& c : plan.local_copies) copies[c.rank] += double(s->model.expert_bytes);
    double l = 0;
    if (transport.from_host) {
      for (const Reload& r : plan.reloads) received[r.rank] += double(r.bytes);
      l = *std::max_element(received.begin(), received.end()) / (s->cluster.host_read_gbps * 1e9) +
          s->cluster.host_read_latency_us * 1e-6;
    } else {
      l = ScheduleTransfers(plan.transfers, topology, s->eplb.schedule).makespan_s;
      out.transport_s +=
          transport.per_message_s * *std::max_element(messages.begin(), messages.end());
    }
    out.transport_s += transport.per_layer_s;
    out.copies_s += *std::max_element(copies.begin(), copies.end()) / (s->cluster.hbm_gbps * 1e9);
    out.links_s += l;
    links_s.push_back(l);
  }
  out.engine = PriceRearrangement(s->migration.engine, s->migration.transport,
                                  s->model.expert_tensors, initial, plans, links_s, s->ep_shape());
  const auto& e = out.engine;
  std::cout << fmt::format(
      "{} {}: {} layers; total {:.4g} ms = links {:.4g} + transport {:.4g} + copies {:.4g} + "
      "engine {:.4g} (window {:.3g}, policy {:.3g}, maps {:.3g}; per layer planning {:.3g}, "
      "transfer {:.3g}, barrier {:.3g}, polling {:.3g}, write-back {:.3g})\n",
      scenario, fmt::join(set, " "), e.num_layers, out.total_s() * 1e3, out.links_s * 1e3,
      out.transport_s * 1e3, out.copies_s * 1e3, e.total_s() * 1e3, e.once.window_reduce_s * 1e3,
      e.once.policy_s * 1e3, e.once.maps_s * 1e3, e.layers.planning_s * 1e3 / e.num_layers,
      e.layers.transfer_s * 1e3 / e.num_layers, e.layers.barrier_s * 1e3 / e.num_layers,
      e.layers.polling_s * 1e3 / e.num_layers, e.layers.writeback_s * 1e3 / e.num_layers);
  return out;
}

TEST(EngineProfile, PublishedStallSetups) {
  const std::vector<std::string> nixl = {"model.expert_bytes=25165824", "migration.transport=nixl",
                                         "model.expert_tensors=6"};
  std::vector<std::string> vllm_nixl = nixl;
  vllm_nixl.push_back("migration.engine=vllm");
  const StallParts before = PriceFigure("gb200-deepseek-r1.yaml", nixl);
  const StallParts after = PriceFigure("gb200-deepseek-r1.yaml", vllm_nixl);
  EXPECT_DOUBLE_EQ(before.engine.total_s(), 0);
  EXPECT_GT(after.total_s(), before.total_s());
  // vLLM's counts replace NIXL's per-layer and per-message estimates; the links stay.
  EXPECT_DOUBLE_EQ(after.transport_s, 0);
  EXPECT_DOUBLE_EQ(after.links_s, before.links_s);
  const auto& e = after.engine;
  EXPECT_DOUBLE_EQ(e.total_s(), e.once.window_reduce_s + e.once.policy_s + e.once.maps_s +
                                    e.layers.planning_s + e.layers.transfer_s + e.layers.barrier_s +
                                    e.layers.polling_s + e.layers.writeback_s);

  const std::vector<std::string> lite = {"cluster.nodes=1",
                                         "compute.gpu=H100",
                                         "cluster.nvlink.bandwidth_gbps=450",
                                         "model.layers=26",
                                         "model.experts=64",
                                         "model.groups=1",
                                         "model.topk_groups=0",
                                         "model.top_k=6",
                                         "model.hidden=2048",
                                         "model.expert_bytes=17301504",
                                         "eplb.num_redundant_experts=0",
                                         "model.expert_tensors=2",
                                         "migration.engine=vllm"};
  PriceFigure("h800-deepseek-v3.yaml", lite);
  std::vector<std::string> lite_nixl = lite;
  lite_nixl.push_back("migration.transport=nixl");
  PriceFigure("h800-deepseek-v3.yaml", lite_nixl);
  // SGLang on the #43219 set-up over NCCL: its per-layer host work, for the what-ifs.
  PriceFigure("gb200-deepseek-r1.yaml",
              {"model.expert_bytes=25165824", "model.expert_tensors=6", "migration.engine=sglang"});
}

}  // namespace
}  // namespace eplb
