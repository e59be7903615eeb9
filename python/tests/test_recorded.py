"""Recorded placements as the policy (eplb.recorded): a run folder's own placements replayed give
its run number for number, in run_scenario and beside the built-in in compare_policies; a bad
recording stops before anything runs, with eplb's message naming the file and the entry."""

import json
import os
import tempfile
import unittest

import numpy as np

import eplb
from eplb.scenario import EplbError

SCENARIOS = os.environ.get("EPLB_SCENARIOS",
                           os.path.join(os.path.dirname(__file__), "../../scenarios"))
TINY = os.path.join(SCENARIOS, "tiny.yaml")


def same_columns(mine, theirs, skip):
    return {k: np.asarray(v).tolist() for k, v in mine.items() if k not in skip} == \
        {k: np.asarray(v).tolist() for k, v in theirs.items() if k not in skip}


class RecordedArguments(unittest.TestCase):
    def test_a_recording_is_named_by_its_file_or_as_given(self):
        self.assertEqual(eplb.recorded("/x/prod.jsonl").name, "prod")
        self.assertEqual(eplb.recorded("/x/runs/tiny/placements.jsonl").name, "tiny")
        self.assertEqual(eplb.recorded("/x/a.json", name="mine").option(),
                         "--policy-replay=mine=/x/a.json")
        with self.assertRaises(eplb.ArgumentError):
            eplb.recorded("/x/a.json", name="no spaces")
        with self.assertRaises(eplb.ArgumentError):
            eplb.recorded("")

    def test_a_name_that_cannot_name_a_folder_is_refused_when_given(self):
        # A recording's name is its policy's, and so the folder of its runs in a comparison:
        # '..' and '.' were taken here and failed only when eplb came to write that folder.
        rule = ("a policy's name is 1 to 100 of letters, digits, '.', '_', '-' and '+', not "
                "starting with '.'")
        for name in ("..", ".", ".hidden", "", "a/b", "x" * 101, "a\nb", "\x1b[2K"):
            with self.subTest(name):
                with self.assertRaises(eplb.ArgumentError) as caught:
                    eplb.recorded("/x/a.json", name=name)
                message = str(caught.exception)
                self.assertIn(f"recorded: name is {eplb._args.quote(name)}", message)
                self.assertIn(rule, message)
                self.assertTrue(message.isprintable(), message)  # escaped, one line
        with self.assertRaises(eplb.ArgumentError) as caught:
            eplb.recorded("/x/a.json", name=3)
        self.assertIn("recorded: name is 3 (an int); expected a string", str(caught.exception))
        for name in ("prod", "v1.2_final-B", "x" * 100, "a+b"):
            self.assertEqual(eplb.recorded("/x/a.json", name=name).name, name)

    def test_a_name_taken_from_the_file_is_always_a_name(self):
        # The file's own name need not be one; the default is made one rather than refused.
        for path, name in (("/x/..jsonl", "recorded"), ("/x/.hidden.jsonl", "hidden"),
                           ("/x/" + "z" * 150 + ".jsonl", "z" * 100), ("/", "recorded"),
                           ("/x/a b+c.json", "a_b_c")):
            with self.subTest(path):
                self.assertEqual(eplb.recorded(path).name, name)


@unittest.skipIf(os.environ.get("EPLB_HAVE_SIM") == "0", "eplb was built without the simulator")
class Recorded(unittest.TestCase):
    def test_a_run_folders_placements_replayed_give_its_run(self):
        theirs = eplb.run_scenario(TINY, set={"eplb.policy": "deepseek"}, frames=False)
        mine = eplb.run_scenario(TINY, policy=eplb.recorded(theirs.folder), frames=False)
        with open(os.path.join(mine.folder, "scenario.yaml")) as f:
            self.assertIn("policy: recorded  # placements replayed from a file", f.read())
        self.assertTrue(same_columns(mine.metrics, theirs.metrics, ()))
        self.assertTrue(same_columns(mine.rearrangements, theirs.rearrangements, ("policy_ms",)))
        self.assertEqual(mine.summary["balancedness"], theirs.summary["balancedness"])

        c = eplb.compare_policies(TINY, policies=["deepseek", eplb.recorded(theirs.folder,
                                                                            name="prod")],
                                  frames=False, timeout=300)
        self.assertEqual(list(c.policies["policy"]), ["deepseek", "prod"])
        self.assertEqual(c.policies["balancedness_mean"][0], c.policies["balancedness_mean"][1])

    def test_sglangs_init_expert_location_as_torch_saved_it_is_the_initial_placement(self):
        import torch
        rows = [[(s + 3) % 16 for s in range(20)] for _ in range(4)]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "init.pt")
            torch.save({"physical_to_logical_map": torch.tensor(rows, dtype=torch.int64)}, path)
            run = eplb.run_scenario(TINY, policy=eplb.recorded(path), frames=False)
            with open(os.path.join(run.folder, "placements.jsonl")) as f:
                first = [json.loads(line) for line in f][:4]
            self.assertEqual([line["phy2log"] for line in first], rows)
            self.assertEqual(run.summary["rearrangements"]["started"], 0)

    def test_a_bad_recording_stops_before_the_run(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "late.jsonl")
            rows = [[s % 16 for s in range(20)] for _ in range(4)]
            with open(path, "w") as f:
                f.write(json.dumps({"step": 400, "phy2log": rows}) + "\n")
            out = os.path.join(d, "out")
            with self.assertRaises(EplbError) as caught:
                eplb.run_scenario(TINY, policy=eplb.recorded(path), out=out)
            self.assertIn("late.jsonl line 1: step 400 is beyond the run's 400 steps",
                          str(caught.exception))
            self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    unittest.main()
