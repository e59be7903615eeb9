"""Scenario runs from Python: what `eplb run` does, with the results as Python objects.

A simulation runs in its own process: SimGrid allows one simulated world per process, and a run
of the default scenario takes seconds, so the cost of starting `eplb` does not matter here. The
run folder it writes is read back whole (summary, per-step metrics, transfers, rearrangements).
"""

import csv
import json
import os
import shutil
import subprocess
import tempfile
import weakref

import numpy as np


class EplbError(RuntimeError):
    """`eplb` refused the scenario or failed; the message is its own."""


def _cli():
    """The eplb command: $EPLB_CLI, then the one this package was built or installed with."""
    path = os.environ.get("EPLB_CLI")
    if path:
        return path
    try:
        from ._build_info import CLI
    except ImportError:
        CLI = None
    if CLI and os.path.exists(CLI):
        return CLI
    found = shutil.which("eplb")
    if found:
        return found
    raise EplbError("the eplb command was not found: set EPLB_CLI to its path, or install eplb")


def _read_csv(path):
    """{column: numpy array}; integer columns as int64, the rest as float64 or str."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows:
        return {}
    header, body = rows[0], rows[1:]
    columns = {}
    for i, name in enumerate(header):
        values = [row[i] for row in body]
        for dtype in (np.int64, np.float64):
            try:
                columns[name] = np.array(values, dtype=dtype)
                break
            except ValueError:
                continue
        else:
            columns[name] = np.array(values, dtype=object)
    return columns


class RunResult:
    """A finished run: its folder, summary (summary.json) and tables as column arrays.

    metrics: one row per step (metrics.csv: step, time_s, step_s, balancedness, ...).
    transfers: one row per executed expert transfer (transfers.csv).
    rearrangements: one row per rearrangement (rearrangements.csv).
    gpu_memory: one row per rearrangement and GPU (gpu_memory.csv: its staging and memory at
        its fullest); None for folders written before it existed.
    The columns are those of the run folder the README describes.
    """

    def __init__(self, folder):
        self.folder = folder
        with open(os.path.join(folder, "summary.json")) as f:
            self.summary = json.load(f)
        self.metrics = _read_csv(os.path.join(folder, "metrics.csv"))
        self.transfers = _read_csv(os.path.join(folder, "transfers.csv"))
        self.rearrangements = _read_csv(os.path.join(folder, "rearrangements.csv"))
        memory = os.path.join(folder, "gpu_memory.csv")
        self.gpu_memory = _read_csv(memory) if os.path.exists(memory) else None

    def placements(self):
        """Every layer placement the run committed, in order: dicts with step (-1: the initial
        placement), time_s, layer and phy2log (an int64 array of the layer's slots)."""
        out = []
        with open(os.path.join(self.folder, "placements.jsonl")) as f:
            for line in f:
                record = json.loads(line)
                record["phy2log"] = np.array(record["phy2log"], dtype=np.int64)
                out.append(record)
        return out

    def __repr__(self):
        s = self.summary
        return (f"RunResult({s.get('scenario')!r}, steps={s.get('steps')}, "
                f"balancedness={s.get('balancedness', {}).get('mean')}, folder={self.folder!r})")


def run_scenario(scenario=None, out=None, set=None, trace=False, timeout=None):
    """Simulates `scenario` (a YAML path; None: the built-in DeepSeek-V3 prefill EP32).

    set: overrides as {"key.path": value} or ["key.path=value", ...], as `eplb run --set`.
    out: the run folder to write (replaced as `eplb run` replaces it); None: a temporary folder
        that lives as long as the returned result.
    trace: also write trace.json (Perfetto), which large runs make big.
    Raises EplbError with eplb's message when the scenario is refused or the run fails.
    """
    args = [_cli(), "run"]
    if scenario is not None:
        args.append(os.fspath(scenario))
    overrides = set or []
    if isinstance(overrides, dict):
        overrides = [f"{k}={_yaml_value(v)}" for k, v in overrides.items()]
    for item in overrides:
        args += ["--set", item]
    temporary = None
    if out is None:
        temporary = tempfile.mkdtemp(prefix="eplb-run-")
        out = os.path.join(temporary, "run")
    args += ["--out", os.fspath(out)]
    if not trace:
        args.append("--no-trace")
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise EplbError(done.stderr.strip() or f"eplb run exited with {done.returncode}")
        result = RunResult(os.fspath(out))
    except BaseException:
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)
        raise
    if temporary is not None:  # the folder goes when the result does
        weakref.finalize(result, shutil.rmtree, temporary, ignore_errors=True)
    return result


def _yaml_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
