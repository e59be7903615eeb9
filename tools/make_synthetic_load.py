#!/usr/bin/env python3
"""Writes a synthetic DeepSeek-V3-like expert load window as CSV (one line per MoE layer).

DeepSeek-V3 has 58 MoE layers of 256 routed experts, top-8 routing. Each layer gets its own
log-normal expert popularity (sigma 0.9, which puts the busiest of 32 GPUs at about 1.8x the
mean when experts sit in order, as measured on real models in shared/data/real-loads), and the
window's counts are drawn for `steps` steps of `tokens` tokens each.

    tools/make_synthetic_load.py > scenarios/data/deepseek-v3-like-load.csv
"""
import argparse
import math
import random


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=58)
    ap.add_argument("--experts", type=int, default=256)
    ap.add_argument("--top-k", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=8192, help="tokens per step")
    ap.add_argument("--steps", type=int, default=32, help="steps in the window")
    ap.add_argument("--sigma", type=float, default=0.9, help="log-normal popularity spread")
    ap.add_argument("--seed", type=int, default=20261129)
    args = ap.parse_args()

    rng = random.Random(args.seed)
    total = args.tokens * args.top_k * args.steps
    print(f"# synthetic DeepSeek-V3-like load: {args.layers} layers x {args.experts} experts, "
          f"{args.steps} steps x {args.tokens} tokens x top-{args.top_k}, sigma {args.sigma}, "
          f"seed {args.seed}")
    for _ in range(args.layers):
        pop = [rng.lognormvariate(0.0, args.sigma) for _ in range(args.experts)]
        norm = sum(pop)
        row = []
        for p in pop:
            mean = total * p / norm
            # Normal approximation of the multinomial count, never below zero.
            row.append(max(0, round(rng.gauss(mean, math.sqrt(mean)))))
        print(",".join(str(v) for v in row))


if __name__ == "__main__":
    main()
