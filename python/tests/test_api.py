"""The package's own API: policies, plans, metrics, array handling and scenario runs."""

import gc
import json
import os
import subprocess
import tempfile
import time
import unittest

import numpy as np
import torch

import eplb
import eplb.deepseek
from eplb._arrays import to_numpy
from eplb._build_info import CLI
from eplb.scenario import EplbError

SCENARIOS = os.environ.get("EPLB_SCENARIOS",
                           os.path.join(os.path.dirname(__file__), "../../scenarios"))


def skewed_load(layers, experts, seed):
    rng = np.random.default_rng(seed)
    return rng.zipf(1.6, size=(layers, experts)).astype(np.float64) * 10


class Policies(unittest.TestCase):
    def test_lists_every_registered_policy_with_a_summary(self):
        names = eplb.policies()
        for name in ("deepseek", "static", "deepseek-preserve", "replicate-lpt", "timeseries",
                     "incremental", "migration-aware"):
            self.assertIn(name, names)
            self.assertTrue(names[name])

    def test_placing_around_lost_gpus_leaves_their_slots_empty(self):
        load = skewed_load(2, 32, seed=3)
        phy2log = eplb.rebalance(load, 48, 8, num_nodes=2, policy="fault-tolerant",
                                 lost_ranks=[6, 2])
        slots = phy2log.reshape(2, 8, 6)
        self.assertTrue((slots[:, [2, 6]] == -1).all())
        self.assertTrue((slots[:, [0, 1, 3, 4, 5, 7]] >= 0).all())
        for layer in phy2log:
            self.assertEqual(set(layer[layer >= 0]), set(range(32)))
        with self.assertRaisesRegex(Exception, "cannot place around lost GPUs"):
            eplb.rebalance(load, 48, 8, policy="static", lost_ranks=[1])
        # None means none lost; numpy indices work; anything else is named.
        self.assertTrue((eplb.rebalance(load, 48, 8, lost_ranks=None) >= 0).all())
        np.testing.assert_array_equal(
            eplb.rebalance(load, 48, 8, num_nodes=2, policy="fault-tolerant",
                           lost_ranks=np.array([6, 2])), phy2log)
        with self.assertRaisesRegex(ValueError, "lost_ranks is 2.5; expected GPU indices"):
            eplb.rebalance(load, 48, 8, lost_ranks=2.5)
        with self.assertRaisesRegex(ValueError, r"lost_ranks is \[1.5\]"):
            eplb.rebalance(load, 48, 8, lost_ranks=[1.5])

    def test_every_policy_gives_a_valid_placement_that_beats_the_initial_one(self):
        load = skewed_load(3, 32, seed=1)
        initial = np.tile(np.arange(48) % 32, (3, 1))
        base = eplb.balancedness(load, initial, 8)
        for name in eplb.policies():
            with self.subTest(policy=name):
                phy2log = eplb.rebalance(load, 48, 8, num_nodes=2, num_groups=4, policy=name,
                                         current=initial)
                self.assertEqual(phy2log.shape, (3, 48))
                self.assertEqual(phy2log.dtype, np.int64)
                for row in phy2log:
                    self.assertTrue((np.bincount(row, minlength=32) >= 1).all())
                if name != "static":
                    self.assertGreater(eplb.balancedness(load, phy2log, 8), base)

    def test_policy_options_are_checked(self):
        load = skewed_load(2, 16, seed=2)
        initial = np.tile(np.arange(24) % 16, (2, 1))
        one = eplb.rebalance(load, 24, 4, policy="incremental", current=initial,
                             max_moves_per_layer=1)
        moved = (one != initial).sum(axis=1)
        self.assertTrue((moved <= 2).all(), moved)  # one expert in, one out, per layer
        with self.assertRaisesRegex(ValueError, "unknown policy option 'speed'"):
            eplb.rebalance(load, 24, 4, speed=3)
        with self.assertRaisesRegex(ValueError, "unknown policy 'fast'"):
            eplb.rebalance(load, 24, 4, policy="fast")
        with self.assertRaisesRegex(ValueError, "num_replicas 25 over num_gpus 4 on num_nodes 1: "
                                                "replicas is 25"):
            eplb.rebalance(load, 25, 4)
        with self.assertRaisesRegex(ValueError, "num_groups is 4 but num_nodes is not given"):
            eplb.rebalance(load, 24, 4, num_groups=4)

    def test_the_module_and_the_command_line_hand_a_policy_the_same_window(self):
        # A load over time whose hot experts drift, for the policies that look at its chunks
        # and at the window's length: both front ends run one library call, so they agree.
        rng = np.random.default_rng(11)
        steps = rng.poisson(20, size=(20, 3, 16)).astype(np.float64)
        steps[10:, :, :4] *= 6
        initial = np.tile(np.arange(24) % 16, (3, 1))
        with tempfile.TemporaryDirectory() as tmp:
            load_path = os.path.join(tmp, "load.json")
            with open(load_path, "w") as f:
                json.dump(steps.tolist(), f)
            current_path = os.path.join(tmp, "current.json")
            with open(current_path, "w") as f:
                json.dump({"phy2log": initial.tolist()}, f)
            for name in ("timeseries", "migration-aware", "incremental", "deepseek"):
                with self.subTest(policy=name):
                    here = eplb.rebalance(steps, 24, 4, num_nodes=1, policy=name,
                                          current=initial)
                    done = subprocess.run(
                        [CLI, "rebalance", "--load", load_path, "--current", current_path,
                         "--replicas", "24", "--gpus", "4", "--nodes", "1", "--policy", name],
                        capture_output=True, text=True)
                    self.assertEqual(done.returncode, 0, done.stderr)
                    np.testing.assert_array_equal(here, json.loads(done.stdout)["phy2log"])
            # Sums past the largest load a window holds (1e15) are capped alike: experts 0 and
            # 1 tie at the cap, so the one extra replica goes to expert 0, where the uncapped
            # sums would give it to expert 1.
            huge = np.ones((2, 1, 4)) * 1e12
            huge[:, 0, 0] = 5.5e14
            huge[:, 0, 1] = 9e14
            with open(load_path, "w") as f:
                json.dump(huge.tolist(), f)
            here = eplb.rebalance(huge, 5, 1)
            done = subprocess.run([CLI, "rebalance", "--load", load_path, "--replicas", "5",
                                   "--gpus", "1"], capture_output=True, text=True)
            self.assertEqual(done.returncode, 0, done.stderr)
            np.testing.assert_array_equal(here, json.loads(done.stdout)["phy2log"])
            self.assertEqual(sorted(here[0].tolist()), [0, 0, 1, 2, 3])

    def test_torch_in_torch_out_and_numpy_views_without_copies(self):
        load = torch.from_numpy(skewed_load(2, 16, seed=3))
        out = eplb.rebalance(load, 24, 4)
        self.assertIsInstance(out, torch.Tensor)
        self.assertEqual(out.dtype, torch.int64)
        array, kind = to_numpy(load, np.float64, "load")
        self.assertTrue(np.shares_memory(array, load.numpy()))
        self.assertTrue(kind.is_torch)


class BadArguments(unittest.TestCase):
    """Every bad argument is a ValueError naming it, as the command line's error names its
    option; nothing is truncated, dropped or summed into something that looks valid."""

    def test_each_is_a_value_error_naming_the_argument(self):
        import eplb.sglang
        load = skewed_load(2, 8, seed=1)
        p = np.tile(np.arange(8), (2, 1))
        steps = np.stack([load, load])
        steps[1, 0, 3] = -5  # the sum over steps stays positive
        nan = load.copy()
        nan[0, 0] = np.nan
        cases = [
            ("complex load", lambda: eplb.rebalance(load + 1j, 8, 4), "complex dtype"),
            ("complex tensor", lambda: eplb.rebalance(torch.from_numpy(load + 1j), 8, 4),
             "complex tensor"),
            ("bool load", lambda: eplb.rebalance(load > 5, 8, 4), "dtype bool"),
            ("float placement", lambda: eplb.gpu_loads(load, p + 0.7, 4),
             r"phy2log\[0, 0\] is 0.7; expected whole numbers"),
            ("float current", lambda: eplb.rebalance(load, 8, 4, current=p + 0.5),
             r"current\[0, 0\] is 0.5"),
            ("fractional replicas", lambda: eplb.rebalance(load, 20.9, 4),
             "num_replicas is 20.9; expected an integer"),
            ("negative groups", lambda: eplb.rebalance(load, 8, 4, num_groups=-4),
             r"num_groups is -4; it must be within \[0, "),
            ("beyond int64", lambda: eplb.rebalance(load, 2**70, 4),
             "num_replicas is 1180591620717411303424; it must be within"),
            ("a negative step", lambda: eplb.rebalance(steps, 8, 4),
             r"load\[1\]: load of layer 0, expert 3 is -5"),
            ("NaN in gpu_loads", lambda: eplb.gpu_loads(nan, p, 4), "expert 0 is nan"),
            ("NaN in balancedness", lambda: eplb.balancedness(nan, p, 4), "expert 0 is nan"),
            ("negative in balancedness", lambda: eplb.balancedness(-load, p, 4),
             "loads must be finite and non-negative"),
            ("NUL in a path", lambda: eplb.read_load("a\0b.csv"), "holds a NUL byte"),
            ("sglang without steps",
             lambda: eplb.sglang.rebalance_experts(np.zeros((0, 2, 8)), 8, 2, 1, 1, "deepseek"),
             "tokens_per_expert has no steps"),
            ("sglang on no nodes",
             lambda: eplb.sglang.rebalance_experts(steps.clip(0), 8, 2, 2, 0,
                                                   "deepseek_hierarchical"),
             r"num_nodes is 0; it must be within \[1, "),
            ("deepseek groups", lambda: eplb.deepseek.rebalance_experts(load, 8, 0.5, 1, 4),
             "num_groups is 0.5; expected an integer"),
        ]
        for name, call, message in cases:
            with self.subTest(name), self.assertRaisesRegex(ValueError, message):
                call()

    def test_every_real_torch_dtype_is_read(self):
        load = torch.from_numpy(skewed_load(2, 16, seed=2))
        expected = eplb.rebalance(load.to(torch.float32), 24, 4)
        for tensor in (load.to(torch.bfloat16).to(torch.float32), (-load)._neg_view()):
            self.assertTrue(torch.equal(eplb.rebalance(tensor, 24, 4), expected))
        self.assertEqual(eplb.rebalance(load.to(torch.bfloat16), 24, 4).shape, (2, 24))


class Interrupts(unittest.TestCase):
    def test_ctrl_c_interrupts_a_long_policy_and_the_module_stays_usable(self):
        import signal
        import threading
        rng = np.random.default_rng(0)
        load = rng.zipf(1.5, size=(4, 20, 1024)).astype(np.float64)  # timeseries: ~1 s
        timer = threading.Timer(0.05, lambda: os.kill(os.getpid(), signal.SIGINT))
        timer.start()
        try:
            with self.assertRaises(KeyboardInterrupt):
                eplb.rebalance(load, 4096, 512, num_nodes=64, policy="timeseries")
                time.sleep(5)  # a policy that ended first still sees the signal here
        finally:
            timer.cancel()
        self.assertEqual(eplb.rebalance(load[:, :2], 4096, 512, num_nodes=64).shape, (2, 4096))


class Plans(unittest.TestCase):
    def test_plan_moves_exactly_what_changes_and_schedules_it(self):
        old = np.tile(np.arange(48) % 32, (3, 1))
        new = eplb.rebalance(skewed_load(3, 32, seed=4), 48, 8, num_nodes=2)
        out = eplb.plan(old, new, 8, num_nodes=2, expert_bytes=1000, frames=False)
        t, layers = out["transfers"], out["layers"]
        self.assertEqual(set(t), {"layer", "expert", "src_rank", "src_slot", "dst_rank",
                                  "dst_slot", "bytes", "link", "round"})
        self.assertTrue((t["bytes"] == 1000).all())
        # Each transfer reads its expert from an old slot of its sender and lands in a new slot.
        self.assertTrue((old[t["layer"], t["src_slot"]] == t["expert"]).all())
        self.assertTrue((new[t["layer"], t["dst_slot"]] == t["expert"]).all())
        self.assertTrue((t["src_slot"] // 6 == t["src_rank"]).all())
        self.assertTrue((t["link"] == (t["src_rank"] // 4 != t["dst_rank"] // 4)).all())
        for i, layer in enumerate(layers["layer"]):
            mine = t["layer"] == layer
            self.assertEqual(layers["nvlink_bytes"][i] + layers["nic_bytes"][i],
                             t["bytes"][mine].sum())
            self.assertGreaterEqual(layers["makespan_s"][i], layers["lower_bound_s"][i])
            self.assertLess(t["round"][mine].max(initial=-1), max(layers["rounds"][i], 1))
        # A slot never receives an expert it already holds.
        self.assertTrue((old[t["layer"], t["dst_slot"]] != t["expert"]).all())

    def test_byte_counts_are_bounded_where_they_start(self):
        old = np.array([[0, 1, 2, 3]])
        with self.assertRaisesRegex(ValueError, r"expert bytes is 4611686018427387904; it must "
                                    r"be within 1\.\.1099511627776"):
            eplb.plan(old, old[:, ::-1], 2, num_nodes=2, expert_bytes=2**62)

    def test_unchanged_placement_plans_nothing(self):
        old = np.tile(np.arange(24) % 16, (2, 1))
        out = eplb.plan(old, old, 4, num_nodes=1)
        self.assertEqual(len(out["transfers"]["expert"]), 0)
        self.assertEqual(len(out["layers"]["layer"]), 0)


class Metrics(unittest.TestCase):
    def test_gpu_loads_split_each_expert_evenly_over_its_replicas(self):
        load = np.array([[6.0, 2.0, 4.0, 0.0]])
        phy2log = np.array([[0, 1, 0, 2, 3, 2]])  # 3 GPUs, 2 slots each
        self.assertEqual(eplb.gpu_loads(load, phy2log, 3).tolist(), [[3.0 + 2.0, 3.0 + 2.0, 2.0]])
        self.assertAlmostEqual(eplb.balancedness(load, phy2log, 3), 4.0 / 5.0)

    def test_log2phy_of_pads_and_counts(self):
        log2phy, logcnt = eplb.log2phy_of(np.array([[2, 0, 2, 1, -1, 2]]), 3)
        self.assertEqual(logcnt.tolist(), [[1, 1, 3]])
        self.assertEqual(log2phy.tolist(), [[[1, -1, -1], [3, -1, -1], [0, 2, 5]]])


# Scenario runs need the simulator; a build without it says so and these skip.
@unittest.skipIf(os.environ.get("EPLB_HAVE_SIM") == "0", "eplb was built without the simulator")
class Scenarios(unittest.TestCase):
    def test_runs_a_scenario_and_reads_its_folder(self):
        result = eplb.run_scenario(os.path.join(SCENARIOS, "tiny.yaml"),
                                   set={"run.steps": 120, "eplb.step_interval": 40})
        self.assertEqual(result.summary["steps"], 120)
        self.assertEqual(len(result.metrics["step"]), 120)
        self.assertTrue(((result.metrics["balancedness"] > 0) &
                         (result.metrics["balancedness"] <= 1)).all())
        self.assertGreaterEqual(len(result.rearrangements.get("step", [])), 1)
        # Each GPU's peak in each rearrangement: 4 GPUs per rearrangement, resident + staged.
        memory = result.gpu_memory
        self.assertEqual(len(memory["rank"]), 4 * len(result.rearrangements["step"]))
        resident = result.summary["gpu_memory"]["resident_bytes"]
        self.assertTrue((abs(memory["peak_memory_bytes"] - memory["staging_peak_bytes"] -
                             resident) <= 1).all())
        placements = result.placements()
        self.assertEqual(placements[0]["step"], -1)
        self.assertFalse(os.path.exists(os.path.join(result.folder, "trace.json")))

    def test_writes_where_asked_and_reports_eplbs_error(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "run")
            eplb.run_scenario(os.path.join(SCENARIOS, "tiny.yaml"), out=out,
                              set=["run.steps=30"], trace=True)
            self.assertTrue(os.path.exists(os.path.join(out, "trace.json")))
        with self.assertRaisesRegex(EplbError, "run.steps"):
            eplb.run_scenario(os.path.join(SCENARIOS, "tiny.yaml"), set={"run.steps": -3})
        with self.assertRaisesRegex(ValueError, r"set\['run.steps'\] is None; an override"):
            eplb.run_scenario(os.path.join(SCENARIOS, "tiny.yaml"), set={"run.steps": None})
        with self.assertRaisesRegex(ValueError, r"vary\['workload.sigma'\] is None"):
            eplb.sweep(os.path.join(SCENARIOS, "tiny.yaml"), vary={"workload.sigma": [0.5, None]})

    def test_compares_policies_over_seeds(self):
        tiny = os.path.join(SCENARIOS, "tiny.yaml")
        comparison = eplb.compare_policies(tiny, policies=["static", "deepseek"], seeds=[3, 4],
                                           set={"run.steps": 200}, jobs=2, frames=False)
        self.assertEqual(comparison.labels, ["static", "deepseek"])
        self.assertEqual(comparison.seeds("deepseek"), [3, 4])
        rows = comparison.policies
        self.assertEqual(list(rows["seeds"]), [2, 2])
        # Rebalancing beats experts in order on the tiny model's skewed load.
        self.assertGreater(rows["balancedness_mean"][1], rows["balancedness_mean"][0])
        run = comparison.run("deepseek", seed=4)
        self.assertEqual(len(run.metrics["step"]), 200)
        # The library's error, not a traceback of eplb's output.
        with self.assertRaisesRegex(EplbError, "--policies names 'static' twice"):
            eplb.compare_policies(tiny, policies="static,static", set={"run.steps": 10})

    def test_sweeps_the_cross_product(self):
        tiny = os.path.join(SCENARIOS, "tiny.yaml")
        result = eplb.sweep(tiny, vary={"cluster.nodes": [1, 2], "workload.sigma": [0.5, 1.5]},
                            set={"run.steps": 100}, jobs=2, frames=False)
        points = result.points
        self.assertEqual(list(points["cluster.nodes"]), [1, 1, 2, 2])
        self.assertEqual(list(points["workload.sigma"]), [0.5, 1.5, 0.5, 1.5])
        self.assertEqual(result.run(3).summary["steps"], 100)
        with self.assertRaisesRegex(EplbError, "cluster.nodes is -3"):
            eplb.sweep(tiny, vary={"cluster.nodes": [1, -3]}, set={"run.steps": 10})
        with self.assertRaises(ValueError):
            eplb.sweep(tiny, vary={})

    def test_a_study_past_its_timeout_is_stopped_and_the_old_folder_stays(self):
        tiny = os.path.join(SCENARIOS, "tiny.yaml")
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "cmp")
            eplb.compare_policies(tiny, policies="static", out=out, set={"run.steps": 20})
            with self.assertRaisesRegex(EplbError, "did not finish within 1 s"):
                eplb.compare_policies(tiny, policies="static", out=out,
                                      set={"run.steps": 10000000}, timeout=1)
            self.assertEqual(sorted(os.listdir(tmp)), ["cmp"])  # no partial folder left
            self.assertEqual(eplb.read_comparison(out).labels, ["static"])

    def test_study_arguments_are_checked_before_eplb_runs(self):
        tiny = os.path.join(SCENARIOS, "tiny.yaml")
        with self.assertRaisesRegex(ValueError, "policies: the list is empty"):
            eplb.compare_policies(tiny, policies=[])
        with self.assertRaisesRegex(ValueError, "seeds: the list is empty"):
            eplb.compare_policies(tiny, seeds=[])
        with self.assertRaisesRegex(ValueError, "not a field's key.path"):
            eplb.sweep(tiny, vary={"workload.sigma=0.5": [1]})
        result = eplb.sweep(tiny, vary={"workload.sigma": 0.5}, set="run.steps=20")
        self.assertEqual(result.run(0).summary["steps"], 20)
        for point in (1.5, True):
            with self.assertRaises(TypeError):
                result.run(point)

    def test_a_study_inside_a_launch_runs_whole_and_its_runs_outlive_it(self):
        # A notebook in a Slurm array task (or under mpirun) runs its whole sweep: eplb sweep
        # would otherwise take one task's share of the points and leave the folder to others.
        tiny = os.path.join(SCENARIOS, "tiny.yaml")
        launch = {"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_MIN": "0",
                  "SLURM_ARRAY_TASK_COUNT": "2", "OMPI_COMM_WORLD_RANK": "1",
                  "OMPI_COMM_WORLD_SIZE": "2"}
        saved = {k: os.environ.get(k) for k in launch}
        os.environ.update(launch)
        try:
            result = eplb.sweep(tiny, vary={"workload.sigma": [0.5, 1.5]},
                                set={"run.steps": 50}, frames=False)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k)
                else:
                    os.environ[k] = v
        self.assertEqual(len(result.points["point"]), 2)
        # A run read from a temporary study keeps the study's folder while it lives.
        run = eplb.compare_policies(tiny, policies="static", seeds=5,
                                    set={"run.steps": 50}).run("static")
        gc.collect()
        self.assertTrue(os.path.isdir(run.folder))
        self.assertEqual([p["step"] for p in run.placements()], [-1] * 4)  # the 4 layers


if __name__ == "__main__":
    unittest.main()
