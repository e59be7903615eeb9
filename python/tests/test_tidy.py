"""Tidy data for a notebook (issue 60): the namespace and the docstrings, plan's tables and its
arguments' names, a run's placements and load windows, summaries as typed rows, and the long
frames of a comparison and a sweep, each column of the dtype asserted; and the notebook example
(docs/notebook_example.py) run as a user runs it."""

import inspect
import json
import os
import subprocess
import sys
import tempfile
import unittest
import warnings

import numpy as np

import eplb
from eplb.scenario import _cli

SCENARIOS = os.environ.get("EPLB_SCENARIOS",
                           os.path.join(os.path.dirname(__file__), "../../scenarios"))
TINY = os.path.join(SCENARIOS, "tiny.yaml")
EXAMPLE = os.path.join(SCENARIOS, "..", "docs", "notebook_example.py")
HAVE_SIM = os.environ.get("EPLB_HAVE_SIM") != "0"

try:
    import pandas
except ImportError:
    pandas = None

I, F, B, S = "int64", "float64", "bool", "str"
METRICS = [("step", I), ("time_s", F), ("step_s", F), ("idle_step_s", F), ("balancedness", F),
           ("imbalance_ratio", F), ("bytes_in_flight", I), ("stalled_s", F), ("tokens_lost", F),
           ("serving_gpus", I), ("latency_s", F)]


def kind(array):
    """A column's dtype as the tables promise it: int64, float64, bool, or str (numpy's '<U',
    pandas' object of str)."""
    array = np.asarray(array)
    if array.dtype.kind == "U" or (array.dtype == object and all(isinstance(v, str)
                                                                 for v in array)):
        return S
    return str(array.dtype)


def columns(table):
    return list(table.keys()) if isinstance(table, dict) else list(table.columns)


class Namespace(unittest.TestCase):
    SUBMODULES = {"deepseek", "sglang", "vllm"}

    def test_dir_lists_the_api_alone(self):
        public = {n for n in dir(eplb) if not n.startswith("_")}
        self.assertEqual(public, set(eplb.__all__) | self.SUBMODULES)
        for name in eplb.__all__:
            self.assertTrue(hasattr(eplb, name), name)

    def test_helpers_do_not_leak(self):
        for name in ("np", "os", "json", "warnings", "integer", "group_count", "to_numpy"):
            self.assertFalse(hasattr(eplb, name), f"eplb.{name} leaks")

    def test_every_public_callable_says_what_it_does(self):
        import eplb.deepseek
        import eplb.sglang
        import eplb.vllm

        missing = []

        def check(owner, name, obj):
            if not (inspect.getdoc(obj) or "").strip():
                missing.append(f"{owner}.{name}")

        for module in (eplb, eplb.deepseek, eplb.sglang, eplb.vllm):
            names = getattr(module, "__all__", None) or [
                n for n, v in vars(module).items() if not n.startswith("_")
                and (inspect.isfunction(v) or inspect.isclass(v))
                and getattr(v, "__module__", "").startswith("eplb")]
            for name in names:
                obj = getattr(module, name)
                check(module.__name__, name, obj)
                if inspect.isclass(obj):
                    for member, value in vars(obj).items():
                        if not member.startswith("_") and (callable(value)
                                                           or isinstance(value, property)):
                            check(f"{module.__name__}.{name}", member, value)
                    for base in obj.__mro__[1:]:
                        if base.__module__.startswith("eplb"):
                            for member, value in vars(base).items():
                                if not member.startswith("_") and (
                                        callable(value) or isinstance(value, property)):
                                    check(f"{module.__name__}.{name}", member, value)
        self.assertEqual(missing, [])

    def test_help_names_each_metrics_column_in_the_column_tables_words(self):
        table = eplb.run_folder_columns(frames=False)
        self.assertEqual(list(table), ["file", "column", "unit", "meaning"])
        metrics = table["file"] == "metrics.csv"
        self.assertEqual([c for c, _ in METRICS], list(table["column"][metrics]))
        for method in (eplb.Comparison.metrics_frame, eplb.Sweep.metrics_frame):
            doc = inspect.getdoc(method)
            for name, meaning in zip(table["column"][metrics], table["meaning"][metrics]):
                self.assertIn(f"{name}", doc)
                self.assertIn(" ".join(meaning.split()), " ".join(doc.split()))

    def test_plan_documents_its_arguments_and_columns(self):
        doc = inspect.getdoc(eplb.plan)
        for word in ("sender_rule", "--sender-rule", "schedule", "--schedule", "src_slot",
                     "dst_rank", "round", "makespan_s", "lower_bound_s", "DeprecationWarning"):
            self.assertIn(word, doc)


OLD = np.array([[0, 1, 2, 3, 0, 1], [3, 2, 1, 0, 3, 2]])
NEW = np.array([[3, 2, 1, 0, 0, 1], [0, 1, 2, 3, 3, 2]])
TRANSFERS = [("layer", I), ("expert", I), ("src_rank", I), ("src_slot", I), ("dst_rank", I),
             ("dst_slot", I), ("bytes", I), ("link", I), ("round", I)]
LAYERS = [("layer", I), ("nvlink_bytes", I), ("nic_bytes", I), ("local_copies", I),
          ("rounds", I), ("makespan_s", F), ("lower_bound_s", F)]


class Plan(unittest.TestCase):
    def check_tables(self, out):
        self.assertEqual(set(out), {"transfers", "layers"})
        for name, want in (("transfers", TRANSFERS), ("layers", LAYERS)):
            self.assertEqual([(c, kind(out[name][c])) for c in columns(out[name])], want, name)

    @unittest.skipIf(pandas is None, "pandas is not installed")
    def test_plan_returns_frames(self):
        out = eplb.plan(OLD, NEW, 3, 1, sender_rule="vllm", schedule="greedy-pairs")
        self.assertIsInstance(out["transfers"], pandas.DataFrame)
        self.assertIsInstance(out["layers"], pandas.DataFrame)
        self.check_tables(out)
        self.assertGreater(len(out["transfers"]), 0)

    def test_plan_returns_numpy_columns_without_frames(self):
        out = eplb.plan(OLD, NEW, 3, 1, frames=False)
        self.assertIsInstance(out["transfers"], dict)
        self.check_tables(out)

    def test_old_argument_names_still_work_with_a_deprecation_warning(self):
        want = eplb.plan(OLD, NEW, 3, 1, sender_rule="vllm", schedule="single-batch",
                         frames=False)
        for old, new in (("sender", "sender_rule"), ("strategy", "schedule")):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                value = "vllm" if old == "sender" else "single-batch"
                other = {"schedule": "single-batch"} if old == "sender" else {
                    "sender_rule": "vllm"}
                got = eplb.plan(OLD, NEW, 3, 1, frames=False, **{old: value}, **other)
            self.assertEqual([w.category for w in caught], [DeprecationWarning])
            self.assertIn(f"argument {old} is now {new}", str(caught[0].message))
            self.assertEqual(caught[0].filename, __file__)  # the caller's line, not eplb's
            for table in ("transfers", "layers"):
                for c in want[table]:
                    np.testing.assert_array_equal(got[table][c], want[table][c])

    def test_argument_errors_name_the_argument_as_given(self):
        cases = [
            (dict(sender_rule="nearest"),
             r"sender_rule is 'nearest'; expected one of local, vllm"),
            (dict(schedule="fast"),
             r"schedule is 'fast'; expected one of best, greedy-pairs, single-batch"),
            (dict(sender="nearest"), r"sender is 'nearest'; expected one of local, vllm"),
            (dict(sender=None), r"sender is None \(a NoneType\); expected a string"),
            (dict(sender="vllm", sender_rule="vllm"),
             r"sender and sender_rule are both given; sender is the old name of sender_rule"),
            (dict(frames="yes"), r"frames is 'yes' \(a str\); expected True or False"),
        ]
        for kwargs, message in cases:
            with self.subTest(kwargs=kwargs), warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                with self.assertRaisesRegex(eplb.ArgumentError, message):
                    eplb.plan(OLD, NEW, 3, 1, **kwargs)


def eplb_cli(*args):
    done = subprocess.run([_cli(), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(f"eplb {' '.join(args)}: {done.stderr}")


SHORT = ["--set", "run.steps=120", "--set", "eplb.step_interval=40", "--no-trace"]


@unittest.skipIf(not HAVE_SIM, "eplb was built without the simulator")
class TidyTables(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.compare_dir = os.path.join(cls.tmp.name, "compare")
        eplb_cli("compare", TINY, "--out", cls.compare_dir, "--policies=deepseek,static",
                 "--seeds=1,2", *SHORT)
        cls.sweep_dir = os.path.join(cls.tmp.name, "sweep")
        eplb_cli("sweep", TINY, "--out", cls.sweep_dir, "--vary=eplb.use_async=true,false",
                 "--vary=workload.sigma=0.5,1.5", "--policies=deepseek", *SHORT)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def frames_both(self):
        """Each test's tables both ways: DataFrames (when pandas is installed) and numpy."""
        return [False] + ([True] if pandas is not None else [])

    def test_comparison_long_frame_has_a_row_per_policy_seed_and_step(self):
        for frames in self.frames_both():
            cmp = eplb.read_comparison(self.compare_dir, frames=frames)
            steps = cmp.metrics_frame()
            self.assertEqual([(c, kind(steps[c])) for c in columns(steps)],
                             [("policy", S), ("seed", I)] + METRICS)
            policy, seed, step = (np.asarray(steps[c]) for c in ("policy", "seed", "step"))
            self.assertEqual(len(step), 2 * 2 * 120)
            for p in ("deepseek", "static"):
                for s in (1, 2):
                    mine = (policy == p) & (seed == s)
                    np.testing.assert_array_equal(step[mine], np.arange(120))
                    run = cmp.run(p, s)
                    np.testing.assert_array_equal(np.asarray(steps["latency_s"])[mine],
                                                  np.asarray(run.metrics["latency_s"]))

    def test_summaries_flatten_to_typed_rows(self):
        for frames in self.frames_both():
            cmp = eplb.read_comparison(self.compare_dir, frames=frames)
            run = cmp.run("deepseek", 2)
            with open(os.path.join(run.folder, "summary.json")) as f:
                summary = json.load(f)
            row = run.summary_frame()
            flat = run.summary_flat()
            self.assertEqual(columns(row), list(flat))
            self.assertEqual(len(np.asarray(row["steps"])), 1)
            want = {"steps": I, "measured.rule": S, "measured.from_step": I,
                    "measured.steps": I, "latency_s.p99": F, "latency_s.p999": F,
                    "latency_s.worst_step": I, "balancedness.mean": F, "bytes_moved.nic": I,
                    "scenario": S, "transfers": I}
            for name, dtype in want.items():
                self.assertEqual(kind(row[name]), dtype, name)
            self.assertEqual(np.asarray(row["latency_s.p999"])[0], summary["latency_s"]["p999"])
            for key in summary:  # every top-level field, today's and tomorrow's, is there
                self.assertTrue(any(c == key or c.startswith(key + ".") for c in columns(row)),
                                key)
            table = cmp.summary_frame()
            self.assertEqual(columns(table)[:3], ["policy", "seed", "tool"])
            self.assertEqual(kind(table["seed"]), I)
            self.assertEqual(sorted(zip(np.asarray(table["policy"]), np.asarray(table["seed"]))),
                             [("deepseek", 1), ("deepseek", 2), ("static", 1), ("static", 2)])

    def test_sweep_flags_are_bools_and_its_long_frame_carries_the_varied_fields(self):
        for frames in self.frames_both():
            sweep = eplb.read_sweep(self.sweep_dir, frames=frames)
            points = sweep.points
            self.assertEqual([(c, kind(points[c])) for c in columns(points)[:4]],
                             [("point", I), ("eplb.use_async", B), ("workload.sigma", F),
                              ("policy", S)])
            self.assertEqual(list(np.asarray(points["eplb.use_async"])),
                             [True, True, False, False])
            steps = sweep.metrics_frame()
            self.assertEqual([(c, kind(steps[c])) for c in columns(steps)],
                             [("point", I), ("eplb.use_async", B), ("workload.sigma", F),
                              ("policy", S), ("seed", I)] + METRICS)
            self.assertEqual(len(np.asarray(steps["step"])), 4 * 120)
            flags = np.asarray(steps["eplb.use_async"])
            point = np.asarray(steps["point"])
            self.assertTrue(flags[point == 1].all() and not flags[point == 2].any())
            table = sweep.summary_frame()
            self.assertEqual(kind(table["eplb.use_async"]), B)
            self.assertEqual(kind(table["point"]), I)

    def run_of(self, policy, frames=None):
        return eplb.read_comparison(self.compare_dir, frames=frames).run(policy, 1)

    def test_placement_at_applies_each_commit_from_the_step_it_is_served(self):
        run = self.run_of("deepseek")
        records = run.placements()
        initial = np.array([r["phy2log"] for r in records if r["step"] == -1])
        commits = [r for r in records if r["step"] >= 0]
        self.assertGreater(len(commits), 0)
        np.testing.assert_array_equal(run.placement_at(0), initial)
        self.assertEqual(run.placement_at(0).dtype, np.int64)
        # Before a commit's step ends the old placement serves; from the next step, the new.
        first = commits[0]
        before = run.placement_at(first["step"])
        after = run.placement_at(first["step"] + 1)
        np.testing.assert_array_equal(before[first["layer"]], initial[first["layer"]])
        np.testing.assert_array_equal(after[first["layer"]], first["phy2log"])
        final = initial.copy()
        for r in commits:
            final[r["layer"]] = r["phy2log"]
        np.testing.assert_array_equal(run.placement_at(120), final)
        static = self.run_of("static")
        for step in (0, 60, 120):
            np.testing.assert_array_equal(static.placement_at(step), initial)
        for step, message in ((121, r"step is 121; it must be within \[0, 120\]"),
                              (-1, r"step is -1; it must be within \[0, 120\]"),
                              (2.0, r"step is 2.0; expected an integer .*not a float"),
                              (True, r"step is True; expected an integer .*not a bool")):
            with self.subTest(step=step), self.assertRaisesRegex(eplb.ArgumentError, message):
                run.placement_at(step)

    def test_a_recovery_that_serving_waits_for_serves_its_own_step(self):
        # GPU 1 lost at step 150, stop-the-world: the recovery commits every layer before step
        # 150 runs, so step 150 is served on it (recorded with step 150, as a commit after the
        # step would be; its time tells them apart).
        with open(TINY) as f:
            text = f.read()
        path = os.path.join(self.tmp.name, "tiny-gpu-lost.yaml")
        with open(path, "w") as f:
            f.write(text + "faults:\n  - {kind: gpu_lost, step: 150, rank: 1}\n")
        folder = os.path.join(self.tmp.name, "gpu-lost")
        eplb_cli("run", path, "--out", folder, "--set", "run.steps=200", "--set",
                 "eplb.num_redundant_experts=12", "--set", "eplb.use_async=false",
                 "--set", "eplb.step_interval=100", "--no-trace")
        run = eplb.read_run(folder)
        arrays = run.placement_arrays()
        recovery = arrays["step"] == 150
        self.assertEqual(sorted(arrays["layer"][recovery]), [0, 1, 2, 3])
        np.testing.assert_array_equal(arrays["from_step"][recovery], 150)
        for i in np.flatnonzero(recovery):
            layer = arrays["layer"][i]
            np.testing.assert_array_equal(run.placement_at(150)[layer], arrays["phy2log"][i])
            self.assertFalse((run.placement_at(149)[layer] == arrays["phy2log"][i]).all())
            # GPU 1 (slots 7..13 of 28) holds nothing once recovered.
            self.assertTrue((run.placement_at(150)[layer][7:14] == -1).all())

    def test_placements_as_arrays_and_a_tidy_frame(self):
        for frames in self.frames_both():
            run = self.run_of("deepseek", frames)
            arrays = run.placement_arrays()
            self.assertEqual({k: v.dtype.name for k, v in arrays.items()},
                             {"step": I, "from_step": I, "time_s": F, "layer": I, "phy2log": I})
            n = len(arrays["step"])
            self.assertEqual(arrays["phy2log"].shape, (n, 20))  # tiny: 16 experts + 4 redundant
            np.testing.assert_array_equal(arrays["from_step"][arrays["step"] == -1], 0)
            later = arrays["step"] >= 0
            np.testing.assert_array_equal(arrays["from_step"][later], arrays["step"][later] + 1)
            table = run.placement_frame()
            self.assertEqual([(c, kind(table[c])) for c in columns(table)],
                             [("step", I), ("from_step", I), ("time_s", F), ("layer", I),
                              ("slot", I), ("rank", I), ("expert", I)])
            self.assertEqual(len(np.asarray(table["slot"])), n * 20)
            np.testing.assert_array_equal(np.asarray(table["expert"]),
                                          arrays["phy2log"].reshape(-1))
            np.testing.assert_array_equal(np.asarray(table["rank"]),
                                          np.asarray(table["slot"]) // 5)  # 20 slots, 4 GPUs

    def test_load_windows_are_what_each_rearrangement_saw(self):
        for frames in self.frames_both():
            run = self.run_of("deepseek", frames)
            windows = run.load_windows()
            rearrangements = np.asarray(run.rearrangements["step"])
            np.testing.assert_array_equal(windows["step"], rearrangements)
            self.assertEqual(windows["load"].shape, (len(rearrangements), 4, 16))
            self.assertEqual(windows["load"].dtype, np.float64)
            self.assertTrue((windows["load"] >= 0).all() and windows["load"].sum() > 0)
            table = run.load_frame()
            self.assertEqual([(c, kind(table[c])) for c in columns(table)],
                             [("window", I), ("step", I), ("time_s", F), ("layer", I),
                              ("expert", I), ("tokens", F)])
            np.testing.assert_array_equal(np.asarray(table["tokens"]),
                                          windows["load"].reshape(-1))
            self.assertEqual((run.num_gpus, run.num_nodes, run.seed), (4, 2, 1))


@unittest.skipIf(not HAVE_SIM, "eplb was built without the simulator")
@unittest.skipIf(pandas is None, "the example uses pandas")
class NotebookExample(unittest.TestCase):
    def test_the_example_runs_and_writes_its_figures(self):
        with tempfile.TemporaryDirectory() as out:
            done = subprocess.run(
                [sys.executable, "-W", "error::DeprecationWarning", EXAMPLE, "--scenario", TINY,
                 "--steps", "300", "--out", out], capture_output=True, text=True, timeout=300)
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertIn("placement at step 150: 4 layers x 20 slots", done.stdout)
            made = sorted(os.listdir(out))
            try:
                import matplotlib  # noqa: F401
                self.assertEqual(made, ["latency_cdf.png", "layer_load_per_gpu.png"])
                return
            except ImportError:
                self.assertEqual(made, ["latency_cdf.csv", "layer_load_per_gpu.csv"])
                self.assertIn("matplotlib is not installed", done.stdout)
            cdf = pandas.read_csv(os.path.join(out, "latency_cdf.csv"))
            self.assertEqual(sorted(cdf["policy"].unique()),
                             ["deepseek", "replicate-lpt", "static"])
            for _, group in cdf.groupby("policy"):
                self.assertTrue(group["latency_s"].is_monotonic_increasing)
                self.assertAlmostEqual(group["fraction"].iloc[-1], 1.0)
            loads = pandas.read_csv(os.path.join(out, "layer_load_per_gpu.csv"))
            self.assertEqual(list(loads.columns), ["rank", "initial", "at_step"])
            self.assertEqual(list(loads["rank"]), [0, 1, 2, 3])
            # The same window's tokens, only placed differently.
            self.assertAlmostEqual(loads["initial"].sum(), loads["at_step"].sum(), places=3)


if __name__ == "__main__":
    unittest.main()
