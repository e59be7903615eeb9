#!/usr/bin/python3
"""A notebook's first ten minutes with eplb, as a script that runs (python/tests runs it).

Compares three policies over three seeds, draws each policy's step-latency CDF from the tidy
frame (one row per policy, seed and step), pulls the placement in force at a step, and draws one
layer's load per GPU under it. Cell by cell, as a notebook would run it:

    PYTHONPATH=build/python /usr/bin/python3 docs/notebook_example.py --out figures
    PYTHONPATH=build/python /usr/bin/python3 docs/notebook_example.py \\
        --scenario scenarios/tiny.yaml --steps 300 --out figures

The figures are PNGs when matplotlib is installed (Debian: python3-matplotlib); without it the
script writes each figure's data as CSV beside where the PNG would be, and says so.
"""

import argparse
import os
import sys

import numpy as np

import eplb

POLICIES = ["deepseek", "replicate-lpt", "static"]
SEEDS = [1, 2, 3]


def latency_cdfs(steps, summaries):
    """Each policy's step-latency CDF over its measured steps, all seeds pooled: a frame with
    policy, latency_s (a step's latency, s) and fraction (of the policy's steps at most that)."""
    import pandas as pd

    # The measured window of each run (summary.json's measured.from_step): the warm-up before
    # the first commit is left out, as the summaries leave it out.
    start = summaries[["policy", "seed", "measured.from_step"]]
    measured = steps.merge(start, on=["policy", "seed"])
    measured = measured[measured["step"] >= measured["measured.from_step"]]
    parts = []
    for policy, group in measured.groupby("policy", sort=False):
        latency = np.sort(group["latency_s"].to_numpy())
        fraction = np.arange(1, len(latency) + 1) / len(latency)
        parts.append(pd.DataFrame({"policy": policy, "latency_s": latency, "fraction": fraction}))
    return pd.concat(parts, ignore_index=True)


def layer_load_per_gpu(run, step, layer):
    """Tokens per GPU of `layer` in the last window the policy saw by `step`, under the initial
    placement and under the placement in force at `step`: a frame with rank, initial, at_step."""
    import pandas as pd

    windows = run.load_windows()  # step, time_s, load [windows, layers, experts]
    seen = np.flatnonzero(windows["step"] <= step)
    window = windows["load"][seen[-1] if len(seen) else 0]
    initial = eplb.gpu_loads(window, run.placement_at(0), run.num_gpus)
    now = eplb.gpu_loads(window, run.placement_at(step), run.num_gpus)
    return pd.DataFrame({"rank": np.arange(run.num_gpus), "initial": initial[layer],
                         "at_step": now[layer]})


def _plotter():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=None,
                        help="a scenario YAML (default: the built-in DeepSeek-V3 prefill EP32)")
    parser.add_argument("--steps", type=int, default=None, help="run.steps for every run")
    parser.add_argument("--out", default=".", help="the folder the figures are written to")
    parser.add_argument("--layer", type=int, default=0, help="the layer whose load is drawn")
    args = parser.parse_args(argv)
    overrides = {"run.steps": args.steps} if args.steps else None
    os.makedirs(args.out, exist_ok=True)

    # Three policies, three seeds: nine runs, each a run folder.
    cmp = eplb.compare_policies(args.scenario, policies=POLICIES, seeds=SEEDS, set=overrides)
    steps = cmp.metrics_frame()        # policy, seed, step, then every metrics.csv column
    summaries = cmp.summary_frame()    # a row per policy and seed: summary.json flattened
    print(summaries.groupby("policy")[["balancedness.mean", "latency_s.p99"]].mean())

    cdfs = latency_cdfs(steps, summaries)
    print(cdfs.groupby("policy")["latency_s"].quantile([0.5, 0.99]).unstack())

    # The placement in force half way through the first seed's deepseek run.
    run = cmp.run("deepseek", seed=SEEDS[0])
    step = int(run.summary["steps"]) // 2
    placement = run.placement_at(step)  # int64 [layers, slots]: the expert in each slot
    print(f"placement at step {step}: {placement.shape[0]} layers x {placement.shape[1]} slots")
    print("layer", args.layer, "GPU by GPU:",
          placement[args.layer].reshape(run.num_gpus, -1).tolist())
    loads = layer_load_per_gpu(run, step, args.layer)
    print(loads.to_string(index=False))

    plt = _plotter()
    if plt is None:
        cdf_path = os.path.join(args.out, "latency_cdf.csv")
        load_path = os.path.join(args.out, "layer_load_per_gpu.csv")
        cdfs.to_csv(cdf_path, index=False)
        loads.to_csv(load_path, index=False)
        print(f"matplotlib is not installed: the figures' data are in {cdf_path} and {load_path}")
        return 0
    fig, ax = plt.subplots(figsize=(6, 4))
    for policy, group in cdfs.groupby("policy", sort=False):
        ax.plot(group["latency_s"] * 1e3, group["fraction"], label=policy)
    ax.set_xlabel("step latency (ms)")
    ax.set_ylabel("fraction of measured steps")
    ax.legend()
    fig.savefig(os.path.join(args.out, "latency_cdf.png"), dpi=120, bbox_inches="tight")
    fig, ax = plt.subplots(figsize=(6, 4))
    width = 0.4
    ax.bar(loads["rank"] - width / 2, loads["initial"], width, label="initial placement")
    ax.bar(loads["rank"] + width / 2, loads["at_step"], width, label=f"placement at step {step}")
    ax.set_xlabel("GPU")
    ax.set_ylabel(f"layer {args.layer} tokens (the window's sum)")
    ax.legend()
    fig.savefig(os.path.join(args.out, "layer_load_per_gpu.png"), dpi=120, bbox_inches="tight")
    print(f"figures: {args.out}/latency_cdf.png, {args.out}/layer_load_per_gpu.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
