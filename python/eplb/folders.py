"""eplb's output folders read back: a run folder (`eplb run`, `device-run`), a comparison
(`eplb compare`) and a sweep (`eplb sweep`).

Every folder is checked whole before it is read, by the same C++ readers the command line uses:
its manifest (every file there, of the size and checksum written), its format version (a folder
of a later format is refused rather than misread) and, for run folders, every field of every
file. A run folder's CSV tables come with their columns' own types (int64, float64, str), in
each file's column order; the README's "run folder" section defines every column.

Tables are pandas DataFrames when pandas is installed (Debian: python3-pandas), else dicts of
numpy arrays keyed by column; `frames=True` or `False` asks for one or the other. Columns read
the same either way: `run.metrics["balancedness"]`.

    import eplb
    run = eplb.read_run("runs/deepseek-v3-prefill-ep32")
    run.summary["balancedness"]["mean"], run.metrics["step_s"].mean()
    cmp = eplb.read_comparison("runs/compare-deepseek-v3-prefill-ep32")
    cmp.policies                       # comparison.json's table, one row per policy
    cmp.run("deepseek").transfers      # that policy's run folder
"""

import json
import operator
import os

import numpy as np

from . import _eplb


def _pandas(frames):
    """pandas when tables should be DataFrames, else None."""
    if frames is False:
        return None
    try:
        import pandas
    except ImportError:
        if frames:
            raise ImportError("frames=True needs pandas (Debian: apt-get install python3-pandas)")
        return None
    return pandas


def _table(columns, frames):
    pandas = _pandas(frames)
    return pandas.DataFrame(columns) if pandas is not None else columns


def _flatten(row, prefix=""):
    """A JSON row with nested objects as 'outer.inner' keys (pandas.json_normalize's names)."""
    out = {}
    for key, value in row.items():
        if isinstance(value, dict):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _rows_table(rows, frames):
    """A list of JSON objects as a table: a column per key (nested keys flattened), in order of
    first appearance; a row without a key holds None there."""
    flat = [_flatten(r) for r in rows]
    keys = list(dict.fromkeys(k for r in flat for k in r))
    columns = {}
    for key in keys:
        values = [r.get(key) for r in flat]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            columns[key] = np.array(values, dtype=np.float64 if any(
                isinstance(v, float) for v in values) else np.int64)
        elif all(isinstance(v, str) for v in values):
            columns[key] = np.array(values, dtype=str)
        else:
            array = np.empty(len(values), dtype=object)
            array[:] = values
            columns[key] = array
    return _table(columns, frames)


def _read_json_of(folder, kind, name):
    """`name` of the eplb `kind` folder at `folder`, once the folder is checked whole."""
    found = _eplb.folder_kind(os.fspath(folder))
    if found != kind:
        raise ValueError(f"{folder}: an eplb {found} folder, not a {kind} folder")
    path = os.path.join(folder, name)
    with open(path) as f:
        doc = json.load(f)
    version = doc.get("format_version", 0)
    if not isinstance(version, int) or version > _eplb.folder_format_version:
        raise ValueError(f"{path}: format_version {version!r} is newer than this eplb reads "
                         f"({_eplb.folder_format_version}); read it with the eplb that wrote it "
                         f"({doc.get('tool', 'unknown')})")
    return doc


class RunResult:
    """A run folder: its summary (summary.json) and tables.

    metrics: one row per step (metrics.csv). transfers: one row per expert transfer.
    rearrangements: one row per rearrangement. layer_balancedness: per span of steps and layer.
    gpu_memory: per rearrangement and GPU. The last two are None for folders written before
    they existed. scenario_yaml: the resolved scenario the run used.
    """

    def __init__(self, folder, frames=None):
        self.folder = os.fspath(folder)
        tables = _eplb.read_run_tables(self.folder)  # checks the folder whole first
        with open(os.path.join(self.folder, "summary.json")) as f:
            self.summary = json.load(f)
        with open(os.path.join(self.folder, "scenario.yaml")) as f:
            self.scenario_yaml = f.read()
        for name in ("metrics", "transfers", "rearrangements", "layer_balancedness",
                     "gpu_memory"):
            columns = tables.get(name)
            setattr(self, name, None if columns is None else _table(columns, frames))

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


def read_run(folder, frames=None):
    """The run folder at `folder` (see RunResult); ValueError names what is wrong with it."""
    return RunResult(folder, frames)


def _part_of(parent, run):
    """`run`, a folder inside `parent`'s, keeping `parent` alive: a temporary folder
    (scenario.py) goes only when nothing read from it is left."""
    run._parent = parent
    return run


class Comparison:
    """An `eplb compare` folder. policies: comparison.json's table, a row per policy (nested
    numbers as 'outer.inner' columns; with several seeds each number is the mean over them and
    'spread.*' its lowest and highest). run(policy, seed=None) reads one policy's run folder
    (seed: which one, when the comparison ran several)."""

    def __init__(self, folder, frames=None):
        self.folder = os.fspath(folder)
        self._frames = frames
        doc = _read_json_of(self.folder, "comparison", "comparison.json")
        self.scenario = doc.get("scenario")
        self.tool = doc.get("tool")
        self.policies = _rows_table(doc.get("policies", []), frames)
        self.labels = [row.get("label") for row in doc.get("policies", [])]

    def seeds(self, policy):
        """The seeds `policy` ran with, when the comparison ran several; else []."""
        path = os.path.join(self.folder, policy)
        if os.path.exists(os.path.join(path, "summary.json")):
            return []
        return sorted(int(name[len("seed-"):]) for name in os.listdir(path)
                      if name.startswith("seed-") and name[len("seed-"):].isdigit())

    def run(self, policy, seed=None):
        if policy not in self.labels:
            raise ValueError(f"{self.folder}: no policy {policy!r}; it has {self.labels}")
        path = os.path.join(self.folder, policy)
        if seed is not None:
            path = os.path.join(path, f"seed-{int(seed)}")
        elif self.seeds(policy):
            raise ValueError(f"{self.folder}: {policy} ran with seeds {self.seeds(policy)}; "
                             "name one")
        return _part_of(self, RunResult(path, self._frames))

    def __repr__(self):
        return f"Comparison({self.scenario!r}, policies={self.labels}, folder={self.folder!r})"


def read_comparison(folder, frames=None):
    """The `eplb compare` folder at `folder` (see Comparison)."""
    return Comparison(folder, frames)


class Sweep:
    """An `eplb sweep` folder. points: sweep.json's table, a row per point (the varied fields,
    the policy, and the comparison's numbers for its run). run(point) reads the point's run
    folder (its row's 'point')."""

    def __init__(self, folder, frames=None):
        self.folder = os.fspath(folder)
        self._frames = frames
        doc = _read_json_of(self.folder, "sweep", "sweep.json")
        self.scenario = doc.get("scenario")
        self.tool = doc.get("tool")
        self._count = len(doc.get("points", []))
        self.points = _rows_table(doc.get("points", []), frames)

    def run(self, point):
        if isinstance(point, bool):
            raise TypeError(f"point: {point!r} is not a point's number")
        point = operator.index(point)  # 1.5 is no point
        if not 0 <= point < self._count:
            raise ValueError(f"{self.folder}: no point {point}; it has 0..{self._count - 1}")
        return _part_of(self, RunResult(os.path.join(self.folder, "points", str(point)),
                                        self._frames))

    def __repr__(self):
        return f"Sweep({self.scenario!r}, points={self._count}, folder={self.folder!r})"


def read_sweep(folder, frames=None):
    """The `eplb sweep` folder at `folder` (see Sweep)."""
    return Sweep(folder, frames)
