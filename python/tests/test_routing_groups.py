"""tools/routing_groups.py, the measurement behind a note of the TensorRT-LLM figures: its
router keeps DeepSeek-V3's rule (8 distinct experts within 4 of 8 groups) and, without groups,
draws experts in proportion to their popularity."""

import unittest

import numpy as np

from project_tools import load_tool


class RoutingGroups(unittest.TestCase):
    def setUp(self):
        self.tool = load_tool("routing_groups")
        self.rng = np.random.default_rng(3)

    def test_grouped_tokens_take_8_distinct_experts_in_at_most_4_groups(self):
        log_popularity = self.rng.normal(0.0, 1.07, 256)
        selected = self.tool.route(log_popularity, True, 2000, self.rng)
        self.assertEqual(selected.shape, (2000, 8))
        for row in selected:
            self.assertEqual(len(set(row)), 8)
            self.assertLessEqual(len(set(row // 32)), 4)
        # Without groups a token's experts spread over more than 4 groups now and then.
        free = self.tool.route(log_popularity, False, 2000, self.rng)
        self.assertTrue(any(len(set(row // 32)) > 4 for row in free))

    def test_the_groups_kept_are_those_whose_two_best_experts_score_highest(self):
        # Groups 4-7 each hold two experts far above everything else: every token keeps them.
        log_popularity = np.zeros(256)
        for group in range(4, 8):
            log_popularity[group * 32:group * 32 + 2] = 50.0
        selected = self.tool.route(log_popularity, True, 200, self.rng)
        self.assertTrue((selected // 32 >= 4).all())

    def test_ungrouped_draws_follow_popularity(self):
        log_popularity = self.rng.normal(0.0, 1.0, 256)
        counts = self.tool.counts(self.tool.route(log_popularity, False, 20000, self.rng))
        share = counts / counts.sum()
        popularity = np.exp(log_popularity) / np.exp(log_popularity).sum()
        # Drawing 8 without replacement flattens the hottest a little; the order is kept.
        self.assertGreater(np.corrcoef(share, popularity)[0, 1], 0.95)


if __name__ == "__main__":
    unittest.main()
