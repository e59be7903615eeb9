"""eplb's external-policy protocol, the policy's side (docs/policy_protocol.md).

    from policy_client import serve
    serve(lambda load, old, **topology: old)      # never moves anything

eplb starts the program once per run (--policy-command 'python3 my_policy.py') and sends a
request per rearrangement on stdin; `serve` answers each with policy(load, old, ...)'s placement.
Print nothing else on stdout: use stderr.
"""
import struct
import sys

import numpy as np

HEADER = struct.Struct("<4s10i")  # "EPLB", version, layers, experts, slots, gpus, nodes,
#                                    slots_per_gpu, groups, step, reserved


def serve(policy, stdin=sys.stdin.buffer, stdout=sys.stdout.buffer):
    """policy(load [layers, experts] float64, old [layers, slots] int32, *, nodes, gpus, groups,
    lost [gpus] bool, step) returns phy2log [layers, slots] of ints (-1: an empty slot)."""
    stdout.write(struct.pack("<4si", b"EPLH", 1))  # ready: what came before is not a call's time
    stdout.flush()
    while (head := stdin.read(HEADER.size)):
        (magic, version, layers, experts, slots, gpus, nodes, _, groups, step,
         _) = HEADER.unpack(head)
        assert magic == b"EPLB" and version == 1, f"not eplb's protocol: {head!r}"
        lost = np.frombuffer(stdin.read(gpus), np.uint8).astype(bool)
        load = np.frombuffer(stdin.read(8 * layers * experts), "<f8").reshape(layers, experts)
        old = np.frombuffer(stdin.read(4 * layers * slots), "<i4").reshape(layers, slots)
        try:
            out = np.asarray(policy(load, old, nodes=nodes, gpus=gpus, groups=groups, lost=lost,
                                    step=step))
            if out.dtype.kind not in "iu" or out.ndim != 2:
                raise TypeError(f"the policy returned {out.dtype} of shape {out.shape}; "
                                f"expected integers of shape ({layers}, {slots})")
            reply = struct.pack("<4s3i", b"EPLR", 0, *out.shape) + out.astype("<i4").tobytes()
        except Exception as e:  # shown to the user by eplb, which stops the run
            text = f"{type(e).__name__}: {e}".encode()[:65536]
            reply = struct.pack("<4s2i", b"EPLR", 1, len(text)) + text
        stdout.write(reply)
        stdout.flush()


if __name__ == "__main__":
    serve(lambda load, old, **_: old)  # the identity policy: what `static` does
