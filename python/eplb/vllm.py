"""vLLM's policy interface (vllm/distributed/eplb/policy/abstract.py, `AbstractEplbPolicy`, as
documented for vLLM's main branch in May 2026):

    @classmethod
    def rebalance_experts(cls, weight, num_replicas, num_groups, num_nodes, num_ranks,
                          old_global_expert_indices=None) -> torch.Tensor

returning physical_to_logical_map [layers, num_replicas] (int64, on the weight's device).
`weight` is [layers, num_logical_experts]; `old_global_expert_indices` is the placement in force
(the old physical_to_logical_map). vLLM passes num_groups=0 for models without expert groups.

Drop-in: vLLM looks policies up in `vllm.distributed.eplb.policy.EPLB_POLICIES` by the name in
`--eplb-config '{"policy": ...}'`, and checks the names against a fixed list, so an eplb policy
takes the place of one of vLLM's before the engine starts:

    import vllm.distributed.eplb.policy as vllm_policies
    import eplb.vllm
    vllm_policies.EPLB_POLICIES["default"] = eplb.vllm.policy("migration-aware")

`EplbPolicy` itself serves `deepseek` as vLLM's default does: with an old placement of the same
shape, experts that stay on a GPU keep their slots (`deepseek-preserve`, vLLM's
preserve_intragpu_slots).
"""

import numpy as np

from . import _eplb
from ._arrays import count, group_count, to_numpy

try:  # when vLLM is installed, our classes are its AbstractEplbPolicy too
    from vllm.distributed.eplb.policy.abstract import AbstractEplbPolicy as _Base
except ImportError:
    _Base = object

# The policy that takes a placement-preserving form when vLLM hands over the old placement.
_PRESERVING = {"deepseek": "deepseek-preserve"}
# Policies that cannot run without the placement in force.
_NEEDS_CURRENT = {"incremental"}


class EplbPolicy(_Base):
    """vLLM's AbstractEplbPolicy, served by eplb's `policy_name` (default: deepseek)."""

    policy_name = "deepseek"
    options = {}

    @classmethod
    def rebalance_experts(cls, weight, num_replicas, num_groups, num_nodes, num_ranks,
                          old_global_expert_indices=None):
        array, kind = to_numpy(weight, np.float64, "weight")
        if array.ndim != 2:
            raise ValueError(
                f"weight has shape {tuple(array.shape)}; expected [layers, num_logical_experts]")
        old = None
        if old_global_expert_indices is not None:
            old = to_numpy(old_global_expert_indices, np.int64, "old_global_expert_indices")[0]
            # As vLLM: the old placement counts only when the slots did not change.
            if old.shape != (array.shape[0], num_replicas):
                old = None
        name = cls.policy_name
        if old is not None:
            name = _PRESERVING.get(name, name)
        elif name in _NEEDS_CURRENT:
            raise ValueError(f"policy '{name}' needs old_global_expert_indices of shape "
                             f"[{array.shape[0]}, {num_replicas}]")
        groups = group_count(num_groups)
        phy2log = _eplb.rebalance(array, count(num_replicas, "num_replicas"),
                                  count(num_ranks, "num_ranks"), count(num_nodes, "num_nodes"),
                                  groups, name, old, 16, dict(cls.options))
        return kind.out(phy2log)


def policy(name="deepseek", **options):
    """A class with vLLM's policy interface that runs eplb's policy `name` with `options`."""
    known = dict(_eplb.policies())
    if name not in known:
        raise ValueError(f"unknown policy '{name}'; the policies are: {', '.join(known)}")
    class_name = "Eplb" + "".join(part.title() for part in name.split("-")) + "Policy"
    return type(class_name, (EplbPolicy,), {"policy_name": name, "options": dict(options),
                                            "__doc__": f"vLLM policy interface over eplb's "
                                                       f"'{name}': {known[name]}"})
