#!/usr/bin/env python3
"""Host costs of the small numpy and torch CPU operations an engine's EPLB code performs.

core/src/migrate/engine_profile.cpp's cost table cites these: np.unique on a rank's slots,
np.isin of a layer's slots against a few experts, a loop over the slots doing the kinds of CPU
tensor ops compute_logical_maps does (written here, not copied), a small CPU tensor op, a
Python dict operation, and a greedy packing loop of the kind DeepSeek's policy runs in torch
(SGLang's balanced_packing: per item a min over the packs with room, keyed by the packs' loads,
which become 0-d tensors; written here, not copied). Run: /usr/bin/python3
tools/bench/engine_host_ops.py
"""
import timeit

import numpy as np
import torch


def best_us(stmt, env, number=20000):
    """The best of 5 repeats, microseconds per call."""
    return min(timeit.repeat(stmt, globals=env, number=number, repeat=5)) / number * 1e6


def main():
    layer = np.random.randint(0, 288, size=288).astype(np.int64)  # a layer's 288 slots
    rank = layer[:9]  # one rank's 9 slots
    env = {"np": np, "layer": layer, "rank": rank}
    print(f"np.unique(9 slots)          {best_us('np.unique(rank, return_index=True)', env):7.2f} us")
    print(f"np.isin(288 slots, 9)       {best_us('np.isin(layer, rank)', env):7.2f} us")
    print(f"mask on 9 slots             {best_us('rank == rank', env):7.2f} us")

    layers, experts, slots = 58, 256, 288
    phy2log = torch.randint(0, experts, (layers, slots))
    count = torch.zeros(layers, experts, dtype=torch.int64)
    out = torch.full((layers, experts, 4), -1, dtype=torch.int64)
    layer_ids = torch.arange(layers)

    def loop_over_slots():
        for slot in range(slots):
            ids = phy2log[:, slot]
            valid = ids >= 0
            if not valid.any():
                continue
            rows, cols = layer_ids[valid], ids[valid]
            replica = count[rows, cols].clamp(max=3)
            out[rows, cols, replica] = slot
            count[rows, cols] += 1

    per_slot = min(timeit.repeat(loop_over_slots, number=5, repeat=3)) / 5 / slots * 1e6
    print(f"loop over slots, per slot   {per_slot:7.2f} us")
    x = torch.zeros(100)
    print(f"torch CPU x + 2 (100)       {best_us('x + 2', {'x': x}):7.2f} us")
    old = [int(v) for v in layer]
    scan = {"old": old, "e": old[5]}
    scan_us = best_us("[x // 9 for x in range(288) if old[x] == e]", scan, 2000) / 288
    print(f"comprehension element       {scan_us:7.3f} us")
    table = {}
    dict_us = best_us("for i in range(100): table.setdefault(i, i)", {"table": table}, 2000) / 100
    print(f"dict setdefault             {dict_us:7.3f} us")
    calls = {"replicas": [5, 130, 277], "gpu_of": lambda p: p // 9, "g": 3}
    call_us = best_us("[p for p in replicas if gpu_of(p) == g]", calls, 200000) / 3
    print(f"comprehension element, call {call_us:7.3f} us")
    packing_costs()


def greedy_packing(weight, packs):
    """Each layer's items, heaviest first, into the least loaded pack with room."""
    layers, items = weight.shape
    per_pack = items // packs
    order = weight.float().sort(-1, descending=True).indices
    where = torch.full_like(weight, -1, dtype=torch.int64)
    position = torch.full_like(where, -1)
    for i in range(layers):
        load = [0] * packs
        count = [0] * packs
        for item in order[i]:
            p = min((k for k in range(packs) if count[k] < per_pack), key=load.__getitem__)
            where[i, item] = p
            position[i, item] = count[p]
            load[p] += weight[i, item]
            count[p] += 1
    return where, position


def packing_costs():
    """Per item of a greedy packing: a fixed part and a part per pack, from two pack counts."""
    per_item = {}
    for packs in (8, 32):
        weight = torch.rand(58, 288)
        t = min(timeit.repeat(lambda: greedy_packing(weight, packs), number=1, repeat=3))
        per_item[packs] = t / weight.numel() * 1e6
        print(f"packing into {packs:2d}, per item  {per_item[packs]:7.2f} us")
    per_pack = (per_item[32] - per_item[8]) / 24
    print(f"  fixed {per_item[8] - 8 * per_pack:.2f} us + {per_pack:.2f} us per pack")


if __name__ == "__main__":
    main()
