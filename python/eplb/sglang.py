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
    any eplb policy            e.g. "migration-aware": run on the summed window and its chunks
Outputs as SGLang's DeepSeek algorithms return them: int64, on the CPU for the deepseek ones,
padded with -1 to the largest count. logical_to_physical_map lists each expert's slots by replica
rank for the deepseek ones, as DeepSeek's reference does, and ascending for the others.

Drop-in, in SGLang's eplb_algorithms/__init__.py or before the server starts:

    import sglang.srt.eplb.eplb_algorithms as algorithms
    import eplb.sglang
    algorithms.rebalance_experts = eplb.sglang.rebalance_experts
"""

import numpy as np

from . import _eplb
from ._args import group_count, integer, text
from ._arrays import Kind, log2phy_of, to_numpy

_SGLANG = {
    "deepseek": ("deepseek", False),
    "deepseek_hierarchical": ("deepseek", True),
    "deepseek_vec": ("timeseries", False),
    "deepseek_vec_hierarchical": ("timeseries", True),
}


def rebalance_experts(tokens_per_expert, num_physical_experts, num_local_physical_experts,
                      num_groups, num_nodes, algorithm):
    """SGLang's `rebalance_experts`; see the module comment."""
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
