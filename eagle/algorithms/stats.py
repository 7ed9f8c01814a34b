"""Statistics over the first `n` values of an array: var, std, norm, absmax, count_nonzero, dot.

Terms are formed in the inputs' precision (float64 if any input is float64, else float32; integers convert to
it inside the kernel before any arithmetic) and summed by hawk's ordered sums (the exact sum, rounded once), so
every floating result has the same bits on every run, thread count and target. count_nonzero is exact (float64
sums of 0/1 flags; float32 data is read through its bits so that counts past 2**24 stay exact). An empty input
launches nothing.
"""

from __future__ import annotations

import math

import numpy as np

from eagle.algorithms import _kernels as K
from eagle.algorithms._common import (
    as_index,
    cell,
    float_run,
    host_array,
    on_device,
    pick_target,
    plan,
    prefix,
    to_float,
    view,
)

_F32_CELL = (1,)  # an integer-only run takes its float type from the cell passed: float32, as the reference


def _data(data, n, who: str) -> np.ndarray:
    return prefix(host_array(data, who), n, who)


def _f32() -> np.ndarray:
    return np.zeros(_F32_CELL, np.float32)


def var(data, n: int | None = None, *, target: str | None = None, threads: int | None = None) -> float:
    """Population variance of the first `n` values: their mean, then sum((x - mean)**2) / n (an ordered sum in
    the data's precision, integers as float32). NaN when n == 0, or when a NaN or infinity is read."""
    x = _data(data, n, "var")
    target = pick_target(target, (x,), "var")
    if x.size == 0:
        return float("nan")
    if x.dtype.kind == "f":
        total = plan(K.float_var, target, threads).run(x=float_run(x))
    else:
        k, unsigned = as_index(x)
        total = plan(K.int_var, target, threads).run(k=k, unsigned=unsigned, total=_f32())
    return cell(total) / x.size


def std(data, n: int | None = None, *, target: str | None = None, threads: int | None = None) -> float:
    """math.sqrt(var(data, n)): NaN when empty."""
    return math.sqrt(var(data, n, target=target, threads=threads))


def absmax(data, n: int | None = None, *, target: str | None = None, threads: int | None = None) -> float:
    """The largest |x| of the first `n` values (NaN if any is NaN); 0.0 when empty."""
    x = _data(data, n, "absmax")
    target = pick_target(target, (x,), "absmax")
    if x.size == 0:
        return 0.0
    if x.dtype.kind == "f":
        return cell(plan(K.float_abs_max, target, threads).run(x=float_run(x)))
    k, unsigned = as_index(x)
    return cell(plan(K.int_abs_max, target, threads).run(k=k, unsigned=unsigned, total=_f32()))


def norm(data, ord=2, n: int | None = None, *, target: str | None = None, threads: int | None = None) -> float:
    """The vector norm of the first `n` values: ord=1 sum |x|, ord=2 sqrt(sum x*x), ord=inf max |x|; any other
    ord is a ValueError before anything runs. 0.0 when empty."""
    try:
        order = next(o for o in (1, 2, math.inf) if ord == o)
    except (StopIteration, TypeError, ValueError):
        raise ValueError(f"Unsupported norm order: norm(ord={ord!r}) takes ord=1, 2 or float('inf')") from None
    if order == math.inf:
        return absmax(data, n, target=target, threads=threads)
    x = _data(data, n, "norm")
    target = pick_target(target, (x,), "norm")
    if x.size == 0:
        return 0.0
    if order == 2 and x.dtype.kind == "f":
        return math.sqrt(cell(plan(K.float_sum_squares, target, threads).run(x=float_run(x))))
    if order == 2:
        return math.sqrt(_dot_terms(x, x, target, threads))
    if x.dtype.kind == "f":
        return cell(plan(K.float_abs_sum, target, threads).run(x=float_run(x)))
    k, unsigned = as_index(x)
    return cell(plan(K.int_abs_sum, target, threads).run(k=k, unsigned=unsigned, total=_f32()))


def count_nonzero(data, n: int | None = None, *, target: str | None = None, threads: int | None = None) -> int:
    """How many of the first `n` values are not zero (x != 0: -0.0 is zero, NaN is not), as a Python int."""
    x = _data(data, n, "count_nonzero")
    target = pick_target(target, (x,), "count_nonzero")
    if x.size == 0:
        return 0
    if x.dtype.kind == "f":
        x = float_run(x)
        if x.dtype == np.float32:  # a float32 sum of flags would round past 2**24: count the bits in float64
            bits = view(x if on_device(x) else np.ascontiguousarray(x), np.int32)
            out = plan(K.f32_bits_nonzero, target, threads).run(k=bits)
        else:
            out = plan(K.float_nonzero, target, threads).run(x=x)
    else:
        out = plan(K.int_nonzero, target, threads).run(k=as_index(x)[0])
    return int(cell(out))


def dot(a, b, n: int | None = None, *, target: str | None = None, threads: int | None = None) -> float:
    """sum(a[i] * b[i]) over the first `n` values (n=None: a.size; n past either array is a ValueError), in
    float64 if either is float64, else float32, ordered. 0.0 when n == 0."""
    ha, hb = host_array(a, "dot", "a"), host_array(b, "dot", "b")
    count = ha.size if n is None else n
    x, y = prefix(ha, count, "dot", "a"), prefix(hb, count, "dot", "b")
    target = pick_target(target, (x, y), "dot")
    if x.size == 0:
        return 0.0
    return _dot_terms(x, y, target, threads)


def _dot_terms(x: np.ndarray, y: np.ndarray, target, threads) -> float:
    fx, fy = x.dtype.kind == "f", y.dtype.kind == "f"
    if fx and fy:
        x, y = float_run(x), float_run(y)
        if x.dtype != y.dtype:  # float64 terms: Plan.run widens a float32 host array (exact); a device one is
            x, y = (to_float(v, np.float64, target, threads) if on_device(v) else v for v in (x, y))  # widened there
        return cell(plan(K.float_dot, target, threads).run(a=x, b=y))
    if fx or fy:
        f, i = (x, y) if fx else (y, x)
        k, unsigned = as_index(i)
        return cell(plan(K.float_int_dot, target, threads).run(a=float_run(f), k=k, unsigned=unsigned))
    (j, uj), (k, uk) = as_index(x), as_index(y)
    return cell(plan(K.int_dot, target, threads).run(j=j, k=k, uj=uj, uk=uk, total=_f32()))
