"""Tidy tables for a notebook: a run's placements and load windows as arrays and long frames,
its summary as one typed row, and a comparison's or a sweep's steps as one long frame (policy or
point, seed, step, every metrics.csv column), which is what pandas' groupby and seaborn want.

The classes here are the bases of folders.py's RunResult, Comparison and Sweep; every table is a
pandas DataFrame when the folder was read with frames (the default when pandas is installed),
else a dict of numpy arrays keyed by column. Columns are typed: int64 for counts and ids,
float64 for measures, bool for flags, str (object in pandas) for names. Each column means what
the run-folder column table says (eplb.run_folder_columns(); docs/run_folder.md).
"""

import textwrap

import numpy as np

from . import _args, _eplb


def pandas_of(frames):
    """pandas when tables should be DataFrames (frames True, or None and pandas installed)."""
    frames = _args.frames(frames)
    if frames is False:
        return None
    try:
        import pandas
    except ImportError:
        if frames:
            raise ImportError("frames=True needs pandas (Debian: apt-get install python3-pandas)")
        return None
    return pandas


def table(columns, frames):
    """`columns` ({name: numpy array}, in order) as a DataFrame, or as they are without pandas."""
    pandas = pandas_of(frames)
    return pandas.DataFrame(columns) if pandas is not None else columns


def column(values):
    """A list of JSON values as one typed numpy column: bool, int64, float64 (None: nan in a
    numeric column), str, or object where they are of mixed kinds (lists, mixed types)."""
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present) and len(present) == len(values):
        return np.array(values, dtype=bool)
    if present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        if len(present) == len(values) and all(isinstance(v, int) for v in present):
            if all(-2**63 <= v < 2**63 for v in present):
                return np.array(values, dtype=np.int64)
        return np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    if present and len(present) == len(values) and all(isinstance(v, str) for v in present):
        return np.array(values, dtype=str)
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def flatten(row, prefix=""):
    """A JSON object with nested objects as 'outer.inner' keys (pandas.json_normalize's names);
    lists stay whole."""
    out = {}
    for key, value in row.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def rows_columns(rows):
    """A list of flat dicts as typed columns, a key per column in order of first appearance."""
    keys = list(dict.fromkeys(k for r in rows for k in r))
    return {key: column([r.get(key) for r in rows]) for key in keys}


def array_of(tab, name):
    """Column `name` of a table (DataFrame or dict) as a numpy array."""
    return np.asarray(tab[name])


def columns_of(tab):
    """The column names of a table (DataFrame or dict), in order."""
    return list(tab.keys()) if isinstance(tab, dict) else list(tab.columns)


def frames_of(tab):
    """Whether `tab` is a DataFrame (so that what is made from it is one too)."""
    return not isinstance(tab, dict)


def concat(parts):
    """Column dicts of equal keys joined row-wise (keys in the first part's order)."""
    keys = list(parts[0])
    for part in parts[1:]:
        if list(part) != keys:
            raise ValueError(f"runs of one study have different columns: {keys} and {list(part)}")
    return {k: np.concatenate([p[k] for p in parts]) for k in keys}


# The run-folder column table (core/src/io/run_folder_fields.cpp), read once.
_COLUMNS = None


def folder_columns():
    """[(file, meaning, [(column, unit, meaning), ...])] of a run folder, from the core."""
    global _COLUMNS
    if _COLUMNS is None:
        _COLUMNS = [(f, m, list(c)) for f, m, c in _eplb.run_folder_columns()]
    return _COLUMNS


def column_lines(file, indent="        "):
    """The columns of run-folder file `file` as docstring lines: 'name (unit): meaning'."""
    for name, _, columns in folder_columns():
        if name == file:
            return "\n".join(
                textwrap.fill(f"{c} ({u}): {m}" if u else f"{c}: {m}", width=96,
                              initial_indent=indent, subsequent_indent=indent + "    ")
                for c, u, m in columns)
    raise KeyError(file)


def columns_table(frames=None):
    """Every column of a run folder's CSV files: file, column, unit, meaning."""
    rows = [(f, c, u, m) for f, _, columns in folder_columns() for c, u, m in columns]
    names = ("file", "column", "unit", "meaning")
    return table({n: np.array([r[i] for r in rows], dtype=str) for i, n in enumerate(names)},
                 frames)


class RunTables:
    """A run folder's placements, load windows and summary as arrays and tidy tables (the base
    of RunResult)."""

    def _tidy_frames(self):
        return frames_of(self.metrics)

    def _facts(self):
        # seed, nodes, gpus_per_node, num_gpus, layers, experts and num_slots of the run's
        # scenario, from the C++ reader (folders.py), which read the folder whole.
        return self._facts_cache

    @property
    def num_gpus(self):
        """GPUs of the run's cluster (cluster.nodes × cluster.gpus_per_node of scenario.yaml)."""
        return self._facts()["num_gpus"]

    @property
    def num_nodes(self):
        """Nodes of the run's cluster (cluster.nodes of scenario.yaml)."""
        return self._facts()["nodes"]

    @property
    def seed(self):
        """The run's random seed (run.seed of scenario.yaml)."""
        return self._facts()["seed"]

    def placement_arrays(self):
        """Every placement the run committed, as arrays (placements.jsonl), in commit order:

            step:      int64 [n]; the step during which the layer was committed, -1 for the
                       initial placement (one record per layer)
            from_step: int64 [n]; the first step served on it: step + 1, or step itself for a
                       recovery committed before its step ran (a lost GPU, serving waiting)
            time_s:    float64 [n]; when it was committed (s, the backend's clock)
            layer:     int64 [n]; the MoE layer
            phy2log:   int64 [n, slots]; the logical expert in each physical slot

        GPU g holds slots [g × slots/num_gpus, (g + 1) × slots/num_gpus).
        """
        cached = self.__dict__.get("_placements_cache")
        if cached is not None:
            return {k: v.copy() for k, v in cached.items()}
        records = self.placements()
        n = len(records)
        step = np.array([r["step"] for r in records], dtype=np.int64)
        time_s = np.array([r["time_s"] for r in records], dtype=np.float64)
        layer = np.array([r["layer"] for r in records], dtype=np.int64)
        slots = self._facts()["num_slots"] if n == 0 else len(records[0]["phy2log"])
        phy2log = np.zeros((n, slots), dtype=np.int64)
        for i, r in enumerate(records):
            phy2log[i] = r["phy2log"]
        # A commit during step s is served from s + 1, unless it came before step s began (a
        # recovery that serving waited for): the step's start time tells the two apart, with
        # half the step as margin for metrics.csv's rounding of times to 1 ns.
        starts = array_of(self.metrics, "time_s")
        lengths = array_of(self.metrics, "step_s")
        from_step = step + 1
        for i in np.flatnonzero((step >= 0) & (step < len(starts))):
            s = step[i]
            if time_s[i] < starts[s] + lengths[s] / 2:
                from_step[i] = s
        out = {"step": step, "from_step": from_step, "time_s": time_s, "layer": layer,
               "phy2log": phy2log}
        self._placements_cache = out
        return {k: v.copy() for k, v in out.items()}

    def placement_at(self, step):
        """The placement in force at `step`: phy2log as an int64 numpy array [layers, slots],
        the initial placement with every commit served by then applied (placement_arrays'
        from_step at most `step`). step: 0 .. the run's steps; the run's steps itself gives the
        placement the run ended with."""
        steps = int(self.summary["steps"])
        step = _args.integer(step, "step", minimum=0, maximum=steps)
        p = self.placement_arrays()
        layers = int(p["layer"].max()) + 1 if len(p["layer"]) else 0
        out = np.full((layers, p["phy2log"].shape[1]), -1, dtype=np.int64)
        for i in np.flatnonzero(p["from_step"] <= step):  # in commit order: the last one wins
            out[p["layer"][i]] = p["phy2log"][i]
        return out

    def placement_frame(self):
        """Every committed placement as a tidy table, one row per record and slot:

            step (int64): the step during which it was committed; -1: the initial placement
            from_step (int64): the first step served on it (see placement_arrays)
            time_s (float64): when it was committed (s)
            layer (int64): the MoE layer
            slot (int64): the physical slot
            rank (int64): the GPU holding the slot
            expert (int64): the logical expert in the slot
        """
        p = self.placement_arrays()
        n, slots = p["phy2log"].shape
        per_gpu = max(1, slots // max(1, self.num_gpus))
        slot = np.tile(np.arange(slots, dtype=np.int64), n)
        columns = {k: np.repeat(p[k], slots) for k in ("step", "from_step", "time_s", "layer")}
        columns.update(slot=slot, rank=slot // per_gpu, expert=p["phy2log"].reshape(-1))
        return table(columns, self._tidy_frames())

    def load_windows(self):
        """The load windows the policy saw (loads.jsonl), one per rearrangement, as arrays:

            step:   int64 [w]; the step after which the rearrangement started
            time_s: float64 [w]; when the policy ran (s)
            load:   float64 [w, layers, experts]; tokens per logical expert, the window's sum
        """
        # Read with the folder, by the C++ reader (folders.py): None when the folder has none.
        _eplb.folder_files(self.folder, _eplb.run_folder_kind)  # still whole as it was read
        loads = self._loads
        if loads is None:
            folder = _args.printable(self.folder)
            raise FileNotFoundError(f"{folder}: no loads.jsonl; eplb writes it in every run "
                                    "folder since the window loads were recorded")
        return {k: v.copy() for k, v in loads.items()}

    def load_frame(self):
        """The load windows as a tidy table, one row per window, layer and expert:

            window (int64): the window's index (its rearrangement's line in rearrangements.csv
                for the rearrangements that ran a policy)
            step (int64): the step after which its rearrangement started
            time_s (float64): when the policy ran (s)
            layer (int64): the MoE layer
            expert (int64): the logical expert
            tokens (float64): tokens routed to the expert in the window (the window's sum)
        """
        w = self.load_windows()
        count, layers, experts = w["load"].shape
        cells = layers * experts
        columns = {
            "window": np.repeat(np.arange(count, dtype=np.int64), cells),
            "step": np.repeat(w["step"], cells),
            "time_s": np.repeat(w["time_s"], cells),
            "layer": np.tile(np.repeat(np.arange(layers, dtype=np.int64), experts), count),
            "expert": np.tile(np.arange(experts, dtype=np.int64), count * layers),
            "tokens": w["load"].reshape(-1),
        }
        return table(columns, self._tidy_frames())

    def summary_flat(self):
        """summary.json as one flat dict: nested numbers under 'outer.inner' keys
        ('latency_s.p99', 'measured.from_step', 'bytes_moved.nic'); lists (faults) whole."""
        return flatten(self.summary)

    def summary_frame(self):
        """summary.json as a one-row table: a column per number ('outer.inner' for nested ones,
        e.g. step_time_s.p99, latency_s.p999, measured.from_step), typed int64, float64, bool or
        str; lists (faults) as one object cell. docs/run_folder.md describes summary.json."""
        return table(rows_columns([self.summary_flat()]), self._tidy_frames())


def _run_columns(run, leading):
    """The run's metrics.csv columns with `leading` ({name: scalar}) repeated before them."""
    metrics = run.metrics
    n = len(array_of(metrics, "step"))
    out = {}
    for name, value in leading.items():
        out[name] = np.repeat(np.asarray([value]), n)
    for name in columns_of(metrics):
        out[name] = array_of(metrics, name)
    return out


def _summary_columns(run, leading):
    row = dict(leading)
    for key, value in run.summary_flat().items():
        row.setdefault(key, value)
    return row


class ComparisonTables:
    """A comparison's runs as long tables (the base of Comparison)."""

    def _each_run(self):
        for policy in self.labels:
            seeds = self.seeds(policy)
            for seed in seeds or [None]:
                yield policy, self.run(policy, seed)

    def metrics_frame(self):
        """Every step of every run as one long table, one row per policy, seed and step:

            policy (str): the policy's label in comparison.json
            seed (int64): the run's seed (run.seed of its scenario.yaml)
            then every column of metrics.csv, typed as there:
        """
        parts = [_run_columns(run, {"policy": policy, "seed": run.seed})
                 for policy, run in self._each_run()]
        return table(concat(parts) if parts else {}, self._frames)

    def summary_frame(self):
        """Every run's summary.json as a table, one row per policy and seed: policy (str), seed
        (int64), then RunResult.summary_frame's columns."""
        rows = [_summary_columns(run, {"policy": policy, "seed": run.seed})
                for policy, run in self._each_run()]
        return table(rows_columns(rows), self._frames)


def typed_points(rows):
    """sweep.json's points with each varied field's 'true'/'false' as a bool: the values are
    written as the scenario's YAML took them, so a swept flag would read as a string."""
    rows = [dict(r) for r in rows]
    for key in varied_keys(rows):
        values = [r.get(key) for r in rows]
        if values and all(v in ("true", "false") for v in values):
            for r in rows:
                r[key] = r[key] == "true"
    return rows


def varied_keys(rows):
    """The varied fields of sweep.json's points: the keys between 'point' and 'policy' (the
    writer's order), or the 'key.path' keys of a file without 'policy'."""
    if not rows or not isinstance(rows[0], dict):
        return []
    keys = list(rows[0])
    if "policy" in keys:
        return [k for k in keys[:keys.index("policy")] if k != "point"]
    return [k for k in keys if "." in k]


class SweepTables:
    """A sweep's runs as long tables (the base of Sweep)."""

    def _leading(self):
        """Per point: {point, each varied field, policy}, typed from the points table."""
        points = self.points
        names = columns_of(points)
        keys = ["point"] + varied_keys([dict.fromkeys(names)])
        if "policy" in names:
            keys.append("policy")
        cols = {k: array_of(points, k) for k in keys}
        return [{k: cols[k][i] for k in keys} for i in range(self._count)]

    def _each_run(self):
        """(point's leading columns, run) for every run: a point's, or one per seed of a sweep
        over several (sweep --seeds)."""
        for i, lead in enumerate(self._leading()):
            for seed in self.seeds(i) or [None]:
                yield lead, self.run(i, seed)

    def metrics_frame(self):
        """Every step of every run as one long table, one row per point, seed and step:

            point (int64): the point's index (sweep.json's 'point')
            each varied field, as its key.path (bools as bool, numbers as int64 or float64)
            policy (str): the point's policy
            seed (int64): the run's seed (run.seed of its scenario.yaml)
            then every column of metrics.csv, typed as there:
        """
        parts = [_run_columns(run, dict(lead, seed=run.seed)) for lead, run in self._each_run()]
        return table(concat(parts) if parts else {}, self._frames)

    def summary_frame(self):
        """Every run's summary.json as a table, one row per point (and seed, over several): point,
        the varied fields, policy, seed, then RunResult.summary_frame's columns."""
        rows = []
        for lead, run in self._each_run():
            rows.append(_summary_columns(run, {k: v.item() if hasattr(v, "item") else v
                                               for k, v in dict(lead, seed=run.seed).items()}))
        return table(rows_columns(rows), self._frames)


def document_tables(cls):
    """Ends `cls`'s docstring (RunResult's) with every table's columns, in the column table's
    words, so that help(eplb.RunResult) says what each column is."""
    parts = [(cls.__doc__ or "").rstrip(), "", "    The tables' columns (eplb.run_folder_columns()):"]
    for name, meaning, columns in folder_columns():
        if columns:
            parts.append(f"\n    {name[:-4]} ({name}, {meaning}):")
            parts.append(column_lines(name))
    cls.__doc__ = "\n".join(parts) + "\n"


def _document():
    """The long tables' docstrings end with metrics.csv's columns, in the column table's words."""
    lines = column_lines("metrics.csv", indent="            ")
    for cls in (ComparisonTables, SweepTables):
        cls.metrics_frame.__doc__ += "\n" + lines + "\n"


_document()
