"""copy, copy_with_offset, fill_value and gather: prefix copies and fills into existing arrays, and gathers.

Destinations are float32/float64 arrays (float output planes) or integer arrays (integer output planes: int8 to
int64 directly, unsigned ones through the signed view of the same width). A store converts: a float truncates
toward zero into an integer, an integer wraps to the destination's width, an integer becomes the nearest float,
and a float becomes the nearest float of the destination's width (a float output plane takes its array's dtype,
the run computing in its input's: a float64 value stored into float32 rounds once to nearest even, as NumPy's
astype; float32 into float64 is exact).
"""

from __future__ import annotations

import numpy as np

from eagle.algorithms import _kernels as K
from eagle.algorithms._common import (
    as_index,
    destination,
    device_copy,
    empty_like_on,
    flat,
    float_run,
    host_array,
    on_device,
    part,
    pick_target,
    plan,
    prefix,
    result,
    view,
)
from eagle.array import Array


def _int_plane(out: np.ndarray, fill) -> None:
    """Run `fill(plane)` on the integer output plane of out's bits: out itself (int8 ... int64), or the signed view
    of an unsigned out (the store wraps to the width, so the bits are those of the unsigned value)."""
    fill(view(out, f"i{out.dtype.itemsize}") if out.dtype.kind == "u" else out)


def _store(src: np.ndarray, out: np.ndarray, target, threads) -> None:
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
    if src.dtype.kind == "f":  # the run computes in src's float type; the store converts into out's
        plan(K.float_copy, target, threads).run(x=float_run(src), out=out)
    else:
        k, unsigned = as_index(src)
        plan(K.int_to_float_copy, target, threads).run(k=k, unsigned=unsigned, out=out)


def copy(src, dst, n: int | None = None, *, target: str | None = None, threads: int | None = None) -> None:
    """dst[i] = src[i] for i < n (n=None: src.size), in flat order, converting into dst's dtype on store.
    n past either array is a ValueError; later elements of dst are left alone."""
    s = host_array(src, "copy", "src")
    d = destination(dst, "copy", "copies write")
    count = s.size if n is None else n
    x, out = prefix(s, count, "copy", "src"), prefix(d, count, "copy", "dst")
    _store(x, out, pick_target(target, (x, out), "copy"), threads)


def copy_with_offset(src, dst, dst_offset: int, n: int | None = None, *, target: str | None = None,
                     threads: int | None = None) -> None:
    """dst[dst_offset + i] = src[i] for i < n (n=None: src.size); the span must lie inside dst (ValueError)."""
    s = host_array(src, "copy_with_offset", "src")
    d = destination(dst, "copy_with_offset", "copies write")
    if isinstance(dst_offset, bool) or not isinstance(dst_offset, (int, np.integer)) or dst_offset < 0:
        raise ValueError(f"copy_with_offset: dst_offset= takes a whole number >= 0, got {dst_offset!r}")
    count = s.size if n is None else n
    src_part = prefix(s, count, "copy_with_offset", "src")
    off = int(dst_offset)
    if off + src_part.size > d.size:
        raise ValueError(f"copy_with_offset: dst_offset={off} with n={src_part.size} reaches element "
                         f"{off + src_part.size - 1}, but dst has {d.size} elements")
    target = pick_target(target, (src_part, d), "copy_with_offset")
    if on_device(d) and off:  # a kernel binds a device buffer from its start: store into a fresh one, then move it
        tmp = empty_like_on(d, src_part.size, d.dtype)
        _store(src_part, tmp, target, threads)
        device_copy(tmp, d, off)
        return
    _store(src_part, part(d, off, off + src_part.size), target, threads)


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
    target = pick_target(target, (out,), "fill_value")
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
    array is a ValueError, a perm entry outside values an IndexError. On device arrays the result is one."""
    return _gather(values, perm, n, target, threads, checked=False)


def _gather(values, perm, n, target, threads, checked: bool) -> Array:
    """gather's work; `checked`: perm's positions are known to lie inside values (sort_by_key's own order)."""
    from eagle.algorithms import _kernels_int as KI

    v = flat(host_array(values, "gather", "values"))
    p = host_array(perm, "gather", "perm")
    if p.dtype.kind not in "iu":
        raise TypeError(f"gather: perm must hold integer positions, got {p.dtype}")
    count = p.size if n is None else n
    idx = prefix(p, count, "gather", "perm")
    if n is None and p.size > v.size:  # (the reference's bounds rule, said of the arrays the caller passed)
        raise ValueError(f"gather: perm has {p.size} positions and values only {v.size}: gather reads the first n "
                         f"of both (n=None: perm.size), and n past any array involved is refused; pass "
                         f"n <= {v.size}, or gather from values padded to perm's length")
    prefix(v, count, "gather", "values")  # the bounds rule: n past any array involved is refused
    target = pick_target(target, (v, idx), "gather")
    if idx.size == 0:
        return Array(np.zeros(0, v.dtype))
    if not checked:
        if on_device(idx):  # the range of the positions from two reductions on the device: no copy of perm
            from eagle.algorithms.reductions import array_max, array_min

            lo, hi = int(array_min(idx, target=target)), int(array_max(idx, target=target))
        else:
            lo, hi = int(idx.min()), int(idx.max())
        if lo < 0 or hi >= v.size:
            bad = lo if lo < 0 else hi
            raise IndexError(f"gather: perm holds position {bad}, outside values (0 <= position < {v.size})")
    lanes = _lanes(idx, v.size, target)
    if v.dtype.kind == "f":
        out = plan(K.float_gather, target, threads).run(base=0, count=idx.size, values=float_run(v), perm=lanes)
        got = part(out if on_device(out) else np.asarray(out), 0, idx.size)
        return result(got if got.dtype == v.dtype else got.astype(v.dtype))  # float16: widened, exact both ways
    plane = as_index(v)[0]  # (narrow integers and uint32 widened: Index inputs are int32 or int64)
    got = empty_like_on(lanes, v.size, v.dtype if v.dtype.kind in "iu" else plane.dtype)  # in values' dtype
    _int_plane(got, lambda o: plan(KI.int_gather, target, threads).run(base=0, count=idx.size, values=plane,
                                                                      perm=lanes, out=o))
    got = part(got, 0, idx.size)
    return result(got if got.dtype == v.dtype else got.astype(v.dtype))  # booleans: read as int32, exact back


def _lanes(idx, size: int, target):
    """perm as the kernels read it: .at reads lanes of a plane as long as the run (values' size), so perm padded
    to it (int64 on the host; on the device, perm's own int32/int64, padded on the device when shorter)."""
    if not on_device(idx):
        lanes = np.zeros(size, np.int64)
        lanes[:idx.size] = idx
        return lanes
    k = as_index(idx)[0]
    if k.size == size:
        return k
    lanes = empty_like_on(k, size, k.dtype)
    lanes.buffer.runtime.zero(lanes.buffer)
    device_copy(k, lanes)
    return lanes
