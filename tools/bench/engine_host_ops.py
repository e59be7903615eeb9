#!/usr/bin/env python3
"""Host costs of the small numpy and torch CPU operations an engine's EPLB code performs.

core/src/migrate/engine_profile.cpp's cost table cites these: np.unique on a rank's slots,
np.isin of a layer's slots against a few experts, a loop over the slots doing the kinds of CPU
tensor ops compute_logical_maps does (written here, not copied), a small CPU tensor op and a
Python dict operation. Run: /usr/bin/python3 tools/bench/engine_host_ops.py
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


if __name__ == "__main__":
    main()
