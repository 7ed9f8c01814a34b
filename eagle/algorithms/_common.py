"""What every algorithm shares: deployed plans cached per kernel, target and threads; inputs flattened to the
first `n` values with the reference's bounds rule; integer inputs brought to the Index planes hawk reads.

Plans are kept at module level: a plan compiles once per dtype specialisation (and keeps it), so a second call
of a statistic on the same dtype and target launches at once.
"""

from __future__ import annotations

import os

import numpy as np

import eagle
from eagle.array import Array

_PLANS: dict[tuple, object] = {}
_TARGETS = {None: "host", "host": "host", "cpu": "host", "spirv": "spirv", "nvvm": "nvvm", "rocdl": "rocdl",
            "auto": "auto"}
FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
U64_WRAP = float(2**64)  # added to a uint64 read as int64 when its top bit is set


def plan(kernel, target: str | None, threads: int | None):
    """The deployed plan of `kernel` for a target and thread count (made once; $EAGLE_MIN_CHUNK is part of the key,
    since a plan reads it when made)."""
    tgt = resolve_target(target, kernel.name)
    key = (id(kernel), tgt, threads, os.environ.get("EAGLE_MIN_CHUNK", ""))
    p = _PLANS.get(key)
    if p is None:
        p = _PLANS[key] = eagle.deploy(kernel, target=tgt, threads=threads)
    return p


def resolve_target(target, who: str) -> str:
    """An eagle target name for `target=` (None is the host, where eagle.Array data lives)."""
    if isinstance(target, str) or target is None:
        t = _TARGETS.get(target)
        if t is not None:
            return t
    raise ValueError(f"{who}: target= is one of 'host', 'spirv', 'nvvm', 'rocdl' or 'auto', got {target!r}")


def host_array(data, who: str, name: str = "data") -> np.ndarray:
    """The NumPy array behind an input (an eagle.Array's own memory, or np.asarray of anything else)."""
    if isinstance(data, Array):
        return data.numpy()
    a = np.asarray(data)
    if a.dtype.kind not in "fiub":
        raise TypeError(f"{who}: {name} must hold numbers (floats, integers or booleans), got dtype {a.dtype}")
    return a


def prefix(a: np.ndarray, n, who: str, name: str = "data") -> np.ndarray:
    """The first `n` values of `a` in flat (row-major) order; n=None means all. A negative `n` or one past the
    array's size is a ValueError naming the function and the array."""
    flat = a.reshape(-1)  # a view for contiguous arrays, a copy otherwise
    if n is None:
        return flat
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"{who}: n= takes a whole number of elements, got {n!r}")
    if n < 0 or n > flat.size:
        raise ValueError(f"{who}: n={n} is outside {name}, which has {flat.size} elements (0 <= n <= "
                         f"{flat.size})")
    return flat[: int(n)]


def float_run(a: np.ndarray) -> np.ndarray:
    """A float input as the plane hawk reads: float32/float64 unchanged, float16 widened to float32 (exact)."""
    return a.astype(np.float32) if a.dtype == np.float16 else a


def as_index(a: np.ndarray) -> tuple[np.ndarray, float]:
    """An integer (or boolean) input as an Index plane, and what to add to a value read negative so that it
    converts to its unsigned value: int32/int64 as they are; uint64 read as int64 without a copy (2**64 added
    back where the top bit is set); narrower types and uint32 widened on the host, since Index planes are
    int32 or int64 only."""
    if a.dtype in (np.dtype(np.int32), np.dtype(np.int64)):
        return a, 0.0
    if a.dtype == np.uint64:
        return a.view(np.int64), U64_WRAP
    if a.dtype == np.uint32:
        return a.astype(np.int64), 0.0
    return a.astype(np.int32), 0.0


def is_float(a: np.ndarray) -> bool:
    return a.dtype.kind == "f"


def cell(out) -> float:
    """A one-value result as a Python float."""
    return float(np.asarray(out).reshape(-1)[0])


def destination(dst, who: str, writes: str) -> np.ndarray:
    """The caller's array a function writes in place, flat: NumPy (or an eagle.Array's memory), C-contiguous,
    writable, float32/float64 or integer. `writes` names what the function writes, for the dtype refusal."""
    d = dst.numpy() if isinstance(dst, Array) else dst
    if not isinstance(d, np.ndarray):
        raise TypeError(f"{who}: dst is written in place, so pass a NumPy array or an eagle.Array (got "
                        f"{type(dst).__name__})")
    if not d.flags.c_contiguous or not d.flags.writeable:
        raise ValueError(f"{who}: dst must be a writable C-contiguous array (pass np.ascontiguousarray(dst) and "
                         "read the result from it)")
    if d.dtype.kind not in "fiu" or d.dtype == np.float16:
        raise TypeError(f"{who}: dst is {d.dtype}; {writes} float32, float64 or integer arrays")
    return d.reshape(-1)
