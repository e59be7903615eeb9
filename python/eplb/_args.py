"""Every argument of the package checked once, here, as the command line checks its options.

Each check takes the value and the argument's name, and returns the value in the one type the
core takes, or raises ArgumentError with a message that names the argument, quotes the value
and says what is valid: "jobs is 1.9; expected an integer at least 0, not a float". The rules
are the command line's (tools/eplb/command.h): an integer is written as an integer (1.9, 2.0,
True, '3' and nan are none), a real is finite, a path is not an option (a name starting with
'-'), and None is no value where one is needed.
"""

import math
import numbers
import operator
import os
import re

# The largest count an argument may hold: the core takes them as C ints.
INT_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

class ArgumentError(TypeError, ValueError):
    """A bad argument. Both a TypeError (the value is of the wrong kind, Python's convention) and
    a ValueError (what the package raised for every bad argument before, and what vLLM's and
    SGLang's callers catch), so that either `except` sees it."""


# At most this many characters of a value are quoted, so that an error stays one line.
_QUOTED = 60


def quote(value):
    """`value` as an error quotes it: its repr, cut to a line."""
    text = repr(value)
    return text if len(text) <= _QUOTED else text[:_QUOTED - 3] + "..."


def printable(text):
    """`text` (a path, or what a file or a user's function said) whole, with every character a
    terminal acts on written as a repr writes it (\\n, \\x1b, \\u202e): what a file or its name
    holds cannot forge a line of output or move the cursor. The C++ readers' Excerpt
    (base/excerpt.h) does the same for theirs."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def _range_text(minimum, maximum):
    if minimum is None and maximum is None:
        return ""
    if maximum is None:
        return f"at least {minimum}"
    if minimum is None:
        return f"at most {maximum}"
    return f"within [{minimum}, {maximum}]"


def _kind(value):
    name = type(value).__name__
    return f"an {name}" if name[:1] in "aeiou" else f"a {name}"


def integer(value, name, minimum=1, maximum=INT_MAX):
    """`value` as a Python int within [minimum, maximum] (None: unbounded there).

    Integers only: Python and numpy integers, and 0-d integer tensors (they have __index__). A
    bool is no count, nor is a float even when whole (20.9 replicas is a mistake, not 20), nor a
    string: the command line's `--jobs 2.0` and `--jobs abc` are refused too.
    """
    bounds = _range_text(minimum, maximum)
    want = "expected an integer" + (" " + bounds if bounds else "")
    if value is None:
        raise ArgumentError(f"{name} is None; {want}")
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        raise ArgumentError(f"{name} is {value!r}; {want}, not a bool")
    try:
        n = operator.index(value)
    except TypeError:
        raise ArgumentError(f"{name} is {quote(value)}; {want}, not {_kind(value)}") from None
    if (minimum is not None and n < minimum) or (maximum is not None and n > maximum):
        raise ArgumentError(f"{name} is {n}; it must be {bounds}")
    return n


def real(value, name, minimum=None, maximum=None, above=None):
    """`value` as a finite Python float within [minimum, maximum] and above `above` (None: no
    bound). Python and numpy reals and integers are taken; bools, strings and complex numbers
    are not, nor nan or an infinity."""
    parts = []
    if above is not None:
        parts.append(f"above {above}")
    if minimum is not None or maximum is not None:
        parts.append(_range_text(minimum, maximum))
    want = "expected a finite number" + (" " + " and ".join(parts) if parts else "")
    if value is None:
        raise ArgumentError(f"{name} is None; {want}")
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentError(f"{name} is {quote(value)}; {want}, not {_kind(value)}")
    x = float(value)
    if (not math.isfinite(x) or (minimum is not None and x < minimum)
            or (maximum is not None and x > maximum) or (above is not None and x <= above)):
        raise ArgumentError(f"{name} is {quote(value)}; {want}")
    return x


def flag(value, name):
    """`value` as a bool: True or False (numpy's too), not a truthy string or number."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return bool(value)
    raise ArgumentError(f"{name} is {quote(value)} ({_kind(value)}); expected True or False")


def text(value, name, choices=None):
    """`value` as a str (one of `choices` when given)."""
    if not isinstance(value, str):
        want = f"one of {', '.join(choices)}" if choices else "a string"
        raise ArgumentError(f"{name} is {quote(value)} ({_kind(value)}); expected {want}")
    if choices is not None and value not in choices:
        raise ArgumentError(f"{name} is {quote(value)}; expected one of {', '.join(choices)}")
    return value


def path(value, name, for_command=True):
    """`value` (a str, bytes or os.PathLike) as a str path. Refused: None, a value of another
    type, an empty path, a NUL byte, and (`for_command`: a path passed on to the eplb command) a
    name starting with '-', which the command would read as an option ('--help'); write './-x'
    for a file named so."""
    if value is None:
        raise ArgumentError(f"{name} is None; expected a path")
    if not isinstance(value, (str, bytes, os.PathLike)):
        raise ArgumentError(f"{name} is {quote(value)} ({_kind(value)}); expected a path "
                        "(str or os.PathLike)")
    p = os.fspath(value)
    if isinstance(p, bytes):
        p = os.fsdecode(p)
    if not p:
        raise ArgumentError(f"{name} is empty; expected a path")
    if "\0" in p:
        raise ArgumentError(f"{name} is {quote(p)}, which holds a NUL byte; no file is named so")
    if for_command and p.startswith("-"):
        raise ArgumentError(f"{name} is {quote(p)}, which reads as an option, not a path; write "
                         f"'./{p}' for a file named so")
    return p


def optional(check, value, *args, **kwargs):
    """None, or `value` checked by `check`."""
    return None if value is None else check(value, *args, **kwargs)


# The longest timeout: Python's clocks overflow past ~9.2e9 s (OverflowError, naming nothing).
TIMEOUT_MAX = 10**9


def timeout(value, name="timeout"):
    """Seconds to wait, a finite number above 0 and at most TIMEOUT_MAX (~31 years), or None for
    no limit."""
    return optional(real, value, name, maximum=TIMEOUT_MAX, above=0)


def one_line(value, name):
    """`value`, a str passed to eplb as (part of) one argument: no line break, no NUL byte (the
    system refuses those in an argument, naming nothing)."""
    for bad, what in (("\0", "a NUL byte"), ("\n", "a line break"), ("\r", "a line break")):
        if bad in value:
            raise ArgumentError(f"{name} is {quote(value)}, which holds {what}; a value is one "
                                "line")
    return value


def overrides(value, name="set"):
    """`--set` overrides as "key.path=value" strings, from None, one such string, a list of
    them, or a dict {"key.path": value}."""
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if isinstance(value, dict):
        out = []
        for key, v in value.items():
            if not isinstance(key, str) or not key or "=" in key:
                raise ArgumentError(f"{name}: key {quote(key)} is not a field's key.path")
            one_line(key, f"{name} key")
            out.append(f"{key}={yaml_value(v, f'{name}[{key!r}]')}")
        return out
    if isinstance(value, (bytes, numbers.Number)) or not hasattr(value, "__iter__"):
        raise ArgumentError(f"{name} is {quote(value)} ({_kind(value)}); expected "
                        "{'key.path': value} or ['key.path=value', ...]")
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise ArgumentError(f"{name}[{i}] is {quote(item)} ({_kind(item)}); expected a "
                            "'key.path=value' string (or pass a dict {'key.path': value})")
        key, eq, _ = item.partition("=")
        if not eq or not key.strip():
            raise ArgumentError(f"{name}[{i}] is {quote(item)}; expected 'key.path=value'")
        out.append(one_line(item, f"{name}[{i}]"))
    return out


def yaml_value(value, name):
    """`value` as `eplb --set` and `--vary` read it: a bool, a finite number or a string."""
    if value is None:  # str() would send the string "None"
        raise ArgumentError(f"{name} is None; an override needs a value (leave the key out to "
                         "keep the scenario's)")
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return repr(real(value, name))  # repr: every digit of the float
    if isinstance(value, str):
        return one_line(value, name)
    raise ArgumentError(f"{name} is {quote(value)} ({_kind(value)}); expected a bool, a "
                    "finite number or a string")


def names(values, name):
    """Comma-separated names from a list of strings or "a,b": none empty, none with a comma."""
    if isinstance(values, bytes):
        values = os.fsdecode(values)
    if isinstance(values, str):
        values = values.split(",")
    elif isinstance(values, numbers.Number) or not hasattr(values, "__iter__"):
        raise ArgumentError(f"{name} is {quote(values)} ({_kind(values)}); expected names, "
                        "a list of strings or 'a,b'")
    values = list(values)
    for i, v in enumerate(values):
        if not isinstance(v, str):
            raise ArgumentError(f"{name}[{i}] is {quote(v)} ({_kind(v)}); expected a name")
        one_line(v, f"{name}[{i}]")
    if not values:
        raise ArgumentError(f"{name}: the list is empty; name at least one, or pass None")
    if any("," in v or not v.strip() for v in values):
        raise ArgumentError(f"{name}: {quote(values)} has an empty name or one with a comma")
    return ",".join(values)


# A policy's name becomes the folder of its runs in a comparison (policies/NAME), so it is one
# safe path component: the rule of IsSafePathComponent (core/src/base/file_io.cpp), in ASCII
# whatever this process's locale. Checked when the name is given, not when eplb comes to write
# the folder ('..' and '.' would otherwise fail only then).
_POLICY_NAME = re.compile(r"[A-Za-z0-9._+-]{1,100}")
POLICY_NAME_RULE = ("a policy's name is 1 to 100 of letters, digits, '.', '_', '-' and '+', not "
                    "starting with '.'")


def policy_name(value, name):
    """`value`, a name given to a policy (a recording's, a function's), as eplb takes it."""
    if not isinstance(value, str):
        raise ArgumentError(f"{name} is {quote(value)} ({_kind(value)}); expected a string: "
                            f"{POLICY_NAME_RULE}")
    if not _POLICY_NAME.fullmatch(value) or value.startswith("."):
        # The length too: quote() cuts a long name, which would hide what is wrong with it.
        size = f" ({len(value)} characters)" if len(value) > 100 else ""
        raise ArgumentError(f"{name} is {quote(value)}{size}, which cannot name a policy (nor "
                            f"the folder of its runs); {POLICY_NAME_RULE}")
    return value


def seeds(values, name="seeds"):
    """Seeds as `--seeds` takes them: non-negative integers (a list, one, or "1,2")."""
    if isinstance(values, str):
        parts = values.split(",")
        for i, part in enumerate(parts):
            if not part.isdigit() or not part.isascii():
                raise ArgumentError(f"{name}[{i}] is {quote(part)}; a seed is written in decimal "
                                 "digits alone")
        return ",".join(str(int(p)) for p in parts)
    if not hasattr(values, "__iter__"):
        values = [values]
    out = [integer(v, f"{name}[{i}]", minimum=0, maximum=2**64 - 1)
           for i, v in enumerate(values)]
    if not out:
        raise ArgumentError(f"{name}: the list is empty; name at least one, or pass None")
    return ",".join(map(str, out))


def frames(value, name="frames"):
    """None (DataFrames when pandas is installed), True or False."""
    return None if value is None else flag(value, name)


def group_count(num_groups):
    """Expert groups as the engines pass them: None or 0 mean 1 (no groups)."""
    return 1 if num_groups is None else integer(num_groups, "num_groups", minimum=0) or 1
