#!/usr/bin/python3
"""The routing skew of recorded expert loads, as the generator's calibration figures measure it.

For each model in a real-loads JSON (the project's shared data, e.g. qwen3-30b-a3b-prefill.json or
olmoe-mixtral-by-domain.json; layouts in its README), prints the imbalance ratio that the published
figures of kind `imbalance_ratio` compare with (usecases/published.h): experts in order, expert e on GPU
e / (E / G), and for each recorded layer and step (or domain) (max − mean) / mean of the GPUs'
loads, averaged. scenarios/published/figures.yaml holds one such figure per shipped model family,
and each scenario's workload.sigma is the log-normal spread that reproduces it (scenarios/README,
"Skew").
Usage: routing_skew.py LOADS.json [--gpus 8 32]
"""
import argparse
import json

import numpy as np


def imbalance_in_order(matrices, gpus):
    """Mean over the [layer][expert] matrices' layers of (max − mean) / mean of the GPU loads."""
    ratios = []
    for matrix in matrices:
        for row in np.asarray(matrix, dtype=float):
            if len(row) % gpus or row.sum() <= 0:
                continue
            per_gpu = row.reshape(gpus, -1).sum(axis=1)
            ratios.append(per_gpu.max() / per_gpu.mean() - 1)
    return float(np.mean(ratios)) if ratios else float("nan")


def models(data):
    """(name, experts, tokens per matrix, [layer][expert] matrices) for each model in the file."""
    if "models" in data:
        for name, m in data["models"].items():
            matrices = list(m["domains"].values())
            tokens = [float(np.sum(x[0])) / m["top_k"] for x in matrices]
            yield name, m["experts"], tokens, matrices
    else:
        yield data["model"], data["experts"], data["tokens"], data["steps"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("loads")
    parser.add_argument("--gpus", type=int, nargs="+", default=[8, 32])
    args = parser.parse_args()
    with open(args.loads) as f:
        data = json.load(f)
    for name, experts, tokens, matrices in models(data):
        cells = ", ".join(
            f"{g} GPUs {imbalance_in_order(matrices, g):.3f}" for g in args.gpus if experts % g == 0)
        print(f"{name}: {experts} experts, {len(matrices)} matrices of "
              f"{np.mean(tokens):,.0f} tokens on average; (max - mean) / mean in order: {cells}")


if __name__ == "__main__":
    main()
