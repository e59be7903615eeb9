"""SGLang's topology-aware EPLB through eplb's SGLang convention layer (eplb.sglang).

The cases are SGLang's own (test/registered/unit/eplb/test_topology_aware.py at commit
2112426b4b1ed5de126a274ecfee064d933453a8): the same inputs and the same assertions, called as
SGLang's code calls its functions. Its cases on private helpers (_improve_topology and the
like) are in tests/policy_topology_aware_test.cpp against the C++ they map to; its server-flag
guards (handle_eplb_and_dispatch) have no counterpart in eplb and are not ported.
"""

import enum
import os
import re
import unittest
from tempfile import NamedTemporaryFile, TemporaryDirectory

import torch

from eplb.sglang import (load_rank_cost_matrix, rebalance_experts,
                         rebalance_experts_topology_aware)

# Stands in for SGLang's enum: eplb.sglang reads a member's name.
EplbAlgorithm = enum.Enum("EplbAlgorithm", [
    "deepseek", "deepseek_hierarchical", "deepseek_vec", "deepseek_vec_hierarchical",
    "elasticity_aware", "topology_aware"])


class TopologyAwarePlacement(unittest.TestCase):
    def test_prefers_the_cheapest_destination(self):
        # Experts 0 and 1 originate on rank 0, experts 2 and 3 on rank 1; two slots per rank.
        counts = torch.zeros((1, 2, 4), dtype=torch.int64)
        counts[0, 0, :2] = 10
        counts[0, 1, 2:] = 10
        costs = torch.tensor([[0.0, 5.0], [5.0, 0.0]])
        p2l, l2p, count = rebalance_experts_topology_aware(counts, costs)
        self.assertEqual(p2l[0].tolist(), [0, 1, 2, 3])
        self.assertEqual(l2p[0, :, 0].tolist(), [0, 1, 2, 3])
        self.assertEqual(count[0].tolist(), [1, 1, 1, 1])

    def test_maps_are_permutations_with_equal_capacity(self):
        counts = torch.tensor([
            [[4, 0, 2, 1, 0, 0], [0, 3, 0, 0, 5, 1], [2, 1, 0, 0, 1, 4]],
            [[0, 1, 6, 0, 2, 0], [3, 0, 0, 4, 0, 1], [1, 0, 0, 2, 5, 0]],
        ], dtype=torch.int64)
        costs = torch.tensor([[0.0, 1.0, 3.0], [1.0, 0.0, 2.0], [3.0, 2.0, 0.0]])
        p2l, l2p, _ = rebalance_experts_topology_aware(counts, costs)
        for layer in range(counts.shape[0]):
            self.assertEqual(sorted(p2l[layer].tolist()), list(range(6)))
            self.assertEqual(sorted(l2p[layer, :, 0].tolist()), list(range(6)))
            for rank in range(3):  # two physical experts per rank
                slots = range(rank * 2, rank * 2 + 2)
                self.assertEqual(
                    sum(int(l2p[layer, expert, 0]) in slots for expert in range(6)), 2)

    def test_is_deterministic(self):
        counts = torch.tensor([[[3, 3, 1, 1], [1, 1, 3, 3]]], dtype=torch.int64)
        costs = torch.tensor([[0.0, 2.0], [2.0, 0.0]])
        first = rebalance_experts_topology_aware(counts, costs)
        second = rebalance_experts_topology_aware(counts, costs)
        for a, b in zip(first, second):
            self.assertTrue(torch.equal(a, b))

    def test_public_algorithm_dispatch(self):
        counts = torch.tensor([[[2, 0], [0, 2]]], dtype=torch.int64)
        costs = torch.tensor([[0.0, 3.0], [3.0, 0.0]])
        direct = rebalance_experts_topology_aware(counts, costs)
        dispatched = rebalance_experts(
            tokens_per_expert=counts.sum(dim=1), num_physical_experts=2,
            num_local_physical_experts=1, num_groups=None, num_nodes=1,
            algorithm=EplbAlgorithm.topology_aware, tokens_per_source_expert=counts,
            rank_cost_matrix=costs)
        for a, b in zip(direct, dispatched):
            self.assertTrue(torch.equal(a, b))

    def test_public_algorithm_requires_topology_inputs(self):
        counts = torch.ones((1, 2), dtype=torch.int64)
        with self.assertRaisesRegex(ValueError, "source-rank expert counts"):
            rebalance_experts(tokens_per_expert=counts, num_physical_experts=2,
                              num_local_physical_experts=1, num_groups=None, num_nodes=1,
                              algorithm=EplbAlgorithm.topology_aware)

    def test_default_algorithm_remains_available_without_topology(self):
        # [DP, layers, experts], reduced over DP before the original EPLB algorithm.
        tokens_per_expert = torch.tensor([[[4, 2, 1, 0]]], dtype=torch.int64)
        p2l, l2p, count = rebalance_experts(
            tokens_per_expert=tokens_per_expert, num_physical_experts=4,
            num_local_physical_experts=2, num_groups=None, num_nodes=1,
            algorithm=EplbAlgorithm.deepseek)
        self.assertEqual(p2l.shape, (1, 4))
        self.assertEqual(l2p.shape, (1, 4, 1))
        self.assertEqual(count.shape, (1, 4))
        self.assertTrue(torch.all(count == 1))

    def test_topology_swaps_without_worsening_load_balance(self):
        # The node-uniform seed puts [0, 1] on rank 0 and [2, 3] on rank 1; the traffic is
        # reversed, so two swaps make the placement local at the same rank loads.
        counts = torch.zeros((1, 2, 4), dtype=torch.int64)
        counts[0, 0, 2:] = 10
        counts[0, 1, :2] = 10
        costs = torch.tensor([[0.0, 5.0], [5.0, 0.0]])
        p2l, _, _ = rebalance_experts_topology_aware(counts, costs)
        self.assertEqual(p2l[0].tolist(), [2, 3, 0, 1])

    def test_topology_does_not_regress_node_uniform_communication(self):
        counts = torch.zeros((1, 2, 4), dtype=torch.int64)
        counts[0, 0] = torch.tensor([10, 9, 8, 7])
        costs = torch.tensor([[0.0, 10.0], [10.0, 0.0]])
        p2l, _, _ = rebalance_experts_topology_aware(counts, costs)
        destination = torch.empty(4, dtype=torch.long)
        for rank in range(2):
            destination[p2l[0, rank * 2:rank * 2 + 2]] = rank
        node_uniform = torch.tensor([0, 0, 1, 1])
        communication = counts[0].to(torch.float64) * costs[:, destination]
        node_uniform_communication = counts[0].to(torch.float64) * costs[:, node_uniform]
        self.assertLessEqual(communication.sum().item(), node_uniform_communication.sum().item())
        total_load = counts[0].sum(dim=0)
        candidate_load = torch.zeros(2, dtype=torch.int64)
        candidate_load.scatter_add_(0, destination, total_load)
        node_uniform_load = torch.tensor([total_load[:2].sum(), total_load[2:].sum()])
        self.assertLessEqual(candidate_load.max(), node_uniform_load.max())

    def test_rejects_replication_until_supported(self):
        counts = torch.ones((1, 2, 4), dtype=torch.int64)
        costs = torch.zeros((2, 2), dtype=torch.float32)
        with self.assertRaisesRegex(NotImplementedError, "no redundant experts"):
            rebalance_experts_topology_aware(counts, costs, num_physical_experts=6)

    def test_rejects_inconsistent_physical_expert_dimension(self):
        counts = torch.ones((1, 2, 4), dtype=torch.int64)
        costs = torch.zeros((2, 2), dtype=torch.float32)
        with self.assertRaisesRegex(ValueError, "must match"):
            rebalance_experts_topology_aware(counts, costs, num_physical_experts=2)

    def test_rejects_nonzero_self_cost(self):
        counts = torch.ones((1, 2, 4), dtype=torch.int64)
        costs = torch.ones((2, 2), dtype=torch.float32)
        with self.assertRaisesRegex(ValueError, "diagonal"):
            rebalance_experts_topology_aware(counts, costs)

    def test_rejects_rank_cost_matrix_shape_mismatch(self):
        counts = torch.ones((1, 2, 4), dtype=torch.int64)
        costs = torch.zeros((3, 3), dtype=torch.float32)
        with self.assertRaisesRegex(ValueError, "does not match"):
            rebalance_experts_topology_aware(counts, costs)

    def test_loads_and_validates_json_topology(self):
        topology = {"rank_cost_matrix": [[0, 1], [1, 0]]}
        matrix = load_rank_cost_matrix(topology, expected_num_ranks=2)
        self.assertEqual(matrix.dtype, torch.float64)
        self.assertTrue(torch.equal(matrix, torch.tensor(topology["rank_cost_matrix"]).double()))
        with NamedTemporaryFile(mode="w+", suffix=".json") as file:
            file.write('{"rank_cost_matrix": [[0, 2], [2, 0]]}')
            file.flush()
            loaded = load_rank_cost_matrix(file.name, expected_num_ranks=2)
        self.assertEqual(loaded.tolist(), [[0.0, 2.0], [2.0, 0.0]])

    def test_preserves_ep_rank_order_in_asymmetric_matrix(self):
        topology = {"rank_cost_matrix": [[0, 1, 4], [2, 0, 3], [5, 6, 0]]}
        matrix = load_rank_cost_matrix(topology, expected_num_ranks=3)
        self.assertEqual(matrix.tolist(), topology["rank_cost_matrix"])


class TopologyAwareInEplb(unittest.TestCase):
    """eplb's own: numpy in gives numpy out, errors name the value, and the policy by name."""

    def test_numpy_in_numpy_out_and_messages_name_the_values(self):
        import numpy as np
        counts = np.ones((1, 2, 4))
        p2l, l2p, count = rebalance_experts_topology_aware(counts, np.array([[0, 1], [1, 0]]))
        self.assertIsInstance(p2l, np.ndarray)
        self.assertEqual(p2l.dtype, np.int64)
        self.assertEqual(l2p.shape, (1, 4, 1))
        cases = [
            (lambda: rebalance_experts_topology_aware(counts, np.ones((2, 2))),
             ValueError, r"diagonal must be zero: \[0\]\[0\] is 1"),
            (lambda: rebalance_experts_topology_aware(counts[0], np.zeros((2, 2))),
             ValueError, "tokens_per_source_expert has 2 dimensions"),
            (lambda: rebalance_experts_topology_aware(-counts, np.zeros((2, 2))),
             ValueError, r"non-negative: \[0, 0, 0\] is -1"),
            (lambda: rebalance_experts_topology_aware(counts, np.zeros((2, 2)),
                                                     num_local_physical_experts=3),
             ValueError, "num_local_physical_experts must equal"),
            (lambda: load_rank_cost_matrix({"costs": []}),
             ValueError, "must contain rank_cost_matrix"),
            (lambda: load_rank_cost_matrix("/nonexistent/topology.json"),
             ValueError, "unable to read EPLB topology file: /nonexistent/topology.json"),
            (lambda: load_rank_cost_matrix([[0, 1]]), ValueError, "must be square"),
            (lambda: load_rank_cost_matrix([[0, 1], [1, 0]], expected_num_ranks=4),
             ValueError, "matrix=2 expected=4"),
        ]
        for call, error, message in cases:
            with self.subTest(message=message), self.assertRaisesRegex(error, message):
                call()

    def test_a_topology_files_errors_name_it_the_field_and_what_is_valid(self):
        valid = (r'expected \{"rank_cost_matrix": \[\[0, 1\], \[1, 0\]\]\} or the matrix alone: '
                 r"ranks x ranks finite non-negative costs, zero on the diagonal")
        with TemporaryDirectory() as folder:
            def file(name, text):
                path = os.path.join(folder, name)
                with open(path, "w") as f:
                    f.write(text)
                return path
            deep = file("deep.json", "[" * 100000 + "]" * 100000)
            cases = [
                (lambda: load_rank_cost_matrix(deep),
                 rf"EPLB topology file {re.escape(deep)} nests arrays or objects deeper than "
                 rf"Python's JSON reader can read; {valid}"),
                (lambda: load_rank_cost_matrix(file("wide.json", '{"rank_cost_matrix": [[0, 1, '
                                                                 '2], [1, 0, 1]]}')),
                 rf"EPLB topology file .*wide.json: rank_cost_matrix must be square; it has "
                 rf"shape \(2, 3\); {valid}"),
                (lambda: load_rank_cost_matrix([[0, 1]]),
                 rf"^rank_cost_matrix must be square; it has shape \(1, 2\); {valid}"),
                (lambda: load_rank_cost_matrix(file("costs.json", '{"costs": []}')),
                 rf"EPLB topology file .*costs.json: topology JSON must contain "
                 rf"rank_cost_matrix; it has keys \['costs'\]; {valid}"),
                (lambda: load_rank_cost_matrix(file("words.json", '{"rank_cost_matrix": "x"}')),
                 rf"EPLB topology file .*words.json: rank_cost_matrix must be a rectangular "
                 rf"numeric array: .*; {valid}"),
                (lambda: load_rank_cost_matrix(file("negative.json", "[[0, -1], [1, 0]]")),
                 r"EPLB topology file .*negative.json: rank_cost_matrix must be finite and "
                 r"non-negative: \[0\]\[1\] is -1"),
                (lambda: load_rank_cost_matrix(file("two.json", "[[0, 1], [1, 0]]"),
                                               expected_num_ranks=4),
                 r"EPLB topology file .*two.json: rank_cost_matrix size does not match the EP "
                 r"group: matrix=2 expected=4"),
                (lambda: load_rank_cost_matrix(file("bad.json", "[[0, 1], ")),
                 rf"EPLB topology file is not valid JSON: .*bad.json: .*; {valid}"),
                # A device or a FIFO is no file of costs (/dev/zero or a FIFO would never end).
                (lambda: load_rank_cost_matrix(os.devnull),
                 rf"EPLB topology file {os.devnull} is not a regular file; {valid}"),
            ]
            for call, message in cases:
                with self.subTest(message=message), self.assertRaisesRegex(ValueError, message):
                    call()

    def test_a_topology_files_name_cannot_forge_a_line_of_its_error(self):
        with TemporaryDirectory() as folder:
            path = os.path.join(folder, "topology.json\neplb: topology checked\x1b[2K")
            with open(path, "w") as f:
                f.write("[[0, 1]]")
            with self.assertRaises(ValueError) as caught:
                load_rank_cost_matrix(path)
        message = str(caught.exception)
        self.assertIn(r"topology.json\neplb: topology checked\x1b[2K: rank_cost_matrix must be "
                      "square", message)
        self.assertNotIn("\n", message)
        self.assertNotIn("\x1b", message)

    def test_the_eplb_policy_by_name(self):
        import eplb
        import numpy as np
        self.assertIn("topology-aware", eplb.policies())
        load = np.random.default_rng(4).zipf(1.6, size=(2, 16)).astype(np.float64)
        phy2log = eplb.rebalance(load, 20, 4, policy="topology-aware")
        self.assertEqual(phy2log.shape, (2, 20))
        for row in phy2log:
            self.assertEqual(sorted(set(row.tolist())), list(range(16)))


# Scenario runs need the simulator; a build without it says so and these skip.
@unittest.skipIf(os.environ.get("EPLB_HAVE_SIM") == "0", "eplb was built without the simulator")
class TopologyAwareInRuns(unittest.TestCase):
    def test_runs_and_compares_like_the_other_policies(self):
        import eplb
        tiny = os.path.join(os.environ.get("EPLB_SCENARIOS", os.path.join(
            os.path.dirname(__file__), "../../scenarios")), "tiny.yaml")
        result = eplb.run_scenario(tiny, set={"run.steps": 120, "eplb.step_interval": 40,
                                              "eplb.policy": "topology-aware"})
        self.assertEqual(result.summary["steps"], 120)
        self.assertGreaterEqual(len(result.rearrangements.get("step", [])), 1)
        for placement in result.placements():  # a layer's slots each: every expert, none empty
            self.assertEqual(sorted(set(placement["phy2log"].tolist())), list(range(16)))
        comparison = eplb.compare_policies(tiny, policies=["static", "topology-aware"],
                                           set={"run.steps": 120, "eplb.step_interval": 40},
                                           jobs=2, frames=False)
        self.assertEqual(comparison.labels, ["static", "topology-aware"])


if __name__ == "__main__":
    unittest.main()
