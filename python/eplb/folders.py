"""eplb's output folders read back: a run folder (`eplb run`, `device-run`), a comparison
(`eplb compare`) and a sweep (`eplb sweep`).

Every folder is read by the same C++ readers the command line uses (io/output_folders.h,
io/run_folder.h): this module opens no file of a folder itself. Each is checked whole first:
its manifest (every file there, of the size and checksum written, and nothing in the folder it
does not list, no symbolic link), its format version (a folder of a later format is refused
rather than misread) and, for run folders, every field of every file, with summary.json's
numbers in their ranges. A comparison's and a sweep's runs are found through the manifest,
never by joining a caller's argument to a path (the C++ module says where each run lies). A run folder's CSV tables come with their
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
from ._tidy import typed_points


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
    first appearance; a row without a key holds None there, or NaN in a column of numbers."""
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
        elif all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))
                 for v in values):
            # A number absent for some rows (null: it does not exist for that run) is NaN.
            columns[key] = np.array([np.nan if v is None else v for v in values],
                                    dtype=np.float64)
        elif all(isinstance(v, str) for v in values):
            columns[key] = np.array(values, dtype=str)
        else:
            array = np.empty(len(values), dtype=object)
            array[:] = values
            columns[key] = array
    return _table(columns, frames)


def _folder(folder):
    return _args.path(folder, "folder", for_command=False)


def _study_runs(study):
    """{name: seeds} of the runs the C++ reader found in a study's manifest (name: a policy's
    label, or a point's index as text), leaving out those whose folder holds none."""
    return {name: list(seeds) for name, found, seeds in study["runs"] if found}


def _checked_seed(seed, seeds, what):
    """`seed` as the study's run of `what` needs it: one of `seeds` when it ran several, else
    None."""
    if seed is not None:
        seed = _args.integer(seed, "seed", minimum=0, maximum=2**64 - 1)
        if seed not in seeds:
            ran = f"ran with seeds {seeds}" if seeds else "ran once, with no seeds named"
            raise _args.ArgumentError(f"seed is {seed}; {what} {ran}")
    elif seeds:
        raise _args.ArgumentError(f"seed is None; {what} ran with seeds {seeds}: name one")
    return seed


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
        # unlisted) and every field of every file in its range, summary.json's included; then
        # every table and document from that one read.
        run = _eplb.read_run(self.folder)
        tables = run["tables"]
        self.summary = run["summary"]
        self.scenario_yaml = run["scenario_yaml"]
        self._facts_cache = run["facts"]
        self._placement_records = run["placements"]
        self._loads = run["loads"]
        for name in ("metrics", "transfers", "rearrangements", "layer_balancedness",
                     "gpu_memory"):
            columns = tables.get(name)
            setattr(self, name, None if columns is None else _table(columns, frames))

    def placements(self):
        """Every layer placement the run committed, in order: dicts with step (-1: the initial
        placement), time_s, layer and phy2log (an int64 array of the layer's slots)."""
        _eplb.folder_files(self.folder, _eplb.run_folder_kind)  # still whole as it was read
        return [dict(r, phy2log=r["phy2log"].copy()) for r in self._placement_records]

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
    """An `eplb compare` folder. policies: comparison.json's table, a row per policy (its
    'policy' column is the file's 'label', as every frame names it; nested numbers as
    'outer.inner' columns; with several seeds each number is the mean over them and 'spread.*'
    its lowest and highest; a number that does not exist for a policy, null in the file, is
    None, or NaN in a frame). run(policy, seed=None) reads one policy's run folder
    (seed: which one, when the comparison ran several)."""

    def __init__(self, folder, frames=None):
        self.folder = _folder(folder)
        self._frames = _args.frames(frames)
        # comparison.json and each policy's runs as the manifest lists them (never by listing
        # the folder), every label checked to name a folder of the comparison.
        study = _eplb.read_comparison(self.folder)
        doc = study["document"]
        self.scenario = doc.get("scenario")
        self.tool = doc.get("tool")
        # Each row's 'label' (comparison.json's word) is its 'policy', as in every frame.
        rows = [{("policy" if key == "label" else key): value for key, value in row.items()}
                for row in doc.get("policies", [])]
        self.policies = _rows_table(rows, frames)
        self.labels = [row.get("policy") for row in rows]
        self._runs = _study_runs(study)

    def _label(self, policy):
        if not isinstance(policy, str) or policy not in self._runs:
            folder = _args.printable(self.folder)
            raise _args.ArgumentError(f"policy is {_args.quote(policy)}; {folder} has no policy "
                                      f"{_args.quote(policy)}; it has {self.labels}")
        return policy

    def seeds(self, policy):
        """The seeds `policy` ran with, when the comparison ran several; else []."""
        return list(self._runs[self._label(policy)])

    def run(self, policy, seed=None):
        """The RunResult of `policy` (a label of the comparison), of run `seed` when it ran
        several (then required; see seeds)."""
        seed = _checked_seed(seed, self._runs[self._label(policy)], policy)
        path = os.path.join(self.folder, _eplb.comparison_run_path(policy, seed))
        return _part_of(self, RunResult(path, self._frames))

    def __repr__(self):
        return f"Comparison({self.scenario!r}, policies={self.labels}, folder={self.folder!r})"


def read_comparison(folder, frames=None):
    """The `eplb compare` folder at `folder` (see Comparison)."""
    return Comparison(folder, frames)


class Sweep(SweepTables):
    """An `eplb sweep` folder. points: sweep.json's table, a row per point (the varied fields,
    the policy, and the comparison's numbers for its run; over several seeds their mean).
    run(point, seed=None) reads the point's run folder (its row's 'point'; seed: which one, when
    the sweep ran each point with several, see seeds)."""

    def __init__(self, folder, frames=None):
        self.folder = _folder(folder)
        self._frames = _args.frames(frames)
        study = _eplb.read_sweep(self.folder)
        doc = study["document"]
        self._runs = _study_runs(study)
        self.scenario = doc.get("scenario")
        self.tool = doc.get("tool")
        self._count = len(doc.get("points", []))
        self.points = _rows_table(typed_points(doc.get("points", [])), frames)

    def _point(self, point):
        point = _args.integer(point, "point", minimum=None, maximum=None)  # 1.5 is no point
        folder = _args.printable(self.folder)
        if not 0 <= point < self._count:
            raise _args.ArgumentError(f"point is {point}; {folder} has no point {point}; it has "
                                      f"0..{self._count - 1}")
        if str(point) not in self._runs:
            raise ValueError(f"{folder}: sweep.json lists point {point} but "
                             f"{_eplb.sweep_run_path(point)}/ holds no run folder")
        return point

    def seeds(self, point):
        """The seeds point `point` ran with, when the sweep ran several (--seeds); else []."""
        return list(self._runs[str(self._point(point))])

    def run(self, point, seed=None):
        """The RunResult of point `point` (its row's 'point' in points, from 0), of run `seed`
        when the sweep ran each point with several seeds (then required; see seeds)."""
        point = self._point(point)
        seed = _checked_seed(seed, self._runs[str(point)], f"point {point}")
        path = os.path.join(self.folder, _eplb.sweep_run_path(point, seed))
        return _part_of(self, RunResult(path, self._frames))

    def __repr__(self):
        return f"Sweep({self.scenario!r}, points={self._count}, folder={self.folder!r})"


def read_sweep(folder, frames=None):
    """The `eplb sweep` folder at `folder` (see Sweep)."""
    return Sweep(folder, frames)
