"""Scenario runs from Python: what `eplb run`, `eplb compare` and `eplb sweep` do, with the
results as Python objects.

A simulation runs in its own process: SimGrid allows one simulated world per process, and a run
of the default scenario takes seconds, so the cost of starting `eplb` does not matter here. The
run folder it writes is read back whole by eplb's own reader (folders.py).
"""

import os
import shutil
import subprocess
import tempfile
import weakref
from collections.abc import Mapping

from . import _args, _eplb
from ._recorded import Recorded
from ._user_policy import PolicyServer, policy_name
from .folders import Comparison, RunResult, Sweep


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


def _simulate(command, scenario, out, set, trace, extra, timeout, read, functions=None,
              policy_time=None, replays=()):
    """Runs `eplb COMMAND [SCENARIO] --set ... --out OUT [--no-trace] EXTRA` and returns
    read(OUT); a temporary OUT (out None) lives as long as what read returned. `functions`
    ({name: fn}) are served as policies for the command's length (_user_policy.py), their
    time priced or free (--policy-time; None: priced)."""
    # Every argument is checked before anything is made (the temporary folder, the policy
    # server's folder and socket), so that a bad one leaves nothing behind; what is made is
    # removed on every way out below, an exception or an interrupt included.
    scenario = _args.optional(_args.path, scenario, "scenario")
    overrides = _args.overrides(set, "set")
    out = _args.optional(_args.path, out, "out")
    trace = _args.flag(trace, "trace")
    timeout = _args.timeout(timeout, "timeout")
    if policy_time is not None and policy_time not in ("priced", "free"):
        raise _args.ArgumentError(f"policy_time is {_args.quote(policy_time)}; expected "
                                  "'priced' or 'free'")
    args = [_cli(), command]
    if scenario is not None:
        args.append(scenario)
    for item in overrides:
        args += ["--set", item]
    options = [] if trace else ["--no-trace"]
    options += extra
    options += [recording.option() for recording in replays]  # eplb reads and checks the file
    if policy_time is not None:
        options.append(f"--policy-time={policy_time}")
    temporary = server = None
    try:
        if out is None:
            temporary = tempfile.mkdtemp(prefix=f"eplb-{command}-")
            out = os.path.join(temporary, command)
        args += ["--out", out]
        if functions:
            server = PolicyServer(functions)
            options += [f"--policy-command={name}={server.command(name)}" for name in functions]
        returncode, stderr = _run_stopping_on_interrupt(args + options, timeout, command)
        if returncode != 0:
            raise EplbError(_error_of(stderr) or f"eplb {command} exited with {returncode}")
        result = read(out)
    except BaseException:
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)
        raise
    finally:
        if server is not None:
            server.close()
    if temporary is not None:  # the folder goes when the result does
        weakref.finalize(result, shutil.rmtree, temporary, ignore_errors=True)
    return result


def _run_stopping_on_interrupt(args, timeout, command):
    """Runs eplb and returns (exit status, stderr). On a timeout or an interrupt of Python
    (Ctrl-C in a notebook), eplb gets SIGTERM, as Ctrl-C on the command line would give it: it
    stops its simulations and removes what it had begun to write, leaving any earlier folder at
    --out whole. A timeout then raises EplbError; an interrupt is raised again."""
    with subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          env=_environment_alone()) as process:
        try:
            _, stderr = process.communicate(timeout=timeout)
            return process.returncode, stderr
        except BaseException as stopped:
            process.terminate()
            try:
                process.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.communicate()
            if isinstance(stopped, subprocess.TimeoutExpired):
                raise EplbError(f"eplb {command} did not finish within {timeout:g} s; it was "
                                "stopped, and nothing it began was kept") from None
            raise


def _environment_alone():
    """This process's environment, with the eplb command told to run as one process
    (base/launcher.h, EPLB_LAUNCH): a notebook inside mpirun or a Slurm job runs its whole study
    itself, not one rank's share of it."""
    return dict(os.environ, EPLB_LAUNCH="alone")


def _error_of(stderr):
    """eplb's error lines (a failed run's own, then the command's), without progress lines."""
    lines = [line for line in stderr.strip().splitlines()
             if line.startswith("eplb: ") or ": error: " in line]
    return "\n".join(lines) if lines else stderr.strip()


def _function_name(fn, argument):
    """The policy name of `fn` (given as `argument`), made known to this process's reader so
    that the folders naming it read back here; before anything starts, so that a refused name
    (a built-in's) leaves nothing behind."""
    name = policy_name(fn, argument)
    try:
        _eplb.name_program_policy(name)
    except ValueError as e:
        raise _args.ArgumentError(f"{argument}.__name__ is {_args.quote(name)}, which cannot "
                                  f"name the function's policy: {e}") from None
    return name


def _functions_of(policies):
    """Policies as names, with the callables among them as {name: fn} (named by __name__) and
    the recordings (eplb.recorded) as a list."""
    if policies is None or isinstance(policies, (str, bytes)):
        return policies, {}, []
    if isinstance(policies, Mapping):
        # Iterated, a dict gives its keys alone: {"deepseek": mine} would run the built-in and
        # never call mine.
        raise _args.ArgumentError(f"policies is {_args.quote(policies)} (a dict); expected a "
                                  "list of names, functions and eplb.recorded(path, name=...): "
                                  "a function is named by its __name__")
    if callable(policies) or isinstance(policies, Recorded):
        policies = [policies]
    names, functions, replays = [], {}, []
    for i, p in enumerate(policies):
        if isinstance(p, Recorded):
            if any(r.name == p.name for r in replays):
                raise _args.ArgumentError(f"policies: two recordings are named {p.name!r}; give "
                                          "each its own name (eplb.recorded(path, name=...))")
            replays.append(p)
            p = p.name
        elif callable(p):
            name = _function_name(p, f"policies[{i}]")
            if name in functions and functions[name] is not p:
                raise _args.ArgumentError(f"policies: two functions are named {name!r}; give "
                                          "each its own __name__")
            functions[name] = p
            p = name
        names.append(p)
    return names, functions, replays


def run_scenario(scenario=None, out=None, set=None, trace=False, timeout=None, frames=None,
                 policy=None, policy_time=None):
    """Simulates `scenario` (a YAML path; None: the built-in DeepSeek-V3 prefill EP32).

    policy: a function as the policy (vLLM's rebalance_experts signature; _user_policy.py),
        named by its __name__ in the run folder, or recorded placements replayed
        (eplb.recorded(path)); None: the scenario's eplb.policy. For a built-in,
        set={"eplb.policy": name}.
    policy_time: "priced" (None): the simulated clock waits for each call of a function's
        policy, as an engine would; "free": it does not, as for the built-ins, and the folder
        is the same on any machine (docs/policy_protocol.md).
    set: overrides as {"key.path": value} or ["key.path=value", ...], as `eplb run --set`.
    out: the run folder to write (replaced as `eplb run` replaces it); None: a temporary folder
        that lives as long as the returned result.
    trace: also write trace.json (Perfetto), which large runs make big.
    frames: the tables as pandas DataFrames (True), dicts of numpy arrays (False), or
        DataFrames when pandas is installed (None; folders.py).
    Raises EplbError with eplb's message when the scenario is refused or the run fails.
    """
    frames = _args.frames(frames)
    functions, replays = {}, []
    if isinstance(policy, Recorded):
        replays = [policy]
    elif policy is not None:
        if not callable(policy):
            raise _args.ArgumentError(f"policy is {_args.quote(policy)}; expected a function "
                                      "or eplb.recorded(path) (a built-in is "
                                      "set={'eplb.policy': name})")
        functions = {_function_name(policy, 'policy'): policy}
    return _simulate("run", scenario, out, set, trace, [], timeout,
                     lambda folder: RunResult(folder, frames), functions, policy_time, replays)


def _study_options(policies, jobs):
    """--policies and --jobs, which compare and sweep share; jobs as `--jobs` takes it (0: a
    core each)."""
    options = []
    if policies is not None:
        options.append(f"--policies={_args.names(policies, 'policies')}")
    if jobs is not None:
        options.append(f"--jobs={_args.integer(jobs, 'jobs', minimum=0)}")
    return options


def compare_policies(scenario=None, policies=None, seeds=None, out=None, set=None, trace=False,
                     jobs=None, timeout=None, frames=None, policy_time=None):
    """Runs `scenario` once per policy (and per seed) and returns the Comparison, as
    `eplb compare` does (the library's sim/studies.h RunComparison, each run in its own
    process).

    policies: names (a list, or "a,b"), or functions and recordings (eplb.recorded) among the
        names (run_scenario's policy); None: eplb compare's default five.
    seeds: run every policy once per seed; the rows are then means with their spread.
    out, set, trace, timeout, frames, policy_time: as run_scenario. jobs: simulations at once
    (None: a core each). Raises EplbError with eplb's message.
    """
    frames = _args.frames(frames)
    policies, functions, replays = _functions_of(policies)
    extra = _study_options(policies, jobs)
    if seeds is not None:
        extra.append(f"--seeds={_args.seeds(seeds, 'seeds')}")
    return _simulate("compare", scenario, out, set, trace, extra, timeout,
                     lambda folder: Comparison(folder, frames), functions, policy_time,
                     replays)


def sweep(scenario=None, vary=None, policies=None, out=None, set=None, trace=False, jobs=None,
          timeout=None, frames=None, policy_time=None):
    """Runs `scenario` over the cross product of `vary` ({"key.path": [values, ...]}, the last
    key varying fastest) and returns the Sweep, as `eplb sweep` does.

    policies: run each point once per policy (innermost), functions among them as in
        compare_policies; None: the scenario's policy.
    out, set, trace, jobs, timeout, frames, policy_time: as compare_policies. Raises EplbError
    with eplb's message.
    """
    frames = _args.frames(frames)
    policies, functions, replays = _functions_of(policies)
    if not isinstance(vary, dict):
        raise _args.ArgumentError(f"vary is {_args.quote(vary)}; expected a dict "
                                  "{'key.path': [values, ...]}")
    if not vary:
        raise _args.ArgumentError("vary is empty: name at least one field and its values, "
                                  "{'key.path': [...]}")
    extra = _study_options(policies, jobs)
    for key, values in vary.items():
        if not isinstance(key, str) or not key or "=" in key or "," in key:
            raise _args.ArgumentError(f"vary: {_args.quote(key)} is not a field's key.path")
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
            values = [values]
        texts = [_args.yaml_value(v, f"vary[{key!r}]") for v in values]
        extra.append(f"--vary={key}={_args.names(texts, f'vary[{key!r}]')}")
    return _simulate("sweep", scenario, out, set, trace, extra, timeout,
                     lambda folder: Sweep(folder, frames), functions, policy_time, replays)
