"""A Python function as the policy (policy=fn): DeepSeek's algorithm written by a user gives the
built-in `deepseek`'s run, number for number; a function that fails stops the run with its
message."""

import importlib.util
import os
import unittest

import numpy as np
import torch

import eplb
from eplb.scenario import EplbError

SCENARIOS = os.environ.get("EPLB_SCENARIOS",
                           os.path.join(os.path.dirname(__file__), "../../scenarios"))
TINY = os.path.join(SCENARIOS, "tiny.yaml")
_spec = importlib.util.spec_from_file_location(
    "deepseek_policy",
    os.path.join(os.path.dirname(__file__), "../../tools/policy/deepseek_policy.py"))
deepseek_policy = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(deepseek_policy)


def deepseek_in_python(weight, num_replicas, num_groups, num_nodes, num_ranks,
                       old_global_expert_indices):
    """vLLM's signature; DeepSeek's eplb.py as tools/policy/deepseek_policy.py writes it."""
    return deepseek_policy.rebalance_experts(torch.from_numpy(weight.astype(np.float32)),
                                             num_replicas, num_groups, num_nodes, num_ranks)


def buggy(weight, num_replicas, num_groups, num_nodes, num_ranks, old_global_expert_indices):
    raise ValueError("my bug")


def keeps_one_expert(weight, num_replicas, num_groups, num_nodes, num_ranks,
                     old_global_expert_indices):
    return np.zeros_like(old_global_expert_indices)


def same_columns(mine, theirs, skip):
    return {k: np.asarray(v).tolist() for k, v in mine.items() if k not in skip} == \
        {k: np.asarray(v).tolist() for k, v in theirs.items() if k not in skip}


@unittest.skipIf(os.environ.get("EPLB_HAVE_SIM") == "0", "eplb was built without the simulator")
class UserPolicy(unittest.TestCase):
    def test_deepseek_in_python_gives_the_built_ins_run(self):
        mine = eplb.run_scenario(TINY, policy=deepseek_in_python, policy_time="free",
                                 frames=False, timeout=300)
        theirs = eplb.run_scenario(TINY, set={"eplb.policy": "deepseek"}, frames=False)
        with open(os.path.join(mine.folder, "scenario.yaml")) as f:
            self.assertIn("policy: external  # a user's program, run only when given again: "
                          "--policy-command 'deepseek_in_python=", f.read())
        self.assertTrue(same_columns(mine.metrics, theirs.metrics, ()))
        self.assertTrue(same_columns(mine.rearrangements, theirs.rearrangements, ("policy_ms",)))
        self.assertEqual(mine.summary["balancedness"], theirs.summary["balancedness"])

    def test_compare_labels_the_function_by_its_name(self):
        c = eplb.compare_policies(TINY, policies=["deepseek", deepseek_in_python],
                                  policy_time="free", frames=False, timeout=300)
        labels = list(c.policies["label"])
        self.assertEqual(labels, ["deepseek", "deepseek_in_python"])
        self.assertEqual(c.policies["balancedness_mean"][0], c.policies["balancedness_mean"][1])

    def test_a_failing_function_stops_the_run_with_its_message(self):
        for fn, expected in ((buggy, "reported an error: ValueError: my bug"),
                             (keeps_one_expert, "logical expert 1 has no replica")):
            with self.subTest(fn.__name__):
                with self.assertRaises(EplbError) as caught:
                    eplb.run_scenario(TINY, policy=fn, timeout=300)
                self.assertIn(f"step 24: policy {fn.__name__}: ", str(caught.exception))
                self.assertIn(expected, str(caught.exception))


if __name__ == "__main__":
    unittest.main()
