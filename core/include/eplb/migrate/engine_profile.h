// Engine profiles (`migration.engine`): what an engine's own code does around the bytes of a
// rearrangement, operation by operation, and what each operation costs on the host. The bytes
// keep going through the links (migrate/transport.h, the simulator); a profile adds the host
// time the engine spends issuing them: its planning, its per-tensor copies and P2P calls, its
// barriers (which wait for the slowest rank), its completion polling, and once per
// rearrangement the load window's reduction, the policy on the CPU and the maps' rebuild.
//
//   eplb  nothing beyond the transport's costs (what eplb priced before the profiles; the
//         default): eplb's own device backend issues one group per layer from C++.
//   vllm  vLLM's EPLB (vllm/distributed/eplb/): counted from the code in engine_profile.cpp,
//         per rearrangement, per layer, per expert moved and per weight tensor
//         (model.expert_tensors), for the communicator migration.transport names (nccl:
//         torch_nccl; nixl; gloo: torch_gloo's CPU staging); in async mode also each step's
//         readiness check while a rearrangement is in flight (AsyncStepOverheadS).
//   sglang  SGLang's ExpertLocationUpdater (torch.distributed P2P, i.e. nccl): per layer Python
//         loops over the rank's slots and, per expert it receives or holds, scans of every
//         physical slot; a P2POp per tensor per expert, one batch, a wait per request; copy_
//         per tensor per move. Its policy and once-per-update work are not counted.
//
// Every per-operation cost lives in one table (OpCosts, VllmOpCosts()) with its source beside
// it. Counts are per rank and per layer; the layer's time is the slowest rank's host work up to
// the layer's barrier, the barrier, then the slowest rank's work after it (NIXL), or the
// slowest rank's whole host work (the P2P communicators, whose group completes only when both
// ends have posted). Host work and the links' time are in series (the reads NIXL issues
// eagerly may overlap the rest of the issuing; not credited).
//
// Thread-safety: pure functions of immutable values.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "eplb/base/status.h"
#include "eplb/migrate/transfer_plan.h"
#include "eplb/migrate/transport.h"

namespace eplb {

enum class Engine { kEplb, kVllm, kSglang };
const char* EngineName(Engine engine);
std::vector<std::string> EngineNames();  // every engine's name, in the enum's order
Result<Engine> ParseEngine(const std::string& name);

// Seconds per host operation; each entry's source is beside its value in engine_profile.cpp.
struct OpCosts {
  double torch_gpu_op_s = 0;      // an eager PyTorch op that launches a kernel or copy (copy_)
  double torch_cpu_op_s = 0;      // an eager PyTorch op on a small CPU tensor
  double numpy_call_s = 0;        // a numpy call on a small array (np.unique, a mask, an index)
  double numpy_isin_s = 0;        // np.isin of the layer's slots against a few experts
  double python_scan_s = 0;       // one element of a list comprehension scanning the slots
  double python_iter_s = 0;       // one iteration of a plain Python loop with a dict/list op
  double p2p_post_s = 0;          // one isend/irecv posted inside batch_isend_irecv
  double work_wait_s = 0;         // one Work.wait() on an NCCL request (a stream-wait event)
  double stream_sync_s = 0;       // cudaStreamSynchronize on a stream whose work has finished
  double small_copy_s = 0;        // a small device-host copy (.cpu(), .to(device))
  double nixl_call_s = 0;         // one NIXL call (make_prepped_xfer, transfer, release)
  double nixl_poll_period_s = 0;  // NIXL's completion poll sleeps this long between checks
  double gloo_op_s = 0;           // one small gloo operation through torch.distributed, end to end
  double gloo_step_s = 0;         // each further step of a small gloo exchange (ring step, message)
  double gloo_message_s = 0;      // one gloo send or receive of a staged tensor (CPU work)
  double maps_per_slot_s = 0;     // compute_logical_maps: one slot's loop iteration (~9 ops)
  double policy_per_layer_slot_s = 0;  // the engine's Python policy, per layer and slot
  // DeepSeek's policy in torch (SGLang's): its greedy packing, per item placed, a fixed part and
  // a part per pack the min looks at.
  double packing_item_s = 0;
  double packing_per_pack_s = 0;
  // A list-comprehension element that calls a small Python function (SGLang's dispatch map).
  double python_call_scan_s = 0;
  // What one rank receives per second when its transfers are torch.distributed P2P ops, one per
  // tensor per expert, in one batch_isend_irecv (vLLM's torch_nccl, SGLang): NCCL runs them as
  // many small operations, far below the links' rate.
  double p2p_rank_bytes_per_s = 0;
};
const OpCosts& VllmOpCosts();

// The operations one rank performs for one layer, counted from the engine's code.
struct LayerOpCounts {
  int numpy_calls = 0;    // planning (move_to_buffer, get_ep_ranks_with_experts_batch)
  int numpy_isins = 0;    // planning's np.isin calls (the slot-wide ones)
  int scan_elems = 0;     // SGLang: list-comprehension elements scanning the slots
  int cpu_ops = 0;        // small CPU tensor ops (SGLang: the maps' .tolist())
  int python_iters = 0;   // planning's Python loops
  int local_copies = 0;   // copy_ into the buffer, one per tensor per local move
  int p2p_posts = 0;      // isend/irecv (or gloo send/recv), one per tensor per expert
  int batches = 0;        // batch_isend_irecv calls
  int waits = 0;          // req.wait(), one per posted op
  int stream_syncs = 0;   // gloo: the stream synchronised before the CPU transfers
  int barriers = 0;       // NIXL: a gloo monitored_barrier over all EP ranks
  int nixl_calls = 0;     // NIXL: per received expert 2 descriptor lists, 2 preps, xfer, post
  int nixl_releases = 0;  // NIXL: per received expert its xfer and 2 dlist handles
  int polls = 0;          // NIXL: completion poll loops (one per layer on a receiving rank)

  int host_copies = 0;       // gloo: .to("cpu") per tensor sent, copy_ back per tensor received
  int writeback_copies = 0;  // move_from_buffer: copy_ per written row per tensor
};

// What a rank does in a layer, from the layer's plan.
struct RankLayerWork {
  int slots = 0;        // the rank's slots (num_local_experts)
  int layer_slots = 0;  // the layer's slots on all ranks (set_transfer_context's loop)

  int held_experts = 0;  // distinct experts the rank holds before (vLLM's send candidates)
  int sends = 0;         // (expert, destination) pairs the rank sends
  int receives = 0;      // experts the rank receives from another rank
  int local_moves = 0;   // slots filled from an expert already on the rank
  int duplicates = 0;    // slots filled by copying an expert the rank just received
  int send_peers = 0;    // distinct ranks it sends to
  int recv_peers = 0;    // distinct ranks it receives from
};

// Each rank's work in `plan`; `old_row` is the layer's phy2log before (topology.num_slots()).
std::vector<RankLayerWork> WorkOfLayer(const LayerPlan& plan, std::span<const int32_t> old_row,
                                       int ranks);

// `tensors`: weight tensors per expert (model.expert_tensors).
LayerOpCounts CountVllmLayerOps(Transport transport, int tensors, const RankLayerWork& work);
LayerOpCounts CountSglangLayerOps(int tensors, const RankLayerWork& work);
// The engine's counts (eplb: none).
LayerOpCounts CountLayerOps(Engine engine, Transport transport, int tensors,
                            const RankLayerWork& work);

// One layer's host time, split where the engine spends it.
struct LayerOrchestration {
  double planning_s = 0;   // the slowest rank's planning
  double transfer_s = 0;   // host work issuing and completing the transfers (slowest rank)
  double barrier_s = 0;    // the barrier itself plus the wait for the slowest rank to reach it
  double polling_s = 0;    // time lost to the poll period beyond the links' own time
  double writeback_s = 0;  // move_from_buffer's copies (slowest rank)
  double total_s() const { return planning_s + transfer_s + barrier_s + polling_s + writeback_s; }
};

// The layer's orchestration across `ranks` ranks (each's work), given the links' time for the
// layer's bytes (`links_s`), which the orchestration does not include. `batches`: the
// communicator executions the layer takes, 1 unless vLLM's migration batching
// (migration.batching) splits it into rounds in which a rank talks to at most one peer: with
// NIXL each execution restores the transfer context, polls and passes its own barrier.
LayerOrchestration PriceLayer(Engine engine, Transport transport, int tensors,
                              const std::vector<RankLayerWork>& ranks, double links_s,
                              int batches = 1);

// The transport's own costs (migrate/transport.h) under an engine profile: vllm's counts
// replace the transport's per-layer and per-message CPU estimates (NIXL's barrier and polls,
// gloo's per-message work), which would otherwise count twice; the rates stay.
TransportCost CostOf(Transport transport, Engine engine);

// The same counts as the simulator's workers pay them, one rank at a time: per layer (planning
// over the rank's `slots` and NIXL's set_transfer_context over `layer_slots`), per expert sent,
// per expert received (its planning, posts, waits or NIXL calls and releases, write-back), per
// local move, and NIXL's barrier (priced as a wait) and poll period. Zero for eplb.
//
// In vLLM's async mode the worker thread only fills the buffer (transfer_layer); the main thread
// applies each layer at a step (EplbState.move_to_workspace): it waits on the buffer's event,
// copies each written row back per tensor (move_from_buffer), records the consumed event and
// updates the layer's three maps. That work is the apply_* costs, paid by the step that applies
// the layer, and the workers' costs then hold no write-back.
struct WorkerCosts {
  double per_layer_s = 0;
  double per_send_s = 0;
  double per_receive_s = 0;
  double per_local_copy_s = 0;
  double barrier_s = 0;            // once per layer (0 when per_round_s carries it)
  double per_round_s = 0;          // migration batching: each execution's context and barrier
  double poll_period_s = 0;        // > 0: a round's completion is seen at the next poll
  double receive_bytes_per_s = 0;  // > 0: the most a rank receives per second (P2P ops)
  double apply_per_layer_s = 0;    // async: a rank's main thread, per layer it applies
  double apply_per_row_s = 0;      // async: and per slot written in that layer
};
struct WorkerMode {
  // migration.batching: each round of the byte schedule one execution (its rounds are vLLM's
  // batches under eplb.schedule greedy_pairs).
  bool batching = false;
  // eplb.use_async: the main thread applies each layer (vLLM's move_to_workspace).
  bool async = false;
};
WorkerCosts WorkerCostsOf(Engine engine, Transport transport, int tensors, int slots,
                          int layer_slots, int ranks, WorkerMode mode = {});

// The most a rank receives per second under the engine's communicator (0: the links decide):
// OpCosts::p2p_rank_bytes_per_s for vLLM over nccl and for SGLang.
double ReceiveBytesPerS(Engine engine, Transport transport);

// Async mode: what the main thread pays on every forward step while a rearrangement is in
// flight (vLLM's EplbState.step, _all_ranks_buffer_ready: a gloo all_reduce of a one-element
// flag over the EP ranks' CPU group, a ring of 2 (ranks - 1) steps, then .item()). Zero for
// eplb.
double AsyncStepOverheadS(Engine engine, int ranks);

// The expert-parallel group a rearrangement runs on, as the engines' once-per-rearrangement
// work scales with it.
struct EpShape {
  int ranks = 1;   // every GPU of the group (a scenario's GPUs, serving or not)
  int nodes = 1;   // cluster.nodes: a GB200 scenario's one NVLink domain is one node here, where
                   // SGLang would count its hosts (trays) and pack by them
  int groups = 1;  // expert groups (model.groups): the policy's hierarchical first step
};

// What one rearrangement costs once, before its layers: `layers` MoE layers of `experts` logical
// experts in `slots` physical slots.
struct RearrangementOnce {
  double window_reduce_s = 0;  // the load window reduced across ranks, then copied to the CPU
  double policy_s = 0;         // the engine's policy on the CPU
  double maps_s = 0;           // the new maps built (Python loops) and copied between devices
  double total_s() const { return window_reduce_s + policy_s + maps_s; }
};
RearrangementOnce PriceOnce(Engine engine, int layers, int experts, int slots, const EpShape& ep);

// A whole rearrangement's orchestration: once, then each layer's (summed), given each plan's
// links time (`links_s`, one per plan), its executions (`batches`, one per plan; empty: 1 each)
// and the placement before it.
struct RearrangementOrchestration {
  RearrangementOnce once;
  LayerOrchestration layers;  // summed over the plans
  int num_layers = 0;
  double total_s() const { return once.total_s() + layers.total_s(); }
};
RearrangementOrchestration PriceRearrangement(Engine engine, Transport transport, int tensors,
                                              const Placement& before,
                                              std::span<const LayerPlan> plans,
                                              std::span<const double> links_s, const EpShape& ep,
                                              std::span<const int> batches = {});

}  // namespace eplb
