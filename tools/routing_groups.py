#!/usr/bin/python3
"""How much DeepSeek-V3's group-limited routing spreads the GPUs' loads after EPLB.

DeepSeek-V3/R1 route each token to 8 of 256 experts within the 4 of 8 groups (32 experts each)
whose two best experts score highest (the model's config: n_group 8, topk_group 4). A token's
experts are therefore chosen together, which could load a GPU's slots together beyond what
independent tokens give: the gap that TensorRT-LLM's after-EPLB figures show
(scenarios/published/figures.yaml, trtllm-r1-gpu-std-ep32-9-slots: 52 tokens of 1,024 measured,
28 in eplb's model).

Per token, an expert's score is its log-popularity plus Gumbel noise (so that, without groups,
a token draws its experts in proportion to popularity, the generator's assumption). With groups,
only the top 4 groups by their two best scores stay, then the best 8 experts. Popularity is
log-normal with eplb's sigma for DeepSeek-V3 (1.07). The placement is eplb's own replicate-lpt
policy (the one the figure is simulated with), made from the experts' long-run counts; each
iteration of 4,096 tokens (128 per GPU on 32 GPUs, 1,024 routed tokens a GPU) is then spread
over it, a replicated expert's tokens split evenly (TensorRT-LLM's round robin).

Prints, with and without groups, the mean over iterations of the GPUs' standard deviation and of
(max - mean) / mean. Usage: routing_groups.py [--trials N] [--seed S]
(PYTHONPATH=build/python for eplb).
"""
import argparse

import numpy as np

import eplb

EXPERTS, GROUPS, TOP_K, TOP_GROUPS = 256, 8, 8, 4
GPUS, REDUNDANT, TOKENS, SIGMA = 32, 32, 4096, 1.07


def route(log_popularity, grouped, tokens, rng):
    """Each token's 8 experts: [tokens, 8]."""
    scores = log_popularity[None, :] + rng.gumbel(size=(tokens, EXPERTS))
    if grouped:
        by_group = scores.reshape(tokens, GROUPS, EXPERTS // GROUPS)
        group_score = np.sort(by_group, axis=2)[:, :, -2:].sum(axis=2)
        kept = np.argsort(-group_score, axis=1)[:, :TOP_GROUPS]
        mask = np.full((tokens, GROUPS), -np.inf)
        np.put_along_axis(mask, kept, 0.0, axis=1)
        scores = (by_group + mask[:, :, None]).reshape(tokens, EXPERTS)
    return np.argpartition(-scores, TOP_K, axis=1)[:, :TOP_K]


def counts(selected):
    return np.bincount(selected.ravel(), minlength=EXPERTS).astype(np.float64)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=8, help="popularity draws")
    parser.add_argument("--iterations", type=int, default=30, help="iterations per draw")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    results = {False: [], True: []}
    for _ in range(args.trials):
        log_popularity = rng.normal(0.0, SIGMA, EXPERTS)
        for grouped in (False, True):
            long_run = sum(counts(route(log_popularity, grouped, 20000, rng)) for _ in range(10))
            phy2log = eplb.rebalance(long_run[None, :], num_replicas=EXPERTS + REDUNDANT,
                                     num_gpus=GPUS, policy="replicate-lpt")
            for _ in range(args.iterations):
                batch = counts(route(log_popularity, grouped, TOKENS, rng))
                loads = np.asarray(eplb.gpu_loads(batch[None, :], phy2log, GPUS))[0]
                results[grouped].append((loads.std(), loads.max() / loads.mean() - 1))
    print(f"{args.trials} popularity draws x {args.iterations} iterations of {TOKENS} tokens, "
          f"EP{GPUS}, {EXPERTS + REDUNDANT} slots, replicate-lpt")
    print(f"{'routing':<28} {'GPU load std':>14} {'(max-mean)/mean':>16}")
    for grouped, label in ((False, "8 of 256, no groups"), (True, "8 within 4 of 8 groups")):
        std, imbalance = np.mean(results[grouped], axis=0)
        print(f"{label:<28} {std:>14.1f} {imbalance:>16.4f}")


if __name__ == "__main__":
    main()
