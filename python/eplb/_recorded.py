"""Recorded placements as a policy (eplb.recorded): what an engine logged, or a run folder's
decisions, replayed at the steps they took effect (docs/own_policy.md), as `--policy-replay
NAME=FILE` does on the command line. eplb reads and checks the file; Python passes its path."""

import os
import re

from . import _args, _eplb


class Recorded:
    """A recording for policy= (run_scenario) and policies= (compare_policies, sweep): `path`
    (a run folder, JSON lines of {"step": N, "phy2log": [[...]]}, or one placement) labelled
    `name` in tables."""

    def __init__(self, path, name=None):
        self.path = os.path.abspath(_args.path(path, "recorded: path"))
        if name is None:
            base = os.path.basename(self.path.rstrip(os.sep))
            if base == _eplb.placements_file:
                base = os.path.basename(os.path.dirname(self.path))
            base = re.sub(r"\.(jsonl|json|yaml|yml)$", "", base)
            # Made a policy's name: a file's own ('..jsonl', '.hidden', 200 characters) may not
            # be one. '+' is no name's here: --policy-replay reads NAME=FILE only for names
            # without it (core/src/policy/recorded_policy.cpp).
            name = re.sub(r"[^A-Za-z0-9_.-]", "_", base).lstrip(".")[:100] or "recorded"
        self.name = _args.policy_name(name, "recorded: name")

    def option(self):
        """The command line's option for it."""
        return f"--policy-replay={self.name}={self.path}"

    def __repr__(self):
        return f"eplb.recorded({self.path!r}, name={self.name!r})"


def recorded(path, name=None):
    """Recorded placements as a policy: run_scenario(policy=eplb.recorded("runs/tiny")) or
    compare_policies(policies=["deepseek", eplb.recorded("prod.jsonl", name="prod")]).

    path: a run folder (or its placements.jsonl): every rearrangement its policy made, at its
        step; JSON lines (or a JSON array) of {"step": N, "phy2log": [[...] per layer]}, N the
        step after which the rearrangement to it starts (-1: the placement the run starts
        from); or one placement, from step 0: eplb's {"phy2log": ...}, SGLang's
        --init-expert-location JSON, vLLM's physical_to_logical_map, a [layers][slots] map.
    name: its label in tables and the folder of its runs in a comparison: 1 to 100 of letters,
        digits, '.', '_', '-' and '+', not starting with '.' (default: the file's or folder's
        name, made one).
    The file is read and checked by eplb when the run starts: an error names the file, the
    entry and what is wrong (EplbError), and nothing is written.
    """
    return Recorded(path, name)
