// Engine profiles: the operations vLLM's code performs for a hand-computed rearrangement, per
// communicator, and the host time they add (migrate/engine_profile.h).
#include "eplb/migrate/engine_profile.h"

#include <vector>

#include <gtest/gtest.h>

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
  int p2p_posts, batches, waits, pack, unpack, syncs, barriers, nixl_calls, polls, host_copies,
      writeback;
};
Totals Sum(Transport transport) {
  Totals t{};
  for (int layer = 0; layer < kLayers; ++layer) {
    for (const RankLayerWork& w : Work()) {
      const LayerOpCounts n = CountVllmLayerOps(transport, kTensors, DtypesOf(kTensors), w);
      t.p2p_posts += n.p2p_posts;
      t.batches += n.batches;
      t.waits += n.waits;
      t.pack += n.pack_copies;
      t.unpack += n.unpack_copies;
      t.syncs += n.stream_syncs;
      t.barriers += n.barriers;
      t.nixl_calls += n.nixl_calls;
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
      {Transport::kNccl, {48, 6, 48, 0, 0, 0, 0, 0, 0, 0, 24}},
      // NIXL: pack per tensor sent, unpack per tensor received, a stream sync and a barrier per
      // active rank and layer, per dtype (FP8 weights, FP32 scales) and source peer
      // make_prepped_xfer + transfer + release, one poll loop per dtype on a receiving rank.
      {Transport::kNixl, {0, 0, 0, 24, 24, 6, 6, 36, 12, 0, 24}},
      // torch_gloo: .to("cpu") per tensor sent, empty_like and copy_ back per tensor received,
      // gloo isend/irecv per tensor with a wait each.
      {Transport::kGloo, {48, 6, 48, 0, 0, 6, 0, 0, 0, 72, 24}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(TransportName(c.transport));
    const Totals got = Sum(c.transport);
    EXPECT_EQ(got.p2p_posts, c.want.p2p_posts);
    EXPECT_EQ(got.batches, c.want.batches);
    EXPECT_EQ(got.waits, c.want.waits);
    EXPECT_EQ(got.pack, c.want.pack);
    EXPECT_EQ(got.unpack, c.want.unpack);
    EXPECT_EQ(got.syncs, c.want.syncs);
    EXPECT_EQ(got.barriers, c.want.barriers);
    EXPECT_EQ(got.nixl_calls, c.want.nixl_calls);
    EXPECT_EQ(got.polls, c.want.polls);
    EXPECT_EQ(got.host_copies, c.want.host_copies);
    EXPECT_EQ(got.writeback, c.want.writeback);
  }
}

TEST(EngineProfile, PlanningCountsFollowTheHeldExperts) {
  // Rank 0 of the cycle: move_to_buffer's 33 calls and one np.isin; the send side's lookup over
  // the 2 experts it holds (3 + 22 + 10 each, two np.isin); the receive side's over its 1
  // expert (3 + 22 + 10, two np.isin); move_from_buffer's 6 + 12.
  const LayerOpCounts n = CountVllmLayerOps(Transport::kNccl, kTensors, 2, Work()[0]);
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
      PriceLayer(Engine::kVllm, Transport::kNccl, kTensors, 2, work, links_s);
  EXPECT_DOUBLE_EQ(nccl.planning_s, planning);
  EXPECT_DOUBLE_EQ(nccl.transfer_s, transfer);
  EXPECT_DOUBLE_EQ(nccl.writeback_s, writeback);
  EXPECT_DOUBLE_EQ(nccl.barrier_s, 0);
  EXPECT_DOUBLE_EQ(nccl.total_s(), planning + transfer + writeback);

  // NIXL: the slowest rank to the barrier, a 2-round barrier (4 ranks), then the reads: the
  // weights' dtype polls one whole period (0.2 ms of links < 0.5 ms), the scales' one more.
  const LayerOrchestration nixl =
      PriceLayer(Engine::kVllm, Transport::kNixl, kTensors, 2, work, links_s);
  EXPECT_DOUBLE_EQ(nixl.planning_s, planning);
  EXPECT_DOUBLE_EQ(nixl.barrier_s, 2 * c.gloo_hop_s);
  EXPECT_DOUBLE_EQ(nixl.polling_s, 2 * c.nixl_poll_period_s - links_s);
  EXPECT_DOUBLE_EQ(nixl.transfer_s, 4 * c.torch_gpu_op_s + c.stream_sync_s + 6 * c.nixl_call_s +
                                        4 * c.torch_gpu_op_s);
  EXPECT_DOUBLE_EQ(nixl.writeback_s, 4 * c.torch_gpu_op_s);
  EXPECT_DOUBLE_EQ(nixl.total_s(), nixl.planning_s + nixl.transfer_s + nixl.barrier_s +
                                       nixl.polling_s + nixl.writeback_s);

  // eplb's own profile adds nothing to the transport's costs.
  EXPECT_DOUBLE_EQ(
      PriceLayer(Engine::kEplb, Transport::kNixl, kTensors, 2, work, links_s).total_s(), 0);
}

TEST(EngineProfile, OncePerRearrangement) {
  const OpCosts& c = VllmOpCosts();
  const RearrangementOnce once = PriceOnce(Engine::kVllm, kLayers, 8, kRanks);
  EXPECT_DOUBLE_EQ(once.policy_s, c.policy_per_layer_slot_s * kLayers * 8);
  EXPECT_DOUBLE_EQ(once.maps_s, 8 * c.maps_per_slot_s + 5 * c.small_copy_s);
  EXPECT_DOUBLE_EQ(once.total_s(), once.window_reduce_s + once.policy_s + once.maps_s);
  EXPECT_DOUBLE_EQ(PriceOnce(Engine::kEplb, kLayers, 8, kRanks).total_s(), 0);
}

TEST(EngineProfile, DtypesPerQuantization) {
  EXPECT_EQ(DtypesOf(2), 1);  // BF16
  EXPECT_EQ(DtypesOf(4), 2);  // FP8 weights, FP32 scales
  EXPECT_EQ(DtypesOf(6), 3);  // NVFP4: packed weights, FP8 block scales, FP32 global scales
}

TEST(EngineProfile, ParseNamesTheValidEngines) {
  EXPECT_EQ(*ParseEngine("vllm"), Engine::kVllm);
  EXPECT_EQ(*ParseEngine("eplb"), Engine::kEplb);
  const auto bad = ParseEngine("sglang");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "engine 'sglang' is not one of eplb, vllm");
}

}  // namespace
}  // namespace eplb
