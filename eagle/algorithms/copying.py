"""copy, copy_with_offset, fill_value and gather: prefix copies and fills into existing arrays, and gathers.

Destinations are float32/float64 arrays (float planes) or integer arrays (integer output planes: int32 and int64
directly, uint32/uint64 through a signed view of the same width, narrower types through an int64 plane that the
host then narrows, wrapping). A store converts: a float truncates toward zero into an integer, an integer wraps
to the destination's width, an integer becomes the nearest float. A run has one float type, so a float32 <->
float64 copy cannot be written by a kernel yet and is refused with a TypeError that says so.
"""

from __future__ import annotations

import numpy as np

from eagle.algorithms import _kernels as K
from eagle.algorithms._common import as_index, destination, float_run, host_array, plan, prefix
from eagle.array import Array

_MISSING = "the float planes of one hawk run share one float type (no float32/float64 conversion inside a run)"
_SIGNED = {np.dtype(np.uint32): np.int32, np.dtype(np.uint64): np.int64}  # same bits, written as Index planes
_NARROW = tuple(np.dtype(t) for t in (np.int8, np.int16, np.uint8, np.uint16))




def _int_plane(out: np.ndarray, fill) -> None:
    """Run `fill(plane)` on an Index plane holding out's values: out itself (int32/int64), a signed view of it
    (uint32/uint64), or an int64 plane narrowed into out afterwards (8- and 16-bit integers wrap)."""
    if out.dtype in _NARROW:
        wide = np.empty(out.size, np.int64)
        fill(wide)
        out[...] = wide.astype(out.dtype)
    else:
        fill(out.view(_SIGNED.get(out.dtype, out.dtype)))


def _store(src: np.ndarray, out: np.ndarray, who: str, target, threads) -> None:
    """out[i] = src[i] converted to out's dtype, by a kernel (out is a contiguous view into the caller's array)."""
    from eagle.algorithms import _kernels_int as KI

    if out.size == 0:
        return
    if out.dtype.kind in "iu":
        if src.dtype.kind == "f":
            x = float_run(src)
            _int_plane(out, lambda o: plan(KI.float_to_int_copy, target, threads).run(x=x, out=o))
        else:
            k = as_index(src)[0]
            _int_plane(out, lambda o: plan(KI.int_copy, target, threads).run(k=k, out=o))
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
    d = destination(dst, "copy", "copies write")
    count = s.size if n is None else n
    _store(prefix(s, count, "copy", "src"), prefix(d, count, "copy", "dst"), "copy", target, threads)


def copy_with_offset(src, dst, dst_offset: int, n: int | None = None, *, target: str | None = None,
                     threads: int | None = None) -> None:
    """dst[dst_offset + i] = src[i] for i < n (n=None: src.size); the span must lie inside dst (ValueError)."""
    s = host_array(src, "copy_with_offset", "src")
    d = destination(dst, "copy_with_offset", "copies write")
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
    """dst[i] = value for i < n (n=None: dst.size), value converted as a store converts: into a float dst the
    nearest float, into an integer dst a float truncates toward zero (2.5 -> 2) and an integer wraps to the width
    (300 -> 44 in uint8). An integer value must lie in int64 or uint64's range (ValueError)."""
    from eagle.algorithms import _kernels_int as KI

    d = destination(dst, "fill_value", "copies write")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"fill_value: value must be a number, got {value!r}")
    out = prefix(d, n, "fill_value", "dst")
    if isinstance(value, (int, np.integer)) and not -(1 << 63) <= int(value) < 1 << 64:
        raise ValueError(f"fill_value: value={int(value)} is outside the int64 and uint64 ranges")
    if not out.size:
        return
    if out.dtype.kind == "f":
        plan(K.float_fill, target, threads).run(value=value, out=out)
    elif isinstance(value, (int, np.integer)):
        v = int(value) % (1 << 64)  # the int64 with the value's low 64 bits; the store wraps it to dst's width
        hi, lo = (v >> 32) - (1 << 32 if v >= 1 << 63 else 0), v & 0xFFFFFFFF
        _int_plane(out, lambda o: plan(KI.int_fill, target, threads).run(high=float(hi), low=float(lo), out=o))
    else:
        _int_plane(out, lambda o: plan(KI.float_to_int_fill, target, threads).run(value=float(value), out=o))


def gather(values, perm, n: int | None = None, *, target: str | None = None, threads: int | None = None) -> Array:
    """A new eagle.Array of n values (n=None: perm.size) in values' dtype: out[i] = values[perm[i]]. n past either
    array is a ValueError, a perm entry outside values an IndexError."""
    from eagle.algorithms import _kernels_int as KI

    v = host_array(values, "gather", "values").reshape(-1)
    p = host_array(perm, "gather", "perm")
    if p.dtype.kind not in "iu":
        raise TypeError(f"gather: perm must hold integer positions, got {p.dtype}")
    count = p.size if n is None else n
    idx = prefix(p, count, "gather", "perm")
    prefix(v, count, "gather", "values")  # the bounds rule: n past any array involved is refused
    if idx.size == 0:
        return Array(np.zeros(0, v.dtype))
    lo, hi = int(idx.min()), int(idx.max())
    if lo < 0 or hi >= v.size:
        bad = lo if lo < 0 else hi
        raise IndexError(f"gather: perm holds position {bad}, outside values (0 <= position < {v.size})")
    lanes = np.zeros(v.size, np.int64)  # .at reads lanes of a plane as long as the run: perm padded to values'
    lanes[:idx.size] = idx
    if v.dtype.kind == "f":
        out = plan(K.float_gather, target, threads).run(base=0, count=idx.size, values=float_run(v), perm=lanes)
        got = np.asarray(out)[:idx.size]
        return Array(got if got.dtype == v.dtype else got.astype(v.dtype))  # float16: widened, exact both ways
    plane = as_index(v)[0]
    got = np.empty(v.size, plane.dtype)
    plan(KI.int_gather, target, threads).run(base=0, count=idx.size, values=plane, perm=lanes, out=got)
    got = got[:idx.size]
    if got.dtype == v.dtype:
        return Array(got)
    if got.dtype.itemsize == v.dtype.itemsize:  # uint64 read as int64: the same bits
        return Array(got.view(v.dtype))
    return Array(got.astype(v.dtype))  # narrow integers widened for the plane: their values fit back
