"""A Python function as eplb's policy (policy=fn in run_scenario, compare_policies, sweep).

The simulation runs in the eplb command's processes (SimGrid allows one simulated world per
process), so the function is served to them over the external-policy protocol
(docs/policy_protocol.md): this process listens on a Unix socket in a private temporary folder,
and the command eplb is given (--policy-command NAME=CMD) is a small relay between its own
stdin/stdout and that socket. Every simulation's relay gets its own connection; calls are made
one at a time, so the function need not be thread-safe.

The function has the engines' signature, vLLM's
    rebalance_experts(weight, num_replicas, num_groups, num_nodes, num_ranks,
                      old_global_expert_indices) -> phy2log [layers, num_replicas]
(DeepSeek's three outputs, (phy2log, log2phy, logcnt), are accepted too: the first is used);
weight is the window's load as a float64 numpy array [layers, experts] and
old_global_expert_indices the placement in force, int64 [layers, num_replicas] (-1: empty). A
function with a `lost_ranks` keyword gets the lost GPUs too. What it returns is checked here,
its shape and every id's range, before it is narrowed to the protocol's int32, then by eplb as a
user's program's output is: a bad placement, or any exception the function raises (sys.exit()
and KeyboardInterrupt included), stops the run with the step and what is wrong.
"""

import inspect
import os
import re
import shlex
import shutil
import socket
import struct
import sys
import tempfile
import threading

import numpy as np

from . import _args
from ._args import printable

_HEADER = struct.Struct("<4s10i")
# The longest path a Unix socket is bound to: Linux's sun_path, 108 bytes with the NUL that
# ends it (Python refuses 108).
_SOCKET_PATH_MAX = 107

# The relay eplb runs: the function's name, then its stdin to the socket and the socket to its
# stdout, until either ends.
_RELAY = """
import os, socket, sys, threading
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
name = sys.argv[2].encode()
s.sendall(len(name).to_bytes(4, "little") + name)  # which function
def up():
    while (b := os.read(0, 1 << 16)):
        s.sendall(b)
    s.shutdown(socket.SHUT_WR)
threading.Thread(target=up, daemon=True).start()
while (b := s.recv(1 << 16)):
    os.write(1, b)
"""


def _read(stream, n):
    data = stream.read(n)
    if len(data) != n:
        raise EOFError
    return data


def policy_name(fn, argument):
    """The label a function's policy gets in tables: its __name__, each character a policy's
    name cannot hold made '_' (a lambda is '_lambda_'; '+' too, which --policy-command's NAME=
    does not take), 'user-policy' when none is left. A __name__ that is still no policy's name
    ('..', '.x', over 100 characters: set so by hand) is refused, naming `argument`."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", getattr(fn, "__name__", "") or "")
    if not name or name == "_" * len(name):
        return "user-policy"
    return _args.policy_name(name, f"{argument}.__name__")


class PolicyServer:
    """Serves `functions` ({name: fn}) until closed; command(name) is what eplb runs."""

    def __init__(self, functions):
        self._functions = dict(functions)
        self._takes_lost = {n: "lost_ranks" in _parameters(f) for n, f in functions.items()}
        self._lock = threading.Lock()
        self._socket = None
        self._dir = tempfile.mkdtemp(prefix="eplb-policy-")
        # Any failure from here (a socket path too long for AF_UNIX under a deep TMPDIR, an
        # interrupt) would leave the folder behind, as no caller holds the server yet to close.
        try:
            self._path = os.path.join(self._dir, "socket")
            self._socket = socket.socket(socket.AF_UNIX)
            size = len(os.fsencode(self._path))
            if size > _SOCKET_PATH_MAX:  # Python's own error names neither the path nor a way out
                raise OSError(f"the socket serving a Python function's policy would be "
                              f"{printable(self._path)}, {size} bytes, over the "
                              f"{_SOCKET_PATH_MAX} a Unix socket's path may have; set TMPDIR "
                              "to a shorter folder")
            self._socket.bind(self._path)
            self._socket.listen()
            threading.Thread(target=self._accept, daemon=True).start()
        except BaseException:
            self.close()
            raise

    def command(self, name):
        relay = os.path.join(self._dir, "relay.py")
        if not os.path.exists(relay):
            with open(relay, "w") as f:
                f.write(_RELAY)
        return (f"{shlex.quote(sys.executable)} {shlex.quote(relay)} {shlex.quote(self._path)}"
                f" {shlex.quote(name)}")

    def close(self):
        if self._socket is not None:
            self._socket.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    def _accept(self):
        while True:
            try:
                conn, _ = self._socket.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        # The relay says which function first; the greeting is this side's.
        with conn, conn.makefile("rb") as rd, conn.makefile("wb") as wr:
            try:
                name = _read(rd, struct.unpack("<i", _read(rd, 4))[0]).decode()
                wr.write(struct.pack("<4si", b"EPLH", 1))
                wr.flush()
                while True:
                    head = rd.read(_HEADER.size)
                    if not head:
                        return
                    wr.write(self._answer(name, head, rd))
                    wr.flush()
            except (EOFError, OSError, ValueError):
                return

    def _answer(self, name, head, rd):
        magic, version, layers, experts, slots, gpus, nodes, _, groups, _, _ = \
            _HEADER.unpack(head)
        if magic != b"EPLB" or version != 1:
            raise ValueError("not eplb's protocol")
        lost = np.frombuffer(_read(rd, gpus), np.uint8).astype(bool)
        load = np.frombuffer(_read(rd, 8 * layers * experts), "<f8").reshape(layers, experts)
        old = np.frombuffer(_read(rd, 4 * layers * slots), "<i4").reshape(layers, slots)
        try:
            fn = self._functions[name]
            kwargs = {"lost_ranks": np.flatnonzero(lost)} if self._takes_lost[name] else {}
            with self._lock:
                out = fn(load.copy(), slots, groups, nodes, gpus, old.astype(np.int64), **kwargs)
            phy2log = _phy2log(out, name, layers, experts, slots)
        except _NotAPlacement as e:
            return _error(str(e))
        # BaseException: a function's sys.exit() or KeyboardInterrupt is its error like any
        # other; uncaught, it would end this thread, and eplb would see only the relay ending
        # without a reply.
        except BaseException as e:
            return _error(f"{name} raised {_described(e)}")
        return struct.pack("<4s3i", b"EPLR", 0, layers, slots) + phy2log.tobytes()


class _NotAPlacement(ValueError):
    """What the function returned is no placement of the request's shape and experts."""


def _phy2log(out, name, layers, experts, slots):
    """`out` as the reply's int32 phy2log, or _NotAPlacement naming what is wrong. The range is
    checked before narrowing: 2**32 + e would become e, and 2**32 - 1 an empty slot, neither of
    which eplb could see as wrong."""
    try:
        if isinstance(out, tuple):  # DeepSeek's three outputs: phy2log first
            out = out[0]
        if hasattr(out, "detach"):  # a torch tensor
            out = out.detach().cpu().numpy()
        out = np.asarray(out)
    except Exception as e:  # a ragged list, a tensor numpy has no dtype for
        raise _NotAPlacement(f"{name} returned {type(out).__name__}, which eplb cannot read "
                             f"as an array: {_described(e)}") from None
    if out.dtype.kind not in "iu" or out.shape != (layers, slots):
        raise _NotAPlacement(f"{name} returned {out.dtype} of shape {out.shape}; expected "
                             f"integers of shape ({layers}, {slots}), the physical-to-logical "
                             "map")
    # min and max first: argwhere alone costs about what the rest of a call does (~90 µs for
    # DeepSeek-V3's 58 x 288 slots).
    if out.size and (out.min() < -1 or out.max() >= experts):
        layer, slot = (int(i) for i in np.argwhere((out < -1) | (out >= experts))[0])
        raise _NotAPlacement(f"{name} returned a placement that is not valid: "
                             f"phy2log[{layer}][{slot}] is {int(out[layer, slot])}; valid "
                             f"values are -1 (empty) or 0..{experts - 1}")
    return out.astype("<i4")


def _described(e):
    """An exception as the error reply names it: "ValueError: my bug", "KeyboardInterrupt",
    "SystemExit(3)" (its exit code, which str() alone would give as a bare "3")."""
    try:
        if isinstance(e, SystemExit):
            return f"SystemExit({e.code!r})"
        text = str(e)
    except Exception:  # a message that cannot be written is no reason to lose the error
        text = ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _error(message):
    """The error reply: `message` on one line (eplb prints it as it comes, so a line break in
    an exception's text would forge a line of eplb's output), cut to the protocol's 65,536
    bytes at a character's end."""
    text = printable(message).encode()[:65536].decode(errors="ignore").encode()
    return struct.pack("<4s2i", b"EPLR", 1, len(text)) + text


def _parameters(fn):
    try:
        return inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}
