#!/usr/bin/python3
"""How far one prompt's routing strays from the average, measured on recorded per-prompt loads.

Reads a real-loads JSON with one prompt per step (e.g. deepseek-v2-lite-chat-prefill.json from
the project's shared data: {"tokens": [...], "steps": [step][layer][expert], "top_k"}) and prints
  1. sigma: the spread of a long prompt's log-share of each expert around the average over all
     prompts, with Poisson noise removed (workload.sequence_sigma, scenarios/README "Sequences");
  2. what in-distribution EPLB leaves on batches of real prompts (placement from the average,
     greedy replication and least-loaded packing; busiest GPU over the mean, mean over layers),
     against the model's moment-matched counts and against independent tokens.
With --step-sigma, the model's counts also carry each batch's own movement (workload.step_sigma,
scenarios/README "Step movement"), to check whether real batches of prompts leave room for it.
Usage: sequence_spread.py LOADS.json [--seed N] [--sigma S] [--step-sigma S]
"""
import argparse
import json

import numpy as np


def place(mean, gpus, slots):
    experts = len(mean)
    replicas = np.ones(experts, int)
    for _ in range(slots - experts):
        replicas[np.argmax(mean / replicas)] += 1
    per_gpu = slots // gpus
    items = sorted(((mean[e] / replicas[e], e) for e in range(experts) for _ in range(replicas[e])),
                   reverse=True)
    load, count, held = np.zeros(gpus), np.zeros(gpus, int), [[] for _ in range(gpus)]
    for weight, e in items:
        g = min((g for g in range(gpus) if count[g] < per_gpu), key=lambda g: load[g])
        load[g] += weight
        count[g] += 1
        held[g].append(e)
    return replicas, held


def busiest_over_mean(batch, placements):
    ratios = []
    for layer, (replicas, held) in enumerate(placements):
        share = batch[layer] / replicas
        per_gpu = np.array([share[h].sum() for h in held])
        ratios.append(per_gpu.max() / per_gpu.mean())
    return float(np.mean(ratios))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("loads")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sigma", type=float, default=0.67,
                        help="the model's spread (the scenarios' workload.sequence_sigma)")
    parser.add_argument("--step-sigma", type=float, default=0.0,
                        help="each batch's own movement (the scenarios' workload.step_sigma)")
    args = parser.parse_args()
    data = json.load(open(args.loads))
    steps = np.array(data["steps"], dtype=float)
    tokens = np.array(data["tokens"], dtype=float)
    top_k = data["top_k"]
    _, layers, experts = steps.shape
    average = steps.sum(0)
    average /= average.sum(1, keepdims=True)

    variances = []
    for s in np.where(tokens >= 1000)[0]:
        expected = steps[s].sum(1, keepdims=True) * average
        well = expected >= 50
        log_ratio = np.log((steps[s][well] + 0.5) / expected[well])
        variances.append(np.var(log_ratio) - np.mean(1 / expected[well]))
    sigma = float(np.sqrt(np.median(variances)))
    print(f"prompts of >= 1,000 tokens: {len(variances)}; sigma median {sigma:.3f}, "
          f"mean {np.sqrt(np.mean(variances)):.3f}")
    print(f"spread of the average across experts: {np.std(np.log(average * experts), 1).min():.2f}"
          f"-{np.std(np.log(average * experts), 1).max():.2f}")

    rng = np.random.default_rng(args.seed)
    long_prompts = np.where(tokens >= 500)[0]
    print(f"GPUs  slots  prompts/batch  real   model (sigma {args.sigma}, step {args.step_sigma})"
          "  independent")
    for gpus, slots in ((8, experts + 16), (16, experts + 16)):
        placements = [place(average[l], gpus, slots) for l in range(layers)]
        for k in (4, 16):
            real, model, independent = [], [], []
            for _ in range(200):
                batch = rng.choice(long_prompts, k, replace=False)
                real.append(busiest_over_mean(steps[batch].sum(0), placements))
                mean = average * top_k * tokens[batch].sum()
                for spread, step, out in ((args.sigma, args.step_sigma, model),
                                          (0.0, 0.0, independent)):
                    var = mean + mean**2 * (np.expm1(spread**2) / k + np.expm1(step**2))
                    draw = np.maximum(0, mean + np.sqrt(var) * rng.standard_normal(mean.shape))
                    out.append(busiest_over_mean(draw, placements))
            print(f"{gpus:4d}  {slots:5d}  {k:13d}  {np.mean(real):.3f}  {np.mean(model):28.3f}  "
                  f"{np.mean(independent):.3f}")


if __name__ == "__main__":
    main()
