#include "eplb/migrate/engine_profile.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "eplb/migrate/names.h"

namespace eplb {

const char* EngineName(Engine engine) {
  return kEngineNames.Name(engine);
}

std::vector<std::string> EngineNames() {
  return kEngineNames.List();
}

Result<Engine> ParseEngine(const std::string& name) {
  if (const auto e = kEngineNames.Find(name)) return *e;
  return Status::InvalidArgument(
      fmt::format("engine '{}' is not one of {}", name, kEngineNames.Joined()));
}

// The one table of per-operation costs. Each value is a published measurement or one made on
// this project's machine with the same library calls (a 2-core Intel Xeon VM, numpy and torch
// 2.x on the CPU: tools/bench/engine_host_ops.py). No entry is fitted to a published figure.
const OpCosts& VllmOpCosts() {
  static const OpCosts costs = [] {
    OpCosts c;
    // An eager PyTorch op that launches a kernel or an async copy (copy_, non_blocking):
    // Python, pybind11, the dispatcher and cudaLaunchKernel/cudaMemcpyAsync, "~5-25 µs of
    // CPU-side work per op" (J. Lin, "From PyTorch op to kernel launch", GPU kernel serving
    // lesson 18); NVIDIA's Nsight Systems guide measures ~20 µs for a PyTorch element-wise
    // kernel on a V100. The middle of the range:
    c.torch_gpu_op_s = 10e-6;
    // A small CPU tensor op: x + 2 on 100 floats, 2.1 µs measured (torch 2.x, this machine);
    // PyTorch's operator micro-benchmarks give split on CPU 2.3-3.4 µs (pytorch #32194).
    c.torch_cpu_op_s = 2e-6;
    // np.unique(return_index=True) on a rank's 9 slots: 3.4 µs measured; masks and index
    // lookups 0.3-0.7 µs. Planning's calls are mostly of the first kind.
    c.numpy_call_s = 3e-6;
    // np.isin(288 slots, 9 experts): 21 µs measured.
    c.numpy_isin_s = 20e-6;
    // A Python loop iteration with a dict lookup or list append: 0.02 µs measured for the
    // lookup alone; vLLM's loops do a few such operations and a tolist() per iteration.
    c.python_iter_s = 0.5e-6;
    // [x // n for x in range(288) if old[x] == e]: 0.017 µs an element measured.
    c.python_scan_s = 0.02e-6;
    // An isend/irecv inside batch_isend_irecv reaches ncclSend/ncclRecv through
    // ProcessGroupNCCL: an eager op's host path, as torch_gpu_op_s.
    c.p2p_post_s = 10e-6;
    // Work.wait() on an NCCL request makes the current stream wait on the work's CUDA event
    // (cudaStreamWaitEvent): a driver call, the low end of the launch range above.
    c.work_wait_s = 5e-6;
    // cudaStreamSynchronize on a stream whose work has finished, and a small cudaMemcpy
    // between host and device: ~10 µs each (the CUDA launch range above; a small D2H copy is a
    // synchronous driver round trip).
    c.stream_sync_s = 10e-6;
    c.small_copy_s = 10e-6;
    // One NIXL call from Python (make_prepped_xfer, transfer, release_xfer_handle): UCX's
    // cuda_ipc overhead, 7 µs as `ucx_info -d` prints it (vLLM #26382), plus a Python-to-C++
    // binding call (torch_gpu_op_s's range).
    c.nixl_call_s = 17e-6;
    // NIXL's completion poll: time.sleep(0.0005) between check_xfer_state rounds
    // (eplb_communicator.py, NixlEplbCommunicator._wait_for_all_transfers).
    c.nixl_poll_period_s = 0.5e-3;
    // One small gloo operation called through torch.distributed, end to end: torchft #199
    // measured 5,014 all_reduces of 10 elements a second over TCP (0.2 ms each). A staged
    // tensor's gloo send or receive costs as much.
    c.gloo_op_s = 0.2e-3;
    c.gloo_message_s = 0.2e-3;
    // Each further step of a small gloo exchange (a ring step, or one of the messages
    // monitored_barrier's rank 0 receives and sends, all posted at once): gloo's own benchmark,
    // allreduce_ring of 1 KB over TCP on 16 ranks of 2 servers, 0.354 ms for 2 x 15 steps
    // (pytorch/gloo #158): 11.8 µs a step.
    c.gloo_step_s = 0.354e-3 / 30.0;
    // compute_logical_maps' loop over physical slots: ~9 small CPU tensor ops per slot
    // (index, compare, any, masked index ×3, clamp, index_put, +=); the same op pattern on
    // 58 layers × 288 slots measured 28 µs a slot on this machine.
    c.maps_per_slot_s = 28e-6;
    // vLLM's default policy in Python after #28369: ~80 → ~10 ms for DeepSeek-V2-Lite (26
    // layers × 64 slots), 6 µs per layer and slot, scaled linearly to other shapes.
    c.policy_per_layer_slot_s = 10e-3 / (26.0 * 64.0);
    // DeepSeek's policy as SGLang runs it (torch on the CPU): balanced_packing places each item
    // in the least loaded pack with room, a min whose keys are 0-d tensors. A loop of that
    // pattern on 58 layers x 288 items measured 14.84 us an item into 8 packs and 36.00 into 32
    // (tools/bench/engine_host_ops.py): 7.79 us and 0.88 us per pack.
    c.packing_item_s = 7.8e-6;
    c.packing_per_pack_s = 0.88e-6;
    // [p for p in replicas if gpu_of(p) == g] with a one-line function: 0.058 us an element
    // measured (the same script).
    c.python_call_scan_s = 0.06e-6;
    // vLLM #28562 (an isolated rearrange_expert_weights benchmark before it packed the P2P ops:
    // Qwen3-Next-80B-A3B, 48 MoE layers of 512 experts of 6,291,456 bytes in BF16 (hidden 2048,
    // moe_intermediate 512), 128 redundant experts on 4 H100s): "Total kernel duration for
    // ncclSendRecv Before: 1.7s After: 0.16s". A random rearrangement of 160 slots per GPU
    // brings ~3/4 of them from the 3 other GPUs: 48 x 120 x 6.29 MB = 36.2 GB per rank in 1.7 s,
    // 21.3 GB/s (packed into few large ops: 226 GB/s, the links' rate). Taken per rank, as
    // measured, whatever the number of peers.
    c.p2p_rank_bytes_per_s = 48.0 * 120.0 * 6291456.0 / 1.7;
    return c;
  }();
  return costs;
}

TransportCost CostOf(Transport transport, Engine engine) {
  TransportCost c = CostOf(transport);
  if (engine != Engine::kEplb) c.per_layer_s = c.per_message_s = 0;
  return c;
}

std::vector<RankLayerWork> WorkOfLayer(const LayerPlan& plan, std::span<const int32_t> old_row,
                                       int ranks) {
  std::vector<RankLayerWork> work(static_cast<size_t>(ranks));
  if (ranks <= 0) return work;
  const int slots = static_cast<int>(old_row.size()) / ranks;
  std::vector<std::set<int32_t>> held(work.size()), to(work.size()), from(work.size());
  for (int r = 0; r < ranks; ++r) {
    work[r].slots = slots;
    work[r].layer_slots = static_cast<int>(old_row.size());

    for (int s = r * slots; s < (r + 1) * slots; ++s) {
      if (old_row[s] >= 0) held[r].insert(old_row[s]);
    }
    work[r].held_experts = static_cast<int>(held[r].size());
  }
  for (const Transfer& t : plan.transfers) {
    ++work[t.src_rank].sends;
    ++work[t.dst_rank].receives;
    to[t.src_rank].insert(t.dst_rank);
    from[t.dst_rank].insert(t.src_rank);
  }
  for (const LocalCopy& c : plan.local_copies) {
    ++(c.after_receive ? work[c.rank].duplicates : work[c.rank].local_moves);
  }
  for (int r = 0; r < ranks; ++r) {
    work[r].send_peers = static_cast<int>(to[r].size());
    work[r].recv_peers = static_cast<int>(from[r].size());
  }
  return work;
}

// Counted from vLLM's vllm/distributed/eplb/ (rebalance_execute.py at 009a5c02 and
// eplb_communicator.py at 0c24b1e7, as the project's code index stores them; the zero-copy
// NixlEplbCommunicator that 009a5c02's set_transfer_context/add_recv(expert_id=) calls, from a
// line-by-line walkthrough of eplb_communicator.py :331-551 in the same index, since the
// index's newest copy of the file predates it):
//  - move_to_buffer: ~33 numpy calls on the rank's slots (masks, np.unique, np.isin once);
//    then for its sends get_ep_ranks_with_experts_batch over every expert the rank holds
//    (send_count is the rank's distinct experts, moved or not) and for its receives over the
//    experts it receives: each call ~24 numpy calls (two np.isin over all slots) plus, per
//    queried expert and for each of the old and new maps, a Python loop iteration with
//    np.unique, np.sort, slicing and tolist (~5 calls).
//  - local moves: b[dst].copy_(w[src]) per tensor.
//  - torch_nccl (TorchDistributedEplbCommunicator): one P2POp per tensor per (expert, peer),
//    one batch_isend_irecv, req.wait() per request.
//  - NIXL (zero-copy READs): set_transfer_context, a dict comprehension over every slot of the
//    layer; add_send a no-op; add_recv per received expert a Python loop over its tensors
//    building descriptors, then _create_peer_xfer's get_xfer_descs x2, prep_xfer_dlist x2,
//    make_prepped_xfer, and transfer (6 NIXL calls); execute: _wait_for_all_transfers'
//    check_xfer_state loop with time.sleep(0.0005), then torch.distributed.monitored_barrier
//    over the CPU (gloo) group, then per received expert release_xfer_handle and 2
//    release_dlist_handle.
//  - torch_gloo (GlooCpuStagedEplbCommunicator): .to("cpu") per tensor sent, empty_like per
//    tensor received, a stream synchronize, gloo isend/irecv per tensor and a wait each, then
//    copy_ back per tensor received.
//  - move_from_buffer: ~6 numpy calls (12 more when it received), then w[dst].copy_(b[dst])
//    per written row (local moves and primary receives) per tensor, and per duplicate row.
LayerOpCounts CountVllmLayerOps(Transport transport, int tensors, const RankLayerWork& w) {
  LayerOpCounts n;
  n.numpy_calls = 33;
  n.numpy_isins = 1;
  if (w.held_experts > 0) {
    n.numpy_calls += 3 + 22 + 10 * w.held_experts;
    n.numpy_isins += 2;
    n.python_iters += 3 * w.held_experts + w.sends;
  }
  if (w.receives > 0) {
    n.numpy_calls += 3 + 22 + 10 * w.receives;
    n.numpy_isins += 2;
    n.python_iters += 4 * w.receives;
  }
  n.numpy_calls += 6 + (w.receives > 0 ? 12 : 0);  // move_from_buffer's masks
  n.local_copies = w.local_moves * tensors;
  const int posts = (w.sends + w.receives) * tensors;
  switch (transport) {
    case Transport::kNccl:
      n.p2p_posts = posts;
      n.batches = posts > 0 ? 1 : 0;
      n.waits = posts;
      break;
    case Transport::kNixl:
      n.python_iters += w.layer_slots + w.receives * tensors;
      n.nixl_calls = 6 * w.receives;
      n.polls = w.receives > 0 ? 1 : 0;
      n.barriers = 1;  // every rank's execute() reaches it, with transfers or not
      n.nixl_releases = 3 * w.receives;
      break;
    case Transport::kGloo:
      if (posts > 0) {
        n.host_copies = w.sends * tensors + 2 * w.receives * tensors;
        n.stream_syncs = 1;
        n.p2p_posts = posts;
        n.batches = 1;
        n.waits = posts;
      }
      break;
    case Transport::kHostPool:
      break;  // not a vLLM communicator
  }
  n.writeback_copies = (w.local_moves + w.receives + w.duplicates) * tensors;
  return n;
}

// Counted from SGLang's python/sglang/srt/eplb/expert_location_updater.py (06120cc8, as the
// project's code index stores it), update_expert_weights_single_layer: the layer's two maps
// .tolist(); _handle_recv, a loop over the rank's slots, each changed slot scanning the rank's
// slots for a local source (same-gpu), then the slots before it (free-rider), then for a
// remote one _compute_comm_info, two list comprehensions over every physical slot;
// _create_isend_ops, a loop over the rank's slots and per distinct expert held
// _compute_comm_info again; a P2POp per tensor per (expert, peer), one batch_isend_irecv, a
// wait per request; copy_ per tensor into the buffer per same-gpu move, and back per changed
// slot.
LayerOpCounts CountSglangLayerOps(int tensors, const RankLayerWork& w) {
  LayerOpCounts n;
  const int changed = w.local_moves + w.receives + w.duplicates;
  n.python_iters = w.slots + w.slots;  // _handle_recv's and _create_isend_ops' loops
  n.scan_elems = changed * w.slots + (w.receives + w.duplicates) * w.slots +
                 (w.receives + w.held_experts) * 2 * w.layer_slots;
  n.cpu_ops = 2;
  n.local_copies = w.local_moves * tensors;
  n.p2p_posts = (w.sends + w.receives) * tensors;
  n.batches = n.p2p_posts > 0 ? 1 : 0;
  n.waits = n.p2p_posts;
  n.writeback_copies = changed * tensors;
  return n;
}

LayerOpCounts CountLayerOps(Engine engine, Transport transport, int tensors,
                            const RankLayerWork& work) {
  switch (engine) {
    case Engine::kEplb:
      return {};
    case Engine::kVllm:
      return CountVllmLayerOps(transport, tensors, work);
    case Engine::kSglang:
      return CountSglangLayerOps(tensors, work);
  }
  return {};
}

namespace {

// torch.distributed.monitored_barrier on gloo (ProcessGroupGloo::monitoredBarrier): every rank
// sends to rank 0 and waits for its answer; rank 0 posts a receive from each rank at once, waits
// for them, then sends to each. One operation's round trip, and rank 0's 2 (ranks - 1) messages
// one step each.
double MonitoredBarrierS(const OpCosts& c, int ranks) {
  return ranks > 1 ? c.gloo_op_s + 2.0 * (ranks - 1) * c.gloo_step_s : 0.0;
}

// One rank's host time before its layer's barrier (all of it for the P2P communicators) and
// after it, split as the breakdown reports it.
struct RankTime {
  double planning = 0, issue = 0, after_issue = 0, polling = 0, writeback = 0;
  double before() const { return planning + issue; }
  double after() const { return after_issue + polling + writeback; }
};

RankTime TimeOf(const OpCosts& c, Transport transport, const LayerOpCounts& n, double links_s,
                int batches = 1) {
  RankTime t;
  t.planning = n.numpy_calls * c.numpy_call_s + n.numpy_isins * c.numpy_isin_s +
               n.python_iters * c.python_iter_s + n.scan_elems * c.python_scan_s +
               n.cpu_ops * c.torch_cpu_op_s;
  t.issue = n.local_copies * c.torch_gpu_op_s + n.stream_syncs * c.stream_sync_s +
            n.nixl_calls * c.nixl_call_s;
  if (transport == Transport::kGloo) {
    t.issue +=
        n.host_copies * c.torch_gpu_op_s + n.p2p_posts * c.gloo_message_s + n.waits * c.work_wait_s;
  } else {
    t.issue += n.p2p_posts * c.p2p_post_s + n.waits * c.work_wait_s;
  }
  t.after_issue = n.nixl_releases * c.nixl_call_s;
  if (n.polls > 0) {
    // The reads are checked once right after the last is posted, then every period: the wait
    // lasts whole periods, at least one, in each execution (the links' time shared evenly among
    // them). What the links take anyway is not counted twice.
    const double each = links_s / batches;
    const double whole = std::max(1.0, std::ceil(each / c.nixl_poll_period_s));
    t.polling = batches * std::max(0.0, whole * c.nixl_poll_period_s - each);
  }
  t.writeback = n.writeback_copies * c.torch_gpu_op_s;
  return t;
}

}  // namespace

LayerOrchestration PriceLayer(Engine engine, Transport transport, int tensors,
                              const std::vector<RankLayerWork>& ranks, double links_s,
                              int batches) {
  LayerOrchestration o;
  if (engine == Engine::kEplb || ranks.empty()) return o;
  const OpCosts& c = VllmOpCosts();
  std::vector<RankTime> times;
  times.reserve(ranks.size());
  batches = std::max(1, batches);
  for (const RankLayerWork& w : ranks) {
    LayerOpCounts n = CountLayerOps(engine, transport, tensors, w);
    if (engine == Engine::kVllm && transport == Transport::kNixl && batches > 1) {
      // _execute_migration_batch: set_transfer_context over the layer's slots per execution.
      n.python_iters += (batches - 1) * w.layer_slots;
    }
    times.push_back(TimeOf(c, transport, n, links_s, batches));
  }
  auto slowest = [&](auto key) {
    return *std::max_element(times.begin(), times.end(),
                             [&](const RankTime& a, const RankTime& b) { return key(a) < key(b); });
  };
  if (engine == Engine::kVllm && transport == Transport::kNixl) {
    // Every rank waits at the barrier, after its reads, for the slowest to arrive; after it,
    // the layer lasts as long as the slowest rank's releases and write-back; the barrier
    // itself as MonitoredBarrierS prices it.
    const RankTime first = slowest([](const RankTime& t) { return t.before() + t.polling; });
    const RankTime second = slowest([](const RankTime& t) { return t.after_issue + t.writeback; });
    const int n = static_cast<int>(ranks.size());
    o.planning_s = first.planning;
    o.transfer_s = first.issue + second.after_issue;
    o.polling_s = first.polling;
    o.barrier_s = batches * MonitoredBarrierS(c, n);
    o.writeback_s = second.writeback;
    return o;
  }
  // P2P: a batch completes when both ends have posted, so the layer lasts as long as the
  // slowest rank's host work.
  const RankTime t = slowest([](const RankTime& x) { return x.before() + x.after(); });
  o.planning_s = t.planning;
  o.transfer_s = t.issue + t.after_issue;
  o.polling_s = t.polling;
  o.writeback_s = t.writeback;
  return o;
}

WorkerCosts WorkerCostsOf(Engine engine, Transport transport, int tensors, int slots,
                          int layer_slots, int ranks, WorkerMode mode) {
  WorkerCosts w;
  if (engine == Engine::kEplb || slots <= 0) return w;
  const OpCosts& c = VllmOpCosts();
  // vLLM's async mode writes back on the main thread (the apply_* costs below), not on the
  // worker.
  const bool main_thread_writes = engine == Engine::kVllm && mode.async;
  auto host = [&](const RankLayerWork& work) {
    const RankTime t = TimeOf(c, transport, CountLayerOps(engine, transport, tensors, work), 0);
    return t.planning + t.issue + t.after_issue + (main_thread_writes ? 0 : t.writeback);
  };
  RankLayerWork base;
  base.slots = slots;
  base.layer_slots = layer_slots;
  base.held_experts = slots;
  const double none = host(base);
  w.per_layer_s = none;
  RankLayerWork one = base;
  one.sends = 1;
  one.send_peers = 1;
  w.per_send_s = host(one) - none;
  // Receiving adds a fixed lookup once, then a share per expert: averaged over a rank that
  // receives every slot.
  RankLayerWork all = base;
  all.receives = slots;
  all.recv_peers = 1;
  w.per_receive_s = (host(all) - none) / slots;
  RankLayerWork local = base;
  local.local_moves = 1;
  w.per_local_copy_s = host(local) - none;
  if (engine == Engine::kVllm && transport == Transport::kNixl) {
    const double barrier = MonitoredBarrierS(c, ranks);
    if (mode.batching) {
      // Each execution restores the transfer context (set_transfer_context's loop over the
      // layer's slots), so the rounds carry it, not the layer.
      const double context = layer_slots * c.python_iter_s;
      w.per_round_s = barrier + context;
      w.per_layer_s -= context;
    } else {
      w.barrier_s = barrier;
    }
    w.poll_period_s = c.nixl_poll_period_s;
  }
  w.receive_bytes_per_s = ReceiveBytesPerS(engine, transport);
  if (main_thread_writes) {
    // EplbState.move_to_workspace (eplb_state.py at 50feac95): stream.wait_event on the
    // buffer's event; the layer's new map row .cpu().numpy() (already on the host: two CPU
    // ops); move_from_buffer's copy_ per written row per tensor; a CUDA event made and
    // recorded; _update_layer_mapping_from_new, one host-to-device copy of the physical map's
    // row and three copy_ into the maps. move_from_buffer's numpy masks stay counted with the
    // worker's planning.
    w.apply_per_layer_s =
        2 * c.work_wait_s + 2 * c.torch_cpu_op_s + c.small_copy_s + 3 * c.torch_gpu_op_s;
    w.apply_per_row_s = tensors * c.torch_gpu_op_s;
  }
  return w;
}

double ReceiveBytesPerS(Engine engine, Transport transport) {
  const bool p2p_ops =
      (engine == Engine::kVllm && transport == Transport::kNccl) || engine == Engine::kSglang;
  return p2p_ops ? VllmOpCosts().p2p_rank_bytes_per_s : 0;
}

// eplb_state.py at 50feac95: step() calls _all_ranks_buffer_ready while
// pending_global_ready_check, from rearrange() until the last layer is moved to the workspace.
double AsyncStepOverheadS(Engine engine, int ranks) {
  if (engine != Engine::kVllm || ranks <= 1) return 0;  // SGLang has no async mode
  const OpCosts& c = VllmOpCosts();
  // A ring all_reduce: the first exchange costs a whole operation, each of the other
  // 2 (ranks - 1) - 1 steps one step.
  return c.gloo_op_s + (2.0 * (ranks - 1) - 1) * c.gloo_step_s + c.torch_cpu_op_s;
}

namespace {

// Counted from vLLM's eplb_state.py (EplbState.rearrange) and rebalance_execute.py
// (rearrange_expert_weights_inplace): the load window all_reduce'd across the EP group and
// copied to the CPU; the policy on the CPU; compute_logical_maps, a Python loop over every
// physical slot; the new maps copied to the device (physical_to_logical, logical_to_physical,
// replica counts); the old and new maps copied back to the host once for the layers' plans.
RearrangementOnce VllmOnce(const OpCosts& c, int layers, int slots) {
  RearrangementOnce o;
  o.window_reduce_s = c.torch_gpu_op_s + c.small_copy_s;
  o.policy_s = c.policy_per_layer_slot_s * layers * slots;
  o.maps_s = c.maps_per_slot_s * slots + 5 * c.small_copy_s;
  return o;
}

// Counted from SGLang's python/sglang/srt/eplb/ (eplb_manager.py @53e29da2, rebalance;
// expert_distribution.py @dd780ab9, _StatAccumulator.dump; eplb_algorithms/deepseek.py
// @c3855c54, DeepSeek's eplb.py in torch on the CPU; expert_location.py @6270b014, init_by_eplb,
// _init_raw, compute_logical_to_rank_dispatch_physical_map; expert_location_updater.py
// @dc0fdf0b, the metadata's update), as the project's code index stores them. SGLang counts its
// metadata over all hidden layers (61 for DeepSeek-V3); this counts the MoE layers.
RearrangementOnce SglangOnce(const OpCosts& c, int layers, int experts, int slots,
                             const EpShape& ep) {
  RearrangementOnce o;
  const double L = layers, E = experts, P = slots, R = std::max(1, ep.ranks);
  // dump_record: the buffered counts scattered to logical experts (3 kernels), one NCCL
  // all_reduce over the world, the buffers zeroed (2); the policy's sum and .float().cpu().
  // The all_reduce's bytes (4 x buffer steps x layers x experts) are not priced.
  o.window_reduce_s = 7 * c.torch_gpu_op_s + c.small_copy_s;
  // DeepSeek's policy in torch: hierarchical when the groups divide among the nodes.
  const bool hierarchical = ep.groups > 1 && ep.groups % std::max(1, ep.nodes) == 0;
  const double N = hierarchical ? std::max(1, ep.nodes) : 1, G = hierarchical ? ep.groups : 1;
  // The vectorised steps around the loops (~23 CPU tensor ops), and replicate_experts, ~6 per
  // redundant slot of a node.
  o.policy_s = (23 + 6 * (P - E) / N) * c.torch_cpu_op_s;
  // balanced_packing of each layer's groups onto the nodes (trivial at one group a node), then
  // of each node's slots onto its GPUs (trivial at one slot a GPU).
  auto packing = [&](double items, double packs) {
    return items * (c.packing_item_s + packs * c.packing_per_pack_s);
  };
  if (G / N > 1) o.policy_s += packing(L * G, N);
  if (P > R) o.policy_s += packing(L * P, R / N);
  // ExpertLocationMetadata: two maps to the device and one back, a pad and a count (3 kernels);
  // compute_logical_to_rank_dispatch_physical_map, for each layer and logical expert the
  // replicas' list from the device (.tolist(), a synchronising copy), ~5 CPU ops and a draw,
  // then for each GPU a list comprehension over the replicas (P / E on average), each element a
  // call of _compute_gpu_id_of_physical_expert, and a setitem where one is on that GPU (at most
  // one per slot); its result to the device; the two device synchronisations around the update;
  // the metadata's update, 4 fields to the device with 2 kernels each.
  o.maps_s = (3 + 1 + 4) * c.small_copy_s + (3 + 8) * c.torch_gpu_op_s + 2 * c.stream_sync_s +
             L * E * (c.small_copy_s + 5 * c.torch_cpu_op_s + c.python_iter_s) +
             L * E * R * (c.python_iter_s + (P / std::max(1.0, E)) * c.python_call_scan_s) +
             L * P * c.torch_cpu_op_s;
  return o;
}

}  // namespace

RearrangementOnce PriceOnce(Engine engine, int layers, int experts, int slots, const EpShape& ep) {
  const OpCosts& c = VllmOpCosts();
  switch (engine) {
    case Engine::kEplb:
      return {};
    case Engine::kVllm:
      return VllmOnce(c, layers, slots);
    case Engine::kSglang:
      return SglangOnce(c, layers, experts, slots, ep);
  }
  return {};
}

RearrangementOrchestration PriceRearrangement(Engine engine, Transport transport, int tensors,
                                              const Placement& before,
                                              std::span<const LayerPlan> plans,
                                              std::span<const double> links_s, const EpShape& ep,
                                              std::span<const int> batches) {
  RearrangementOrchestration r;
  const int ranks = ep.ranks;
  r.once = PriceOnce(engine, before.num_layers(), before.num_experts(), before.num_slots(), ep);

  for (size_t i = 0; i < plans.size(); ++i) {
    const LayerPlan& plan = plans[i];
    const LayerOrchestration o =
        PriceLayer(engine, transport, tensors, WorkOfLayer(plan, before.phy2log(plan.layer), ranks),
                   links_s[i], i < batches.size() ? batches[i] : 1);
    r.layers.planning_s += o.planning_s;
    r.layers.transfer_s += o.transfer_s;
    r.layers.barrier_s += o.barrier_s;
    r.layers.polling_s += o.polling_s;
    r.layers.writeback_s += o.writeback_s;
    ++r.num_layers;
  }
  return r;
}

}  // namespace eplb
