"""DeepSeek's calling convention (github.com/deepseek-ai/EPLB, eplb.py at d52c72d).

    from eplb.deepseek import rebalance_experts   # instead of: from eplb import rebalance_experts
    phy2log, log2phy, logcnt = rebalance_experts(weight, num_replicas, num_groups, num_nodes,
                                                 num_gpus)

The same placement as the reference for the same float32 weights, computed in C++. As in the
reference: weights are read as float32 on the CPU; the hierarchical policy runs when num_groups
is a multiple of num_nodes, the global one otherwise; the outputs are int64, on the CPU:
    phy2log [layers, num_replicas]  the logical expert in each slot
    log2phy [layers, experts, X]    each expert's slots, padded with -1; X = logcnt.max()
    logcnt  [layers, experts]       each expert's replica count
log2phy lists each expert's slots by replica rank, as the reference does: rank 0 is the
expert's own slot before replication, then its replicas in the order the policy made them.
Equal weights (an expert's replicas always tie) are ordered as torch's CPU sort orders them
where it sorts with libstdc++'s std::sort (torch 1.13, with which the golden outputs were made),
so log2phy matches the reference element for element there. Newer torch builds that sort
float32 with x86-simd-sort on AVX2/AVX-512 CPUs may order ties otherwise, and their log2phy
with them; phy2log and logcnt differ only where distinct experts' weights tie exactly.
torch in, torch out; numpy in, numpy out.
"""

import numpy as np

from . import _eplb
from ._args import integer
from ._arrays import Kind, to_numpy


def rebalance_experts(weight, num_replicas, num_groups, num_nodes, num_gpus):
    """DeepSeek's `rebalance_experts`: (phy2log, log2phy, logcnt); see the module comment."""
    array, kind = to_numpy(weight, np.float32, "weight")
    if array.ndim != 2:
        raise ValueError(f"weight has shape {array.shape}; expected [layers, num_logical_experts]")
    phy2log, log2phy, logcnt = _eplb.deepseek_full(array, integer(num_replicas, "num_replicas"),
                                                   integer(num_groups, "num_groups"),
                                                   integer(num_nodes, "num_nodes"),
                                                   integer(num_gpus, "num_gpus"))
    cpu = Kind(kind.is_torch)  # the reference returns CPU tensors whatever the input's device
    return cpu.out(phy2log), cpu.out(log2phy), cpu.out(logcnt)

