"""The engines' calling conventions: shapes, dtypes, padding and values as their sources define."""

import json
import os
import subprocess
import sys
import unittest

import numpy as np
import torch

import eplb
import eplb.deepseek
import eplb.sglang
import eplb.vllm

DATA = os.environ.get("EPLB_TEST_DATA", os.path.join(os.path.dirname(__file__), "../../tests/data"))


def golden_cases(name="deepseek-eplb-cases.json"):
    with open(os.path.join(DATA, name)) as f:
        return json.load(f)["cases"]


def random_load(layers, experts, seed=0, steps=None):
    rng = np.random.default_rng(seed)
    shape = (layers, experts) if steps is None else (steps, layers, experts)
    # Continuous values: the reference's unstable sort makes exact ties order-dependent.
    return (rng.random(shape) * 1000).astype(np.float32)


class DeepSeekConvention(unittest.TestCase):
    def test_golden_cases_torch_in_torch_out(self):
        cases = golden_cases() + golden_cases("deepseek-eplb-tie-cases.json")
        for i, c in enumerate(cases):
            with self.subTest(case=i):
                weight = torch.tensor(c["load"], dtype=torch.float32)
                phy2log, log2phy, logcnt = eplb.deepseek.rebalance_experts(
                    weight, c["replicas"], c["groups"], c["nodes"], c["gpus"])
                for out in (phy2log, log2phy, logcnt):
                    self.assertIsInstance(out, torch.Tensor)
                    self.assertEqual(out.dtype, torch.int64)
                self.assertEqual(phy2log.tolist(), c["phy2log"])
                self.assertEqual(logcnt.tolist(), c["logcnt"])
                self.assertEqual(log2phy.tolist(), c["log2phy"])  # by rank, padded to the max

    def test_numpy_in_numpy_out(self):
        c = golden_cases()[5]
        phy2log, log2phy, logcnt = eplb.deepseek.rebalance_experts(
            np.array(c["load"]), c["replicas"], c["groups"], c["nodes"], c["gpus"])
        self.assertIsInstance(phy2log, np.ndarray)
        self.assertEqual(phy2log.dtype, np.int64)
        self.assertEqual(phy2log.tolist(), c["phy2log"])

    def test_a_tensor_is_read_whatever_its_guise(self):
        # A plain float32 CPU tensor is viewed as it is; every other guise takes the general
        # path. All must read the same weights.
        load = random_load(4, 32, seed=3)
        expected = eplb.deepseek.rebalance_experts(load, 48, 4, 2, 8)
        plain = torch.from_numpy(load.copy())
        guises = {
            "plain": plain,
            "requiring grad": plain.clone().requires_grad_(),
            "a parameter": torch.nn.Parameter(plain.clone()),
            "a negated view": (-plain)._neg_view(),
            "transposed": plain.t().contiguous().t(),
            "float64": plain.double(),
        }
        for name, tensor in guises.items():
            with self.subTest(name):
                outputs = eplb.deepseek.rebalance_experts(tensor, 48, 4, 2, 8)
                for got, want in zip(outputs, expected):
                    self.assertIsInstance(got, torch.Tensor)
                    self.assertEqual(got.dtype, torch.int64)
                    self.assertTrue(got.is_contiguous())
                    self.assertEqual(got.tolist(), want.tolist())

    def test_tensors_without_dense_values_are_refused(self):
        for name, tensor in {"sparse": torch.ones(2, 8).to_sparse(),
                             "meta": torch.ones(2, 8, device="meta")}.items():
            with self.subTest(name), self.assertRaisesRegex(ValueError,
                                                            "eplb reads dense tensors"):
                eplb.deepseek.rebalance_experts(tensor, 8, 1, 1, 2)

    def test_numpy_callers_never_import_torch(self):
        script = ("import sys, numpy as np, eplb, eplb.deepseek, eplb.vllm, eplb.sglang\n"
                  "eplb.deepseek.rebalance_experts(np.ones((2, 8), np.float32), 8, 1, 1, 2)\n"
                  "eplb.rebalance(np.ones((2, 8)), 8, 2)\n"
                  "sys.exit('torch' in sys.modules)\n")
        subprocess.run([sys.executable, "-c", script], check=True)

    def test_log2phy_lists_each_experts_slots_once_then_padding(self):
        phy2log, log2phy, logcnt = eplb.deepseek.rebalance_experts(
            torch.from_numpy(random_load(3, 64, seed=2)), 96, 8, 2, 16)
        for layer in range(3):
            for e in range(64):
                row = log2phy[layer, e].tolist()
                count = logcnt[layer, e].item()
                self.assertEqual(row[count:], [-1] * (len(row) - count))
                self.assertEqual(sorted(row[:count]),
                                 [i for i, x in enumerate(phy2log[layer].tolist()) if x == e])

    def test_impossible_shapes_raise_value_error_naming_them(self):
        with self.assertRaisesRegex(ValueError, "replicas is 30"):
            eplb.deepseek.rebalance_experts(torch.ones(2, 16), 30, 4, 2, 8)
        with self.assertRaisesRegex(ValueError, "expected \\[layers, num_logical_experts\\]"):
            eplb.deepseek.rebalance_experts(torch.ones(16), 16, 1, 1, 1)


class VllmConvention(unittest.TestCase):
    def test_returns_the_physical_to_logical_map_on_the_cpu(self):
        weight = torch.from_numpy(random_load(4, 64, seed=3)).to(torch.int64)
        out = eplb.vllm.EplbPolicy.rebalance_experts(weight, 80, 8, 2, 16)
        self.assertIsInstance(out, torch.Tensor)
        self.assertEqual(out.dtype, torch.int64)
        self.assertEqual(tuple(out.shape), (4, 80))
        self.assertEqual(out.device.type, "cpu")  # as vLLM's, for a weight on any device
        ref = eplb.deepseek.rebalance_experts(weight.float(), 80, 8, 2, 16)[0]
        self.assertTrue(torch.equal(out, ref))

    def test_groups_zero_means_no_groups(self):
        weight = torch.from_numpy(random_load(2, 32, seed=4))
        out = eplb.vllm.EplbPolicy.rebalance_experts(weight, 48, 0, 2, 8)
        ref = eplb.deepseek.rebalance_experts(weight, 48, 1, 1, 8)[0]
        self.assertTrue(torch.equal(out, ref))

    def test_an_old_placement_keeps_the_slots_of_experts_that_stay_on_a_gpu(self):
        weight = torch.from_numpy(random_load(3, 64, seed=5))
        old = eplb.vllm.EplbPolicy.rebalance_experts(torch.from_numpy(random_load(3, 64, seed=6)),
                                                     96, 8, 2, 16)
        new = eplb.vllm.EplbPolicy.rebalance_experts(weight, 96, 8, 2, 16, old)
        plain = eplb.vllm.EplbPolicy.rebalance_experts(weight, 96, 8, 2, 16)
        per_gpu = 96 // 16
        for layer in range(3):
            for gpu in range(16):
                a = slice(gpu * per_gpu, (gpu + 1) * per_gpu)
                # Same experts per GPU as without the old placement ...
                self.assertEqual(sorted(new[layer, a].tolist()), sorted(plain[layer, a].tolist()))
                # ... and each one that was on this GPU before sits in one of its old slots.
                for slot in range(a.start, a.stop):
                    e = new[layer, slot].item()
                    if e in old[layer, a].tolist():
                        self.assertIn(old[layer, slot].item(), new[layer, a].tolist())
        self.assertGreater(int((new == old).sum()), int((plain == old).sum()))

    def test_every_policy_has_a_vllm_class(self):
        weight = torch.from_numpy(random_load(2, 32, seed=7))
        old = eplb.vllm.EplbPolicy.rebalance_experts(weight, 48, 4, 2, 8)
        for name in eplb.policies():
            with self.subTest(policy=name):
                cls = eplb.vllm.policy(name)
                out = cls.rebalance_experts(weight, 48, 4, 2, 8, old)
                self.assertEqual(tuple(out.shape), (2, 48))
                counts = np.stack([np.bincount(row, minlength=32) for row in out.numpy()])
                self.assertTrue((counts >= 1).all(), "every expert keeps a replica")
        with self.assertRaisesRegex(ValueError, "unknown policy 'nope'; the policies are: deepseek"):
            eplb.vllm.policy("nope")


class SglangConvention(unittest.TestCase):
    class Algorithm:  # stands in for SGLang's EplbAlgorithm enum members
        def __init__(self, name):
            self.name = name

    def test_deepseek_is_the_global_policy_on_the_summed_window(self):
        tokens = torch.from_numpy(random_load(2, 64, seed=8, steps=4)).round().to(torch.int64)
        phy2log, log2phy, count = eplb.sglang.rebalance_experts(
            tokens, 96, 6, 8, 2, self.Algorithm("deepseek"))
        ref = eplb.deepseek.rebalance_experts(tokens.sum(0).float(), 96, 1, 1, 16)
        for ours, theirs in zip((phy2log, log2phy, count), ref):
            self.assertEqual(ours.dtype, torch.int64)
            self.assertTrue(torch.equal(ours, theirs))

    def test_hierarchical_uses_groups_and_nodes(self):
        tokens = torch.from_numpy(random_load(2, 64, seed=9, steps=4))
        phy2log = eplb.sglang.rebalance_experts(tokens, 96, 6, 8, 2, "deepseek_hierarchical")[0]
        ref = eplb.deepseek.rebalance_experts(tokens.double().sum(0).float(), 96, 8, 2, 16)[0]
        self.assertTrue(torch.equal(phy2log, ref))
        with self.assertRaisesRegex(ValueError, "multiple of num_nodes"):
            eplb.sglang.rebalance_experts(tokens, 96, 6, 3, 2, "deepseek_hierarchical")

    def test_the_time_axis_reaches_timeseries(self):
        rng = np.random.default_rng(1)
        tokens = rng.random((8, 2, 32)) ** 4 * 1000  # a few hot experts, changing over time
        out = eplb.sglang.rebalance_experts(tokens, 48, 6, 1, 1, "deepseek_vec")
        self.assertIsInstance(out[0], np.ndarray)
        self.assertEqual(out[0].shape, (2, 48))
        self.assertEqual(out[1].shape[:2], (2, 32))
        self.assertTrue(np.array_equal(out[0], eplb.rebalance(tokens, 48, 8, policy="timeseries")))
        # Summed first, the policy would see no time, and choose otherwise.
        summed = eplb.rebalance(tokens.sum(axis=0), 48, 8, policy="timeseries")
        self.assertFalse(np.array_equal(out[0], summed))

    def test_any_eplb_policy_by_name_and_clear_errors(self):
        tokens = random_load(2, 32, seed=10, steps=2)
        phy2log = eplb.sglang.rebalance_experts(tokens, 48, 6, 4, 2, "replicate-lpt")[0]
        self.assertEqual(phy2log.shape, (2, 48))
        with self.assertRaisesRegex(ValueError, "expected \\[steps, layers, logical experts\\]"):
            eplb.sglang.rebalance_experts(tokens[0], 48, 6, 4, 2, "deepseek")
        with self.assertRaises(NotImplementedError):
            eplb.sglang.rebalance_experts(tokens, 48, 6, 4, 2, "elasticity_aware")


if __name__ == "__main__":
    unittest.main()
