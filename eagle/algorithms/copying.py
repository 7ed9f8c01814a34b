"""copy, copy_with_offset, fill_value and gather: prefix copies and fills into existing arrays, and gathers.

Destinations are float32/float64 arrays: a hawk kernel's outputs are float planes of the run's one float type,
so an integer destination, or a float destination of the other float width, cannot be written by a kernel yet
and is refused with a TypeError that says so (docs/algorithms.md lists what the language lacks). Integer
sources convert inside the kernel (uint64 included), as a store converts.
"""

from __future__ import annotations

import numpy as np

from eagle.algorithms import _kernels as K
from eagle.algorithms._common import as_index, float_run, host_array, plan, prefix
from eagle.array import Array

_MISSING = ("hawk kernels write float planes of one float type per run (no integer outputs, no float32/float64 "
            "conversion inside a run)")


def _destination(dst, who: str) -> np.ndarray:
    """The caller's array to write in place: NumPy (or an eagle.Array's memory), C-contiguous, writable, float."""
    d = dst.numpy() if isinstance(dst, Array) else dst
    if not isinstance(d, np.ndarray):
        raise TypeError(f"{who}: dst is written in place, so pass a NumPy array or an eagle.Array (got "
                        f"{type(dst).__name__})")
    if not d.flags.c_contiguous or not d.flags.writeable:
        raise ValueError(f"{who}: dst must be a writable C-contiguous array (pass np.ascontiguousarray(dst) and "
                         "read the result from it)")
    if d.dtype not in (np.float32, np.float64):
        raise TypeError(f"{who}: dst is {d.dtype}; only float32 and float64 destinations can be written for now: "
                        f"{_MISSING}")
    return d.reshape(-1)


def _store(src: np.ndarray, out: np.ndarray, who: str, target, threads) -> None:
    """out[i] = src[i] converted to out's dtype, by a kernel (out is a contiguous view into the caller's array)."""
    if out.size == 0:
        return
    if src.dtype.kind == "f":
        if src.dtype != out.dtype:
            raise TypeError(f"{who}: src is {src.dtype} but dst is {out.dtype}; copies between float widths are not "
                            f"built yet: {_MISSING}")
        plan(K.float_copy, target, threads).run(x=src, out=out)
    else:
        k, unsigned = as_index(src)
        plan(K.int_to_float_copy, target, threads).run(k=k, unsigned=unsigned, out=out)


def copy(src, dst, n: int | None = None, *, target: str | None = None, threads: int | None = None) -> None:
    """dst[i] = src[i] for i < n (n=None: src.size), in flat order, converting into dst's dtype on store.
    n past either array is a ValueError; later elements of dst are left alone."""
    s = host_array(src, "copy", "src")
    d = _destination(dst, "copy")
    count = s.size if n is None else n
    _store(prefix(s, count, "copy", "src"), prefix(d, count, "copy", "dst"), "copy", target, threads)


def copy_with_offset(src, dst, dst_offset: int, n: int | None = None, *, target: str | None = None,
                     threads: int | None = None) -> None:
    """dst[dst_offset + i] = src[i] for i < n (n=None: src.size); the span must lie inside dst (ValueError)."""
    s = host_array(src, "copy_with_offset", "src")
    d = _destination(dst, "copy_with_offset")
    if isinstance(dst_offset, bool) or not isinstance(dst_offset, (int, np.integer)) or dst_offset < 0:
        raise ValueError(f"copy_with_offset: dst_offset= takes a whole number >= 0, got {dst_offset!r}")
    count = s.size if n is None else n
    part = prefix(s, count, "copy_with_offset", "src")
    off = int(dst_offset)
    if off + part.size > d.size:
        raise ValueError(f"copy_with_offset: dst_offset={off} with n={part.size} reaches element "
                         f"{off + part.size - 1}, but dst has {d.size} elements")
    _store(part, d[off:off + part.size], "copy_with_offset", target, threads)


def fill_value(dst, value, n: int | None = None, *, target: str | None = None, threads: int | None = None) -> None:
    """dst[i] = value for i < n (n=None: dst.size), value converted to dst's float dtype as a store converts."""
    d = _destination(dst, "fill_value")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"fill_value: value must be a number, got {value!r}")
    out = prefix(d, n, "fill_value", "dst")
    if out.size:
        plan(K.float_fill, target, threads).run(value=value, out=out)


def gather(values, perm, n: int | None = None, *, target: str | None = None, threads: int | None = None) -> Array:
    """A new eagle.Array of n values (n=None: perm.size): out[i] = values[perm[i]]. n past either array is a
    ValueError, a perm entry outside values an IndexError; values are float32/float64 (TypeError otherwise)."""
    v = host_array(values, "gather", "values").reshape(-1)
    p = host_array(perm, "gather", "perm")
    if p.dtype.kind not in "iu":
        raise TypeError(f"gather: perm must hold integer positions, got {p.dtype}")
    count = p.size if n is None else n
    idx = prefix(p, count, "gather", "perm")
    prefix(v, count, "gather", "values")  # the bounds rule: n past any array involved is refused
    if v.dtype.kind != "f":
        raise TypeError(f"gather: values are {v.dtype}; only float32 and float64 values can be gathered for now: "
                        f"{_MISSING}")
    if idx.size == 0:
        return Array(np.zeros(0, v.dtype))
    lo, hi = int(idx.min()), int(idx.max())
    if lo < 0 or hi >= v.size:
        bad = lo if lo < 0 else hi
        raise IndexError(f"gather: perm holds position {bad}, outside values (0 <= position < {v.size})")
    lanes = np.zeros(v.size, np.int64)  # .at reads lanes of a plane as long as the run: perm padded to values'
    lanes[:idx.size] = idx
    out = plan(K.float_gather, target, threads).run(base=0, count=idx.size, values=float_run(v), perm=lanes)
    return Array(np.asarray(out)[:idx.size])
