"""The hawk kernels behind eagle.asarray's reductions and eagle.algorithms (compiled like any user kernel).

Every floating sum here uses policy="ordered": the same bits on every run, thread count and target.
Integer inputs arrive as Index planes (hawk has no integer accumulator and no integer outputs): exact integer
sums split each value into 21-bit limbs whose float64 sums stay exact, and exact integer extrema compare the
high 32 bits first, then the low 32 bits among the lanes that hold the highest (lowest) high part. Lanes
that must not count take a sentinel through m.where rather than `where=`: a masked max/min is not vectorized
on the host (about 6x slower).
`unsigned` Params are 2**64 for a uint64 array read as int64, else 0.0: `as_float` converts such a value read
negative to its unsigned value, rounded once.

Mutable outputs are assigned in the body (pyproject ignores F841/F821 for eagle/algorithms). No
`from __future__ import annotations`: the histogram factory's annotation names a closure variable.
"""

import functools

import hawk
import hawk.math as m
from hawk import Index, Mutable, Param, Scalar

LIMB = 2097152  # 2**21: n limbs of 21 bits sum exactly in float64 for n < 2**32
HALF = 4294967296  # 2**32
QUARTER_WRAP = 4611686018427387904  # 2**62


@hawk.func
def as_float(k, unsigned):
    """An Index value as a float of the run's type, rounded once; a uint64 read as int64 (`unsigned` = 2**64,
    k < 0) as its unsigned value u = k + 2**64, also rounded once. (`float(k) + 2**64` rounds twice: k on the
    grid of its own binade, then the sum on u's, so a u just off a tie of u's grid could land on the tie and go
    to even the wrong way.) u is halved with round-to-odd, v = 2 * (u // 4) + (1 if u % 4 else 0), which lies
    in [2**62, 2**63) (an int64) and rounds to the same float as u / 2 (float64 and float32 keep at most 53 of
    its 63 bits, so the bit that stands for the dropped ones never decides a tie); float(v) * 2.0 is then exact.
    Lanes of signed or non-negative values take float(k) (the other branch reads -1 there: no overflow)."""
    neg = m.where(k < 0, k, -1)
    half = (neg // 4) * 2 + QUARTER_WRAP + QUARTER_WRAP + m.where(neg % 4 != 0, 1, 0)
    return m.where((k < 0) & (unsigned > 0.0), float(half) * 2.0, float(k))


# --- Array.sum / min / max --------------------------------------------------------------------------------
@hawk.kernel
def float_sum(x: Scalar, total: Mutable[Scalar]):
    total = hawk.sum(x, policy="ordered")


@hawk.kernel
def float_min(x: Scalar, lo: Mutable[Scalar], zero_sign: Mutable[Scalar]):
    lo = hawk.min(x)
    zero_sign = hawk.min(m.where(x == 0.0, m.copysign(1.0, x), 2.0))  # -1 when some zero is -0.0


@hawk.kernel
def float_max(x: Scalar, hi: Mutable[Scalar], zero_sign: Mutable[Scalar]):
    hi = hawk.max(x)
    zero_sign = hawk.max(m.where(x == 0.0, m.copysign(1.0, x), -2.0))  # +1 when some zero is +0.0


@hawk.kernel
def float_extent(x: Scalar, lo: Mutable[Scalar], neg_hi: Mutable[Scalar], lo_sign: Mutable[Scalar],
                 neg_hi_sign: Mutable[Scalar]):
    # float_min and float_max in one pass (a histogram's detected range); a kernel reduces with one operation,
    # so the max is -min(-x) and its zero flag the negated min of the negated signs
    lo = hawk.min(x)
    neg_hi = hawk.min(-x)
    lo_sign = hawk.min(m.where(x == 0.0, m.copysign(1.0, x), 2.0))
    neg_hi_sign = hawk.min(m.where(x == 0.0, -m.copysign(1.0, x), 2.0))


@hawk.kernel
def int_sum(k: Index, s0: Mutable[Scalar], s1: Mutable[Scalar], s2: Mutable[Scalar]):
    upper = k // LIMB
    s0 = hawk.sum(k % LIMB)  # k == s0 + s1 * 2**21 + s2 * 2**42, every limb summed exactly
    s1 = hawk.sum(upper % LIMB)
    s2 = hawk.sum(upper // LIMB)


@hawk.kernel
def int_min(k: Index, unsigned: Param, hi: Mutable[Scalar], lo: Mutable[Scalar]):
    h = k // HALF
    hf = float(h) + m.where(h < 0, unsigned / HALF, 0.0)  # unsigned high words count from 2**31 up
    hi = hawk.min(hf)
    lo = hawk.min(m.where(hf == hi, float(k % HALF), 4294967296.0))


@hawk.kernel
def int_max(k: Index, unsigned: Param, hi: Mutable[Scalar], lo: Mutable[Scalar]):
    h = k // HALF
    hf = float(h) + m.where(h < 0, unsigned / HALF, 0.0)
    hi = hawk.max(hf)
    lo = hawk.max(m.where(hf == hi, float(k % HALF), -1.0))


# --- statistics: float inputs, and integer twins converting in the kernel ----------------------------------
@hawk.kernel
def float_var(x: Scalar, total: Mutable[Scalar]):
    mu = hawk.mean(x, policy="ordered")
    d = x - mu
    total = hawk.sum(d * d, policy="ordered")


@hawk.kernel
def int_var(k: Index, unsigned: Param, total: Mutable[Scalar]):
    x = as_float(k, unsigned)
    mu = hawk.mean(x, policy="ordered")
    d = x - mu
    total = hawk.sum(d * d, policy="ordered")


@hawk.kernel
def float_abs_sum(x: Scalar, total: Mutable[Scalar]):
    total = hawk.sum(m.abs(x), policy="ordered")


@hawk.kernel
def int_abs_sum(k: Index, unsigned: Param, total: Mutable[Scalar]):
    total = hawk.sum(m.abs(as_float(k, unsigned)), policy="ordered")


@hawk.kernel
def float_abs_max(x: Scalar, total: Mutable[Scalar]):
    total = hawk.max(m.abs(x))


@hawk.kernel
def int_abs_max(k: Index, unsigned: Param, total: Mutable[Scalar]):
    total = hawk.max(m.abs(as_float(k, unsigned)))


@hawk.kernel
def float_sum_squares(x: Scalar, total: Mutable[Scalar]):
    total = hawk.sum(x * x, policy="ordered")  # (norm: one plane read once, not the same one bound twice)


@hawk.kernel
def float_dot(a: Scalar, b: Scalar, total: Mutable[Scalar]):
    total = hawk.sum(a * b, policy="ordered")


@hawk.kernel
def float_int_dot(a: Scalar, k: Index, unsigned: Param, total: Mutable[Scalar]):
    total = hawk.sum(a * (as_float(k, unsigned)), policy="ordered")


@hawk.kernel
def int_dot(j: Index, k: Index, uj: Param, uk: Param, total: Mutable[Scalar]):
    a = as_float(j, uj)
    b = as_float(k, uk)
    total = hawk.sum(a * b, policy="ordered")


@hawk.kernel
def float_nonzero(x: Scalar, count: Mutable[Scalar]):
    count = hawk.sum(x != 0.0)  # float64 data: sums of 0/1 flags are exact to 2**53


@hawk.kernel
def f32_bits_nonzero(k: Index, count: Mutable[Scalar]):
    count = hawk.sum(k % 2147483648 != 0)  # float32 bits read as int32: all but the sign bit


@hawk.kernel
def int_nonzero(k: Index, count: Mutable[Scalar]):
    count = hawk.sum(k != 0)


# --- histogram (one kernel per bin count: a sink's extent is part of its type) -----------------------------
@functools.cache
def float_histogram(bins: int):
    @hawk.kernel
    def histogram_bins(x: Scalar, lo: Param, scale: Param, counts: Mutable["bin":bins]):
        # (plain adds of 1.0 are exact integers below the float's 2**53 or 2**24, in any order: histogram.py)
        hawk.scatter(counts, policy="plain")[m.index((x - lo) * scale, bins)] += 1.0

    return histogram_bins


@functools.cache
def int_histogram(bins: int):
    @hawk.kernel
    def histogram_int_bins(k: Index, unsigned: Param, lo: Param, scale: Param, counts: Mutable["bin":bins]):
        x = as_float(k, unsigned)
        hawk.scatter(counts, policy="plain")[m.index((x - lo) * scale, bins)] += 1.0

    return histogram_int_bins


# --- copies, fills, gathers (float destinations: hawk outputs are float planes) ---------------------------
@hawk.kernel
def float_copy(x: Scalar, out: Mutable[Scalar]):
    out = x


@hawk.kernel
def int_to_float_copy(k: Index, unsigned: Param, out: Mutable[Scalar]):
    out = as_float(k, unsigned)


@hawk.kernel
def float_fill(value: Param, out: Mutable[Scalar]):
    out = value


@hawk.kernel
def float_gather(values: Scalar, perm: Index, out: Mutable[Scalar]):
    out = values.at(perm)
