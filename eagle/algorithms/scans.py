"""exclusive_scan and inclusive_scan: running sums of the first `n` values of `src` written into `dst`.

The scan runs in dst's dtype (as np.cumsum with dtype=): float32/float64 outputs add in their own precision,
integer outputs add in int64 and wrap at their own width. The sums come from one hawk kernel (`hawk.scan`): lanes
are cut into fixed 4096-lane blocks, each block starts from the in-order fold of the earlier blocks' totals, so up
to 4096 values the result is np.cumsum's bit for bit, and at any size it has the same bits on every run, thread
count and target. The total (the sum of all n values, in dst's dtype) is returned unless total=False.
"""

from __future__ import annotations

import numpy as np

from eagle.algorithms._common import (
    as_index,
    destination,
    device_copy,
    device_empty,
    float_run,
    host_array,
    item,
    on_device,
    pick_target,
    plan,
    prefix,
    to_float,
    view,
)

_UNSIGNED = {np.dtype(np.uint8): np.int8, np.dtype(np.uint16): np.int16, np.dtype(np.uint32): np.int32,
             np.dtype(np.uint64): np.int64}  # written through a signed view of the same width (same bits)


def exclusive_scan(src, dst, n: int | None = None, *, total: bool = True, target: str | None = None,
                   threads: int | None = None) -> int | float | None:
    """dst[i] = src[0] + ... + src[i-1] for i < n (dst[0] is 0), in dst's dtype; returns the sum of all n values
    (a Python int for integer dst, a float for float dst), or None with total=False. n=None is src.size; n past
    either array is a ValueError; later elements of dst are left alone; src may be dst (in place)."""
    return _scan(src, dst, n, True, total, target, threads, "exclusive_scan")


def inclusive_scan(src, dst, n: int | None = None, *, total: bool = True, target: str | None = None,
                   threads: int | None = None) -> int | float | None:
    """dst[i] = src[0] + ... + src[i] for i < n, in dst's dtype; returns dst[n-1] (the sum of all n values), or
    None with total=False. The n rules and the in-place rule are exclusive_scan's."""
    return _scan(src, dst, n, False, total, target, threads, "inclusive_scan")




def _scan(src, dst, n, exclusive: bool, total: bool, target, threads, who: str):
    s = host_array(src, who, "src")
    d = destination(dst, who, "a scan writes")
    count = s.size if n is None else n
    x = prefix(s, count, who, "src")
    out = prefix(d, count, who, "dst")
    target = pick_target(target, (x, out), who)
    integer = out.dtype.kind in "iu"
    if x.size == 0:
        return None if not total else (0 if integer else 0.0)
    last = item(x, -1).item() if exclusive and total else None  # read before an in-place scan overwrites it
    if on_device(x) and on_device(out) and x.buffer is out.buffer:  # in place on the device: the scan's stages
        src_copy = device_empty(x.device, x.size, x.dtype)  # reread src after the first wrote dst, so read a copy
        device_copy(x, src_copy)
        x = src_copy
    if integer:
        _integer_scan(x, out, exclusive, target, threads)
    else:
        _float_scan(x, out, exclusive, target, threads)
    if not total:
        return None
    if not integer:
        if not exclusive:
            return float(item(out, -1))
        term = _as_float_term(last, out.dtype)  # dst[0] is +0.0, the scan's own start -0.0: one value is itself
        return float(term if out.size == 1 else item(out, -1) + term)
    end = int(item(out, -1)) + (_as_int_term(last) if exclusive else 0)
    bits = 8 * out.dtype.itemsize
    end %= 1 << bits
    if out.dtype.kind == "i" and end >= 1 << (bits - 1):
        end -= 1 << bits
    return end


def _float_scan(x: np.ndarray, out: np.ndarray, exclusive: bool, target, threads) -> None:
    from eagle.algorithms import _kernels_scan as K

    if x.dtype.kind == "f":
        # the scan adds in dst's type, so each value converts to it first, as np.cumsum(dtype=) does (a float16
        # src is read as float32, exactly); on a device by the copy kernel there
        x = to_float(float_run(x), out.dtype, target, threads)
        kern = K.float_scan_exclusive if exclusive else K.float_scan_inclusive
        plan(kern, target, threads).run(x=x, out=out)
    else:
        k, unsigned = as_index(x)
        kern = K.int_to_float_scan_exclusive if exclusive else K.int_to_float_scan_inclusive
        plan(kern, target, threads).run(k=k, unsigned=unsigned, out=out)


def _integer_scan(x: np.ndarray, out: np.ndarray, exclusive: bool, target, threads) -> None:
    from eagle.algorithms import _kernels_scan as K

    signed = _UNSIGNED.get(out.dtype)  # the scan adds in int64; the store wraps to dst's width (8 to 64 bits)
    plane = out if signed is None else view(out, signed)
    if x.dtype.kind == "f":
        kern = K.float_to_int_scan_exclusive if exclusive else K.float_to_int_scan_inclusive
        plan(kern, target, threads).run(x=float_run(x), out=plane)
    else:
        kern = K.int_scan_exclusive if exclusive else K.int_scan_inclusive
        plan(kern, target, threads).run(k=as_index(x)[0], out=plane)


def _as_float_term(value, dtype: np.dtype):
    """The last input as the kernel converts it into dst's float type (an integer rounds once, a uint64 too), so
    that exclusive total = dst[n-1] + term has the inclusive bits."""
    if isinstance(value, float):
        return dtype.type(value)
    v = int(value)
    if v >= 1 << 63:  # a uint64 from 2**63: halved with round-to-odd (an int64), rounded once, doubled (exact),
        return np.array((v >> 1) | (v & 1), np.int64).astype(dtype)[()] * dtype.type(2.0)  # as _kernels.as_float
    return np.array(v, np.int64).astype(dtype)[()]  # one rounding, int64 -> float, as the kernel's


def _as_int_term(value) -> int:
    """The last input as the kernel converts it into an integer (floats truncate toward zero)."""
    return int(value)
