"""SGLang's algorithm entry point (python/sglang/srt/eplb/eplb_algorithms/__init__.py, read on
SGLang's main branch in 2026):

    rebalance_experts(tokens_per_expert, num_physical_experts, num_local_physical_experts,
                      num_groups, num_nodes, algorithm) -> (physical_to_logical_map,
                                                            logical_to_physical_map,
                                                            expert_count)

`tokens_per_expert` is [steps, layers, logical experts] (the recorder's buffered window).
`algorithm` is one of SGLang's EplbAlgorithm members or names, or any eplb policy name:
    deepseek                   DeepSeek's global policy on the summed window (exactly)
    deepseek_hierarchical      DeepSeek's hierarchical policy (num_groups % num_nodes == 0)
    deepseek_vec[_hierarchical] eplb's `timeseries` over the time axis: the same goal as SGLang's
                               deepseek_vec (each extra replica where it most cuts the sum over
                               time of the largest load per replica), eplb's own algorithm
    topology_aware             SGLang's topology-aware placement (rebalance_experts_topology_aware
                               below), which reads the keywords tokens_per_source_expert and
                               rank_cost_matrix instead of tokens_per_expert
    any eplb policy            e.g. "migration-aware": run on the summed window and its chunks
Outputs as SGLang's DeepSeek algorithms return them: int64, on the CPU for the deepseek ones,
padded with -1 to the largest count. logical_to_physical_map lists each expert's slots by replica
rank for the deepseek ones, as DeepSeek's reference does, and ascending for the others.

Drop-in, in SGLang's eplb_algorithms/__init__.py or before the server starts:

    import sglang.srt.eplb.eplb_algorithms as algorithms
    import eplb.sglang
    algorithms.rebalance_experts = eplb.sglang.rebalance_experts
"""

import json
import os
import stat

import numpy as np

from . import _eplb
from ._args import ArgumentError, group_count, integer, optional, printable, quote, text
from ._arrays import Kind, _torch, log2phy_of, to_numpy

_SGLANG = {
    "deepseek": ("deepseek", False),
    "deepseek_hierarchical": ("deepseek", True),
    "deepseek_vec": ("timeseries", False),
    "deepseek_vec_hierarchical": ("timeseries", True),
}


def rebalance_experts(tokens_per_expert, num_physical_experts, num_local_physical_experts,
                      num_groups, num_nodes, algorithm, tokens_per_source_expert=None,
                      rank_cost_matrix=None):
    """SGLang's `rebalance_experts`; see the module comment."""
    if text(getattr(algorithm, "name", algorithm), "algorithm") == "topology_aware":
        if tokens_per_source_expert is None or rank_cost_matrix is None:
            raise ValueError("topology_aware needs source-rank expert counts "
                             "(tokens_per_source_expert [layers, source ranks, experts]) and "
                             "rank_cost_matrix [ranks, ranks]; tokens_per_expert has no sources")
        return rebalance_experts_topology_aware(
            tokens_per_source_expert, rank_cost_matrix,
            num_physical_experts=num_physical_experts,
            num_local_physical_experts=num_local_physical_experts)
    array, kind = to_numpy(tokens_per_expert, np.float64, "tokens_per_expert")
    if array.ndim != 3:
        raise ValueError(f"tokens_per_expert has shape {tuple(array.shape)}; expected "
                         "[steps, layers, logical experts]")
    if array.shape[0] == 0:
        raise ValueError("tokens_per_expert has no steps: its first dimension is 0")
    name = text(getattr(algorithm, "name", algorithm), "algorithm")  # a member or its name
    num_physical_experts = integer(num_physical_experts, "num_physical_experts")
    num_local_physical_experts = integer(num_local_physical_experts, "num_local_physical_experts")
    num_nodes = integer(num_nodes, "num_nodes")
    if num_physical_experts % num_local_physical_experts:
        raise ValueError(f"num_physical_experts ({num_physical_experts}) must be a multiple of "
                         f"num_local_physical_experts ({num_local_physical_experts})")
    num_gpus = num_physical_experts // num_local_physical_experts
    groups = group_count(num_groups)
    policy, hierarchical = _SGLANG.get(name, (name, True))
    if name == "elasticity_aware":
        raise NotImplementedError("elasticity_aware reads SGLang's live elastic-EP state; "
                                  "eplb serves the deepseek, deepseek_vec and eplb policies")
    if name == "deepseek_hierarchical" and groups % num_nodes:
        raise ValueError(f"deepseek_hierarchical needs num_groups ({groups}) to be a multiple of "
                         f"num_nodes ({num_nodes})")
    experts = array.shape[2]
    if policy == "deepseek":
        window = array.sum(axis=0)  # exact for counts; the policy reads it as float32, as SGLang
        phy2log, log2phy, logcnt = _eplb.deepseek_full(
            window, num_physical_experts, groups if hierarchical else 1,
            num_nodes if hierarchical else 1, num_gpus)
        out = Kind(kind.is_torch)  # SGLang's deepseek returns CPU tensors
        return out.out(phy2log), out.out(log2phy), out.out(logcnt)
    phy2log = _eplb.rebalance(array, num_physical_experts, num_gpus,
                              num_nodes if hierarchical else 1,
                              groups if hierarchical else 1, policy, None, 16, {})
    log2phy, logcnt = log2phy_of(phy2log, experts)
    return kind.out(phy2log), kind.out(log2phy), kind.out(logcnt)


def rebalance_experts_topology_aware(tokens_per_source_expert, rank_cost_matrix, *,
                                     num_physical_experts=None, num_local_physical_experts=None):
    """SGLang's `rebalance_experts_topology_aware` (eplb_algorithms/topology_aware.py), in eplb's
    C++ (core/include/eplb/policy/topology_aware.h): each logical expert on one rank, every rank
    with as many, chosen from the tokens each source rank sent each expert ([layers, source
    ranks, experts]) and the relative cost of a token from one rank to another ([ranks, ranks],
    zero diagonal). Returns (physical_to_logical_map [layers, experts], logical_to_physical_map
    [layers, experts, 1], expert_count [layers, experts]), int64, on the CPU (torch for torch
    input). More physical than logical experts raises NotImplementedError, as SGLang's does."""
    tokens, kind = to_numpy(tokens_per_source_expert, np.float64, "tokens_per_source_expert")
    costs, _ = to_numpy(rank_cost_matrix, np.float64, "rank_cost_matrix")
    num_physical_experts = optional(integer, num_physical_experts, "num_physical_experts")
    num_local_physical_experts = optional(integer, num_local_physical_experts,
                                          "num_local_physical_experts")
    if (tokens.ndim == 3 and num_physical_experts is not None
            and num_physical_experts > tokens.shape[2]):
        raise NotImplementedError(
            "topology-aware placement currently requires no redundant experts: "
            f"num_physical_experts is {num_physical_experts} for {tokens.shape[2]} logical experts")
    out = Kind(kind.is_torch)  # SGLang's returns CPU tensors
    return tuple(out.out(a) for a in _eplb.topology_aware(
        tokens, costs, num_physical_experts, num_local_physical_experts))


# What --eplb-topology holds, as its errors say it.
_TOPOLOGY_FORM = ('expected {"rank_cost_matrix": [[0, 1], [1, 0]]} or the matrix alone: ranks x '
                  'ranks finite non-negative costs, zero on the diagonal')


def load_rank_cost_matrix(topology, *, expected_num_ranks=None):
    """SGLang's `load_rank_cost_matrix` (sglang/srt/eplb/topology.py): the rank cost matrix of
    --eplb-topology, from a JSON file's path or its object ({"rank_cost_matrix": [[0, 1], [1,
    0]]}) or the matrix itself, checked as rebalance_experts_topology_aware checks it (square,
    `expected_num_ranks` ranks, finite, non-negative, zero diagonal). float64, as a torch tensor
    when the caller has imported torch (as SGLang's), else numpy. Every error names the file
    (when read from one), the field and what is valid."""
    where = ""  # an error's prefix: the file, when the matrix came from one
    if isinstance(topology, (str, bytes, os.PathLike)):
        path = printable(os.fsdecode(topology))
        where = f"EPLB topology file {path}: "
        data = _topology_json(topology, path)
    else:
        data = topology
    if isinstance(data, dict):
        if "rank_cost_matrix" not in data:
            raise ValueError(f"{where}topology JSON must contain rank_cost_matrix; it has keys "
                             f"{quote(list(data))}; {_TOPOLOGY_FORM}")
        data = data["rank_cost_matrix"]
    try:
        matrix, _ = to_numpy(data, np.float64, "rank_cost_matrix")
    except ArgumentError as e:
        raise ValueError(f"{where}rank_cost_matrix must be a rectangular numeric array: {e}; "
                         f"{_TOPOLOGY_FORM}") from None
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"{where}rank_cost_matrix must be square; it has shape "
                         f"{matrix.shape}; {_TOPOLOGY_FORM}")
    ranks = matrix.shape[0]
    expected = optional(integer, expected_num_ranks, "expected_num_ranks")
    try:
        # The core's checks, on one layer of one expert per rank: its messages name the value.
        _eplb.topology_aware(np.zeros((1, max(ranks, 1), max(ranks, 1))), matrix)
    except ValueError as e:
        raise ValueError(f"{where}{e}") from None
    if expected is not None and ranks != expected:
        raise ValueError(f"{where}rank_cost_matrix size does not match the EP group: "
                         f"matrix={ranks} expected={expected}")
    torch = _torch()
    return torch.from_numpy(matrix) if torch is not None else matrix


def _topology_json(topology, path):
    """The JSON document of the topology file at `topology` (`path` as errors print it)."""
    try:
        # Not blocking on open, and refusing what is no regular file: a FIFO or a device would
        # hang the caller or never end.
        fd = os.open(topology, os.O_RDONLY | os.O_NONBLOCK)
        with open(fd, encoding="utf-8") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ValueError(f"EPLB topology file {path} is not a regular file; "
                                 f"{_TOPOLOGY_FORM}")
            return json.load(f)
    except OSError as e:
        raise ValueError(f"unable to read EPLB topology file: {path}: {e.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"EPLB topology file is not valid JSON: {path}: {e}; "
                         f"{_TOPOLOGY_FORM}") from None
    except RecursionError:  # Python's JSON reader recurses once per level
        raise ValueError(f"EPLB topology file {path} nests arrays or objects deeper than "
                         f"Python's JSON reader can read; {_TOPOLOGY_FORM}") from None
