"""vLLM's policy interface (vllm/distributed/eplb/policy/, `AbstractEplbPolicy` and its
`DefaultEplbPolicy`, as on vLLM's main branch in 2026):

    @classmethod
    def rebalance_experts(cls, weight, num_replicas, num_groups, num_nodes, num_ranks,
                          old_global_expert_indices=None) -> torch.Tensor

returning physical_to_logical_map [layers, num_replicas] (int64, on the CPU whatever the weight's
device: vLLM's policy returns `torch.from_numpy(...)` and its `compute_logical_maps`, which every
caller runs next, asserts a CPU map; vLLM's test_device_compatibility[cuda] checks this).
`weight` is [layers, num_logical_experts]; `old_global_expert_indices` is the placement in force
(the old physical_to_logical_map). vLLM passes num_groups=0 for models without expert groups.

Drop-in: vLLM looks policies up in `vllm.distributed.eplb.policy.EPLB_POLICIES` by the name in
`--eplb-config '{"policy": ...}'`, and checks the names against a fixed list, so an eplb policy
takes the place of one of vLLM's before the engine starts:

    import vllm.distributed.eplb.policy as vllm_policies
    import eplb.vllm
    vllm_policies.EPLB_POLICIES["default"] = eplb.vllm.policy("migration-aware")

`EplbPolicy` itself serves `deepseek` as vLLM's default does: with an old placement of the same
shape, experts that stay on a GPU keep their slots (preserve_intragpu_slots after the policy).
It also offers the class methods that vLLM's default policy offers its callers and plugins, with
the same arguments and results as on vLLM's main branch: `balanced_packing`,
`replicate_experts`, `rebalance_experts_hierarchical` and `preserve_intragpu_slots` (which also
takes the earlier form that carries replica ranks along). They run in eplb's core with DeepSeek's
float32 arithmetic and torch's order of equal weights, where vLLM's numpy port sums packs in
float64 and sorts with numpy: where two packs or experts tie to within float32's precision, or
loads tie exactly, the two may choose differently, with the same balance. Subclasses that
override `balanced_packing` or `replicate_experts` do not change `rebalance_experts`, which runs
in the core. Numpy in gives numpy out, torch in gives torch out (rebalance_experts' torch out
is on the CPU, as vLLM's; the other methods keep their input's device).

vLLM asserts on bad arguments where eplb raises ValueError; every error these classes raise for
a bad argument is an `InvalidArgument`, which is both, with eplb's message.
"""

import functools
import inspect

import numpy as np

from . import _eplb
from ._args import ArgumentError, group_count, integer, text, yaml_value
from ._arrays import Kind as _Kind, to_numpy

try:  # when vLLM is installed, our classes are its AbstractEplbPolicy too
    from vllm.distributed.eplb.policy.abstract import AbstractEplbPolicy as _Base
except ImportError:
    _Base = object

# Policies that vLLM's default follows with preserve_intragpu_slots when it hands over the old
# placement. The old placement then need not be one eplb's policies could take (an expert
# without a slot, -1 slots): like vLLM's, the pass only matches experts by id.
_PRESERVED_AFTER = {"deepseek"}
# Policies that cannot run without the placement in force.
_NEEDS_CURRENT = {"incremental"}


class InvalidArgument(ArgumentError, AssertionError):
    """A bad argument: a ValueError (and TypeError, as every ArgumentError) for eplb's callers,
    an AssertionError for vLLM's, whose policy asserts on the same conditions."""


def _vllm_errors(method):
    """Raises the ValueErrors of `method` as InvalidArgument, keeping their message."""

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except InvalidArgument:
            raise
        except ValueError as error:
            raise InvalidArgument(str(error)) from None

    return wrapper


def _matrix(value, dtype, name, shape):
    array, kind = to_numpy(value, dtype, name)
    if array.ndim != 2:
        raise ValueError(f"{name} has shape {tuple(array.shape)}; expected {shape}")
    return array, kind


def _gather(values, source):
    """values[l, source[l, s]] for every (l, s), in the type, dtype and device `values` has."""
    if isinstance(values, np.ndarray) or not hasattr(values, "gather"):
        return np.take_along_axis(np.asarray(values), source, axis=1)
    import torch

    return values.gather(1, torch.from_numpy(source).to(values.device))


# The two forms of preserve_intragpu_slots: vLLM's main branch (2026) and the earlier one,
# whose numpy and torch variants named the old placement differently.
_P = inspect.Parameter
_PRESERVE_MAIN = inspect.Signature(
    [_P(name, _P.POSITIONAL_OR_KEYWORD) for name in ("phy2log", "num_ranks", "old_phy2log")])
_PRESERVE_WITH_RANKS = inspect.Signature(
    [_P(name, _P.POSITIONAL_OR_KEYWORD) for name in ("phy2log", "phy_replicas_idx", "num_ranks")] +
    [_P(name, _P.POSITIONAL_OR_KEYWORD, default=None)
     for name in ("old_phy2log", "old_global_expert_indices")])


class EplbPolicy(_Base):
    """vLLM's DefaultEplbPolicy, served by eplb's `policy_name` (default: deepseek)."""

    policy_name = "deepseek"
    options = {}

    @classmethod
    @_vllm_errors
    def rebalance_experts(cls, weight, num_replicas, num_groups, num_nodes, num_ranks,
                          old_global_expert_indices=None):
        array, kind = _matrix(weight, np.float64, "weight", "[layers, num_logical_experts]")
        num_replicas = integer(num_replicas, "num_replicas")
        old = None
        if old_global_expert_indices is not None:
            old = to_numpy(old_global_expert_indices, np.int64, "old_global_expert_indices")[0]
            # As vLLM: the old placement counts only when the slots did not change.
            if old.shape != (array.shape[0], num_replicas):
                old = None
        name = cls.policy_name
        if old is None and name in _NEEDS_CURRENT:
            raise ValueError(f"policy '{name}' needs old_global_expert_indices of shape "
                             f"[{array.shape[0]}, {num_replicas}]")
        preserve_after = old is not None and name in _PRESERVED_AFTER
        ranks = integer(num_ranks, "num_ranks")
        phy2log = _eplb.rebalance(array, num_replicas, ranks,
                                  integer(num_nodes, "num_nodes"), group_count(num_groups), name,
                                  None if preserve_after else old, 16, dict(cls.options))
        if preserve_after:
            source = _eplb.preserve_slots(old, phy2log, num_replicas // ranks)
            phy2log = np.take_along_axis(phy2log, source, axis=1)
        # On the CPU for a tensor on any device, as vLLM's (see the module's docstring).
        return _Kind(kind.is_torch).out(phy2log)

    @classmethod
    @_vllm_errors
    def balanced_packing(cls, weight, num_packs):
        """Each row's items [rows, n] into `num_packs` packs of n / num_packs items, heaviest
        first into the lightest pack: (pack_index, rank_in_pack), each [rows, n], int64."""
        array, kind = _matrix(weight, np.float32, "weight", "[rows, items]")
        pack_index, rank_in_pack = _eplb.balanced_packing(array, integer(num_packs, "num_packs"))
        return kind.out(pack_index), kind.out(rank_in_pack)

    @classmethod
    @_vllm_errors
    def replicate_experts(cls, weight, num_phy):
        """`num_phy` slots for each row's experts [rows, n], each extra one to the expert with
        the most load per replica: (phy2log [rows, num_phy], logcnt [rows, n]), int64."""
        array, kind = _matrix(weight, np.float32, "weight", "[rows, num_logical_experts]")
        phy2log, _, logcnt = _eplb.replicate_experts(array, integer(num_phy, "num_phy"))
        return kind.out(phy2log), kind.out(logcnt)

    @classmethod
    @_vllm_errors
    def rebalance_experts_hierarchical(cls, weight, num_physical_experts, num_groups, num_nodes,
                                       num_gpus):
        """DeepSeek's hierarchical policy: phy2log [layers, num_physical_experts], int64. Global
        balance is this with one group and one node."""
        array, kind = _matrix(weight, np.float32, "weight", "[layers, num_logical_experts]")
        groups, nodes = integer(num_groups, "num_groups"), integer(num_nodes, "num_nodes")
        if groups % nodes != 0:
            raise ValueError(f"num_groups is {groups}; the hierarchical policy needs a multiple "
                             f"of num_nodes ({nodes})")
        phy2log, _, _ = _eplb.deepseek_ranked(
            array, integer(num_physical_experts, "num_physical_experts"), groups, nodes,
            integer(num_gpus, "num_gpus"))
        return kind.out(phy2log)

    @classmethod
    @_vllm_errors
    def preserve_intragpu_slots(cls, phy2log, *args, **kwargs):
        """On each GPU, experts that stay keep their old slots; incoming ones fill the rest in
        the order `phy2log` lists them. Called as on vLLM's main branch,
        `(phy2log, num_ranks, old_phy2log) -> phy2log`, or in the earlier form that carries
        each slot's replica rank along, `(phy2log, phy_replicas_idx, num_ranks, old_phy2log)
        -> (phy2log, phy_replicas_idx)`. As vLLM's, it returns its inputs unchanged when
        num_ranks is not a positive divisor of the slots."""
        try:
            bound = _PRESERVE_MAIN.bind(phy2log, *args, **kwargs)
            with_ranks, replicas_idx = False, None
        except TypeError:
            bound = _PRESERVE_WITH_RANKS.bind(phy2log, *args, **kwargs)
            with_ranks, replicas_idx = True, bound.arguments["phy_replicas_idx"]
        arguments = bound.arguments
        old = arguments.get("old_phy2log")
        if old is None:
            old = arguments.get("old_global_expert_indices")
        if old is None:
            raise ValueError("preserve_intragpu_slots needs the old placement (old_phy2log)")
        num_ranks = integer(arguments["num_ranks"], "num_ranks", minimum=None, maximum=None)
        new, _ = _matrix(phy2log, np.int64, "phy2log", "[layers, slots]")
        unchanged = num_ranks <= 0 or new.shape[1] % num_ranks != 0
        if not unchanged:
            source = _eplb.preserve_slots(to_numpy(old, np.int64, "old_phy2log")[0], new,
                                          new.shape[1] // num_ranks)
            phy2log = _gather(phy2log, source)
            if with_ranks:
                if tuple(np.shape(replicas_idx)) != new.shape:
                    raise ValueError(f"phy_replicas_idx has shape {tuple(np.shape(replicas_idx))}"
                                     f"; it must be phy2log's, {new.shape}")
                replicas_idx = _gather(replicas_idx, source)
        return (phy2log, replicas_idx) if with_ranks else phy2log


def policy(name="deepseek", **options):
    """A class with vLLM's policy interface that runs eplb's policy `name` with `options`."""
    known = dict(_eplb.policies())
    name = text(name, "name")
    options = {key: yaml_value(value, key) for key, value in options.items()}
    if name not in known:
        raise ValueError(f"unknown policy '{name}'; the policies are: {', '.join(known)}")
    class_name = "Eplb" + "".join(part.title() for part in name.split("-")) + "Policy"
    return type(class_name, (EplbPolicy,), {"policy_name": name, "options": dict(options),
                                            "__doc__": f"vLLM policy interface over eplb's "
                                                       f"'{name}': {known[name]}"})
