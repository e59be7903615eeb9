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

import numpy as np

from . import _args, _eplb
from ._args import ArgumentError, group_count, integer
from ._arrays import log2phy_of, to_numpy
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
    "run_scenario",
    "sweep",
    "ArgumentError",
    "Comparison",
    "EplbError",
    "RunResult",
    "Sweep",
]

try:
    from ._build_info import VERSION as __version__
except ImportError:  # running from a source tree without a build
    __version__ = "unknown"


def policies():
    """{name: summary} of every registered policy, built-ins first."""
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
        p2l, _ = to_numpy(physical_to_logical_map, np.int64, "physical_to_logical_map")
    return _eplb.read_load(_args.path(path, "path", for_command=False),
                           integer(num_experts, "num_experts", minimum=0), p2l)


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
    num_groups = group_count(num_groups)
    if num_nodes is None:
        if num_groups > 1:
            raise ValueError(f"num_groups is {num_groups} but num_nodes is not given; with expert "
                             "groups the hierarchical policies pack groups onto nodes, so give "
                             "num_nodes (1 for a single node)")
        num_nodes = 1
    array, kind = to_numpy(load, np.float64, "load")
    cur = None if current is None else to_numpy(current, np.int64, "current")[0]
    try:
        if isinstance(lost_ranks, (str, bytes)):
            raise TypeError("a string is iterable, but not of indices")
        lost = [integer(r, "lost_ranks", minimum=0)
                for r in (() if lost_ranks is None else lost_ranks)]
    except (TypeError, ValueError):
        raise ArgumentError(f"lost_ranks is {_args.quote(lost_ranks)}; expected GPU indices, "
                            "e.g. [2, 6], or None for none") from None
    values = {key: _args.yaml_value(value, key) for key, value in options.items()}
    phy2log = _eplb.rebalance(array, integer(num_replicas, "num_replicas"),
                              integer(num_gpus, "num_gpus"), integer(num_nodes, "num_nodes"),
                              num_groups, _args.text(policy, "policy"), cur,
                              integer(max_chunks, "max_chunks"), values, lost)
    return kind.out(phy2log)


def gpu_loads(load, phy2log, num_gpus):
    """Tokens per GPU [layers, num_gpus] when each expert's load splits evenly over its replicas."""
    array, kind = to_numpy(load, np.float64, "load")
    placement = to_numpy(phy2log, np.int64, "phy2log")[0]
    return kind.out(_eplb.gpu_loads(array, placement, integer(num_gpus, "num_gpus")))


def balancedness(load, phy2log, num_gpus):
    """vLLM's balancedness: sum over layers of mean GPU load / sum of max GPU load (1 is perfect)."""
    loads = np.asarray(gpu_loads(np.asarray(to_numpy(load, np.float64, "load")[0]), phy2log,
                                 num_gpus))
    peak = loads.max(axis=1).sum()
    return float(loads.mean(axis=1).sum() / peak) if peak > 0 else 1.0


def plan(old, new, num_gpus, num_nodes, num_experts=None, expert_bytes=3 * 7168 * 2048,
         sender="local", strategy="best", nvlink_gbps=450.0, nic_gbps=50.0):
    """The transfers that turn placement `old` into `new`, and their schedule.

    Returns {"transfers": {column: numpy array}, "layers": {column: numpy array}}. Per transfer:
    layer, expert, src_rank, src_slot, dst_rank, dst_slot, bytes, link (0 NVLink, 1 NIC) and
    round (its round within its link's lane). Per changed layer: layer, nvlink_bytes,
    nic_bytes, local_copies, rounds, makespan_s and lower_bound_s (schedule.h defines both).
    sender: "local" (ours) or "vllm"; strategy: "best", "greedy-pairs" or "single-batch".
    """
    old_array = to_numpy(old, np.int64, "old")[0]
    new_array = to_numpy(new, np.int64, "new")[0]
    if num_experts is None:
        num_experts = int(max(old_array.max(initial=-1), new_array.max(initial=-1))) + 1
    return _eplb.plan(old_array, new_array, integer(num_gpus, "num_gpus"),
                      integer(num_nodes, "num_nodes"), integer(num_experts, "num_experts"),
                      integer(expert_bytes, "expert_bytes", maximum=_args.INT64_MAX),
                      _args.text(sender, "sender"), _args.text(strategy, "strategy"),
                      _args.real(nvlink_gbps, "nvlink_gbps", *_GBPS),
                      _args.real(nic_gbps, "nic_gbps", *_GBPS))


# A link's bandwidth in GB/s: 1 byte/s to 1 PB/s (the scenario's kMaxGbps), so that every
# transfer's time is finite (a subnormal bandwidth made it infinite).
_GBPS = (1e-9, 1e6)
