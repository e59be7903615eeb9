"""eplb: expert-parallel load balancing for Mixture-of-Experts models.

The toolkit's C++ core in process: every policy, the transfer plan and its schedule, and the
scenario runner. numpy arrays and torch tensors go in; the same kind comes out.

    import eplb
    phy2log = eplb.rebalance(load, num_replicas=288, num_gpus=32, num_nodes=4, num_groups=8)

Scenario runs, comparisons and sweeps, and eplb's output folders, come back as tables, pandas
DataFrames when pandas is installed: eplb.run_scenario, eplb.compare_policies, eplb.sweep,
eplb.read_run, eplb.read_comparison, eplb.read_sweep.

The engines' own calling conventions live in submodules, each a drop-in replacement:
    eplb.deepseek.rebalance_experts   DeepSeek's eplb.py
    eplb.vllm.EplbPolicy              vLLM's AbstractEplbPolicy (vllm/distributed/eplb/policy)
    eplb.sglang.rebalance_experts     SGLang's eplb_algorithms entry point
"""

# Every name here that is not eplb's API starts with an underscore, so that dir(eplb) and tab
# completion show the API alone (__all__, the submodules deepseek, vllm and sglang).
import warnings as _warnings

import numpy as _np

from . import _args, _eplb, _tidy
from ._args import ArgumentError
from ._arrays import log2phy_of
from ._arrays import to_numpy as _to_numpy
from ._recorded import recorded
from .folders import Comparison, RunResult, Sweep, read_comparison, read_run, read_sweep
from .scenario import EplbError, compare_policies, run_scenario, sweep

__all__ = [
    "balancedness",
    "compare_policies",
    "gpu_loads",
    "log2phy_of",
    "plan",
    "policies",
    "read_comparison",
    "read_load",
    "read_run",
    "read_sweep",
    "rebalance",
    "recorded",
    "run_folder_columns",
    "run_scenario",
    "sweep",
    "ArgumentError",
    "Comparison",
    "EplbError",
    "RunResult",
    "Sweep",
]

_tidy.document_tables(RunResult)

# The engines' calling conventions, imported on use (eplb.deepseek, eplb.vllm, eplb.sglang).
_SUBMODULES = ("deepseek", "sglang", "vllm")


def __dir__():
    return sorted(set(__all__) | set(_SUBMODULES) | {"__version__", "__doc__", "__name__",
                                                      "__all__", "__file__", "__path__"})


try:
    from ._build_info import VERSION as __version__
except ImportError:  # running from a source tree without a build
    __version__ = "unknown"


def policies():
    """{name: summary} of every registered policy, built-ins first (the names rebalance's
    `policy` and compare_policies' `policies` take)."""
    return dict(_eplb.policies())


def read_load(path, num_experts=0, physical_to_logical_map=None):
    """The load recorded in `path` as a float64 numpy array [steps, layers, experts].

    Reads every layout the command line reads: CSV (wide, with or without a header row or
    pandas' index column, or long step,layer,expert,tokens), JSON ([layer][expert],
    [step][layer][expert], or under load / logical_count / steps), SGLang's expert-distribution
    .pt dumps (a file or their folder), vLLM's EPLB window saved with its map, and TensorRT-LLM's
    statistics folder. num_experts: refuse a load of another width. physical_to_logical_map
    ([layers, slots]): the file counts physical slots; fold them onto logical experts.
    """
    p2l = None
    if physical_to_logical_map is not None:
        p2l, _ = _to_numpy(physical_to_logical_map, _np.int64, "physical_to_logical_map")
    return _eplb.read_load(_args.path(path, "path", for_command=False),
                           _args.integer(num_experts, "num_experts", minimum=0), p2l)


def rebalance(load, num_replicas, num_gpus, num_nodes=None, num_groups=1, policy="deepseek",
              current=None, max_chunks=16, lost_ranks=(), **options):
    """The placement `policy` chooses: phy2log [layers, num_replicas], int64.

    load: [layers, experts] tokens per logical expert (a window's sum), or [steps, layers,
        experts]: summed over steps for the policy, and cut into at most `max_chunks`
        consecutive chunks for the policies that look at time (`timeseries`).
    num_replicas: physical slots per layer, a multiple of num_gpus.
    num_groups: the model's expert groups (DeepSeek's group-limited routing); 0 or None mean 1.
    num_nodes: required with num_groups above 1, where the hierarchical policies pack groups
        onto nodes; 1 otherwise.
    current: the placement in force (phy2log), for the policies that keep or repair it.
    lost_ranks: GPUs lost or drained (None or empty: none); their slots stay -1 (deepseek,
        replicate-lpt, timeseries and fault-tolerant place around them, the other policies
        refuse).
    options: window_steps, serve_steps, seconds_per_token, migration_weight,
        max_moves_per_layer (see `eplb policies`).
    Returns numpy for numpy input and torch for torch input (on the load's device).
    """
    num_groups = _args.group_count(num_groups)
    if num_nodes is None:
        if num_groups > 1:
            raise ValueError(f"num_groups is {num_groups} but num_nodes is not given; with expert "
                             "groups the hierarchical policies pack groups onto nodes, so give "
                             "num_nodes (1 for a single node)")
        num_nodes = 1
    array, kind = _to_numpy(load, _np.float64, "load")
    cur = None if current is None else _to_numpy(current, _np.int64, "current")[0]
    try:
        if isinstance(lost_ranks, (str, bytes)):
            raise TypeError("a string is iterable, but not of indices")
        lost = [_args.integer(r, "lost_ranks", minimum=0)
                for r in (() if lost_ranks is None else lost_ranks)]
    except (TypeError, ValueError):
        raise ArgumentError(f"lost_ranks is {_args.quote(lost_ranks)}; expected GPU indices, "
                            "e.g. [2, 6], or None for none") from None
    values = {key: _args.yaml_value(value, key) for key, value in options.items()}
    phy2log = _eplb.rebalance(array, _args.integer(num_replicas, "num_replicas"),
                              _args.integer(num_gpus, "num_gpus"),
                              _args.integer(num_nodes, "num_nodes"),
                              num_groups, _args.text(policy, "policy"), cur,
                              _args.integer(max_chunks, "max_chunks"), values, lost)
    return kind.out(phy2log)


def gpu_loads(load, phy2log, num_gpus):
    """Tokens per GPU [layers, num_gpus] when each expert's load splits evenly over its replicas.

    load: [layers, experts] tokens per logical expert (a window's sum; numpy or torch).
    phy2log: the placement [layers, slots], the logical expert in each physical slot; -1 for a
        slot of a lost GPU. num_gpus: GPUs, each holding slots / num_gpus consecutive slots.
    Returns float64 numpy for numpy input and torch for torch input.
    """
    array, kind = _to_numpy(load, _np.float64, "load")
    placement = _to_numpy(phy2log, _np.int64, "phy2log")[0]
    return kind.out(_eplb.gpu_loads(array, placement, _args.integer(num_gpus, "num_gpus")))


def balancedness(load, phy2log, num_gpus):
    """vLLM's balancedness of `load` under `phy2log` as a float: Σ over layers of the mean GPU
    load / Σ of the max GPU load (1 is perfect); arguments as gpu_loads."""
    array = _np.asarray(_to_numpy(load, _np.float64, "load")[0])
    loads = _np.asarray(gpu_loads(array, phy2log, num_gpus))
    peak = loads.max(axis=1).sum()
    return float(loads.mean(axis=1).sum() / peak) if peak > 0 else 1.0


# What `plan` took before its arguments were named as the command line names them.
_UNSET = object()
_SENDER_RULES = tuple(sorted(_eplb.sender_rule_names))  # the C++ tables' names, listed sorted
_SCHEDULES = tuple(sorted(_eplb.schedule_names))


def _renamed(value, old_value, name, old_name, default):
    """`value`, or the deprecated `old_value` (with a DeprecationWarning) when that was given."""
    if old_value is _UNSET:
        return name, value
    if value is not default:
        raise ArgumentError(f"{old_name} and {name} are both given; {old_name} is the old name "
                            f"of {name}: give {name} only")
    _warnings.warn(f"plan's argument {old_name} is now {name}, as the command line's "
                   f"--{name.replace('_', '-')}; {old_name} will go", DeprecationWarning,
                   stacklevel=3)
    return old_name, old_value


def plan(old, new, num_gpus, num_nodes, num_experts=None, expert_bytes=3 * 7168 * 2048,
         sender_rule="local", schedule="best", nvlink_gbps=450.0, nic_gbps=50.0, frames=None,
         *, sender=_UNSET, strategy=_UNSET):
    """The transfers that turn placement `old` into `new`, and their schedule (`eplb plan`).

    old, new: phy2log placements [layers, slots] (numpy or torch), the same shape.
    num_gpus, num_nodes: the cluster; slots are spread evenly over the GPUs, GPUs over nodes.
    num_experts: logical experts (None: one more than the largest id in old or new).
    expert_bytes: bytes of one expert in one layer (--expert-bytes).
    sender_rule: who sends each expert (--sender-rule): "local" (a holder on the receiver's
        node, the one with the fewest bytes to send so far; another node only when that node
        has no copy) or "vllm" (vLLM's rebalance_execute.py: old holders serve new ones
        round-robin).
    schedule: how transfers are cut into rounds (--schedule): "best", "greedy-pairs" or
        "single-batch".
    nvlink_gbps, nic_gbps: each link's bandwidth in GB/s.
    frames: the tables as pandas DataFrames (True), dicts of numpy arrays (False), or
        DataFrames when pandas is installed (None).
    sender, strategy: the old names of sender_rule and schedule, still taken with a
        DeprecationWarning.

    Returns {"transfers": table, "layers": table}. transfers, one row per expert transfer (all
    int64): layer, expert (the logical expert moved), src_rank, src_slot (the GPU and old slot
    it is read from), dst_rank, dst_slot (the GPU and new slot it is written to), bytes, link
    (0 NVLink, 1 NIC) and round (its round within its link's lane). layers, one row per changed
    layer: layer, nvlink_bytes, nic_bytes, local_copies (int64; copies within a GPU), rounds
    (int64), makespan_s (float64; the schedule's time, schedule.h) and lower_bound_s (float64;
    no schedule could move the layer faster).
    """
    rule_name, sender_rule = _renamed(sender_rule, sender, "sender_rule", "sender", "local")
    schedule_name, schedule = _renamed(schedule, strategy, "schedule", "strategy", "best")
    # A non-string named first as such ("sender is None ... expected a string"), then the values.
    sender_rule = _args.text(_args.text(sender_rule, rule_name), rule_name, _SENDER_RULES)
    schedule = _args.text(_args.text(schedule, schedule_name), schedule_name, _SCHEDULES)
    frames = _args.frames(frames)
    old_array = _to_numpy(old, _np.int64, "old")[0]
    new_array = _to_numpy(new, _np.int64, "new")[0]
    if num_experts is None:
        num_experts = int(max(old_array.max(initial=-1), new_array.max(initial=-1))) + 1
    out = _eplb.plan(old_array, new_array, _args.integer(num_gpus, "num_gpus"),
                     _args.integer(num_nodes, "num_nodes"),
                     _args.integer(num_experts, "num_experts"),
                     _args.integer(expert_bytes, "expert_bytes", maximum=_args.INT64_MAX),
                     sender_rule, schedule, _args.real(nvlink_gbps, "nvlink_gbps", *_GBPS),
                     _args.real(nic_gbps, "nic_gbps", *_GBPS))
    return {name: _tidy.table(dict(out[name]), frames) for name in ("transfers", "layers")}


def run_folder_columns(frames=None):
    """Every column of a run folder's CSV files, as the writers, the readers and the docs
    define them: a table with file (metrics.csv, transfers.csv, rearrangements.csv,
    layer_balancedness.csv, gpu_memory.csv), column, unit (s, bytes, tokens, ms, 1 for a ratio,
    empty for an id or a name) and meaning. frames: as in read_run."""
    return _tidy.columns_table(frames)


# A link's bandwidth in GB/s: 1 byte/s to 1 PB/s (the scenario's kMaxGbps), so that every
# transfer's time is finite (a subnormal bandwidth made it infinite).
_GBPS = (1e-9, 1e6)
