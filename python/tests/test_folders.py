"""eplb's folders read back from Python: typed columns from the C++ reader, tables as pandas
DataFrames or numpy columns, comparison and sweep folders, and damaged or newer folders refused."""

import json
import os
import subprocess
import tempfile
import unittest
import zlib

import numpy as np

import eplb
from eplb.scenario import _cli

SCENARIOS = os.environ.get("EPLB_SCENARIOS",
                           os.path.join(os.path.dirname(__file__), "../../scenarios"))
TINY = os.path.join(SCENARIOS, "tiny.yaml")
SHORT = ["--set", "run.steps=60", "--set", "eplb.step_interval=20", "--set",
         "eplb.window_size=20", "--no-trace"]

try:
    import pandas
except ImportError:
    pandas = None


def eplb_cli(*args):
    done = subprocess.run([_cli(), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(f"eplb {' '.join(args)}: {done.stderr}")


def rewrite_manifest(folder):
    """The manifest of `folder` for its files as they are now, as eplb writes one (kind line
    kept; a line per file, sorted by path, with its size and CRC-32)."""
    path = os.path.join(folder, "manifest.tsv")
    with open(path) as f:
        header = f.readline() + f.readline()
    entries = []
    for root, _, files in os.walk(folder):
        for name in files:
            full = os.path.join(root, name)
            rel = os.path.relpath(full, folder).replace(os.sep, "/")
            if rel != "manifest.tsv":
                with open(full, "rb") as f:
                    data = f.read()
                entries.append(f"file\t{rel}\t{len(data)}\t{zlib.crc32(data):08x}\n")
    with open(path, "w") as f:
        f.write(header + "".join(sorted(entries)))


@unittest.skipIf(os.environ.get("EPLB_HAVE_SIM") == "0", "eplb was built without the simulator")
class Folders(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.run_dir = os.path.join(cls.tmp.name, "run")
        eplb_cli("run", TINY, "--out", cls.run_dir, *SHORT)
        cls.compare_dir = os.path.join(cls.tmp.name, "compare")
        eplb_cli("compare", TINY, "--policies", "static,deepseek", "--out", cls.compare_dir,
                 *SHORT)
        cls.sweep_dir = os.path.join(cls.tmp.name, "sweep")
        eplb_cli("sweep", TINY, "--vary", "eplb.num_redundant_experts=0,4", "--policies",
                 "deepseek", "--out", cls.sweep_dir, *SHORT)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_columns_have_their_own_types_in_the_files_order(self):
        run = eplb.read_run(self.run_dir, frames=False)
        self.assertEqual(run.metrics["step"].dtype, np.int64)
        self.assertEqual(run.metrics["step"].tolist(), list(range(60)))
        self.assertEqual(run.metrics["balancedness"].dtype, np.float64)
        self.assertEqual(run.transfers["link"].dtype.kind, "U")
        self.assertTrue(set(run.transfers["link"]) <= {"nvlink", "nic"})
        self.assertEqual(run.rearrangements["reason"].dtype.kind, "U")
        with open(os.path.join(self.run_dir, "metrics.csv")) as f:
            self.assertEqual(list(run.metrics), f.readline().strip().split(","))
        self.assertEqual(len(run.transfers["expert"]), run.summary["transfers"])
        self.assertIn("name: tiny", run.scenario_yaml)

    @unittest.skipIf(pandas is None, "pandas is not installed (Debian: python3-pandas)")
    def test_tables_are_dataframes_with_pandas(self):
        run = eplb.read_run(self.run_dir)
        plain = eplb.read_run(self.run_dir, frames=False)
        self.assertIsInstance(run.metrics, pandas.DataFrame)
        self.assertEqual(list(run.metrics.columns), list(plain.metrics))
        self.assertEqual(run.metrics["step"].dtype, np.int64)
        self.assertTrue(np.array_equal(run.metrics["step_s"].to_numpy(), plain.metrics["step_s"]))

    @unittest.skipIf(pandas is not None, "pandas is installed")
    def test_without_pandas_frames_true_says_what_to_install(self):
        with self.assertRaisesRegex(ImportError, "python3-pandas"):
            eplb.read_run(self.run_dir, frames=True)

    def test_a_damaged_run_folder_is_refused_naming_the_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            copy = os.path.join(tmp, "run")
            eplb_cli("run", TINY, "--out", copy, *SHORT)
            with open(os.path.join(copy, "metrics.csv"), "a") as f:
                f.write("60,1,2,3\n")
            with self.assertRaisesRegex(ValueError, "metrics.csv"):
                eplb.read_run(copy)
            # Even with a manifest that agrees, the reader checks every line.
            rewrite_manifest(copy)
            with self.assertRaisesRegex(ValueError, r"metrics.csv:\d+"):
                eplb.read_run(copy)
        with self.assertRaisesRegex(ValueError, "not a finished eplb folder|no such folder"):
            eplb.read_run(os.path.join(self.tmp.name, "nothing"))

    def test_a_comparison_reads_its_table_and_each_policys_run(self):
        cmp = eplb.read_comparison(self.compare_dir, frames=False)
        self.assertEqual(cmp.labels, ["static", "deepseek"])
        self.assertEqual(cmp.policies["policy"].tolist(), ["static", "deepseek"])
        self.assertEqual(cmp.seeds("deepseek"), [])
        run = cmp.run("deepseek")
        self.assertEqual(len(run.metrics["step"]), 60)
        self.assertEqual(run.summary["scenario"], "tiny")
        with self.assertRaisesRegex(ValueError, "no policy 'lplb'"):
            cmp.run("lplb")
        with self.assertRaisesRegex(ValueError, "an eplb comparison folder, not a run folder"):
            eplb.read_run(self.compare_dir)

    def test_a_sweep_reads_its_points_and_their_runs(self):
        sweep = eplb.read_sweep(self.sweep_dir, frames=False)
        self.assertEqual(sweep.points["eplb.num_redundant_experts"].tolist(), [0, 4])
        self.assertEqual(sweep.points["policy"].tolist(), ["deepseek", "deepseek"])
        self.assertEqual(sweep.run(1).summary["steps"], 60)
        with self.assertRaisesRegex(ValueError, "no point 2; it has 0..1"):
            sweep.run(2)
        with self.assertRaisesRegex(ValueError, "an eplb sweep folder, not a comparison folder"):
            eplb.read_comparison(self.sweep_dir)

    def test_a_number_that_does_not_exist_is_nan_not_zero(self):
        # A point that never rearranges has no balance after a rearrangement: null in sweep.json,
        # NaN in its column, which stays a column of numbers.
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "sweep")
            eplb_cli("sweep", TINY, "--vary", "eplb.step_interval=20,1000", "--out", out, *SHORT)
            after = eplb.read_sweep(out, frames=False).points["following_balancedness"]
            self.assertEqual(after.dtype, np.float64)
            self.assertGreater(after[0], 0)
            self.assertTrue(np.isnan(after[1]))

    def test_a_sweep_over_seeds_reads_each_points_seeded_runs(self):
        # sweep --seeds runs point I once per seed, at points/I/seed-S.
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "sweep")
            eplb_cli("sweep", TINY, "--vary", "eplb.num_redundant_experts=0,4", "--seeds", "1,2",
                     "--out", out, *SHORT)
            sweep = eplb.read_sweep(out, frames=False)
            self.assertEqual(sweep.seeds(1), [1, 2])
            run = sweep.run(1, seed=2)
            self.assertEqual(run.summary["steps"], 60)
            self.assertEqual(run.seed, 2)
            with self.assertRaisesRegex(ValueError, r"seed is None; point 1 ran with seeds \[1, 2\]"):
                sweep.run(1)
            with self.assertRaisesRegex(ValueError, "seed is 3; point 0 ran with seeds"):
                sweep.run(0, seed=3)
            # The long tables hold every seed's run of every point.
            self.assertEqual(sweep.summary_frame()["seed"].tolist(), [1, 2, 1, 2])
            self.assertEqual(len(sweep.metrics_frame()["step"]), 4 * 60)
        self.assertEqual(eplb.read_sweep(self.sweep_dir).seeds(0), [])

    def test_a_folder_of_a_newer_format_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            copy = os.path.join(tmp, "compare")
            subprocess.run(["cp", "-r", self.compare_dir, copy], check=True)
            path = os.path.join(copy, "comparison.json")
            with open(path) as f:
                doc = json.load(f)
            doc["format_version"] = 99
            with open(path, "w") as f:
                json.dump(doc, f)
            with self.assertRaisesRegex(ValueError, "changed after eplb wrote it"):
                eplb.read_comparison(copy)  # the manifest no longer agrees
            rewrite_manifest(copy)
            with self.assertRaisesRegex(ValueError, "format_version 99 is newer"):
                eplb.read_comparison(copy)


if __name__ == "__main__":
    unittest.main()
