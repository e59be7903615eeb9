#!/usr/bin/python3
"""In-process policy latency: eplb's Python module beside the engines' own Python policies.

Every call is timed whole, as an engine makes it: torch tensor in, tensors out, conversions
included. The references run from their own source files, which this script only imports:

  tools/bench/bench_python.py --deepseek PATH/eplb.py --vllm PATH/vllm/distributed/eplb/policy

--deepseek: DeepSeek's eplb.py (github.com/deepseek-ai/EPLB).
--vllm: the folder holding vLLM's default.py and batched.py (abstract.py is used when present;
        otherwise a plain base class stands in for it, since the policies only subclass it).
Without them, only eplb's own rows are printed. Needs Debian's python3 (numpy, torch) and the
package on PYTHONPATH (build/python) or installed.

Reported per shape: the median and the best of --repeat calls, or of --min-time seconds of
calls where that is more (ms), and the speed-up of eplb's DeepSeek-convention call over the
fastest reference. Shapes: the rows of
tools/bench/bench_policy.cpp. Loads are skewed (log-normal per expert, continuous values) so
that every implementation sees the same strict order and must return the same placement; the
script checks that it does, and that DeepSeek's three outputs (log2phy included) are eplb's.
"""

import argparse
import importlib.util
import statistics
import sys
import time
import types

import numpy as np
import torch

import eplb
import eplb.deepseek
import eplb.vllm

# layers, experts, replicas, groups, nodes, gpus
SHAPES = [
    (58, 256, 288, 8, 4, 32),
    (58, 256, 320, 8, 8, 64),
    (58, 256, 384, 8, 2, 128),
    (94, 128, 144, 1, 1, 16),  # Qwen3-235B-like: the global policy
]


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_vllm_policies(folder):
    """vLLM's DefaultEplbPolicy and BatchedEplbPolicy, imported as a package from `folder`."""
    package = types.ModuleType("vllm_eplb_policy")
    package.__path__ = [folder]
    sys.modules[package.__name__] = package
    try:
        load_module(package.__name__ + ".abstract", f"{folder}/abstract.py")
    except (FileNotFoundError, ImportError):
        abstract = types.ModuleType(package.__name__ + ".abstract")
        abstract.AbstractEplbPolicy = type("AbstractEplbPolicy", (), {})
        sys.modules[abstract.__name__] = abstract
    default = load_module(package.__name__ + ".default", f"{folder}/default.py")
    policies = {"vLLM default": default.DefaultEplbPolicy}
    try:
        batched = load_module(package.__name__ + ".batched", f"{folder}/batched.py")
        policies["vLLM batched"] = batched.BatchedEplbPolicy
    except FileNotFoundError:
        pass
    return policies


def skewed_weight(layers, experts, seed):
    rng = np.random.default_rng(seed)
    return torch.from_numpy(
        (rng.lognormal(0.0, 1.0, size=(layers, experts)) * 1000).astype(np.float32))


def first_tensor(out):
    return out[0] if isinstance(out, tuple) else out


def time_calls(fn, repeat, min_seconds):
    """(the last output, median ms, best ms) of at least `repeat` calls lasting `min_seconds`.

    The time floor keeps a fast call's median from resting on a few milliseconds of samples,
    which one burst of another process's work on a shared machine can fill."""
    times = []
    while len(times) < repeat or sum(times) < min_seconds * 1e3:
        start = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - start) * 1e3)
    return out, statistics.median(times), min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deepseek", help="DeepSeek's eplb.py")
    parser.add_argument("--vllm", help="folder with vLLM's policy default.py and batched.py")
    parser.add_argument("--repeat", type=int, default=20, help="calls at least (default 20)")
    parser.add_argument("--min-time", type=float, default=1.0,
                        help="seconds of calls at least, per implementation and shape (default 1)")
    args = parser.parse_args()

    references = {}
    if args.deepseek:
        ref = load_module("deepseek_eplb_reference", args.deepseek)
        references["DeepSeek eplb.py"] = lambda w, r, g, n, p: ref.rebalance_experts(w, r, g, n, p)
    if args.vllm:
        for name, cls in load_vllm_policies(args.vllm).items():
            references[name] = (lambda c: lambda w, r, g, n, p: c.rebalance_experts(w, r, g, n,
                                                                                   p))(cls)
    ours = {
        "eplb.deepseek": eplb.deepseek.rebalance_experts,
        "eplb.vllm.EplbPolicy": eplb.vllm.EplbPolicy.rebalance_experts,
    }

    print(f"eplb {eplb.__version__}, torch {torch.__version__}, numpy {np.__version__}; "
          f"at least {args.repeat} calls and {args.min_time:g} s each, times in ms "
          "(median / best)")
    for shape in SHAPES:
        layers, experts, replicas, groups, nodes, gpus = shape
        weight = skewed_weight(layers, experts, seed=sum(shape))
        print(f"\n{layers} layers x {experts} experts -> {replicas} slots, {groups} groups, "
              f"{nodes} nodes, {gpus} GPUs")
        results = {}
        for name, fn in list(ours.items()) + list(references.items()):
            out, median, best = time_calls(lambda: fn(weight, replicas, groups, nodes, gpus),
                                           args.repeat, args.min_time)
            results[name] = (out, median, best)
            print(f"  {name:<22} {median:9.3f} / {best:9.3f}")
        ours_out, ours_median, _ = results["eplb.deepseek"]
        for name in references:
            same = torch.equal(first_tensor(results[name][0]).cpu().to(torch.int64), ours_out[0])
            print(f"  {name:<22} same placement as eplb: {'yes' if same else 'NO'}")
        if "DeepSeek eplb.py" in references:
            # DeepSeek's convention returns all three maps; log2phy lists replicas by rank.
            theirs = results["DeepSeek eplb.py"][0]
            same = all(torch.equal(a, b) for a, b in zip(theirs, ours_out))
            print(f"  {'DeepSeek eplb.py':<22} same phy2log, log2phy and logcnt: "
                  f"{'yes' if same else 'NO'}")
        if references:
            fastest = min(references, key=lambda n: results[n][1])
            print(f"  eplb.deepseek is {results[fastest][1] / ours_median:.1f}x faster than "
                  f"{fastest} (medians)")


if __name__ == "__main__":
    main()
