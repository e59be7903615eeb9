"""Arrays in and out: numpy in gives numpy out, torch in gives torch out (on the input's device).

The C++ core works on numpy arrays in host memory. A torch tensor on the CPU is viewed as numpy
without a copy (``Tensor.numpy()``) when its dtype and layout already match; a CUDA tensor is
copied to the host once, and results go back to the device the input came from.
"""

import operator
import sys

import numpy as np


def _torch():
    """torch when the caller has imported it (no tensor exists otherwise), else None: eplb never
    pays torch's import for a numpy caller."""
    return sys.modules.get("torch")


def _same_dtype(tensor, dtype):
    """Whether `tensor` holds numpy's `dtype` (float32, float64 or int64) as it is."""
    torch = sys.modules["torch"]
    return tensor.dtype == {np.float32: torch.float32, np.float64: torch.float64,
                            np.int64: torch.int64}.get(dtype)


class Kind:
    """Where an input came from, so that outputs can go back the same way."""

    def __init__(self, is_torch, device=None):
        self.is_torch = is_torch
        self.device = device

    def out(self, array, dtype=None):
        """`array` (numpy) as this kind, with `dtype` given as a numpy dtype."""
        if dtype is not None and array.dtype != dtype:
            array = array.astype(dtype)
        if not self.is_torch:
            return array
        torch = _torch()
        tensor = torch.from_numpy(array if array.flags.c_contiguous else np.ascontiguousarray(array))
        if self.device is not None and self.device.type != "cpu":
            tensor = tensor.to(self.device)
        return tensor


# The largest count an argument may hold: the core takes them as C ints.
_INT_MAX = 2**31 - 1


def count(value, name, minimum=1, maximum=_INT_MAX):
    """`value` as a Python int within [minimum, maximum], or ValueError naming `name`.

    Integers only (Python, numpy or 0-d tensor ones): 20.9 replicas is a mistake, not 20.
    """
    if isinstance(value, bool):
        raise ValueError(f"{name} is {value!r}; expected an integer")
    try:
        n = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} is {value!r}; expected an integer") from None
    if not minimum <= n <= maximum:
        raise ValueError(f"{name} is {n}; it must be within [{minimum}, {maximum}]")
    return n


def group_count(num_groups):
    """Expert groups as the engines pass them: None or 0 mean 1 (no groups)."""
    return 1 if num_groups is None else count(num_groups, "num_groups", minimum=0) or 1


def to_numpy(value, dtype, name):
    """(`value` as a C-contiguous numpy array of `dtype`, its Kind).

    Every real dtype numpy or torch has is taken (torch's bfloat16 and lazily negated views
    included); complex and boolean values, and for an integer `dtype` values that are not whole
    numbers, are refused with ValueError naming `name`.
    """
    torch = _torch()
    if (torch is not None and type(value) is torch.Tensor and _same_dtype(value, dtype)
            and value.layout is torch.strided and value.device.type == "cpu"
            and not value.requires_grad and not value.is_neg()):
        # An engine's usual argument: a CPU tensor of the dtype wanted, viewed as it is.
        return np.ascontiguousarray(value.numpy()), Kind(True, value.device)
    if torch is not None and isinstance(value, torch.Tensor):
        kind = Kind(True, value.device)
        value = value.detach()
        if value.layout is not torch.strided or value.device.type == "meta":
            raise ValueError(f"{name} is a {value.layout} tensor on {value.device}; eplb reads "
                             "dense tensors that hold their values")
        if value.device.type != "cpu":
            value = value.cpu()
        if value.is_complex():
            raise ValueError(f"{name} is a complex tensor ({value.dtype}); expected real numbers")
        value = value.resolve_neg()  # a lazily negated view has no numpy equivalent
        if value.is_floating_point() and value.dtype not in (torch.float16, torch.float32,
                                                             torch.float64):
            value = value.to(torch.float64)  # bfloat16 and the 8-bit floats numpy lacks
        try:
            array = value.numpy()
        except (TypeError, RuntimeError) as e:
            raise ValueError(f"{name} is a {value.dtype} tensor that eplb cannot read: {e}") \
                from None
    else:
        kind = Kind(False)
        array = np.asarray(value)
    if array.dtype == object:
        raise TypeError(f"{name} must be a numeric array or tensor, not {type(value).__name__}")
    if array.dtype.kind == "c":
        raise ValueError(f"{name} has complex dtype {array.dtype}; expected real numbers")
    if array.dtype.kind not in "iuf":
        raise ValueError(f"{name} has dtype {array.dtype}; expected numbers")
    if np.issubdtype(dtype, np.integer) and array.dtype.kind == "f":
        whole = np.isfinite(array) & (np.abs(array) < 2.0**63)
        whole[whole] = array[whole] == np.round(array[whole])
        if not whole.all():
            where = tuple(int(i) for i in np.argwhere(~whole)[0])
            raise ValueError(f"{name}{list(where)} is {array[where]!r}; expected whole numbers "
                             "(slots and ranks are integers)")
    return np.ascontiguousarray(array, dtype=dtype), kind


def log2phy_of(phy2log, num_experts, width=None):
    """Each expert's slots, ascending, padded with -1 to `width` (default: the largest count).

    Returns (log2phy [layers, experts, width], logcnt [layers, experts]) as int64 numpy arrays.
    """
    from . import _eplb

    log2phy, logcnt = _eplb.log2phy(np.ascontiguousarray(phy2log, dtype=np.int64),
                                    count(num_experts, "num_experts"))
    if width is not None and width != log2phy.shape[2]:
        if width < log2phy.shape[2]:
            raise ValueError(f"width {width} is below the largest replica count "
                             f"{log2phy.shape[2]}")
        padded = np.full(log2phy.shape[:2] + (width,), -1, dtype=np.int64)
        padded[:, :, :log2phy.shape[2]] = log2phy
        log2phy = padded
    return log2phy, logcnt
