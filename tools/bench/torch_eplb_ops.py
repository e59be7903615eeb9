#!/usr/bin/python3
"""The operations vLLM performs per MoE layer when it rearranges experts, each timed with torch.

vLLM's rearrangement (vllm/distributed/eplb/rebalance_execute.py, move_to_buffer and
move_from_buffer, and eplb_state.py's map updates) does, for each layer on each rank:

  local_move        buffer[dst].copy_(weight[src], non_blocking=True) per weight tensor, for each
                    expert that moves within the rank
  p2p_build         one P2POp (isend or irecv) per weight tensor per expert sent or received
  p2p_batch         torch.distributed.batch_isend_irecv of those ops, then every request's wait()
  move_from_buffer  weight[dst].copy_(buffer[dst]) per weight tensor for each expert received or
                    moved
  map_update        the layer's physical_to_logical_map row, logical_to_physical_map and
                    logical_replica_count copied in place (small device tensors)
  stream_sync       the synchronisation vLLM waits on (torch.cuda.synchronize; on the CPU: none)
  event_sync        a CUDA event recorded and waited for (the async path's CpuGpuEvent)

and, for reference, plain_copy: one copy of as many bytes as the layer moved, and the layer
total (everything above in order). Each operation is timed from its issue to its completion
(a device synchronisation after it; the bare synchronisation is its own row, to subtract), the
median over --repeats after a warm-up. The table gives per layer: how many calls, the time per
layer and per call, and the bytes per second of the operations that move bytes.

On CUDA the process group is NCCL with one rank sending to itself (NCCL cannot put two ranks on
one GPU); on the CPU it is gloo with two processes exchanging their experts (gloo cannot send to
its own rank). `--device cpu --quick` runs in seconds, for tests; the GPU check
(device/check.sh) runs it on CUDA. Run it with /usr/bin/python3 (torch).
"""

import argparse
import json
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

OPS = ["local_move", "p2p_build", "p2p_batch", "move_from_buffer", "map_update", "stream_sync",
       "event_sync", "layer_total", "plain_copy"]


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=["cpu", "cuda"],
                   default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--quick", action="store_true",
                   help="small experts and few repeats (seconds on a CPU)")
    p.add_argument("--expert-mb", type=float, default=42.0,
                   help="bytes per expert, MiB, split over the weight tensors (DeepSeek-V3 FP8: "
                        "42, w13 two thirds and w2 one third)")
    p.add_argument("--slots", type=int, default=9, help="expert slots per rank")
    p.add_argument("--received", type=int, default=4,
                   help="experts each rank receives per layer")
    p.add_argument("--local-moves", type=int, default=1,
                   help="experts each rank moves within itself per layer")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--json", help="also write the table to this file")
    a = p.parse_args(argv)
    if a.quick:
        a.expert_mb, a.repeats = 0.25, 3
    if a.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: torch here has no CUDA device (torch "
                f"{torch.__version__}); use --device cpu")
    for name in ("slots", "repeats"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} is {getattr(a, name)}; it must be at least 1")
    if a.received < 0 or a.local_moves < 0 or a.received + a.local_moves > a.slots:
        p.error(f"--received {a.received} and --local-moves {a.local_moves} must be at least 0 "
                f"and together at most --slots ({a.slots})")
    a.p2p_error = ""
    if not a.expert_mb > 0:
        p.error(f"--expert-mb is {a.expert_mb}; it must be above 0")
    return a


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Layer:
    """One MoE layer's expert weights on one rank, as vLLM holds them: a tensor per weight kind,
    [slots, ...], and a buffer of the same shape per tensor."""

    def __init__(self, a, device):
        total = int(a.expert_mb * 2**20)
        # w13 (gate and up) two thirds of the bytes, w2 one third; uint8, as FP8 weights are.
        sizes = [total * 2 // 3, total - total * 2 // 3]
        self.weights = [torch.randint(0, 255, (a.slots, n), dtype=torch.uint8, device=device)
                        for n in sizes]
        self.buffers = [torch.empty_like(w) for w in self.weights]
        self.expert_bytes = sum(sizes)
        experts = a.slots * 2
        self.phy2log = torch.arange(a.slots * 2, device=device).remainder(experts).view(1, -1)
        self.log2phy = torch.full((1, experts, 2), -1, dtype=torch.int64, device=device)
        self.logcnt = torch.ones((1, experts), dtype=torch.int64, device=device)
        self.new_phy2log = self.phy2log.flip(1).contiguous()
        self.new_log2phy = self.log2phy.clone()
        self.new_logcnt = self.logcnt.clone()


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_layer(a, layer, device, peer, timings):
    """One layer's rearrangement as vLLM does it, each operation timed into `timings`."""
    def timed(name, fn):
        t0 = time.perf_counter()
        out = fn()
        synchronize(device)
        timings.setdefault(name, []).append(time.perf_counter() - t0)
        return out

    start = time.perf_counter()
    moves = list(range(a.received, a.received + a.local_moves))
    received = list(range(a.received))

    def local_move():
        for dst in moves:
            src = (dst + 1) % a.slots
            for w, b in zip(layer.weights, layer.buffers):
                b[dst].copy_(w[src], non_blocking=True)

    timed("local_move", local_move)

    def build():
        ops = []
        # vLLM posts its sends, then its receives, each per expert and weight tensor.
        for slot in received:
            for w in layer.weights:
                ops.append(dist.P2POp(dist.isend, w[slot], peer))
        for slot in received:
            for b in layer.buffers:
                ops.append(dist.P2POp(dist.irecv, b[slot], peer))
        return ops

    ops = timed("p2p_build", build)

    def exchange():
        if ops and not a.p2p_error:
            for request in dist.batch_isend_irecv(ops):
                request.wait()

    timed("p2p_batch", exchange)

    def move_from_buffer():
        for dst in received + moves:
            for w, b in zip(layer.weights, layer.buffers):
                w[dst].copy_(b[dst], non_blocking=True)

    timed("move_from_buffer", move_from_buffer)

    def map_update():
        layer.phy2log[0].copy_(layer.new_phy2log[0])
        layer.log2phy[0].copy_(layer.new_log2phy[0])
        layer.logcnt[0].copy_(layer.new_logcnt[0])

    timed("map_update", map_update)
    timed("stream_sync", lambda: None)  # the synchronisation alone (timed() adds it)
    if device.type == "cuda":
        def event():
            e = torch.cuda.Event()
            e.record()
            e.synchronize()

        timed("event_sync", event)
    timings.setdefault("layer_total", []).append(time.perf_counter() - start)
    moved = (len(received) + len(moves)) * layer.expert_bytes
    if moved:
        source = torch.empty(moved, dtype=torch.uint8, device=device)
        target = torch.empty_like(source)
        timed("plain_copy", lambda: target.copy_(source, non_blocking=True))


def worker(rank, world, port, a, results):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    device = torch.device(a.device)
    if device.type == "cuda":
        torch.cuda.set_device(0)
        device = torch.device("cuda", 0)
    backend = "nccl" if device.type == "cuda" else "gloo"
    try:  # device_id (torch >= 2.3) binds the communicator to the GPU at once
        kwargs = {"device_id": device} if device.type == "cuda" else {}
        dist.init_process_group(backend, rank=rank, world_size=world, **kwargs)
    except TypeError:
        dist.init_process_group(backend, rank=rank, world_size=world)
    try:
        layer = Layer(a, device)
        peer = (rank + 1) % world  # the other process, or this rank itself on one GPU
        warm = {}
        try:
            run_layer(a, layer, device, peer, warm)
        except RuntimeError as e:  # e.g. a NCCL without sends to itself: time the rest
            a.p2p_error = f"p2p failed: {str(e).splitlines()[0][:80]}"
            synchronize(device)
        timings = {}
        for _ in range(a.repeats):
            if world > 1:
                dist.barrier()
            run_layer(a, layer, device, peer, timings)
        if a.p2p_error:
            timings.pop("p2p_batch", None)
        if rank == 0:
            results.put({"p2p_error": a.p2p_error, "timings": timings, "expert_bytes": layer.expert_bytes,
                         "backend": dist.get_backend(), "world": world,
                         "device": torch.cuda.get_device_name(device) if device.type == "cuda"
                         else "cpu"})
    finally:
        dist.destroy_process_group()


def table(a, result):
    moved = result["expert_bytes"] * (a.received + a.local_moves)
    tensors = 2
    calls = {"local_move": a.local_moves * tensors,
             "p2p_build": 2 * a.received * tensors,
             "p2p_batch": 1,
             "move_from_buffer": (a.received + a.local_moves) * tensors,
             "map_update": 3, "stream_sync": 1, "event_sync": 1, "layer_total": 1,
             "plain_copy": 1}
    bytes_of = {"local_move": a.local_moves * result["expert_bytes"],
                "p2p_batch": a.received * result["expert_bytes"],
                "move_from_buffer": moved, "plain_copy": moved}
    rows = []
    for name in OPS:
        samples = result["timings"].get(name)
        if not samples:
            note = (result["p2p_error"] if name == "p2p_batch" and result["p2p_error"]
                    else "not on this device")
            rows.append({"op": name, "calls": calls[name], "ms": None, "us_per_call": None,
                         "GBps": None, "note": note})
            continue
        median = statistics.median(samples)
        moved_bytes = bytes_of.get(name, 0)
        rows.append({"op": name, "calls": calls[name], "ms": median * 1e3,
                     "us_per_call": median * 1e6 / max(1, calls[name]),
                     "GBps": moved_bytes / median / 1e9 if moved_bytes and median > 0 else None,
                     "note": ""})
    return rows


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    world = 1 if a.device == "cuda" else 2
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = free_port()
    if world == 1:
        worker(0, 1, port, a, results)
    else:
        mp.start_processes(worker, args=(world, port, a, results), nprocs=world, join=True,
                           start_method="spawn")
    result = results.get(timeout=60)
    rows = table(a, result)
    print(f"torch {torch.__version__}, {result['device']}, {result['backend']} with "
          f"{result['world']} rank(s); {a.slots} slots a rank, {a.received} received and "
          f"{a.local_moves} moved within per layer, {result['expert_bytes']} bytes an expert in "
          f"2 tensors; medians of {a.repeats}")
    print(f"{'operation':<17} {'calls':>5} {'ms/layer':>10} {'us/call':>10} {'GB/s':>8}")
    for r in rows:
        if r["ms"] is None:
            print(f"{r['op']:<17} {r['calls']:>5} {'-':>10} {'-':>10} {'-':>8}  {r['note']}")
            continue
        gbps = f"{r['GBps']:.1f}" if r["GBps"] is not None else "-"
        print(f"{r['op']:<17} {r['calls']:>5} {r['ms']:>10.3f} {r['us_per_call']:>10.1f} "
              f"{gbps:>8}")
    # One line for a summary table (device/check.sh): ms a layer, and GB/s where bytes move.
    print("per layer: " + ", ".join(
        f"{r['op']} " + ("-" if r["ms"] is None else f"{r['ms']:.3f}")
        + (f" ({r['GBps']:.0f} GB/s)" if r["GBps"] else "") for r in rows))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"torch": torch.__version__, "device": result["device"],
                       "backend": result["backend"], "world": result["world"],
                       "expert_bytes": result["expert_bytes"], "slots": a.slots,
                       "received": a.received, "local_moves": a.local_moves,
                       "repeats": a.repeats, "rows": rows}, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
