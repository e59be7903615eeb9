"""tools/routing_skew.py, which measures the recorded skew that the routing-skew figures of
scenarios/published/figures.yaml hold: by hand, and against those figures' published values, so
that a figure cannot drift from the counts it comes from."""

import math
import os
import re
import unittest

from project_tools import SCENARIOS, load_tool


def published(figure_id):
    with open(os.path.join(SCENARIOS, "published/figures.yaml")) as f:
        text = f.read()
    block = text[text.index(f"- id: {figure_id}\n"):]
    return float(re.search(r"\n    published: ([0-9.]+)\n", block).group(1))


class RoutingSkew(unittest.TestCase):
    def setUp(self):
        self.tool = load_tool("routing_skew")

    def test_by_hand(self):
        # Experts [3, 1, 2, 2] on 2 GPUs load 4 and 4; on 4 GPUs the busiest holds 3 of a mean 2.
        matrices = [[[3, 1, 2, 2]]]
        self.assertEqual(self.tool.imbalance_in_order(matrices, 2), 0.0)
        self.assertAlmostEqual(self.tool.imbalance_in_order(matrices, 4), 0.5)
        # Averaged over layers and matrices; empty layers and GPU counts that do not divide the
        # experts are left out.
        matrices = [[[3, 1, 2, 2], [0, 0, 0, 0]], [[4, 0, 0, 0]]]
        self.assertAlmostEqual(self.tool.imbalance_in_order(matrices, 4), (0.5 + 3.0) / 2)
        self.assertTrue(math.isnan(self.tool.imbalance_in_order(matrices, 3)))  # nothing to average

    def test_figures_hold_what_the_counts_say(self):
        import json
        for data, model, gpus, figure in [
            ("qwen3-30b-a3b-prefill.json", "Qwen3-30B-A3B-Instruct-2507", 16,
             "qwen3-30b-a3b-imbalance-ep16-in-order"),
            ("olmoe-mixtral-by-domain.json", "Mixtral-8x7B-v0.1", 8,
             "mixtral-8x7b-imbalance-ep8-in-order"),
        ]:
            with open(os.path.join(SCENARIOS, "data", data)) as f:
                loaded = json.load(f)
            found = {name: matrices for name, _, _, matrices in self.tool.models(loaded)}
            measured = self.tool.imbalance_in_order(found[model], gpus)
            self.assertAlmostEqual(measured, published(figure), places=3, msg=figure)


if __name__ == "__main__":
    unittest.main()
