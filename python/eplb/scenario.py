"""Scenario runs from Python: what `eplb run` does, with the results as Python objects.

A simulation runs in its own process: SimGrid allows one simulated world per process, and a run
of the default scenario takes seconds, so the cost of starting `eplb` does not matter here. The
run folder it writes is read back whole by eplb's own reader (folders.py).
"""

import os
import shutil
import subprocess
import tempfile
import weakref

from .folders import RunResult


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


def run_scenario(scenario=None, out=None, set=None, trace=False, timeout=None, frames=None):
    """Simulates `scenario` (a YAML path; None: the built-in DeepSeek-V3 prefill EP32).

    set: overrides as {"key.path": value} or ["key.path=value", ...], as `eplb run --set`.
    out: the run folder to write (replaced as `eplb run` replaces it); None: a temporary folder
        that lives as long as the returned result.
    trace: also write trace.json (Perfetto), which large runs make big.
    frames: the tables as pandas DataFrames (True), dicts of numpy arrays (False), or
        DataFrames when pandas is installed (None; folders.py).
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
        result = RunResult(os.fspath(out), frames)
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
