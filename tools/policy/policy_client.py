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
            out = policy(load, old, nodes=nodes, gpus=gpus, groups=groups, lost=lost, step=step)
            reply = struct.pack("<4s3i", b"EPLR", 0, layers, slots) + \
                _phy2log(out, layers, experts, slots).tobytes()
        except _NotAPlacement as e:
            reply = _error(str(e))
        # BaseException: the policy's sys.exit() or KeyboardInterrupt is its error like any
        # other, which eplb shows; uncaught, it would end this program mid-reply.
        except BaseException as e:
            reply = _error(f"the policy raised {_described(e)}")
        stdout.write(reply)
        stdout.flush()


class _NotAPlacement(ValueError):
    """What the policy returned is no placement of the request's shape and experts."""


def _phy2log(out, layers, experts, slots):
    """`out` as the reply's int32 phy2log, or _NotAPlacement naming what is wrong. The range is
    checked before narrowing: 2**32 + e would become e, and 2**32 - 1 an empty slot, neither of
    which eplb could see as wrong."""
    try:
        out = np.asarray(out)
    except Exception as e:  # a ragged list, an object numpy cannot hold
        raise _NotAPlacement(f"the policy returned {type(out).__name__}, which is no array: "
                             f"{_described(e)}") from None
    if out.dtype.kind not in "iu" or out.shape != (layers, slots):
        raise _NotAPlacement(f"the policy returned {out.dtype} of shape {out.shape}; expected "
                             f"integers of shape ({layers}, {slots})")
    # min and max first: argwhere alone costs about what the rest of a call does (~90 µs for
    # DeepSeek-V3's 58 x 288 slots).
    if out.size and (out.min() < -1 or out.max() >= experts):
        layer, slot = (int(i) for i in np.argwhere((out < -1) | (out >= experts))[0])
        raise _NotAPlacement(f"the policy returned a placement that is not valid: "
                             f"phy2log[{layer}][{slot}] is {int(out[layer, slot])}; valid "
                             f"values are -1 (empty) or 0..{experts - 1}")
    return out.astype("<i4")


def _described(e):
    """"ValueError: my bug", "KeyboardInterrupt", "SystemExit(3)" (str() gives a bare "3")."""
    try:
        if isinstance(e, SystemExit):
            return f"SystemExit({e.code!r})"
        text = str(e)
    except Exception:  # a message that cannot be written is no reason to lose the error
        text = ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _error(message):
    """The error reply: `message` on one line (eplb prints it as it comes: a line break in an
    exception's text would forge a line of its output), cut to 65,536 bytes at a character's
    end."""
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
    data = text.encode()[:65536].decode(errors="ignore").encode()
    return struct.pack("<4s2i", b"EPLR", 1, len(data)) + data


if __name__ == "__main__":
    serve(lambda load, old, **_: old)  # the identity policy: what `static` does
