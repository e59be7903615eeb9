#!/usr/bin/python3
"""Writes the .pt fixtures of eplb's PyTorch-dump reader, with real torch (Debian's python3-torch).

Run once when a fixture changes: ``/usr/bin/python3 tests/data/torch/make_dumps.py``. The outputs
are committed, so that the C++ tests read dumps torch really wrote without needing torch.

* ``good/*.pt`` are dumps as the engines write them; ``expected.json`` holds the
  [steps, layers, experts] series torch itself computes for each (folded through the map where
  the dump counts per slot).
* ``bad/*.pt`` are dumps eplb must refuse; ``exploit/*.pt`` would run code in a reader that
  runs pickles (each payload creates /tmp/eplb-exploit-ran-NAME), which eplb must refuse without
  running anything.
"""

import io
import json
import os
import struct
import zipfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
MARKER = "/tmp/eplb-exploit-ran-{}"


def path(kind, name):
    os.makedirs(os.path.join(HERE, kind), exist_ok=True)
    return os.path.join(HERE, kind, name + ".pt")


def fold(physical, p2l):
    """[steps, layers, slots] -> [steps, layers, experts] through p2l [layers, slots]."""
    experts = int(p2l.max()) + 1
    out = torch.zeros(physical.shape[0], p2l.shape[0], experts, dtype=torch.float64)
    for layer in range(p2l.shape[0]):
        for slot in range(p2l.shape[1]):
            if p2l[layer, slot] >= 0:
                out[:, layer, p2l[layer, slot]] += physical[:, layer, slot].double()
    return out


def good():
    expected = {}
    g = torch.Generator().manual_seed(7)
    counts = torch.randint(0, 1000, (3, 2, 4), generator=g)
    # SGLang's stat mode (_StatAccumulator.dump): int64 counts, a float, an int.
    torch.save(dict(rank=0, logical_count=counts, average_utilization_rate_over_window=0.42),
               path("good", "sglang_stat"))
    expected["sglang_stat"] = counts.double()
    two_d = torch.randint(0, 50, (2, 4), generator=g, dtype=torch.int32)
    torch.save(dict(logical_count=two_d), path("good", "sglang_stat_2d"))
    expected["sglang_stat_2d"] = two_d.double().unsqueeze(0)
    # A strided view: torch saves the whole storage with the view's offset and strides.
    base = torch.arange(2 * 4 * 3 + 5, dtype=torch.float32)
    view = base[5:].reshape(2, 4, 3).transpose(1, 2)  # [2, 3, 4], not contiguous
    torch.save({"logical_count": view}, path("good", "strided_view"))
    expected["strided_view"] = view.double()
    half = torch.tensor([[[1.5, 2.0, 0.0, 3.25]]], dtype=torch.bfloat16)
    torch.save(collections_ordered({"logical_count": half}), path("good", "bfloat16_ordered"))
    expected["bfloat16_ordered"] = half.double()

    p2l = torch.tensor([[0, 1, 2, 3, 0, 1], [3, 2, 1, 0, 3, 2]])
    per_rank = torch.arange(3 * 2 * 2 * 6, dtype=torch.int32).reshape(3, 2, 2, 6)
    records = [dict(forward_pass_id=p, rank=r, gatherer_key="primary",
                    global_physical_count=per_rank[p, r]) for p in range(3) for r in range(2)]
    torch.save(dict(records=records, last_physical_to_logical_map=p2l), path("good", "per_pass"))
    expected["per_pass"] = fold(per_rank.sum(dim=1), p2l)

    topk = torch.tensor([[[0, 4], [5, -1]], [[3, 3], [2, 1]]])  # [layers, tokens, top-k]
    torch.save(dict(records=[dict(forward_pass_id=0, rank=0, topk_ids_of_layer=topk)],
                    last_physical_to_logical_map=p2l), path("good", "per_token"))
    physical = torch.tensor([[[1, 0, 0, 0, 1, 1], [0, 1, 1, 2, 0, 0]]])
    expected["per_token"] = fold(physical, p2l)

    window = torch.randint(0, 100, (5, 2, 6), generator=g)
    torch.save({"expert_load_window": window, "physical_to_logical_map": p2l},
               path("good", "vllm_window"))
    expected["vllm_window"] = fold(window, p2l)
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump({k: v.tolist() for k, v in expected.items()}, f, indent=None)
        f.write("\n")


def collections_ordered(d):
    import collections  # noqa: PLC0415
    return collections.OrderedDict(d)


def bad():
    p2l = torch.tensor([[0, 1, 2, 3]])
    torch.save({"logical_count": torch.ones(1, 2, 2, dtype=torch.complex64)},
               path("bad", "complex_counts"))
    torch.save({"logical_count": torch.ones(1, 2, 2, dtype=torch.bool)}, path("bad", "bool_counts"))
    torch.save({"expert_load_window": torch.ones(2, 1, 4), "physical_to_logical_map": p2l.float()},
               path("bad", "float_map"))
    torch.save(dict(records=[dict(forward_pass_id=0, topk_ids_of_layer=torch.tensor([[[0, 9]]]))],
                    last_physical_to_logical_map=p2l), path("bad", "topk_beyond_slots"))
    torch.save({"expert_load_window": torch.ones(1, 1, 2),
                "physical_to_logical_map": torch.tensor([[0, 30_000_000]])},
               path("bad", "huge_expert_id"))
    torch.save({"logical_count": -torch.ones(1, 2, 2, dtype=torch.int64)},
               path("bad", "negative_counts"))
    torch.save({"weights": torch.zeros(2)}, path("bad", "other_keys"))
    torch.save({}, path("bad", "empty_dict"))
    torch.save(dict(records=[], last_physical_to_logical_map=p2l), path("bad", "empty_records"))
    torch.save(dict(records=[5], last_physical_to_logical_map=p2l), path("bad", "record_not_dict"))
    torch.save(dict(records=[dict(forward_pass_id=0, global_physical_count=torch.ones(1, 4))]),
               path("bad", "records_without_map"))
    torch.save({"logical_count": torch.nn.Parameter(torch.ones(1, 2, 2))},
               path("bad", "parameter_counts"))
    torch.save({"logical_count": torch.ones(1, 2, 2)}, path("bad", "legacy_format"),
               _use_new_zipfile_serialization=False)


class _System:
    """Pickles as os.system(COMMAND): the classic code-running pickle."""

    def __init__(self, name):
        self.command = "touch " + MARKER.format(name)

    def __reduce__(self):
        return (os.system, (self.command,))


def _zip(name, pickled):
    """A .pt archive laid out as torch.save lays it out, around hand-made pickle bytes."""
    with zipfile.ZipFile(path("exploit", name), "w", zipfile.ZIP_STORED) as z:
        z.writestr(name + "/data.pkl", pickled)
        z.writestr(name + "/version", "3\n")


def _short(s):
    b = s.encode()
    return b"\x8c" + bytes([len(b)]) + b


def exploits():
    # GLOBAL posix.system as a value, and called through REDUCE beside a valid load.
    torch.save({"logical_count": torch.zeros(1, 2, 2), "x": os.system}, path("exploit", "global"))
    torch.save({"logical_count": torch.ones(1, 2, 2), "x": _System("reduce")},
               path("exploit", "reduce"))
    # Protocol 4 resolves dotted names: torch._utils / _rebuild_tensor.__builtins__.get is the
    # builtins' dict.get, and get('exec') is exec. The same dict holds a valid logical_count
    # (a torch-written one: BINPERSID storage and _rebuild_tensor_v2), so a reader that runs
    # pickles returns a good load and the code ran silently.
    code = f"import os; os.system('touch {MARKER.format('dotted')}')"
    exec_payload = (
        _short("torch._utils") + _short("_rebuild_tensor.__builtins__.get") + b"\x93"
        + _short("exec") + b"\x85R"   # get('exec') -> exec
        + _short(code) + b"\x85R"     # exec(code)
    )
    tensor = (
        _short("torch._utils") + _short("_rebuild_tensor_v2") + b"\x93"
        + b"("                                                    # the arguments' tuple
        + b"(" + _short("storage") + _short("torch") + _short("FloatStorage") + b"\x93"
        + _short("0") + _short("cpu") + b"K\x04t" + b"Q"          # storage '0' of 4 floats
        + b"K\x00"                                                # offset
        + b"K\x01K\x02K\x02\x87" + b"K\x04K\x02K\x01\x87"        # size, stride
        + b"\x89"                                                 # requires_grad
        + _short("collections") + _short("OrderedDict") + b"\x93)R"  # hooks
        + b"tR"
    )
    pickled = (b"\x80\x04}(" + _short("x") + exec_payload + _short("logical_count") + tensor
               + b"u.")
    with zipfile.ZipFile(path("exploit", "dotted"), "w", zipfile.ZIP_STORED) as z:
        z.writestr("dotted/data.pkl", pickled)
        z.writestr("dotted/data/0", struct.pack("<4f", 1, 2, 3, 4))
        z.writestr("dotted/version", "3\n")
    # A TorchScript archive: code/ and constants.pkl beside data.pkl.
    class Counts(torch.nn.Module):  # noqa: D401 - a fixture
        def __init__(self):
            super().__init__()
            self.logical_count = torch.ones(1, 2, 2)

        def forward(self, x):
            return x + self.logical_count

    torch.jit.save(torch.jit.script(Counts()), path("exploit", "torchscript"))
    # Pickle opcodes that build objects, for the reader's refusal of each.
    _zip("build", b"\x80\x02}(" + _short("logical_count") + b"]" + b"}b" + b"u.")
    _zip("newobj", b"\x80\x02}(" + _short("x") + b"cbuiltins\nobject\n)\x81" + b"u.")


def check_dotted_runs_in_python():
    """The dotted fixture is a real exploit: Python's own unpickler runs its code."""
    import pickle  # noqa: PLC0415

    marker = MARKER.format("dotted")
    if os.path.exists(marker):
        os.remove(marker)
    with zipfile.ZipFile(path("exploit", "dotted")) as z:
        data = z.read("dotted/data.pkl")
    unpickler = pickle.Unpickler(io.BytesIO(data))
    unpickler.persistent_load = lambda pid: torch.FloatStorage(4)
    loaded = unpickler.load()
    assert os.path.exists(marker) and loaded["x"] is None, "the dotted payload did not run"
    os.remove(marker)
    print("dotted: Python's unpickler runs it; logical_count", tuple(loaded["logical_count"].shape))


if __name__ == "__main__":
    good()
    bad()
    exploits()
    check_dotted_runs_in_python()
