"""eplb.vllm.EplbPolicy as vLLM's DefaultEplbPolicy: every class method its callers use, in the
forms vLLM's main branch and its earlier releases call them, and the error type they expect."""

import unittest
import unittest.mock

import numpy as np
import torch

import eplb.deepseek
from eplb.vllm import EplbPolicy, InvalidArgument

from test_conventions import random_load


def replica_ranks(phy2log):
    """Each slot's number among its expert's slots, counted left to right."""
    ranks = np.zeros_like(phy2log)
    for layer, row in enumerate(phy2log.tolist()):
        seen = {}
        for slot, expert in enumerate(row):
            ranks[layer, slot] = seen.get(expert, 0)
            seen[expert] = ranks[layer, slot] + 1
    return ranks


class PreserveIntraGpuSlots(unittest.TestCase):
    def check(self, old, new, post, gpus, new_ranks=None, post_ranks=None):
        """The properties vLLM documents: the same experts (and ranks) per GPU, an expert that
        stays on a GPU in its first old slot there, and incoming experts in the remaining slots
        in the order the new map lists them."""
        per = new.shape[1] // gpus
        for layer in range(new.shape[0]):
            for gpu in range(gpus):
                span = slice(gpu * per, (gpu + 1) * per)
                o, n, p = (x[layer, span].tolist() for x in (old, new, post))
                if new_ranks is None:
                    self.assertEqual(sorted(p), sorted(n))
                else:
                    pairs = lambda e, r: sorted(zip(e, r[layer, span].tolist()))
                    self.assertEqual(pairs(p, post_ranks), pairs(n, new_ranks))
                for expert in set(o) & set(n):
                    self.assertEqual(p[o.index(expert)], expert,
                                     f"layer {layer}, GPU {gpu}: expert {expert} left its slot")
                # Old slots in order keep their expert while the new map has a copy left.
                incoming, kept = list(n), []
                for i in range(per):
                    if o[i] in incoming:
                        incoming.remove(o[i])
                        kept.append(i)
                        self.assertEqual(p[i], o[i])
                self.assertEqual([p[i] for i in range(per) if i not in kept], incoming)

    def test_hand_worked_rows(self):
        # GPU 0 keeps 0 and 1 where they were; 5 and 4 come in, in the new map's order.
        old = np.array([[0, 1, 2, 3, 4, 5, 6, 7]])
        new = np.array([[1, 5, 0, 4, 6, 2, 7, 3]])
        post = EplbPolicy.preserve_intragpu_slots(new, 2, old)
        self.assertIsInstance(post, np.ndarray)
        self.assertEqual(post.tolist(), [[0, 1, 5, 4, 2, 3, 6, 7]])
        # A duplicated expert keeps both of its old slots.
        old = np.array([[3, 0, 3, 1]])
        post = EplbPolicy.preserve_intragpu_slots(np.array([[2, 3, 3, 0]]), 1, old)
        self.assertEqual(post.tolist(), [[3, 0, 3, 2]])

    def test_random_maps_in_both_forms_and_both_array_kinds(self):
        rng = np.random.default_rng(11)
        for trial in range(200):
            gpus, per = 1 + trial % 5, 1 + trial % 4
            experts = max(1, gpus * per - trial % 3)
            old = rng.integers(0, experts, size=(3, gpus * per))
            new = rng.integers(0, experts, size=(3, gpus * per))
            post = EplbPolicy.preserve_intragpu_slots(new, gpus, old)
            self.check(old, new, post, gpus)
            ranks = replica_ranks(new)
            post_t, post_ranks = EplbPolicy.preserve_intragpu_slots(
                torch.from_numpy(new), torch.from_numpy(ranks), gpus,
                old_global_expert_indices=torch.from_numpy(old))
            self.assertIsInstance(post_t, torch.Tensor)
            self.assertTrue(np.array_equal(post_t.numpy(), post))
            self.check(old, new, post, gpus, ranks, post_ranks.numpy())

    def test_inputs_come_back_unchanged_when_the_gpus_do_not_divide_the_slots(self):
        new, old = np.array([[1, 0, 2, 3]]), np.array([[0, 1, 2, 3]])
        for gpus in (0, -1, 3):
            self.assertEqual(EplbPolicy.preserve_intragpu_slots(new, gpus, old).tolist(),
                             new.tolist())

    def test_keeps_the_callers_dtype(self):
        new = np.array([[1, 0, 3, 2]], dtype=np.int32)
        post = EplbPolicy.preserve_intragpu_slots(new, 2, np.array([[0, 1, 2, 3]]))
        self.assertEqual(post.dtype, np.int32)

    def test_an_old_map_of_another_shape_is_refused_naming_both(self):
        with self.assertRaisesRegex(InvalidArgument, r"old_phy2log has shape \(1, 6\); it must "
                                                     r"be phy2log's, \(1, 4\)"):
            EplbPolicy.preserve_intragpu_slots(np.zeros((1, 4), int), 2, np.zeros((1, 6), int))


class RebalanceWithOldPlacement(unittest.TestCase):
    def test_any_old_map_of_the_right_shape_is_preserved_against(self):
        # As vLLM's pass matches experts by id, an old map need not hold every expert (here 5
        # has no slot) nor be free of -1: the new map is the policy's, slots preserved.
        weight = torch.from_numpy(random_load(2, 8, seed=40))
        plain = EplbPolicy.rebalance_experts(weight, 12, 1, 1, 4)
        old = torch.tensor([[0, 1, 2, 3, 4, 6, 7, 0, 1, -1, 2, 3]] * 2)
        new = EplbPolicy.rebalance_experts(weight, 12, 1, 1, 4, old)
        expected = EplbPolicy.preserve_intragpu_slots(plain.numpy(), 4, old.numpy())
        self.assertTrue(np.array_equal(new.numpy(), expected))
        self.assertFalse(np.array_equal(new.numpy(), plain.numpy()))


class BuildingBlocks(unittest.TestCase):
    def test_hierarchical_is_deepseeks_policy(self):
        for seed, (layers, experts, replicas, groups, nodes, gpus) in enumerate(
                [(3, 64, 80, 8, 2, 16), (2, 32, 48, 4, 4, 8), (2, 24, 32, 1, 1, 4)]):
            weight = torch.from_numpy(random_load(layers, experts, seed=20 + seed))
            phy2log = EplbPolicy.rebalance_experts_hierarchical(weight, replicas, groups,
                                                                nodes, gpus)
            self.assertIsInstance(phy2log, torch.Tensor)
            ref = eplb.deepseek.rebalance_experts(weight, replicas, groups, nodes, gpus)[0]
            self.assertTrue(torch.equal(phy2log, ref))

    def test_balanced_packing_fills_every_pack_heaviest_first(self):
        weight = random_load(4, 24, seed=30)
        for packs in (1, 2, 3, 4, 6, 24):
            pack, rank = EplbPolicy.balanced_packing(weight, packs)
            per = 24 // packs
            for row in range(4):
                sums = np.zeros(packs)
                for p in range(packs):
                    items = np.flatnonzero(pack[row] == p)
                    self.assertEqual(sorted(rank[row, items].tolist()), list(range(per)))
                    # Heaviest first: a pack's items by rank are by descending weight.
                    by_rank = items[np.argsort(rank[row, items])]
                    self.assertTrue((np.diff(weight[row, by_rank]) <= 0).all())
                    sums[p] = weight[row, items].sum()
                # The greedy bound: no pack outweighs another by more than the heaviest item.
                self.assertLessEqual(sums.max() - sums.min(), weight[row].max() + 1e-3)

    def test_replicate_experts_gives_each_extra_slot_to_the_most_loaded_per_replica(self):
        weight = random_load(3, 10, seed=31)
        phy2log, logcnt = EplbPolicy.replicate_experts(torch.from_numpy(weight), 17)
        self.assertIsInstance(phy2log, torch.Tensor)
        phy2log, logcnt = phy2log.numpy(), logcnt.numpy()
        for row in range(3):
            self.assertEqual(phy2log[row, :10].tolist(), list(range(10)))
            self.assertEqual(np.bincount(phy2log[row], minlength=10).tolist(),
                             logcnt[row].tolist())
            # Replaying the choices: each extra slot's expert had the most load per replica.
            count = np.ones(10)
            for slot in range(10, 17):
                e = phy2log[row, slot]
                self.assertEqual(e, int(np.argmax(weight[row] / count)))
                count[e] += 1


class VllmErrors(unittest.TestCase):
    def test_bad_arguments_are_both_value_error_and_assertion_error_with_eplbs_message(self):
        weight = torch.tensor([[10, 20, 30, 40]])
        for error in (ValueError, AssertionError):
            with self.assertRaisesRegex(error, "replicas is 7; it must be a positive "
                                               "multiple of GPUs \\(4\\)"):
                EplbPolicy.rebalance_experts(weight, 7, 2, 2, 4)
        with self.assertRaises(AssertionError):
            EplbPolicy.balanced_packing(np.ones((1, 6)), 4)
        with self.assertRaisesRegex(AssertionError, "num_phy is 3 but a row has 4 experts"):
            EplbPolicy.replicate_experts(weight, 3)
        with self.assertRaisesRegex(AssertionError, "needs a multiple of num_nodes"):
            EplbPolicy.rebalance_experts_hierarchical(weight, 8, 3, 2, 4)
        with self.assertRaisesRegex(ValueError, r"weight\[0, 1\] is nan"):
            EplbPolicy.balanced_packing(np.array([[1.0, np.nan]]), 1)


def compute_logical_maps(phy2log, num_logical_experts):
    """vLLM's compute_logical_maps (eplb_state.py) as far as its device rule goes: it asserts a
    CPU map, then counts each logical expert's replicas."""
    assert phy2log.device.type == "cpu"
    logcnt = torch.zeros(phy2log.shape[0], num_logical_experts, dtype=phy2log.dtype)
    logcnt.scatter_add_(1, phy2log.clamp(min=0), (phy2log >= 0).to(phy2log.dtype))
    return None, logcnt


class DeviceConvention(unittest.TestCase):
    """vLLM's DefaultEplbPolicy.rebalance_experts returns torch.from_numpy(...), a CPU int64
    map, whatever the weight's device; test_device_compatibility[cpu|cuda] in vLLM's
    tests/distributed/test_eplb_algo.py then hands it to compute_logical_maps, which asserts so.
    """

    def device_compatibility(self, device):
        # vLLM's test, with its arguments.
        weight = torch.tensor([[10, 20, 30, 40]], device=device)
        phy2log = EplbPolicy.rebalance_experts(weight, 6, 2, 1, 2)
        _, logcnt = compute_logical_maps(phy2log, weight.shape[-1])
        self.assertEqual(tuple(phy2log.shape), (1, 6))
        self.assertEqual(tuple(logcnt.shape), (1, 4))
        self.assertEqual(phy2log.dtype, torch.int64)
        self.assertEqual(phy2log.device.type, "cpu")
        self.assertEqual(int(logcnt.sum()), 6)

    def test_device_compatibility_cpu(self):
        self.device_compatibility("cpu")

    @unittest.skipUnless(torch.cuda.is_available(), "CUDA not available: torch here is "
                         "CPU-only (device/check.sh runs this test on a lent GPU)")
    def test_device_compatibility_cuda(self):
        self.device_compatibility("cuda")
        # An old placement on the GPU too, as vLLM's EplbState passes it.
        weight = torch.from_numpy(random_load(2, 16, seed=9)).cuda()
        old = torch.arange(24).remainder(16).repeat(2, 1).cuda()
        out = EplbPolicy.rebalance_experts(weight, 24, 4, 1, 4, old)
        self.assertEqual(out.device.type, "cpu")

    def test_a_map_for_a_weight_on_another_device_is_made_on_the_cpu(self):
        """Without a GPU: an input that reports another device must still give a CPU tensor,
        never one moved to that device (eplb's other methods keep their input's device)."""
        import eplb._arrays as arrays
        import eplb.vllm as module

        real = module.to_numpy
        moved = []

        class Elsewhere(arrays.Kind):
            def out(self, array, dtype=None):
                moved.append(True)
                return super().out(array, dtype)

        def as_if_on_a_gpu(value, dtype, name):
            array, kind = real(value, dtype, name)
            return array, Elsewhere(kind.is_torch, torch.device("meta"))

        weight = torch.tensor([[10, 20, 30, 40]])
        with unittest.mock.patch.object(module, "to_numpy", as_if_on_a_gpu):
            out = EplbPolicy.rebalance_experts(weight, 6, 2, 1, 2)
        self.assertEqual(out.device.type, "cpu")
        self.assertEqual(moved, [])
        self.assertTrue(torch.equal(out, EplbPolicy.rebalance_experts(weight, 6, 2, 1, 2)))

    def test_numpy_in_gives_numpy_out(self):
        out = EplbPolicy.rebalance_experts(np.array([[10, 20, 30, 40]]), 6, 2, 1, 2)
        self.assertIsInstance(out, np.ndarray)
        self.assertEqual(out.dtype, np.int64)


if __name__ == "__main__":
    unittest.main()
