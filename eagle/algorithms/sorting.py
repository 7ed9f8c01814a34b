"""argsort and sort_by_key: a stable LSD radix sort over the keys' spread, as hawk kernels.

Keys are int32, uint32, int64 or uint64 (anything else is a TypeError). One kernel finds the smallest and largest
key exactly; the number of 8-bit passes is that of the spread's bits (max - min), so ids below 2**16 take two
passes whatever their dtype and all-equal keys take none. Each pass is one kernel: a keyed scan
(`hawk.scan(1, by=digit, keys=256, order="key", exclusive=True)`, each lane's place in a stable sort by its
digit), then plane scatters of the order and the shifted keys. Equal keys keep their order; results are
identical on every run, thread count and target.
"""

from __future__ import annotations

import numpy as np

from eagle.algorithms._common import empty_like_on, host_array, pick_target, plan, prefix, result, view
from eagle.array import Array

_I32_MAX = (1 << 31) - 1
_KEYS = {np.dtype(np.int32): (np.int32, 0.0, 0.0), np.dtype(np.uint32): (np.int32, 2.0**32, 0.0),
         np.dtype(np.int64): (np.int64, 0.0, 0.0), np.dtype(np.uint64): (np.int64, 0.0, -(2.0**63))}
BITS = 8  # digit width of one pass


def _index_dtype(index_dtype, size: int, who: str) -> np.dtype:
    if index_dtype is None:
        return np.dtype(np.int32 if size <= _I32_MAX else np.int64)
    try:
        dt = np.dtype(index_dtype)
    except TypeError:
        dt = None
    if dt not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise TypeError(f"{who}: index_dtype= is np.int32 or np.int64, got {index_dtype!r}")
    if dt == np.int32 and size > _I32_MAX:
        raise ValueError(f"{who}: {size} keys do not fit an int32 permutation; use index_dtype=np.int64")
    return dt


def _sort_keys(keys, n, who: str) -> np.ndarray:
    a = host_array(keys, who, "keys")
    if a.dtype not in _KEYS:
        raise TypeError(f"{who}: keys must be int32, uint32, int64 or uint64, got {a.dtype} (convert integer "
                        "keys with .astype(np.int32); floats have no radix order here)")
    return a


def argsort(keys, n: int | None = None, *, index_dtype=None, target: str | None = None,
            threads: int | None = None) -> Array:
    """The stable ascending order of the first n keys (n=None: all) as a new eagle.Array: keys[perm] is sorted
    and equal keys keep their order. int32 positions up to 2**31 - 1 keys, int64 beyond or with
    index_dtype=np.int64. TypeError for other key dtypes; ValueError for n past keys; n=0 gives an empty array."""
    a = _sort_keys(keys, n, "argsort")
    k = prefix(a, a.size if n is None else n, "argsort", "keys")
    idt = _index_dtype(index_dtype, k.size, "argsort")
    return result(_order(k, idt, pick_target(target, (k,), "argsort"), threads))


def sort_by_key(keys, values, n: int | None = None, *, index_dtype=None, target: str | None = None,
                threads: int | None = None) -> tuple[Array, Array]:
    """(sorted keys, values in the same order): argsort of the first n keys (n=None: keys.size), then both
    gathered by it. values may be any number dtype; n past either array is a ValueError."""
    from eagle.algorithms.copying import _gather

    a = _sort_keys(keys, n, "sort_by_key")
    v = host_array(values, "sort_by_key", "values")
    count = a.size if n is None else n
    k = prefix(a, count, "sort_by_key", "keys")
    vals = prefix(v, count, "sort_by_key", "values")
    idt = _index_dtype(index_dtype, k.size, "sort_by_key")
    target = pick_target(target, (k, vals), "sort_by_key")
    perm = _order(k, idt, target, threads)
    return (_gather(k, perm, None, target, threads, checked=True),
            _gather(vals, perm, None, target, threads, checked=True))


def passes_for(spread: int) -> int:
    """8-bit passes for keys whose max - min is `spread` (0 for all-equal keys)."""
    return -(-spread.bit_length() // BITS)


def key_range(k: np.ndarray, target, threads) -> tuple[int, int]:
    """The smallest and largest key as the kernels order them (uint64 keys with the top bit flipped, so as
    int64), Python ints, from one kernel."""
    from eagle.algorithms import _kernels_sort as K

    plane, wrap, flip = _plane(k)
    cells = {name: np.zeros(1, np.float64) for name in ("top", "bottom")}
    if plane.dtype == np.int32:
        plan(K.key_range_narrow, target, threads).run(k=plane, wrap=wrap, **cells)
        lo, hi = -int(cells["bottom"][0]), int(cells["top"][0])
    else:
        cells = {name: np.zeros(1, np.float64) for name in ("top_hi", "top_lo", "bottom_hi", "bottom_lo")}
        plan(K.key_range_wide, target, threads).run(k=plane, flip=flip, **cells)
        hi = int(cells["top_hi"][0]) * (1 << 32) + int(cells["top_lo"][0])
        lo = -int(cells["bottom_hi"][0]) * (1 << 32) - int(cells["bottom_lo"][0])
    return lo, hi


def _plane(k: np.ndarray) -> tuple[np.ndarray, float, float]:
    signed, wrap, flip = _KEYS[k.dtype]
    return view(k, signed), wrap, flip


def _order(k: np.ndarray, idt: np.dtype, target, threads) -> np.ndarray:
    from eagle.algorithms import _kernels_sort as K

    if k.size == 0:
        return np.zeros(0, idt)
    lo, hi = key_range(k, target, threads)
    passes = passes_for(hi - lo)
    order = empty_like_on(k, k.size, idt)  # (on the device when the keys are: every pass's planes stay there)
    if passes == 0:  # all keys equal: the identity order
        plan(K.lane_order, target, threads).run(i=k.size, out=order)
        return order
    plane, wrap, flip = _plane(k)
    first = {"k": plane, "wrap": wrap, "flip": flip,
             "low_hi": float(lo >> 32), "low_lo": float(lo & 0xFFFFFFFF)}  # lo in the kernels' int64 order
    if passes == 1:
        plan(K.radix_only, target, threads).run(order=order, **first)
        return order
    shifted = np.int32 if passes * BITS <= 32 else np.int64  # keys minus the smallest, shifted (low bits kept)
    moved, spare = empty_like_on(k, k.size, shifted), empty_like_on(k, k.size, shifted)
    other = empty_like_on(k, k.size, idt)
    plan(K.radix_first, target, threads).run(order=order, moved=moved, **first)
    for p in range(1, passes):
        order, other = other, order  # this pass reads the last one's order and keys, writes the spare ones
        moved, spare = spare, moved
        if p == passes - 1:
            plan(K.radix_last, target, threads).run(u0=spare, at=other, order=order)
        else:
            plan(K.radix_next, target, threads).run(u0=spare, at=other, order=order, moved=moved)
    return order
