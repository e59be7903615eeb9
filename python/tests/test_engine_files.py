"""The engines' PyTorch dumps read by eplb: SGLang's recorder (stat and per-pass modes) and
vLLM's EPLB window, replayed step by step in scenarios and folded to logical experts."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import torch

import eplb
from eplb._build_info import CLI

SCENARIOS = os.environ.get("EPLB_SCENARIOS",
                           os.path.join(os.path.dirname(__file__), "../../scenarios"))
TINY = os.path.join(SCENARIOS, "tiny.yaml")  # 4 layers × 16 experts


def read_dump(path):
    """What eplb reads from a dump (its own C++ reader), as a float64 tensor."""
    return torch.from_numpy(eplb.read_load(path))


def stepped_counts(steps, layers=4, experts=16, seed=3):
    """Counts whose hot expert changes every few steps, so that time matters."""
    g = torch.Generator().manual_seed(seed)
    counts = torch.randint(0, 40, (steps, layers, experts), generator=g, dtype=torch.int32)
    for s in range(steps):
        counts[s, :, (s // 5) % experts] += 900
    return counts


class SGLangStatDump(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.counts = stepped_counts(40)
        # SGLang's _StatAccumulator.dump, as written to SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR.
        self.pt = os.path.join(self.dir.name, "expert_distribution_recorder_1700000000.0.pt")
        torch.save(dict(rank=0, logical_count=self.counts,
                        average_utilization_rate_over_window=0.42), self.pt)
        self.json = os.path.join(self.dir.name, "steps.json")
        with open(self.json, "w") as f:
            json.dump({"logical_count": self.counts.tolist()}, f)

    def test_the_dump_reads_as_its_steps(self):
        series = read_dump(self.pt)
        self.assertEqual(tuple(series.shape), (40, 4, 16))
        self.assertTrue(torch.equal(series, self.counts.double()))

    @unittest.skipIf(os.environ.get("EPLB_HAVE_SIM") == "0",
                     "eplb was built without the simulator")
    def test_a_scenario_replays_the_dump_step_by_step_as_it_replays_the_same_json(self):
        runs = {}
        for name, trace in (("pt", self.pt), ("json", self.json)):
            runs[name] = eplb.run_scenario(TINY, set={"workload.kind": "trace",
                                                      "workload.trace": trace,
                                                      "run.steps": 120})
        pt, js = runs["pt"].metrics["balancedness"], runs["json"].metrics["balancedness"]
        self.assertEqual(len(pt), 120)
        np.testing.assert_array_equal(pt, js)
        # Step by step, not one summed distribution: the hot expert moves, so balancedness
        # changes from step to step with the recording.
        self.assertGreater(np.std(pt[:40]), 0.01)

    def test_rebalance_reads_the_dump_and_refuses_another_model_width(self):
        done = subprocess.run([CLI, "rebalance", "--load", self.pt, "--replicas", "20", "--gpus",
                               "4", "--policy", "timeseries"], capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(len(json.loads(done.stdout)["phy2log"]), 4)
        done = subprocess.run([CLI, "rebalance", "--load", self.pt, "--replicas", "20", "--gpus",
                               "4", "--experts", "20"], capture_output=True, text=True)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("the load has 16 experts per layer but --experts is 20", done.stderr)

    def test_read_load_gives_the_steps_in_process(self):
        np.testing.assert_array_equal(eplb.read_load(self.pt), self.counts.numpy())
        np.testing.assert_array_equal(eplb.read_load(self.json, num_experts=16),
                                      self.counts.numpy())
        with self.assertRaisesRegex(ValueError, "16 experts per layer but num_experts is 8"):
            eplb.read_load(self.json, num_experts=8)

    def test_several_dumps_in_a_folder_concatenate_in_time_order(self):
        folder = os.path.join(self.dir.name, "dumps")
        os.mkdir(folder)
        for i, part in enumerate((self.counts[:10], self.counts[10:])):
            torch.save(dict(rank=0, logical_count=part,
                            average_utilization_rate_over_window=None),
                       os.path.join(folder, f"expert_distribution_recorder_{1700000000 + i}.pt"))
        self.assertTrue(torch.equal(read_dump(folder), self.counts.double()))


class PerSlotDumps(unittest.TestCase):
    """Per-pass records and vLLM's window count physical slots: folded through the map."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        # 2 layers, 6 slots over 4 logical experts; slot 4 replicates expert 0, slot 5 expert 1.
        self.p2l = torch.tensor([[0, 1, 2, 3, 0, 1], [3, 2, 1, 0, 3, 2]])

    def expected(self, physical):
        out = torch.zeros(physical.shape[0], 2, 4, dtype=torch.float64)
        for layer in range(2):
            for slot in range(6):
                out[:, layer, self.p2l[layer, slot]] += physical[:, layer, slot]
        return out

    def test_sglang_per_pass_records_sum_ranks_and_fold(self):
        per_rank = torch.arange(3 * 2 * 2 * 6, dtype=torch.int32).reshape(3, 2, 2, 6)  # pass, rank
        for rank in range(2):
            records = [dict(forward_pass_id=p, rank=rank, gatherer_key="primary",
                            global_physical_count=per_rank[p, rank]) for p in range(3)]
            torch.save(dict(records=records, last_physical_to_logical_map=self.p2l),
                       os.path.join(self.dir.name, f"expert_distribution_recorder_1.0_{rank}.pt"))
        got = read_dump(self.dir.name)
        self.assertTrue(torch.equal(got, self.expected(per_rank.sum(dim=1).double())))

    def test_sglang_per_token_records_count_their_top_k_slots(self):
        topk = torch.tensor([[[0, 4], [5, -1]], [[3, 3], [2, 1]]])  # [layers, tokens, top-k]
        torch.save(dict(records=[dict(forward_pass_id=0, rank=0, topk_ids_of_layer=topk)],
                        last_physical_to_logical_map=self.p2l),
                   os.path.join(self.dir.name, "pass.pt"))
        got = read_dump(os.path.join(self.dir.name, "pass.pt"))
        physical = torch.tensor([[[1, 0, 0, 0, 1, 1], [0, 1, 1, 2, 0, 0]]], dtype=torch.float64)
        self.assertTrue(torch.equal(got, self.expected(physical)))

    def test_read_load_folds_a_per_slot_csv_through_a_map(self):
        path = os.path.join(self.dir.name, "slots.csv")
        with open(path, "w") as f:
            f.write("1,2,3,4,5,6\n6,5,4,3,2,1\n")
        got = eplb.read_load(path, num_experts=4, physical_to_logical_map=self.p2l)
        physical = torch.tensor([[[1, 2, 3, 4, 5, 6], [6, 5, 4, 3, 2, 1]]], dtype=torch.float64)
        np.testing.assert_array_equal(got, self.expected(physical).numpy())

    def test_vllm_window_folds_through_its_map(self):
        window = torch.rand(5, 2, 6, dtype=torch.float64) * 100
        path = os.path.join(self.dir.name, "vllm-window.pt")
        torch.save({"expert_load_window": window, "physical_to_logical_map": self.p2l}, path)
        self.assertTrue(torch.allclose(read_dump(path), self.expected(window)))

    def test_a_dump_of_another_kind_is_named(self):
        path = os.path.join(self.dir.name, "other.pt")
        torch.save({"weights": torch.zeros(2)}, path)
        with self.assertRaisesRegex(ValueError,
                                    "other.pt: has keys \\['weights'\\]; expected SGLang's "
                                    "logical_count"):
            read_dump(path)

    def test_code_in_a_dump_does_not_run(self):
        path = os.path.join(self.dir.name, "evil.pt")
        # The float comes first, as in SGLang's dumps (some torch versions' weights-only loader
        # refuses floats, and the reader falls back to its own tensors-only unpickler).
        for dump in ({"average_utilization_rate_over_window": 0.5, "x": os.system},
                     {"logical_count": torch.zeros(1, 2, 2), "x": os.system}):
            torch.save(dump, path)
            with self.assertRaisesRegex(ValueError, "refused to load posix.system"):
                read_dump(path)


class DumpsThatWouldRunCode(unittest.TestCase):
    """Each fixture runs `touch /tmp/eplb-exploit-ran-NAME` in a reader that runs pickles
    (tests/data/torch/make_dumps.py); eplb refuses each by name, from every door, and nothing
    runs."""

    EXPLOITS = {"global": "refused to load posix.system",
                "reduce": "refused to load posix.system",
                "dotted": "refused to load torch._utils._rebuild_tensor.__builtins__.get",
                "torchscript": "a TorchScript archive",
                "build": "refused BUILD",
                "newobj": "refused to load builtins.object"}

    def each(self):
        for name, message in self.EXPLOITS.items():
            path = os.path.join(os.environ["EPLB_TEST_DATA"], "torch", "exploit", name + ".pt")
            marker = f"/tmp/eplb-exploit-ran-{name}"
            if os.path.exists(marker):
                os.remove(marker)
            yield name, path, message, marker

    def test_read_load_refuses_each_and_runs_nothing(self):
        for name, path, message, marker in self.each():
            with self.subTest(name), self.assertRaisesRegex(ValueError, message):
                eplb.read_load(path)
            self.assertFalse(os.path.exists(marker), f"{name}: the dump's code ran")

    def test_the_command_line_refuses_each_and_runs_nothing(self):
        for name, path, message, marker in self.each():
            done = subprocess.run([CLI, "rebalance", "--load", path, "--replicas", "8", "--gpus",
                                   "2"], capture_output=True, text=True)
            self.assertEqual(done.returncode, 2, done.stderr)
            self.assertIn(message, done.stderr)
            self.assertFalse(os.path.exists(marker), f"{name}: the dump's code ran")

    @unittest.skipIf(os.environ.get("EPLB_HAVE_SIM") == "0",
                     "eplb was built without the simulator")
    def test_a_scenario_trace_refuses_each_and_runs_nothing(self):
        for name, path, message, marker in self.each():
            with self.subTest(name), self.assertRaisesRegex(Exception, message):
                eplb.run_scenario(TINY, set={"workload.kind": "trace", "workload.trace": path,
                                             "run.steps": 10})
            self.assertFalse(os.path.exists(marker), f"{name}: the dump's code ran")


if __name__ == "__main__":
    unittest.main()
