"""Whole-array reductions behind `eagle.Array.sum/min/max/mean`: every component, a Python float.

Rules (those of the reference, docs/algorithms.md): float32 sums come out in float32 and float64 in float64,
each the exact sum rounded once to its precision (hawk's ordered sums: the same bits on every run, thread count
and target); integer sums are exact modulo 2**64 (signed types wrap as int64, unsigned as uint64); extrema are
exact; a NaN anywhere gives NaN; min of 0.0 and -0.0 is -0.0 and max is 0.0 whatever their order; an empty array
sums to 0.0, has mean NaN, and min/max raise ValueError. Nothing launches for an empty array.
"""

from __future__ import annotations

import numpy as np

from eagle.algorithms import _kernels as K
from eagle.algorithms._common import as_index, cell, flat, float_run, host_array, pick_target, plan

_LIMBS = (1, 1 << 21, 1 << 42)
_LIMB_LANES = 1 << 31  # a launch's limb sums stay below 2**52: exact float64 integers


def _flat(data, who: str) -> np.ndarray:
    return flat(host_array(data, who))


def _wrap(total: int, dtype: np.dtype) -> int:
    """An integer total reduced modulo 2**64 into the accumulator's range (int64, or uint64 for unsigned)."""
    total %= 1 << 64
    if dtype.kind != "u" and total >= 1 << 63:
        total -= 1 << 64
    return total


def array_sum(data, *, target: str | None = None, threads: int | None = None) -> float:
    """The sum of every component: float32/float64 in their own precision (exact, rounded once), integers exact in
    int64/uint64 with wrapping, then a Python float. 0.0 when empty."""
    a = _flat(data, "Array.sum")
    target = pick_target(target, (a,), "Array.sum")
    if a.size == 0:
        return 0.0
    if a.dtype.kind == "f":
        return cell(plan(K.float_sum, target, threads).run(x=float_run(a)))
    k, _ = as_index(a)
    p, total = plan(K.int_sum, target, threads), 0
    for base in range(0, k.size, _LIMB_LANES):  # one launch unless 2**31 values or more
        out = p.run(k=k, base=base, count=min(_LIMB_LANES, k.size - base))
        total += sum(int(out[f"s{i}"][0]) * w for i, w in enumerate(_LIMBS))
    return float(_wrap(total, a.dtype))


def _extreme(data, which: str, target, threads) -> float:
    who = f"Array.{which}"
    a = _flat(data, who)
    target = pick_target(target, (a,), who)
    if a.size == 0:
        raise ValueError(f"{which} reduction requires a nonempty array ({who} of an array with no elements)")
    if a.dtype.kind == "f":
        kern = K.float_min if which == "min" else K.float_max
        out = plan(kern, target, threads).run(x=float_run(a))
        return _signed_zero(cell(out["lo" if which == "min" else "hi"]), cell(out["zero_sign"]), which)
    k, unsigned = as_index(a)
    out = plan(K.int_min if which == "min" else K.int_max, target, threads).run(k=k, unsigned=unsigned)
    value = int(out["hi"][0]) * (1 << 32) + int(out["lo"][0])
    if a.dtype.kind == "u":
        value %= 1 << (8 * a.dtype.itemsize)  # a uint32 read through int64 keeps its value; uint64 wraps back
    return float(value)


def _signed_zero(v: float, sign: float, which: str) -> float:
    """An extremum with the sign of a zero result: -0.0 for min when any zero was -0.0 (`sign`, the smallest
    zero's copysign, is -1), 0.0 for max when any was 0.0 (the largest is +1)."""
    if v != 0.0:
        return v
    return -0.0 if (sign < 0 if which == "min" else sign <= 0) else 0.0


def float_extent(a: np.ndarray, target: str, threads: int | None) -> tuple[float, float]:
    """(array_min, array_max) of nonempty float data (already through float_run) in one launch: one pass over
    the data where two took two."""
    out = plan(K.float_extent, target, threads).run(x=a)
    return (_signed_zero(cell(out["lo"]), cell(out["lo_sign"]), "min"),
            _signed_zero(-cell(out["neg_hi"]), -cell(out["neg_hi_sign"]), "max"))


def array_min(data, *, target: str | None = None, threads: int | None = None) -> float:
    """The smallest component as a Python float (NaN if any is NaN; -0.0 beats 0.0). ValueError when empty."""
    return _extreme(data, "min", target, threads)


def array_max(data, *, target: str | None = None, threads: int | None = None) -> float:
    """The largest component as a Python float (NaN if any is NaN; 0.0 beats -0.0). ValueError when empty."""
    return _extreme(data, "max", target, threads)


def array_mean(data, *, target: str | None = None, threads: int | None = None) -> float:
    """array_sum(data) / data.size in Python floats (binary64); NaN when empty."""
    a = _flat(data, "Array.mean")
    if a.size == 0:
        return float("nan")
    return array_sum(a, target=target, threads=threads) / a.size
