"""Arrays in and out: numpy in gives numpy out, torch in gives torch out (on the input's device).

The C++ core works on numpy arrays in host memory. A torch tensor on the CPU is viewed as numpy
without a copy (``Tensor.numpy()``) when its dtype and layout already match; a CUDA tensor is
copied to the host once, and results go back to the device the input came from.
"""

import sys

import numpy as np

from ._args import ArgumentError, integer


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


def to_numpy(value, dtype, name):
    """(`value` as a C-contiguous numpy array of `dtype`, its Kind).

    Every real dtype numpy or torch has is taken (torch's bfloat16 and lazily negated views
    included); complex and boolean values, and for an integer `dtype` values that are not whole
    numbers, are refused with ArgumentError (a ValueError) naming `name`.
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
            raise ArgumentError(f"{name} is a {value.layout} tensor on {value.device}; eplb "
                                "reads dense tensors that hold their values")
        if value.device.type != "cpu":
            value = value.cpu()
        if value.is_complex():
            raise ArgumentError(f"{name} is a complex tensor ({value.dtype}); expected real "
                                "numbers")
        value = value.resolve_neg()  # a lazily negated view has no numpy equivalent
        if value.is_floating_point() and value.dtype not in (torch.float16, torch.float32,
                                                             torch.float64):
            value = value.to(torch.float64)  # bfloat16 and the 8-bit floats numpy lacks
        try:
            array = value.numpy()
        except (TypeError, RuntimeError) as e:
            raise ArgumentError(f"{name} is a {value.dtype} tensor that eplb cannot read: {e}") \
                from None
    else:
        kind = Kind(False)
        try:
            array = np.asarray(value)
        except (TypeError, ValueError) as e:  # a ragged list, an object numpy cannot hold
            raise ArgumentError(f"{name} is not an array of numbers: {e}") from None
    if array.dtype == object:
        raise ArgumentError(f"{name} must be a numeric array or tensor, not "
                            f"{type(value).__name__}")
    if array.dtype.kind == "c":
        raise ArgumentError(f"{name} has complex dtype {array.dtype}; expected real numbers")
    if array.dtype.kind not in "iuf":
        raise ArgumentError(f"{name} has dtype {array.dtype}; expected numbers")
    if np.issubdtype(dtype, np.integer) and array.dtype.kind == "f":
        flat = array.reshape(-1)  # a 0-d array too
        whole = np.isfinite(flat) & (np.abs(flat) < 2.0**63)
        whole[whole] = flat[whole] == np.round(flat[whole])
        if not whole.all():
            where = np.unravel_index(int(np.argmin(whole)), array.shape)
            where = tuple(int(i) for i in where)
            raise ArgumentError(f"{name}{list(where)} is {float(array[where])!r}; expected "
                                "whole numbers (slots, experts and ranks are integers)")
    if (np.issubdtype(dtype, np.integer) and array.dtype.kind == "u" and array.size
            and int(array.max()) > np.iinfo(dtype).max):
        where = tuple(int(i) for i in np.unravel_index(int(array.argmax()), array.shape))
        raise ArgumentError(f"{name}{list(where)} is {int(array[where])}; it does not fit in "
                            f"{np.dtype(dtype).name}")
    return np.ascontiguousarray(array, dtype=dtype), kind


def log2phy_of(phy2log, num_experts, width=None):
    """Each expert's slots, ascending, padded with -1 to `width` (default: the largest count).

    Returns (log2phy [layers, experts, width], logcnt [layers, experts]), int64, as numpy for
    numpy input and torch for torch input. phy2log holds whole numbers (-1: an empty slot); a
    fraction, a nan or a complex number is refused, naming its position.
    """
    from . import _eplb

    array, kind = to_numpy(phy2log, np.int64, "phy2log")
    log2phy, logcnt = _eplb.log2phy(array, integer(num_experts, "num_experts"))
    if width is not None:
        width = integer(width, "width", minimum=0)
        if not log2phy.shape[2] <= width <= max(array.shape[1], log2phy.shape[2]):
            raise ArgumentError(f"width is {width}; it must be within [{log2phy.shape[2]}, "
                                f"{array.shape[1]}]: at least the largest replica count, at "
                                "most the slots")
        if width > log2phy.shape[2]:
            padded = np.full(log2phy.shape[:2] + (width,), -1, dtype=np.int64)
            padded[:, :, :log2phy.shape[2]] = log2phy
            log2phy = padded
    return kind.out(log2phy), kind.out(logcnt)
