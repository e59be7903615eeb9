"""The package's arguments and readers tried as a careless or hostile caller would (issue 54).

Every argument is checked once, in eplb/_args.py, as the command line checks its options: each
bad value raises ArgumentError (both a TypeError and a ValueError) naming the argument, the
value and what is valid, before any work or any eplb process starts. The readers take a folder
only when it is exactly what eplb wrote (every file listed in its manifest, nothing else in it)
and its numbers are in their ranges; a comparison's parts are found through its manifest, never
by a name the caller passes."""

import json
import math
import os
import shutil
import subprocess
import tempfile
import unittest

import numpy as np

import eplb
import eplb.sglang
import eplb.vllm
from eplb.scenario import _cli

try:
    import torch
except ImportError:
    torch = None

SCENARIOS = os.environ.get("EPLB_SCENARIOS",
                           os.path.join(os.path.dirname(__file__), "../../scenarios"))
TINY = os.path.join(SCENARIOS, "tiny.yaml")
SHORT = ["--set", "run.steps=40", "--set", "eplb.step_interval=20", "--set",
         "eplb.window_size=20", "--no-trace"]

LOAD = np.arange(1, 17, dtype=np.float64).reshape(2, 8)
PHY2LOG = np.array([[0, 1, 2, 3, 4, 5, 6, 7, 0, 1], [7, 6, 5, 4, 3, 2, 1, 0, 7, 6]])


def with_entry(array, value, dtype=None):
    out = np.array(array, dtype=dtype or type(value))
    out[0, 1] = value
    return out


# (case, call, message): each call raises ArgumentError, which is both a TypeError and a
# ValueError, with a message matching `message` (the argument, the value, what is valid).
# Study calls fail before eplb is started, so the scenario need not exist.
ARGUMENTS = [
    # Integers are integers: not a float (even a whole one), a bool, a string, nan or None.
    ("jobs a fraction", lambda: eplb.compare_policies("x.yaml", jobs=1.9),
     r"jobs is 1.9; expected an integer within \[0, \d+\], not a float"),
    ("jobs a bool", lambda: eplb.compare_policies("x.yaml", jobs=True),
     r"jobs is True; expected an integer within \[0, \d+\], not a bool"),
    ("jobs a string", lambda: eplb.compare_policies("x.yaml", jobs="abc"),
     r"jobs is 'abc'; expected an integer within \[0, \d+\], not a str"),
    ("jobs nan", lambda: eplb.sweep("x.yaml", vary={"run.steps": [1]}, jobs=math.nan),
     r"jobs is nan; expected an integer within \[0, \d+\], not a float"),
    ("jobs negative", lambda: eplb.compare_policies("x.yaml", jobs=-1),
     r"jobs is -1; it must be within \[0, 2147483647\]"),
    ("seeds a fraction", lambda: eplb.compare_policies("x.yaml", seeds=[1, 2.5]),
     r"seeds\[1\] is 2.5; expected an integer"),
    ("seeds negative", lambda: eplb.compare_policies("x.yaml", seeds=[-1]),
     r"seeds\[0\] is -1; it must be within \[0, "),
    ("seeds text not digits", lambda: eplb.compare_policies("x.yaml", seeds="1,x"),
     r"seeds\[1\] is 'x'; a seed is written in decimal digits alone"),
    ("policies not names", lambda: eplb.compare_policies("x.yaml", policies=["static", 3]),
     r"policies\[1\] is 3 \(an int\); expected a name"),
    # Overrides: a dict or "key=value" strings, never pairs; values finite, never None.
    ("set as pairs", lambda: eplb.run_scenario("x.yaml", set=[("run.steps", 10)]),
     r"set\[0\] is \('run.steps', 10\) \(a tuple\); expected a 'key.path=value' string"),
    ("set without =", lambda: eplb.run_scenario("x.yaml", set=["run.steps"]),
     r"set\[0\] is 'run.steps'; expected 'key.path=value'"),
    ("set a number", lambda: eplb.run_scenario("x.yaml", set=5),
     r"set is 5 \(an int\); expected"),
    ("set value nan", lambda: eplb.run_scenario("x.yaml", set={"workload.sigma": math.nan}),
     r"set\['workload.sigma'\] is nan; expected a finite number"),
    ("set value a list", lambda: eplb.run_scenario("x.yaml", set={"run.steps": [1]}),
     r"set\['run.steps'\] is \[1\] \(a list\); expected a bool, a finite number or a string"),
    ("vary not a dict", lambda: eplb.sweep("x.yaml", vary=[("run.steps", [1, 2])]),
     r"vary is \[\('run.steps', \[1, 2\]\)\]; expected a dict"),
    ("vary value inf", lambda: eplb.sweep("x.yaml", vary={"workload.sigma": [0.5, math.inf]}),
     r"vary\['workload.sigma'\] is inf; expected a finite number"),
    # Seconds are finite and above 0; flags are bools.
    ("timeout a string", lambda: eplb.run_scenario("x.yaml", timeout="10"),
     r"timeout is '10'; expected a finite number above 0 and at most 1000000000, not a str"),
    ("timeout nan", lambda: eplb.run_scenario("x.yaml", timeout=math.nan),
     r"timeout is nan; expected a finite number above 0"),
    ("timeout past the clocks", lambda: eplb.run_scenario("x.yaml", timeout=1e300),
     r"timeout is 1e\+300; expected a finite number above 0 and at most 1000000000"),
    ("set item with a NUL", lambda: eplb.run_scenario("x.yaml", set=["run.steps=1\0"]),
     r"set\[0\] is 'run.steps=1\\x00', which holds a NUL byte"),
    ("policy with a line break", lambda: eplb.compare_policies("x.yaml", policies="a\nb"),
     r"policies\[0\] is 'a\\nb', which holds a line break"),
    ("timeout zero", lambda: eplb.compare_policies("x.yaml", timeout=0),
     r"timeout is 0; expected a finite number above 0"),
    ("trace a string", lambda: eplb.run_scenario("x.yaml", trace="no"),
     r"trace is 'no' \(a str\); expected True or False"),
    ("frames a string", lambda: eplb.run_scenario("x.yaml", frames="yes"),
     r"frames is 'yes' \(a str\); expected True or False"),
    # A path passed to eplb is never an option.
    ("scenario an option", lambda: eplb.run_scenario("--help"),
     r"scenario is '--help', which reads as an option, not a path; write './--help'"),
    ("out an option", lambda: eplb.compare_policies("x.yaml", out="-o"),
     r"out is '-o', which reads as an option"),
    ("scenario a number", lambda: eplb.run_scenario(3),
     r"scenario is 3 \(an int\); expected a path"),
    ("scenario with NUL", lambda: eplb.run_scenario("a\0b.yaml"),
     r"scenario is 'a\\x00b.yaml', which holds a NUL byte"),
    ("read_load a number", lambda: eplb.read_load(3.5),
     r"path is 3.5 \(a float\); expected a path"),
    ("read_load None", lambda: eplb.read_load(None), r"path is None; expected a path"),
    ("read_load NUL", lambda: eplb.read_load("a\0b.csv"), r"path is .*holds a NUL byte"),
    ("read_run None", lambda: eplb.read_run(None), r"folder is None; expected a path"),
    ("read_comparison frames", lambda: eplb.read_comparison("nowhere", frames=1),
     r"frames is 1 \(an int\); expected True or False"),
    # The placement functions.
    ("plan sender_rule None", lambda: eplb.plan(PHY2LOG, PHY2LOG, 2, 1, sender_rule=None),
     r"sender_rule is None \(a NoneType\); expected a string"),
    ("plan schedule a number", lambda: eplb.plan(PHY2LOG, PHY2LOG, 2, 1, schedule=1),
     r"schedule is 1 \(an int\); expected a string"),
    ("plan nvlink nan", lambda: eplb.plan(PHY2LOG, PHY2LOG, 2, 1, nvlink_gbps=math.nan),
     r"nvlink_gbps is nan; expected a finite number within \[1e-09, 1000000.0\]"),
    ("plan nvlink subnormal", lambda: eplb.plan(PHY2LOG, PHY2LOG, 2, 1, nvlink_gbps=5e-324),
     r"nvlink_gbps is 5e-324; expected a finite number within \[1e-09, 1000000.0\]"),
    ("plan current a float scalar", lambda: eplb.plan(2.5, PHY2LOG, 2, 1),
     r"old\[\] is 2.5; expected whole numbers"),
    ("plan nic a string", lambda: eplb.plan(PHY2LOG, PHY2LOG, 2, 1, nic_gbps="50"),
     r"nic_gbps is '50'; expected a finite number within \[1e-09, 1000000.0\], not a str"),
    ("plan nan in old", lambda: eplb.plan(with_entry(PHY2LOG, math.nan), PHY2LOG, 2, 1),
     r"old\[0, 1\] is nan; expected whole numbers"),
    ("plan num_gpus a float", lambda: eplb.plan(PHY2LOG, PHY2LOG, 2.0, 1),
     r"num_gpus is 2.0; expected an integer within \[1, 2147483647\], not a float"),
    ("log2phy a fraction", lambda: eplb.log2phy_of(with_entry(PHY2LOG, 0.7), 8),
     r"phy2log\[0, 1\] is 0.7; expected whole numbers"),
    ("log2phy nan", lambda: eplb.log2phy_of(with_entry(PHY2LOG, math.nan), 8),
     r"phy2log\[0, 1\] is nan; expected whole numbers"),
    ("log2phy complex", lambda: eplb.log2phy_of(PHY2LOG + 0.5j, 8),
     r"phy2log has complex dtype complex128; expected real numbers"),
    ("log2phy width a string", lambda: eplb.log2phy_of(PHY2LOG, 8, width="3"),
     r"width is '3'; expected an integer within \[0, \d+\], not a str"),
    ("log2phy width too small", lambda: eplb.log2phy_of(PHY2LOG, 8, width=1),
     r"width is 1; it must be within \[2, 10\]: at least the largest replica count"),
    ("log2phy width past the slots", lambda: eplb.log2phy_of(PHY2LOG, 8, width=2**31 - 1),
     r"width is 2147483647; it must be within \[2, 10\]"),
    ("log2phy experts a float", lambda: eplb.log2phy_of(PHY2LOG, 8.0),
     r"num_experts is 8.0; expected an integer"),
    ("rebalance replicas a bool", lambda: eplb.rebalance(LOAD, True, 1),
     r"num_replicas is True; expected an integer within \[1, 2147483647\], not a bool"),
    ("rebalance replicas a string", lambda: eplb.rebalance(LOAD, "16", 2),
     r"num_replicas is '16'; expected an integer"),
    ("rebalance policy None", lambda: eplb.rebalance(LOAD, 16, 2, policy=None),
     r"policy is None \(a NoneType\); expected a string"),
    ("rebalance option nan", lambda: eplb.rebalance(LOAD, 16, 2, window_steps=math.nan),
     r"window_steps is nan; expected a finite number"),
    ("rebalance ragged load", lambda: eplb.rebalance([[1.0, 2.0], [3.0]], 4, 2),
     r"load is not an array of numbers"),
    ("vllm replicas a fraction",
     lambda: eplb.vllm.EplbPolicy.rebalance_experts(LOAD, 16.5, 1, 1, 2),
     r"num_replicas is 16.5; expected an integer"),
    ("vllm ranks a string",
     lambda: eplb.vllm.EplbPolicy.preserve_intragpu_slots(PHY2LOG, "2", PHY2LOG),
     r"num_ranks is '2'; expected an integer"),
    ("vllm policy name a list", lambda: eplb.vllm.policy(["deepseek"]),
     r"name is \['deepseek'\] \(a list\); expected a string"),
    ("vllm policy option nan", lambda: eplb.vllm.policy("deepseek", window_steps=math.nan),
     r"window_steps is nan; expected a finite number"),
    ("sglang algorithm None",
     lambda: eplb.sglang.rebalance_experts(LOAD[None], 16, 8, 1, 1, None),
     r"algorithm is None \(a NoneType\); expected a string"),
]


class Arguments(unittest.TestCase):
    def test_each_bad_argument_is_refused_naming_it_its_value_and_what_is_valid(self):
        for case, call, message in ARGUMENTS:
            with self.subTest(case):
                with self.assertRaisesRegex(eplb.ArgumentError, message):
                    call()
                # Both kinds of caller catch it: Python's TypeError, the package's ValueError.
                self.assertRaises(TypeError, call)
                self.assertRaises(ValueError, call)

    def test_the_vllm_classes_raise_it_as_their_assertion(self):
        with self.assertRaisesRegex(AssertionError, r"num_replicas is 16.5"):
            eplb.vllm.EplbPolicy.rebalance_experts(LOAD, 16.5, 1, 1, 2)

    def test_good_arguments_of_every_numeric_kind_still_pass(self):
        # numpy integers, 0-d integer arrays and whole-number float arrays are integers.
        log2phy, logcnt = eplb.log2phy_of(PHY2LOG.astype(np.float64), np.int64(8),
                                          width=np.int32(3))
        self.assertEqual(log2phy.shape, (2, 8, 3))
        self.assertEqual(logcnt.tolist(), [[2, 2, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 2, 2]])
        self.assertEqual(log2phy[0, 0].tolist(), [0, 8, -1])
        plan = eplb.plan(PHY2LOG, PHY2LOG[::-1].copy(), np.array(2), 1, nvlink_gbps=450)
        self.assertGreater(len(plan["transfers"]["layer"]), 0)

    @unittest.skipIf(torch is None, "torch is not installed")
    def test_log2phy_gives_torch_for_torch(self):
        log2phy, logcnt = eplb.log2phy_of(torch.from_numpy(PHY2LOG), 8)
        self.assertIsInstance(log2phy, torch.Tensor)
        self.assertIsInstance(logcnt, torch.Tensor)
        self.assertEqual(log2phy.dtype, torch.int64)
        self.assertEqual(logcnt.tolist(), [[2, 2, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 2, 2]])
        with self.assertRaisesRegex(ValueError, r"phy2log\[0, 1\] is 0.7"):
            eplb.log2phy_of(torch.from_numpy(with_entry(PHY2LOG, 0.7)), 8)
        with self.assertRaisesRegex(ValueError, r"phy2log is a complex tensor"):
            eplb.log2phy_of(torch.from_numpy(PHY2LOG + 0.5j), 8)


def eplb_cli(*args):
    done = subprocess.run([_cli(), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(f"eplb {' '.join(args)}: {done.stderr}")


def rewrite_manifest(folder, files=None):
    """`folder`'s manifest for `files` (default: every file in it) as they are now, as eplb
    writes one: its kind line kept, a line per file with its size and CRC-32."""
    import zlib

    path = os.path.join(folder, "manifest.tsv")
    with open(path) as f:
        header = f.readline() + f.readline()
    entries = []
    for root, _, names in os.walk(folder):
        for name in names:
            rel = os.path.relpath(os.path.join(root, name), folder).replace(os.sep, "/")
            if rel != "manifest.tsv" and (files is None or rel in files):
                with open(os.path.join(folder, rel), "rb") as f:
                    data = f.read()
                entries.append(f"file\t{rel}\t{len(data)}\t{zlib.crc32(data):08x}\n")
    with open(path, "w") as f:
        f.write(header + "".join(sorted(entries)))


def edit_json(path, change):
    with open(path) as f:
        doc = json.load(f)
    change(doc)
    with open(path, "w") as f:
        json.dump(doc, f)


def no_files(folder):
    rewrite_manifest(folder, files=())


def balancedness_of(value):
    def tamper(folder):
        edit_json(os.path.join(folder, "summary.json"),
                  lambda s: s["balancedness"].__setitem__("mean", value))
        rewrite_manifest(folder)
    return tamper


def extra_file(folder):
    with open(os.path.join(folder, "notes.txt"), "w") as f:
        f.write("mine\n")


def linked_scenario(folder):
    # The same bytes through a link: the manifest's sizes and checksums agree, the link does not.
    path = os.path.join(folder, "scenario.yaml")
    shutil.move(path, os.path.join(os.path.dirname(folder), "elsewhere.yaml"))
    os.symlink(os.path.join(os.path.dirname(folder), "elsewhere.yaml"), path)


def negative_steps_time(folder):
    edit_json(os.path.join(folder, "summary.json"),
              lambda s: s["step_time_s"].__setitem__("max", -1.0))
    rewrite_manifest(folder)


# (case, tamper(run folder), message): read_run refuses the tampered copy naming the problem.
RUN_FOLDERS = [
    ("a manifest that lists no files", no_files,
     r"gpu_memory.csv, layer_balancedness.csv, loads.jsonl and \d+ more are not listed in "
     "manifest.tsv: the folder was changed after eplb wrote it"),
    ("a balancedness of 5", balancedness_of(5),
     r"summary.json: field 'balancedness.mean' is 5; a balancedness is within \[0, 1\]"),
    ("a negative balancedness", balancedness_of(-0.5),
     r"summary.json: field 'balancedness.mean' is -0.5; a balancedness is within \[0, 1\]"),
    ("a negative step time", negative_steps_time,
     r"summary.json: field 'step_time_s.max' is -1.0; it is never negative"),
    ("a file the manifest does not list", extra_file,
     r"notes.txt is not listed in manifest.tsv"),
    ("a symbolic link in place of a file", linked_scenario,
     r"scenario.yaml is a symbolic link; eplb writes none"),
]


@unittest.skipIf(os.environ.get("EPLB_HAVE_SIM") == "0", "eplb was built without the simulator")
class Readers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.run_dir = os.path.join(cls.tmp.name, "run")
        eplb_cli("run", TINY, "--out", cls.run_dir, *SHORT)
        cls.compare_dir = os.path.join(cls.tmp.name, "compare")
        eplb_cli("compare", TINY, "--policies", "static", "--seeds", "1,2", "--out",
                 cls.compare_dir, *SHORT)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def copy(self, folder):
        tmp = tempfile.mkdtemp(dir=self.tmp.name)
        out = os.path.join(tmp, os.path.basename(folder))
        shutil.copytree(folder, out, symlinks=True)
        return out

    def test_a_run_folder_is_read_only_as_eplb_wrote_it(self):
        self.assertEqual(eplb.read_run(self.run_dir, frames=False).summary["steps"], 40)
        for case, tamper, message in RUN_FOLDERS:
            with self.subTest(case):
                folder = self.copy(self.run_dir)
                tamper(folder)
                with self.assertRaisesRegex(ValueError, message):
                    eplb.read_run(folder, frames=False)

    def test_placements_are_read_only_while_the_folder_is_whole(self):
        folder = self.copy(self.run_dir)
        run = eplb.read_run(folder, frames=False)
        self.assertGreater(len(run.placements()), 0)
        extra_file(folder)
        with self.assertRaisesRegex(ValueError, "notes.txt is not listed in manifest.tsv"):
            run.placements()

    def test_a_comparisons_runs_are_found_through_its_manifest(self):
        cmp = eplb.read_comparison(self.compare_dir, frames=False)
        self.assertEqual(cmp.seeds("static"), [1, 2])
        self.assertEqual(cmp.run("static", seed=np.int64(2)).summary["steps"], 40)
        cases = [
            ("a policy outside the comparison", lambda: cmp.seeds("../.."),
             r"policy is '../..'; .* has no policy '../..'; it has \['static'\]"),
            ("a policy that is no name", lambda: cmp.run(None),
             r"policy is None; .* has no policy None"),
            ("a fractional seed", lambda: cmp.run("static", seed=1.7),
             r"seed is 1.7; expected an integer within \[0, \d+\], not a float"),
            ("a bool seed", lambda: cmp.run("static", seed=True),
             r"seed is True; expected an integer"),
            ("a seed it did not run", lambda: cmp.run("static", seed=3),
             r"seed is 3; static ran with seeds \[1, 2\]"),
            ("no seed where it ran several", lambda: cmp.run("static"),
             r"seed is None; static ran with seeds \[1, 2\]: name one"),
        ]
        for case, call, message in cases:
            with self.subTest(case), self.assertRaisesRegex(eplb.ArgumentError, message):
                call()

    def test_a_folders_name_cannot_forge_a_line_of_an_error(self):
        folder = os.path.join(self.tmp.name, "compare\neplb: all checks passed\x1b[2K")
        shutil.copytree(self.compare_dir, folder, symlinks=True)
        cmp = eplb.read_comparison(folder, frames=False)
        with self.assertRaises(eplb.ArgumentError) as caught:
            cmp.seeds("deepseek")
        message = str(caught.exception)
        self.assertIn(r"compare\neplb: all checks passed\x1b[2K has no policy 'deepseek'",
                      message)
        self.assertNotIn("\n", message)
        self.assertNotIn("\x1b", message)

    def test_a_comparison_with_anything_eplb_did_not_write_is_refused(self):
        folder = self.copy(self.compare_dir)
        os.makedirs(os.path.join(folder, "static", "seed-9"))
        shutil.copy(os.path.join(folder, "static", "seed-1", "summary.json"),
                    os.path.join(folder, "static", "seed-9", "summary.json"))
        with self.assertRaisesRegex(ValueError, r"static/seed-9/summary.json is not listed in "
                                                "manifest.tsv"):
            eplb.read_comparison(folder)


if __name__ == "__main__":
    unittest.main()
