"""Arrays in and out: numpy in gives numpy out, torch in gives torch out (on the input's device).

The C++ core works on numpy arrays in host memory. A torch tensor on the CPU is viewed as numpy
without a copy (``Tensor.numpy()``) when its dtype and layout already match; a CUDA tensor is
copied to the host once, and results go back to the device the input came from.
"""

import numpy as np


def _torch():
    try:
        import torch
    except ImportError:  # numpy-only installs never see a tensor
        return None
    return torch


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
        tensor = torch.from_numpy(np.ascontiguousarray(array))
        if self.device is not None and self.device.type != "cpu":
            tensor = tensor.to(self.device)
        return tensor


def to_numpy(value, dtype, name):
    """(`value` as a C-contiguous numpy array of `dtype`, its Kind)."""
    torch = _torch()
    if torch is not None and isinstance(value, torch.Tensor):
        kind = Kind(True, value.device)
        value = value.detach()
        if value.device.type != "cpu":
            value = value.cpu()
        array = value.numpy()
    else:
        kind = Kind(False)
        array = np.asarray(value)
    if array.dtype == object:
        raise TypeError(f"{name} must be a numeric array or tensor, not {type(value).__name__}")
    return np.ascontiguousarray(array, dtype=dtype), kind


def log2phy_of(phy2log, num_experts, width=None):
    """Each expert's slots, ascending, padded with -1 to `width` (default: the largest count).

    Returns (log2phy [layers, experts, width], logcnt [layers, experts]) as int64 numpy arrays.
    """
    from . import _eplb

    log2phy, logcnt = _eplb.log2phy(np.ascontiguousarray(phy2log, dtype=np.int64),
                                    int(num_experts))
    if width is not None and width != log2phy.shape[2]:
        if width < log2phy.shape[2]:
            raise ValueError(f"width {width} is below the largest replica count "
                             f"{log2phy.shape[2]}")
        padded = np.full(log2phy.shape[:2] + (width,), -1, dtype=np.int64)
        padded[:, :, :log2phy.shape[2]] = log2phy
        log2phy = padded
    return log2phy, logcnt
