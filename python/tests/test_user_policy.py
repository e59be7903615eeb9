"""A Python function as the policy (policy=fn): DeepSeek's algorithm written by a user gives the
built-in `deepseek`'s run, number for number; a function that fails (sys.exit() and
KeyboardInterrupt included) or returns an id outside -1..experts-1 (which int32 would wrap) stops
the run with its message, on one line. tools/policy/policy_client.py, the same for a user's
program, is tried here too."""

import importlib.util
import io
import os
import struct
import sys
import tempfile
import unittest
from unittest import mock

import numpy as np
import torch

import eplb
import eplb.scenario
from eplb.scenario import EplbError

SCENARIOS = os.environ.get("EPLB_SCENARIOS",
                           os.path.join(os.path.dirname(__file__), "../../scenarios"))
TINY = os.path.join(SCENARIOS, "tiny.yaml")
_spec = importlib.util.spec_from_file_location(
    "deepseek_policy",
    os.path.join(os.path.dirname(__file__), "../../tools/policy/deepseek_policy.py"))
deepseek_policy = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(deepseek_policy)
_spec = importlib.util.spec_from_file_location(
    "policy_client",
    os.path.join(os.path.dirname(__file__), "../../tools/policy/policy_client.py"))
policy_client = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(policy_client)


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


def wraps_to_the_same_placement(weight, num_replicas, num_groups, num_nodes, num_ranks,
                                old_global_expert_indices):
    return old_global_expert_indices + 2**32  # each e + 2**32, which int32 would read as e


def empties_a_slot_by_wrapping(weight, num_replicas, num_groups, num_nodes, num_ranks,
                               old_global_expert_indices):
    out = old_global_expert_indices.copy()
    out[1, 2] = 2**32 - 1  # int32 would read -1, an empty slot
    return out


def drops_a_slot(weight, num_replicas, num_groups, num_nodes, num_ranks,
                 old_global_expert_indices):
    return old_global_expert_indices[:, 1:]


def returns_flags(weight, num_replicas, num_groups, num_nodes, num_ranks,
                  old_global_expert_indices):
    return old_global_expert_indices > 3


def returns_halves(weight, num_replicas, num_groups, num_nodes, num_ranks,
                   old_global_expert_indices):
    return old_global_expert_indices + 0.5


def exits(weight, num_replicas, num_groups, num_nodes, num_ranks, old_global_expert_indices):
    sys.exit(3)


def interrupted(weight, num_replicas, num_groups, num_nodes, num_ranks,
                old_global_expert_indices):
    raise KeyboardInterrupt


def forges_a_line(weight, num_replicas, num_groups, num_nodes, num_ranks,
                  old_global_expert_indices):
    raise ValueError("bad row\neplb: all runs passed")


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
        labels = list(c.policies["policy"])
        self.assertEqual(labels, ["deepseek", "deepseek_in_python"])
        self.assertEqual(c.policies["balancedness_mean"][0], c.policies["balancedness_mean"][1])

    def test_a_failing_function_stops_the_run_with_its_message(self):
        for fn, expected in ((buggy, "reported an error: buggy raised ValueError: my bug"),
                             (keeps_one_expert, "logical expert 1 has no replica")):
            with self.subTest(fn.__name__):
                with self.assertRaises(EplbError) as caught:
                    eplb.run_scenario(TINY, policy=fn, timeout=300)
                self.assertIn(f"step 24: policy {fn.__name__}: ", str(caught.exception))
                self.assertIn(expected, str(caught.exception))

    def test_ids_out_of_range_are_refused_before_int32_could_wrap_them(self):
        # The tiny scenario: 4 layers, 16 experts, 20 slots.
        for fn, expected in (
                (wraps_to_the_same_placement, "wraps_to_the_same_placement returned a placement "
                 "that is not valid: phy2log[0][0] is 4294967296; valid values are -1 (empty) "
                 "or 0..15"),
                (empties_a_slot_by_wrapping, "empties_a_slot_by_wrapping returned a placement "
                 "that is not valid: phy2log[1][2] is 4294967295; valid values are -1 (empty) "
                 "or 0..15"),
                (drops_a_slot, "drops_a_slot returned int64 of shape (4, 19); expected integers "
                 "of shape (4, 20)"),
                (returns_flags, "returns_flags returned bool of shape (4, 20); expected integers"),
                (returns_halves, "returns_halves returned float64 of shape (4, 20); expected "
                 "integers")):
            with self.subTest(fn.__name__):
                with self.assertRaises(EplbError) as caught:
                    eplb.run_scenario(TINY, policy=fn, timeout=300)
                self.assertIn(f"step 24: policy {fn.__name__}: ", str(caught.exception))
                self.assertIn(f"reported an error: {expected}", str(caught.exception))

    def test_sys_exit_and_keyboard_interrupt_are_the_functions_errors(self):
        for fn, expected in ((exits, "exits raised SystemExit(3)"),
                             (interrupted, "interrupted raised KeyboardInterrupt")):
            with self.subTest(fn.__name__):
                with self.assertRaises(EplbError) as caught:
                    eplb.run_scenario(TINY, policy=fn, timeout=300)
                self.assertIn(f"step 24: policy {fn.__name__}: ", str(caught.exception))
                self.assertIn(f"reported an error: {expected}", str(caught.exception))

    def test_an_exceptions_line_break_cannot_forge_a_line_of_the_error(self):
        with self.assertRaises(EplbError) as caught:
            eplb.run_scenario(TINY, policy=forges_a_line, timeout=300)
        message = str(caught.exception)
        self.assertIn(r"forges_a_line raised ValueError: bad row\neplb: all runs passed", message)
        self.assertNotIn("\n", message)


def named(name):
    """A function as a policy, its __name__ set to `name` as a user may set it."""
    def policy(weight, num_replicas, num_groups, num_nodes, num_ranks,
               old_global_expert_indices):
        return old_global_expert_indices
    policy.__name__ = name
    return policy


class NothingLeftBehind(unittest.TestCase):
    """A function's policy is served from a folder of its own (eplb-policy-*, with the socket)
    and a run without `out` is written to another (eplb-run-*, -compare-, -sweep-): however the
    call ends, a bad argument, an error or an interrupt, neither may be left in the temporary
    folder. Run under a private one (tempfile honours tempfile.tempdir), to see every entry."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="t-")
        self.addCleanup(self.tmp.cleanup)
        for patch in (mock.patch.object(tempfile, "tempdir", self.tmp.name),
                      # eplb itself is not run here: these tests hold without the simulator
                      mock.patch.object(eplb.scenario, "_cli", lambda: "eplb")):
            patch.start()
            self.addCleanup(patch.stop)

    def left(self):
        return sorted(n for n in os.listdir(self.tmp.name) if n.startswith("eplb-"))

    def test_a_bad_argument_leaves_nothing(self):
        mine = named("mine")
        calls = {
            "run, policy_time": lambda: eplb.run_scenario(TINY, policy=mine, policy_time="bogus"),
            "compare, policy_time": lambda: eplb.compare_policies(TINY, policies=[mine],
                                                                  policy_time=3),
            "sweep, policy_time": lambda: eplb.sweep(TINY, vary={"run.steps": [10]},
                                                     policies=[mine], policy_time="x"),
            "a built-in's name": lambda: eplb.run_scenario(TINY, policy=named("deepseek")),
            "out": lambda: eplb.run_scenario(TINY, policy=mine, out="-x"),
            "seeds": lambda: eplb.compare_policies(TINY, policies=[mine], seeds="1,,2"),
            "set": lambda: eplb.run_scenario(TINY, policy=mine, set={"a=b": 1}),
            "timeout": lambda: eplb.run_scenario(TINY, policy=mine, timeout=-1),
            "a name '..'": lambda: eplb.compare_policies(TINY, policies=[named("..")]),
            "a keyword": lambda: eplb.run_scenario(TINY, policy=mine, bogus=1),
        }
        for what, call in calls.items():
            with self.subTest(what):
                before = self.left()
                with self.assertRaises(TypeError):  # ArgumentError is a TypeError too
                    call()
                self.assertEqual(self.left(), before)

    def test_an_interrupt_during_the_run_leaves_nothing(self):
        seen = []

        def interrupted(args, timeout, command):
            seen.append(self.left())  # both folders made, the run under way
            raise KeyboardInterrupt
        with mock.patch.object(eplb.scenario, "_run_stopping_on_interrupt", interrupted):
            with self.assertRaises(KeyboardInterrupt):
                eplb.run_scenario(TINY, policy=named("mine"))
        self.assertEqual([[n.split("-")[1] for n in names] for names in seen],
                         [["policy", "run"]])
        self.assertEqual(self.left(), [])

    def test_a_socket_path_too_long_is_named_and_leaves_nothing(self):
        # Python's own "AF_UNIX path too long" named neither the path nor a way out, and the
        # server's folder, made before, stayed.
        deep = os.path.join(self.tmp.name, "d" * 100)
        os.mkdir(deep)
        with mock.patch.object(tempfile, "tempdir", deep):
            with self.assertRaises(OSError) as caught:
                eplb.run_scenario(TINY, policy=named("mine"))
            self.assertEqual(os.listdir(deep), [])
        self.assertIn("a Unix socket's path may have; set TMPDIR to a shorter folder",
                      str(caught.exception))


class FunctionNames(unittest.TestCase):
    """A function's __name__ names its policy, and so the folder of its runs in a comparison: one
    that cannot ('..', '.', a leading '.', over 100 characters) is refused when given, naming the
    argument, rather than failing when eplb comes to write the folder."""

    RULE = ("a policy's name is 1 to 100 of letters, digits, '.', '_', '-' and '+', not starting "
            "with '.'")

    def test_a_name_that_cannot_name_a_folder_is_refused_up_front(self):
        for name in ("..", ".", ".hidden", "x" * 101):
            with self.subTest(name):
                with self.assertRaises(eplb.ArgumentError) as caught:
                    eplb.run_scenario(TINY, policy=named(name))
                self.assertIn(f"policy.__name__ is {eplb._args.quote(name)}",
                              str(caught.exception))
                self.assertIn(self.RULE, str(caught.exception))
                with self.assertRaises(eplb.ArgumentError) as caught:
                    eplb.compare_policies(TINY, policies=["deepseek", named(name)])
                self.assertIn(f"policies[1].__name__ is {eplb._args.quote(name)}",
                              str(caught.exception))
        with self.assertRaises(eplb.ArgumentError) as caught:
            eplb.run_scenario(TINY, policy=named("x" * 101))
        self.assertIn("(101 characters)", str(caught.exception))

    def test_a_built_ins_name_is_refused_as_an_argument(self):
        with self.assertRaises(eplb.ArgumentError) as caught:
            eplb.compare_policies(TINY, policies=[named("deepseek")])
        self.assertIn("policies[0].__name__ is 'deepseek'", str(caught.exception))
        self.assertIn("a built-in policy's name", str(caught.exception))

    def test_a_dict_of_policies_is_refused_not_read_as_its_keys(self):
        # Iterated, {"deepseek": fn} was ["deepseek"]: the built-in ran and fn was never called.
        with self.assertRaises(eplb.ArgumentError) as caught:
            eplb.compare_policies(TINY, policies={"deepseek": named("mine")})
        self.assertIn("policies is {'deepseek': <function", str(caught.exception))
        self.assertIn("a function is named by its __name__", str(caught.exception))


def ask(policy, layers=2, experts=4, slots=6, gpus=2):
    """One request to tools/policy/policy_client.py's serve(policy), as eplb sends it; returns
    (status, phy2log) or (status, message)."""
    old = np.arange(layers * slots, dtype="<i4").reshape(layers, slots) % experts
    request = (struct.pack("<4s10i", b"EPLB", 1, layers, experts, slots, gpus, 1, slots // gpus,
                           1, 24, 0)
               + bytes(gpus) + np.ones((layers, experts), "<f8").tobytes() + old.tobytes())
    stdout = io.BytesIO()
    policy_client.serve(policy, stdin=io.BytesIO(request), stdout=stdout)
    reply = stdout.getvalue()
    assert reply[:8] == struct.pack("<4si", b"EPLH", 1)
    magic, status = struct.unpack("<4si", reply[8:16])
    assert magic == b"EPLR"
    if status == 1:
        (length,) = struct.unpack("<i", reply[16:20])
        return status, reply[20:20 + length].decode()
    rows, columns = struct.unpack("<2i", reply[16:24])
    return status, np.frombuffer(reply[24:], "<i4").reshape(rows, columns)


class PolicyClient(unittest.TestCase):
    """tools/policy/policy_client.py, the protocol's Python side for a user's program."""

    def test_a_placement_in_range_is_sent_as_it_is(self):
        status, phy2log = ask(lambda load, old, **_: np.asarray(old, np.uint64))
        self.assertEqual(status, 0)
        self.assertEqual(phy2log.tolist(), [[0, 1, 2, 3, 0, 1], [2, 3, 0, 1, 2, 3]])

    def test_ids_out_of_range_are_refused_before_int32_could_wrap_them(self):
        def with_id(value, dtype=np.int64):
            def policy(load, old, **_):
                out = old.astype(dtype)
                out[1, 4] = value
                return out
            return policy
        cases = [
            (with_id(2**32 + 1), "the policy returned a placement that is not valid: "
             "phy2log[1][4] is 4294967297; valid values are -1 (empty) or 0..3"),
            (with_id(2**32 - 1, np.uint32), "phy2log[1][4] is 4294967295; valid values are -1 "
             "(empty) or 0..3"),
            (with_id(2**64 - 1, np.uint64), "phy2log[1][4] is 18446744073709551615; valid "
             "values are -1 (empty) or 0..3"),
            (with_id(-2), "phy2log[1][4] is -2; valid values are -1 (empty) or 0..3"),
            (with_id(4), "phy2log[1][4] is 4; valid values are -1 (empty) or 0..3"),
            (lambda load, old, **_: old[:, :5], "the policy returned int32 of shape (2, 5); "
             "expected integers of shape (2, 6)"),
            (lambda load, old, **_: old > 1, "the policy returned bool of shape (2, 6)"),
            (lambda load, old, **_: old + 0.5, "the policy returned float64 of shape (2, 6)"),
        ]
        for policy, expected in cases:
            with self.subTest(expected):
                status, message = ask(policy)
                self.assertEqual(status, 1)
                self.assertIn(expected, message)

    def test_sys_exit_and_keyboard_interrupt_are_the_policys_errors(self):
        def exits(load, old, **_):
            sys.exit(3)

        def interrupted(load, old, **_):
            raise KeyboardInterrupt
        self.assertEqual(ask(exits), (1, "the policy raised SystemExit(3)"))
        self.assertEqual(ask(interrupted), (1, "the policy raised KeyboardInterrupt"))

    def test_an_exceptions_line_break_cannot_forge_a_line(self):
        def forges(load, old, **_):
            raise ValueError("bad row\neplb: all runs passed\x1b[2K")
        self.assertEqual(ask(forges), (1, r"the policy raised ValueError: bad row\neplb: all "
                                          r"runs passed\x1b[2K"))


if __name__ == "__main__":
    unittest.main()
