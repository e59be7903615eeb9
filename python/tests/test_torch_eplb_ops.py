"""tools/bench/torch_eplb_ops.py, the per-operation costs of vLLM's per-layer rearrangement: it
runs on the CPU (gloo, two processes) and gives a row per operation; on CUDA when present."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import torch

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "bench",
                      "torch_eplb_ops.py")
OPS = ["local_move", "p2p_build", "p2p_batch", "move_from_buffer", "map_update", "stream_sync",
       "event_sync", "layer_total", "plain_copy"]


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          timeout=300)


class TorchEplbOps(unittest.TestCase):
    def table(self, device):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "ops.json")
            done = run("--device", device, "--quick", "--json", out)
            self.assertEqual(done.returncode, 0, done.stderr)
            with open(out) as f:
                data = json.load(f)
        self.assertEqual([r["op"] for r in data["rows"]], OPS)
        for op in OPS:
            self.assertIn(op, done.stdout)
        return {r["op"]: r for r in data["rows"]}, data

    def test_cpu_gives_every_operation_its_row(self):
        rows, data = self.table("cpu")
        self.assertEqual((data["backend"], data["world"]), ("gloo", 2))
        for op in OPS:
            if op == "event_sync":  # a CUDA event: nothing to time on the CPU
                self.assertIsNone(rows[op]["ms"])
                self.assertEqual(rows[op]["note"], "not on this device")
                continue
            self.assertGreater(rows[op]["ms"], 0, op)
        # Calls per layer as vLLM makes them: an op per weight tensor (2) per expert, sends and
        # receives, for the 4 experts received; one batch.
        self.assertEqual(rows["p2p_build"]["calls"], 16)
        self.assertEqual(rows["p2p_batch"]["calls"], 1)
        self.assertEqual(rows["move_from_buffer"]["calls"], 10)
        self.assertGreater(rows["plain_copy"]["GBps"], 0)
        self.assertGreaterEqual(rows["layer_total"]["ms"], rows["p2p_batch"]["ms"])

    @unittest.skipUnless(torch.cuda.is_available(), "CUDA not available: torch here is "
                         "CPU-only (device/check.sh runs the benchmark on a lent GPU)")
    def test_cuda(self):
        rows, data = self.table("cuda")
        self.assertEqual((data["backend"], data["world"]), ("nccl", 1))
        self.assertGreater(rows["event_sync"]["ms"], 0)

    def test_bad_arguments_name_the_option_and_the_valid_range(self):
        done = run("--device", "cpu", "--slots", "4", "--received", "4")
        self.assertEqual(done.returncode, 2)
        self.assertIn("--received 4 and --local-moves 1 must be at least 0 and together at most "
                      "--slots (4)", done.stderr)
        if not torch.cuda.is_available():
            done = run("--device", "cuda")
            self.assertEqual(done.returncode, 2)
            self.assertIn("--device cuda: torch here has no CUDA device", done.stderr)


if __name__ == "__main__":
    unittest.main()
