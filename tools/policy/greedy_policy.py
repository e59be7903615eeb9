"""A small policy in numpy, as a user would write one (docs/own_policy.md): each spare slot
replicates the expert with the most load per replica, then replicas go heaviest first to the
least loaded GPU with a free slot. No groups, no nodes, no migration cost.

    eplb compare --policy-command 'greedy=python3 tools/policy/greedy_policy.py'
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from policy_client import serve  # noqa: E402


def greedy(load, old, *, nodes, gpus, groups, lost, step):
    layers, experts = load.shape
    slots = old.shape[1]
    per_gpu = slots // gpus
    live = np.flatnonzero(~lost)
    out = np.full((layers, slots), -1, dtype=np.int32)
    for layer in range(layers):
        w = load[layer] + 1e-9
        count = np.ones(experts, dtype=np.int64)
        for _ in range(len(live) * per_gpu - experts):  # the spare slots
            count[np.argmax(w / count)] += 1
        replicas = np.repeat(np.arange(experts), count)
        share = (w / count)[replicas]
        gpu_load = np.zeros(gpus)
        gpu_load[lost] = np.inf
        used = np.zeros(gpus, dtype=np.int64)
        for r in np.argsort(-share, kind="stable"):
            g = np.argmin(np.where(used < per_gpu, gpu_load, np.inf))
            out[layer, g * per_gpu + used[g]] = replicas[r]
            used[g] += 1
            gpu_load[g] += share[r]
    return out


if __name__ == "__main__":
    serve(greedy)
