"""The exact accumulator behind policy="ordered": its Python reference, with no MLIR in it.

The word counts the runtime needs live in hawk/abi/exact.py (re-exported here).

An ordered sum keeps the exact sum of its terms in a fixed-point integer accumulator (a "superaccumulator") and
rounds it once, to nearest-even, when the launch ends. Integer adds commute and associate, so any split of the
terms over chunks, threads, workgroups, targets or devices gives the same accumulator, hence the same bits.

Format (one accumulator = `words(dtype)` int64 words):
- words [0, LIMBS): limb k holds a signed multiple of 2**(32*k + BASE); BASE is the exponent of the format's
  smallest subnormal, so every finite term is a whole number of units. A term's significand (53 or 24 bits) is
  shifted to its position and split into three 32-bit pieces added into limbs k, k+1, k+2: no carries at deposit
  time, and a limb stays exact for 2**31 deposits. The limbs above the largest term's reach absorb carries.
- words LIMBS, LIMBS+1, LIMBS+2: counts of +inf, -inf and NaN terms (a special term deposits 1 there, which is
  why deposits always touch three consecutive words: the last two spare words only ever receive zeros).

`deposit`, `combine` and `round_exact` below are the reference the compiled code is tested against
(hawk/passes/exact_emit.py emits the same steps in MLIR).
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction

import numpy as np

from hawk.abi.exact import DIGIT, FORMATS, SPECIAL, limbs, words  # noqa: F401  (the format lives in the ABI)


def _bits(x: float, dtype: str) -> int:
    if dtype == "float64":
        return struct.unpack("<q", struct.pack("<d", x))[0]
    return struct.unpack("<i", struct.pack("<f", x))[0]


def deposit(acc: list[int], x: float, dtype: str = "float64") -> None:
    """Add the term x (a value of `dtype`) into the accumulator `acc` exactly, as the compiled code does."""
    p_bits, e_bits, _, nl = FORMATS[dtype]
    b = _bits(x, dtype)
    frac_bits = p_bits - 1
    ef = (b >> frac_bits) & ((1 << e_bits) - 1)
    frac = b & ((1 << frac_bits) - 1)
    neg = b < 0
    if ef == (1 << e_bits) - 1:  # inf or NaN: counted
        acc[nl + (2 if frac else (1 if neg else 0))] += 1
        return
    mant = frac | (1 << frac_bits) if ef else frac
    p = max(ef, 1) - 1
    k, s = p >> 5, p & 31
    v = mant << s
    pieces = (v & 0xFFFFFFFF, (v >> 32) & 0xFFFFFFFF, v >> 64)
    for j, piece in enumerate(pieces):
        acc[k + j] += -piece if neg else piece


def combine(dst: list[int], src: list[int]) -> None:
    """dst += src, word by word (what the finish does with each chunk's accumulator)."""
    for i, v in enumerate(src):
        dst[i] += v


def value(acc: list[int], dtype: str = "float64") -> Fraction | float:
    """The exact value an accumulator holds: a Fraction, or inf/-inf/nan when special terms were counted."""
    _, _, base, nl = FORMATS[dtype]
    pinf, ninf, nan = acc[nl], acc[nl + 1], acc[nl + 2]
    if nan or (pinf and ninf):
        return math.nan
    if pinf or ninf:
        return math.inf if pinf else -math.inf
    total = sum(v << (DIGIT * k) for k, v in enumerate(acc[:nl]))
    return Fraction(total) * Fraction(2) ** base


def round_exact(acc: list[int], dtype: str = "float64") -> float:
    """The accumulator's value rounded once to nearest-even in `dtype` (a Python float; float32 values are
    exactly representable floats). A zero result is +0.0; beyond the largest finite value it is inf of its
    sign."""
    v = value(acc, dtype)
    if not isinstance(v, Fraction):
        return v
    return round_fraction(v, dtype)


def round_fraction(v: Fraction, dtype: str = "float64") -> float:
    """An exact rational rounded once to nearest-even in `dtype` (ties to even, subnormals kept, overflow to
    inf); zero gives +0.0. The reference tests compare with (math.fsum agrees for float64 when it does not raise
    on an intermediate overflow)."""
    if v == 0:
        return 0.0
    p_bits, e_bits, base, _ = FORMATS[dtype]
    neg, a = v < 0, abs(v)
    emax = (1 << (e_bits - 1)) - 1
    e = a.numerator.bit_length() - a.denominator.bit_length()  # 2**e <= a < 2**(e+2)
    if Fraction(2) ** e > a:
        e -= 1
    elif Fraction(2) ** (e + 1) <= a:
        e += 1
    lsb = max(e - p_bits + 1, base)  # the exponent of the last kept bit (subnormals: the fixed BASE)
    scaled = a / Fraction(2) ** lsb
    q, r = divmod(scaled.numerator, scaled.denominator)
    twice = 2 * r
    if twice > scaled.denominator or (twice == scaled.denominator and q & 1):
        q += 1
    if q * Fraction(2) ** lsb >= Fraction(2) ** (emax + 1):
        return -math.inf if neg else math.inf
    out = math.ldexp(q, lsb)
    return -out if neg else out


def fraction_sum(terms) -> Fraction:
    """The exact sum of finite float terms (any float dtype) as a Fraction, nothing rounded, and independent of the
    accumulator above: np.frexp splits each term into a 53-bit integer times a power of two, the integers are added
    per exponent in two int64 halves (no overflow below 2**36 terms) and the groups joined as Python integers.
    Fast enough for millions of terms: what tests, the card and the benchmarks use as their reference."""
    t = np.asarray(terms, dtype=np.float64).ravel()
    if not np.isfinite(t).all():
        raise ValueError("fraction_sum takes finite terms only")
    t = t[t != 0.0]
    if t.size == 0:
        return Fraction(0)
    m, e = np.frexp(t)
    mant = (m * 2.0**53).astype(np.int64)  # exact: |m| < 1 has at most 53 significant bits
    e = e.astype(np.int64) - 53  # term = mant * 2**e
    order = np.argsort(e, kind="stable")
    e, mant = e[order], mant[order]
    starts = np.flatnonzero(np.r_[True, e[1:] != e[:-1]])
    hi = np.add.reduceat(mant >> 26, starts)  # |mant >> 26| < 2**27
    lo = np.add.reduceat(mant & ((1 << 26) - 1), starts)
    low = int(e[0])
    total = sum(((int(h) << 26) + int(q)) << (int(x) - low) for h, q, x in zip(hi, lo, e[starts], strict=True))
    return Fraction(total << low) if low >= 0 else Fraction(total, 1 << -low)


def exact_sum(terms, dtype: str = "float64") -> float:
    """Reference: the exact sum of `terms` (values of `dtype`), rounded once, through the accumulator."""
    acc = [0] * words(dtype)
    for x in terms:
        deposit(acc, float(x), dtype)
    return round_exact(acc, dtype)
