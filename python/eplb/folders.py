"""eplb's output folders read back: a run folder (`eplb run`, `device-run`), a comparison
(`eplb compare`) and a sweep (`eplb sweep`).

Every folder is checked whole before it is read, by the same C++ readers the command line uses:
its manifest (every file there, of the size and checksum written, and nothing in the folder it
does not list, no symbolic link), its format version (a folder of a later format is refused
rather than misread) and, for run folders, every field of every file, with summary.json's
numbers in their ranges. A comparison's and a sweep's runs are found through the manifest,
never by joining a caller's argument to a path. A run folder's CSV tables come with their
columns' own types (int64, float64, str), in each file's column order; eplb.run_folder_columns()
defines every column (docs/run_folder.md describes the folder).

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

import os

import numpy as np

from . import _args, _eplb
from ._tidy import ComparisonTables, RunTables, SweepTables, pandas_of as _pandas, table as _table
from ._tidy import _strict_json, typed_points


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
        if values and all(isinstance(v, bool) for v in values):
            columns[key] = np.array(values, dtype=bool)  # a swept flag (typed_points)
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            columns[key] = np.array(values, dtype=np.float64 if any(
                isinstance(v, float) for v in values) else np.int64)
        elif all(isinstance(v, str) for v in values):
            columns[key] = np.array(values, dtype=str)
        else:
            array = np.empty(len(values), dtype=object)
            array[:] = values
            columns[key] = array
    return _table(columns, frames)


def _folder(folder):
    return _args.path(folder, "folder", for_command=False)


def _read_json_of(folder, kind, name):
    """(`name` of the eplb `kind` folder at `folder`, the folder's files as its manifest lists
    them), once the folder is checked whole."""
    files = _eplb.folder_files(folder, kind)
    path = os.path.join(folder, name)
    with open(path, encoding="utf-8") as f:
        doc = _strict_json(f.read(), path)
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: expected a JSON object")
    version = doc.get("format_version", 0)
    if not isinstance(version, int) or version > _eplb.folder_format_version:
        raise ValueError(f"{path}: format_version {version!r} is newer than this eplb reads "
                         f"({_eplb.folder_format_version}); read it with the eplb that wrote it "
                         f"({doc.get('tool', 'unknown')})")
    return doc, files


class RunResult(RunTables):
    """A run folder: its summary (summary.json) and tables.

    metrics: one row per step (metrics.csv). transfers: one row per expert transfer.
    rearrangements: one row per rearrangement. layer_balancedness: per span of steps and layer.
    gpu_memory: per rearrangement and GPU. The last two are None for folders written before
    they existed. scenario_yaml: the resolved scenario the run used.
    """

    def __init__(self, folder, frames=None):
        self.folder = _folder(folder)
        _pandas(frames)  # frames checked before the folder is read
        # The C++ reader's checks, all of them: the folder whole (manifest, no link, nothing
        # unlisted) and every field of every file in its range, summary.json's included.
        tables = _eplb.read_run_tables(self.folder)
        path = os.path.join(self.folder, "summary.json")
        with open(path, encoding="utf-8") as f:
            self.summary = _strict_json(f.read(), path)
        with open(os.path.join(self.folder, "scenario.yaml"), encoding="utf-8") as f:
            self.scenario_yaml = f.read()
        for name in ("metrics", "transfers", "rearrangements", "layer_balancedness",
                     "gpu_memory"):
            columns = tables.get(name)
            setattr(self, name, None if columns is None else _table(columns, frames))

    def placements(self):
        """Every layer placement the run committed, in order: dicts with step (-1: the initial
        placement), time_s, layer and phy2log (an int64 array of the layer's slots)."""
        out = []
        _eplb.folder_files(self.folder, "run")  # unchanged since it was read whole
        path = os.path.join(self.folder, "placements.jsonl")
        with open(path, encoding="utf-8") as f:
            for line in f:
                record = _strict_json(line, path)
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


class Comparison(ComparisonTables):
    """An `eplb compare` folder. policies: comparison.json's table, a row per policy (nested
    numbers as 'outer.inner' columns; with several seeds each number is the mean over them and
    'spread.*' its lowest and highest). run(policy, seed=None) reads one policy's run folder
    (seed: which one, when the comparison ran several)."""

    def __init__(self, folder, frames=None):
        self.folder = _folder(folder)
        self._frames = _args.frames(frames)
        doc, files = _read_json_of(self.folder, "comparison", "comparison.json")
        self.scenario = doc.get("scenario")
        self.tool = doc.get("tool")
        self.policies = _rows_table(doc.get("policies", []), frames)
        self.labels = [row.get("label") for row in doc.get("policies", [])]
        # Each policy's runs, as the manifest lists them (never by listing the folder): its run
        # folder POLICY/, or one per seed, POLICY/seed-S/.
        self._runs = {}
        for label in self.labels:
            if not isinstance(label, str) or not _eplb.is_safe_path_component(label):
                raise ValueError(f"{self.folder}/comparison.json: policy label "
                                 f"{_args.quote(label)} names no folder of the comparison")
            seeds = []
            for f in files:
                parts = f.split("/")
                if (len(parts) == 3 and parts[0] == label and parts[2] == "manifest.tsv"
                        and parts[1].startswith("seed-") and parts[1][5:].isdigit()
                        and parts[1][5:].isascii() and parts[1] == f"seed-{int(parts[1][5:])}"):
                    seeds.append(int(parts[1][5:]))
            if not seeds and f"{label}/manifest.tsv" not in files:
                raise ValueError(f"{self.folder}: comparison.json names policy {label!r} but "
                                 f"{label}/ holds no run folder")
            self._runs[label] = sorted(seeds)

    def _label(self, policy):
        if not isinstance(policy, str) or policy not in self._runs:
            raise _args.ArgumentError(f"policy is {_args.quote(policy)}; {self.folder} has no "
                                      f"policy {_args.quote(policy)}; it has {self.labels}")
        return policy

    def seeds(self, policy):
        """The seeds `policy` ran with, when the comparison ran several; else []."""
        return list(self._runs[self._label(policy)])

    def run(self, policy, seed=None):
        """The RunResult of `policy` (a label of the comparison), of run `seed` when it ran
        several (then required; see seeds)."""
        seeds = self._runs[self._label(policy)]
        path = os.path.join(self.folder, policy)
        if seed is not None:
            seed = _args.integer(seed, "seed", minimum=0, maximum=2**64 - 1)
            if seed not in seeds:
                ran = f"ran with seeds {seeds}" if seeds else "ran once, with no seeds named"
                raise _args.ArgumentError(f"seed is {seed}; {policy} {ran}")
            path = os.path.join(path, f"seed-{seed}")
        elif seeds:
            raise _args.ArgumentError(f"seed is None; {policy} ran with seeds {seeds}: name one")
        return _part_of(self, RunResult(path, self._frames))

    def __repr__(self):
        return f"Comparison({self.scenario!r}, policies={self.labels}, folder={self.folder!r})"


def read_comparison(folder, frames=None):
    """The `eplb compare` folder at `folder` (see Comparison)."""
    return Comparison(folder, frames)


class Sweep(SweepTables):
    """An `eplb sweep` folder. points: sweep.json's table, a row per point (the varied fields,
    the policy, and the comparison's numbers for its run). run(point) reads the point's run
    folder (its row's 'point')."""

    def __init__(self, folder, frames=None):
        self.folder = _folder(folder)
        self._frames = _args.frames(frames)
        doc, self._files = _read_json_of(self.folder, "sweep", "sweep.json")
        self.scenario = doc.get("scenario")
        self.tool = doc.get("tool")
        self._count = len(doc.get("points", []))
        self.points = _rows_table(typed_points(doc.get("points", [])), frames)

    def run(self, point):
        """The RunResult of point `point` (its row's 'point' in points, from 0)."""
        point = _args.integer(point, "point", minimum=None, maximum=None)  # 1.5 is no point
        if not 0 <= point < self._count:
            raise _args.ArgumentError(f"point is {point}; {self.folder} has no point {point}; "
                                      f"it has 0..{self._count - 1}")
        if f"points/{point}/manifest.tsv" not in self._files:
            raise ValueError(f"{self.folder}: sweep.json lists point {point} but points/{point}/ "
                             "holds no run folder")
        return _part_of(self, RunResult(os.path.join(self.folder, "points", str(point)),
                                        self._frames))

    def __repr__(self):
        return f"Sweep({self.scenario!r}, points={self._count}, folder={self.folder!r})"


def read_sweep(folder, frames=None):
    """The `eplb sweep` folder at `folder` (see Sweep)."""
    return Sweep(folder, frames)
