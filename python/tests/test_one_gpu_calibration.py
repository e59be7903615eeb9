"""tools/bench/one_gpu_calibration.py: the one-GPU model's calibration file from bench_device's
JSON, each key from the benchmark that measures it; stopped or missing benchmarks leave their
keys out, saying so."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "bench",
                      "one_gpu_calibration.py")

# As eplb_bench_device writes it (google benchmark's JSON; counters are top-level keys).
BENCH = {"context": {}, "benchmarks": [
    {"name": "BM_PlainCopy/8192/manual_time", "bytes_per_second": 1.74e12},
    {"name": "BM_LayerMigration/iterations:5/manual_time", "start_ms": 1.0, "commit_ms": 0.3,
     "committed_ms": 0.05,
     "staged_ms": 2.3, "bytes_per_second": 1.28e12},
    {"name": "BM_MigrationCopies/iterations:5/manual_time", "bytes_per_second": 1.66e12},
    {"name": "BM_StepSlowdown/iterations:3", "idle_read_GBps": 1900.0, "slowdown": 1.13},
]}


def run(bench):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.json")
        with open(path, "w") as f:
            json.dump(bench, f)
        return subprocess.run([sys.executable, SCRIPT, path], capture_output=True, text=True)


class OneGpuCalibration(unittest.TestCase):
    def test_each_key_from_its_benchmark(self):
        done = run(BENCH)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stderr, "")
        out = json.loads(done.stdout)
        self.assertAlmostEqual(out["start_us"], 1000.0)
        self.assertAlmostEqual(out["commit_us"], 50.0)  # the host's part, not the drain
        self.assertAlmostEqual(out["copy_gbps"], 1660.0)
        self.assertAlmostEqual(out["step_read_gbps"], 1900.0)

    def test_a_stopped_benchmark_leaves_its_keys_out(self):
        bench = json.loads(json.dumps(BENCH))
        bench["benchmarks"][1] = {"name": "BM_LayerMigration", "error_occurred": True}
        del bench["benchmarks"][3]["idle_read_GBps"]
        done = run(bench)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(set(json.loads(done.stdout)), {"copy_gbps"})
        self.assertIn("left out start_us: no BM_LayerMigration result", done.stderr)
        self.assertIn("left out step_read_gbps: BM_StepSlowdown has no idle_read_GBps (got None)",
                      done.stderr)

    def test_an_older_benchmark_gives_its_commit_with_the_drain_saying_so(self):
        bench = json.loads(json.dumps(BENCH))
        del bench["benchmarks"][1]["committed_ms"]
        done = run(bench)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertAlmostEqual(json.loads(done.stdout)["commit_us"], 300.0)
        self.assertIn("no committed_ms (an older benchmark): commit_ms instead", done.stderr)

    def test_a_file_that_is_not_json_is_named(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "bench.json")
            with open(path, "w") as f:
                f.write("BM_PlainCopy 3 ms")
            done = subprocess.run([sys.executable, SCRIPT, path], capture_output=True, text=True)
        self.assertEqual(done.returncode, 1)
        self.assertIn(f"{path}: Expecting value", done.stderr)


if __name__ == "__main__":
    unittest.main()
