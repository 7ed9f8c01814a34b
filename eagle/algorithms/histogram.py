"""histogram(data, bins=10, range=None, n=None): counts of the first `n` values in `bins` equal bins.

The bin of x is int((x - lo) * (1 / width)) with width = (hi - lo) / bins, in the data's precision (float32 for
integers), clamped into [0, bins - 1]: values below lo count in the first bin, values above hi in the last (a
value equal to hi too, as in NumPy). range=None takes lo and hi from the first `n` values' min and max; equal
endpoints become (lo, lo + 1). Counts are exact: the kernel adds 1.0 per value into a plain sink (every partial
count is an integer the float holds exactly, whatever the order of the adds, the chunks' copies included),
float32 sinks over at most 2**24 values per launch (the host adds the launches' integer counts).
"""

from __future__ import annotations

import builtins
import math

import numpy as np

import eagle
from eagle.algorithms import _kernels as K
from eagle.algorithms._common import as_index, float_run, host_array, on_device, pick_target, plan, prefix
from eagle.algorithms.reductions import array_max, array_min, float_extent
from eagle.array import Array

_F32_EXACT = 1 << 24  # lanes per launch for float32 sinks: every count below this is an exact float32 integer
_I32_MAX = (1 << 31) - 1


def histogram(data, bins: int = 10, range: tuple[float, float] | None = None,  # noqa: A002 (the reference's name)
              n: int | None = None, *, target: str | None = None,
              threads: int | None = None) -> tuple[Array, np.ndarray]:
    """(counts, edges): an int32 eagle.Array of `bins` counts and a float64 NumPy array of `bins + 1` edges.
    ValueError for bins < 1, a range with a nonfinite end or lo > hi, a nonfinite detected range, or n == 0
    without a range."""
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)):
        raise TypeError(f"histogram: bins= takes a whole number of bins >= 1, got {bins!r}")
    if bins < 1:
        raise ValueError(f"histogram: bins={bins}; use at least one bin")
    bins = int(bins)
    x = prefix(host_array(data, "histogram"), n, "histogram")
    target = pick_target(target, (x,), "histogram")
    if x.dtype.kind == "f":
        x = float_run(x)
    if range is None:
        if x.size == 0:
            raise ValueError("histogram: n == 0 values and no range=: the range cannot be detected; pass "
                             "range=(lo, hi)")
        if x.dtype.kind == "f":  # (one pass for both)
            lo, hi = float_extent(x, target, threads)
        else:
            lo, hi = array_min(x, target=target, threads=threads), array_max(x, target=target, threads=threads)
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise ValueError(f"histogram: the detected range ({lo}, {hi}) is not finite; filter NaN and "
                             "infinities first or pass a finite range=")
    else:
        try:
            lo, hi = (float(v) for v in range)
        except (TypeError, ValueError):
            raise ValueError(f"histogram: range= takes two numbers (lo, hi), got {range!r}") from None
        if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
            raise ValueError(f"histogram: range=({lo}, {hi}) needs finite ends with lo <= hi")
    if lo == hi:
        hi = lo + 1.0
    edges = np.linspace(lo, hi, bins + 1)
    run_dtype = np.dtype(np.float64) if x.dtype == np.float64 else np.dtype(np.float32)
    scale = run_dtype.type(1) / ((run_dtype.type(hi) - run_dtype.type(lo)) / run_dtype.type(bins))
    counts = np.zeros(bins, np.int64)
    if x.size:
        step = x.size if run_dtype == np.float64 else _F32_EXACT
        if x.dtype.kind == "f":
            p, planes = plan(K.float_histogram(bins), target, threads), {"x": x}
        else:
            k, unsigned = as_index(x)
            p, planes = plan(K.int_histogram(bins), target, threads), {"k": k, "unsigned": unsigned}
        for base in builtins.range(0, x.size, step):
            sink = np.zeros(bins, run_dtype)
            count = min(step, x.size - base)
            p.run(base=base, count=count, lo=lo, scale=scale, counts=sink, **planes)
            counts += sink.astype(np.int64)
    if counts.max(initial=0) > _I32_MAX:
        raise ValueError(f"histogram: a bin holds {int(counts.max())} values, more than its int32 count holds")
    if on_device(x):  # array results live where the data does (the bins' counts: one small copy up)
        return eagle.asarray(counts.astype(np.int32), device=x.device), edges
    return Array(counts.astype(np.int32)), edges
