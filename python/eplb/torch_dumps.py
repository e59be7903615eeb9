#!/usr/bin/python3
"""The serving engines' PyTorch dumps of expert load, as one [steps, layers, experts] series.

Reads, with ``torch.load(weights_only=True)`` (no code in a dump runs):

* SGLang's expert-distribution recorder (``SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR``):
  ``stat`` mode files hold ``logical_count`` [buffered steps, layers, logical experts] (a 2-D
  one is one step); several files are concatenated in file-name (time) order. ``per_pass`` and
  ``per_token`` mode files hold ``records`` (one per forward pass and rank, with
  ``global_physical_count`` [layers, physical slots], or per-token ``topk_ids_of_layer``
  [layers, tokens, top-k] of physical slots) and ``last_physical_to_logical_map``: ranks are
  summed per ``forward_pass_id`` and slots folded to logical experts through that map.
* vLLM's EPLB window saved as the README shows: ``expert_load_window`` [window, layers,
  physical slots] with ``physical_to_logical_map`` [layers, physical slots], folded the same
  way. (The window is a ring buffer; its order does not matter to a policy's sum.)

As a program (how the ``eplb`` command line calls it): ``torch_dumps.py PATH`` writes the series
to stdout as a safetensors file with one F64 tensor ``load``; errors go to stderr, exit code 2.
This file imports only torch and the standard library, so it runs without the eplb module.
"""

import glob
import json
import os
import pickle
import struct
import sys
import types


class DumpError(Exception):
    pass


def _torch():
    try:
        import torch  # noqa: PLC0415 - only the readers need it
    except ImportError as e:
        raise DumpError(
            "reading a PyTorch .pt dump needs torch: use Debian's /usr/bin/python3 with "
            "python3-torch (apt-get install python3-torch), or set EPLB_PYTHON to an "
            f"interpreter that has it ({sys.executable}: {e})"
        ) from e
    return torch


def _files(path):
    if os.path.isdir(path):
        files = sorted(glob.glob(os.path.join(path, "*.pt")))
        if not files:
            raise DumpError(
                f"{path}: a folder with neither TensorRT-LLM's meta_info.json nor any .pt dump"
            )
        return files
    return [path]


def _fold(physical, p2l, name):
    """[steps, layers, slots] per-slot counts -> [steps, layers, logical experts]."""
    torch = _torch()
    p2l = torch.as_tensor(p2l).long()
    if p2l.dim() != 2 or physical.shape[1:] != p2l.shape:
        raise DumpError(
            f"{name}: the per-slot load is {list(physical.shape)} but the physical-to-logical map "
            f"is {list(p2l.shape)}; expected [steps, layers, slots] and [layers, slots]"
        )
    if (p2l < -1).any():
        raise DumpError(f"{name}: the physical-to-logical map holds ids below -1")
    experts = int(p2l.max()) + 1
    steps, layers, _ = physical.shape
    out = torch.zeros((steps, layers, experts), dtype=torch.float64)
    valid = p2l >= 0
    for layer in range(layers):
        ids = p2l[layer][valid[layer]]
        out[:, layer, :].index_add_(1, ids, physical[:, layer, valid[layer]].double())
    return out


class _TensorsOnly(pickle.Unpickler):
    """Unpickles tensors, dtypes and plain containers; refuses every other global.

    torch.load(weights_only=True) does the same, but the one in Debian's torch 1.13 rejects
    pickled floats (opcode BINFLOAT), and every SGLang stat dump holds one."""

    def find_class(self, module, name):
        torch = _torch()
        # Decided on the names alone: looking an object up may import its module, which runs it.
        allowed = (
            (module == "collections" and name == "OrderedDict")
            or (module in ("torch._utils", "torch._tensor") and name.startswith("_rebuild_"))
            or (module == "torch" and (name == "Size" or name.endswith("Storage")
                                       or isinstance(getattr(torch, name, None), torch.dtype)))
            or (module == "torch.storage" and name in ("TypedStorage", "UntypedStorage"))
        )
        if not allowed:
            raise pickle.UnpicklingError(f"refused to load {module}.{name}: not a tensor")
        return super().find_class(module, name)


_tensors_only = types.SimpleNamespace(__name__="eplb_tensors_only", Unpickler=_TensorsOnly,
                                      load=pickle.load)


def _load(path):
    torch = _torch()
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as first:  # torch raises many kinds for a bad file
        if "Unsupported operand" not in str(first):
            raise DumpError(f"{path}: torch.load could not read it: {first}") from first
    # torch.load(pickle_module=...) would not do: torch 1.13 replaces any pickle_module by
    # pickle when weights_only is false. Its zip reader takes ours.
    serialization = torch.serialization
    try:
        with open(path, "rb") as f, serialization._open_zipfile_reader(f) as archive:
            return serialization._load(archive, "cpu", _tensors_only, encoding="utf-8")
    except Exception as e:
        raise DumpError(f"{path}: could not read it as tensors only: {e}") from e


def _per_pass(dumps, name):
    torch = _torch()
    counts = {}  # forward pass id -> summed [layers, slots]
    p2l = None
    for path, d in dumps:
        p2l = d["last_physical_to_logical_map"]
        slots = torch.as_tensor(p2l).shape[-1]
        for i, r in enumerate(d["records"]):
            if "global_physical_count" in r:
                c = torch.as_tensor(r["global_physical_count"]).double()
            elif "topk_ids_of_layer" in r:
                ids = torch.as_tensor(r["topk_ids_of_layer"]).long()
                c = torch.zeros((ids.shape[0], slots), dtype=torch.float64)
                for layer in range(ids.shape[0]):
                    row = ids[layer].flatten()
                    row = row[row >= 0]
                    c[layer] = torch.bincount(row, minlength=slots)[:slots].double()
            else:
                raise DumpError(
                    f"{path}: records[{i}] has neither global_physical_count nor "
                    "topk_ids_of_layer"
                )
            key = int(r["forward_pass_id"])
            counts[key] = counts[key] + c if key in counts else c
    physical = torch.stack([counts[k] for k in sorted(counts)])
    return _fold(physical, p2l, name)


def read_torch_dump(path):
    """The load series in ``path`` (a .pt file or a folder of them) as a float64 tensor."""
    torch = _torch()
    dumps = [(f, _load(f)) for f in _files(path)]
    kinds = set()
    for f, d in dumps:
        if not isinstance(d, dict):
            raise DumpError(f"{f}: holds a {type(d).__name__}; expected the dict an engine saves")
        if "logical_count" in d:
            kinds.add("stat")
        elif "records" in d and "last_physical_to_logical_map" in d:
            kinds.add("per_pass")
        elif "expert_load_window" in d and "physical_to_logical_map" in d:
            kinds.add("vllm")
        else:
            raise DumpError(
                f"{f}: has keys {sorted(map(str, d))}; expected SGLang's logical_count, or records "
                "with last_physical_to_logical_map, or vLLM's expert_load_window with "
                "physical_to_logical_map"
            )
    if len(kinds) != 1:
        raise DumpError(f"{path}: mixes dumps of several kinds ({', '.join(sorted(kinds))})")
    kind = kinds.pop()
    if kind == "stat":
        parts = []
        for f, d in dumps:
            lc = torch.as_tensor(d["logical_count"]).double()
            if lc.dim() == 2:
                lc = lc.unsqueeze(0)
            if lc.dim() != 3:
                raise DumpError(
                    f"{f}: logical_count is {list(lc.shape)}; expected [steps, layers, experts]"
                )
            parts.append(lc)
        if len({p.shape[1:] for p in parts}) != 1:
            raise DumpError(f"{path}: the dumps' logical_count shapes differ")
        return torch.cat(parts)
    if kind == "per_pass":
        return _per_pass(dumps, path)
    return torch.cat(
        [
            _fold(torch.as_tensor(d["expert_load_window"]).double(), d["physical_to_logical_map"], f)
            for f, d in dumps
        ]
    )


def _safetensors(load):
    data = load.contiguous().numpy().astype("<f8").tobytes()
    header = json.dumps(
        {"load": {"dtype": "F64", "shape": list(load.shape), "data_offsets": [0, len(data)]}}
    ).encode()
    header += b" " * (-len(header) % 8)
    return struct.pack("<Q", len(header)) + header + data


def main(argv):
    if len(argv) != 2:
        print(f"usage: {argv[0]} DUMP.pt|FOLDER", file=sys.stderr)
        return 2
    try:
        load = read_torch_dump(argv[1])
    except DumpError as e:
        print(e, file=sys.stderr)
        return 2
    sys.stdout.buffer.write(_safetensors(load))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
