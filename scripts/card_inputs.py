"""The inputs and exact references of the accuracy card (scripts/card.py): the input families drawn for every
(dtype, length), the adversarial sets, and the exact sum of a run (a Fraction), with k and the error in ulps
measured against it. No hawk kernels here: NumPy, math.fsum, Fractions and hawk.exact's rounding only."""

import math
from fractions import Fraction

import numpy as np

from hawk.exact import FORMATS, fraction_sum, round_fraction

KEYS = 4  # slots the spread and grouped scatter layouts use; every slot gets a full run of the length

# ---------------------------------------------------------------------------------------------- inputs


def eps_of(dtype) -> float:
    """Machine epsilon of a float dtype."""
    return float(np.finfo(dtype).eps)


def cancelling(n, dtype, rng):
    """Pairs b and r - b: big values (1 .. 2e7) that cancel up to small residues r (|r| < 1e-3), shuffled."""
    half = n // 2
    b = (rng.uniform(1.0, 2.0, half) * 10.0 ** rng.uniform(0.0, 7.0, half)).astype(dtype)
    r = rng.uniform(-1e-3, 1e-3, half).astype(dtype)
    t = np.concatenate([b, (r - b).astype(dtype), np.full(n % 2, 0.625, dtype=dtype)])
    return rng.permutation(t).astype(dtype)


def wide(n, dtype, rng):
    """Random signs, decimal exponents uniform over 1e-290 .. 1e283 (float32: 1e-30 .. 1e23): no overflow."""
    d = 290.0 if np.dtype(dtype) == np.float64 else 30.0
    mant = rng.uniform(1.0, 10.0, n) * rng.choice([-1.0, 1.0], n)
    return (mant * 10.0 ** rng.uniform(-d, d - 7.0, n)).astype(dtype)


def wide_cancelling(n, dtype, rng):
    """Wide exponents where each huge term also appears negated; what is left is small (|v| ~ 1e-3 .. 1e3)."""
    w = wide(n // 2 - n // 8, dtype, rng)
    rest = n - 2 * w.size
    tail = (rng.normal(size=rest) * 10.0 ** rng.uniform(-3.0, 3.0, rest)).astype(dtype)
    return rng.permutation(np.concatenate([w, -w, tail])).astype(dtype)


def absorbing(n, dtype, rng):
    """1.0, then n - 1 terms of 0.49 eps: each lies under half an ulp of the running sum (a plain add drops it)."""
    t = np.full(n, 0.49 * eps_of(dtype), dtype=dtype)
    t[0] = 1.0
    return t


def positive(n, dtype, rng):
    """Uniform on [0, 1): no cancellation, the running sum grows steadily (the usual case for a plain sum)."""
    return rng.uniform(0.0, 1.0, n).astype(dtype)


FAMILIES = {"cancelling": cancelling, "wide": wide, "wide_cancelling": wide_cancelling,
            "absorbing": absorbing, "positive": positive}
LAYOUTS = {  # how the lanes of a scatter meet the slots
    "one": "every lane to key 0 (Index key)",
    "one_sorted": "every lane to key 0 (Sorted[Index] key)",
    "spread": f"{KEYS} keys, a run of the length each, lanes shuffled (Index key)",
    "grouped": f"{KEYS} keys, a run of the length each, keys grouped (Sorted[Index] key)",
}



def adv_cancellation(n, dtype, rng):
    """Kahan-style: 1, 1e100, 1, -1e100 (float32: 1e30) among pairs b, r - b (|b| up to 1e15, float32 1e7) that
    cancel up to small residues r; the exact sum is tiny next to the terms."""
    big = 1e100 if np.dtype(dtype) == np.float64 else 1e30
    q = (n - 4) // 2
    b = rng.uniform(1.0, 2.0, q) * 10.0 ** rng.uniform(0.0, 15.0 if np.dtype(dtype) == np.float64 else 7.0, q)
    b = (b * rng.choice([-1.0, 1.0], q)).astype(dtype)
    r = rng.uniform(-1e-3, 1e-3, q).astype(dtype)
    t = np.concatenate([[1.0, big, 1.0, -big], b, (r - b).astype(dtype), np.zeros(n - 4 - 2 * q)])
    return rng.permutation(t.astype(dtype))


def adv_dynamic_range(n, dtype, rng):
    """Random signs, decimal exponents uniform over 1e-300 .. 1e300 (float32: 1e-44 .. 1e37)."""
    lo, hi = (-300.0, 300.0) if np.dtype(dtype) == np.float64 else (-44.0, 37.0)
    return (rng.choice([-1.0, 1.0], n) * rng.uniform(1.0, 10.0, n) * 10.0 ** rng.uniform(lo, hi, n)).astype(dtype)


def adv_subnormals(n, dtype, rng):
    """Subnormals of both signs and a few small normals whose last bit lies above the subnormals' units."""
    fi = np.finfo(dtype)
    k = rng.integers(-(2 ** (fi.nmant - 1)), 2 ** (fi.nmant - 1), n - 8)
    normals = rng.uniform(1.0, 2.0, 8) * rng.choice([-1.0, 1.0], 8) * 2.0 ** (fi.minexp + 20)
    return rng.permutation(np.concatenate([k * 2.0 ** (fi.minexp - fi.nmant), normals])).astype(dtype)


ADVERSARIAL = {"cancellation": adv_cancellation, "dynamic_range": adv_dynamic_range, "subnormals": adv_subnormals}
ADVERSARIAL_LENGTH = 10_000


# ---------------------------------------------------------------------------------------------- references


def exact_sum(terms: np.ndarray) -> Fraction:
    """The exact sum of finite float terms, as a Fraction (hawk.exact.fraction_sum)."""
    return fraction_sum(terms)


class Exact:
    """One run's references, computed once: fsum(terms) and fsum(|terms|) for k; the exact sum (a Fraction),
    its correct rounding in the run's dtype and the ulp there, for the error in ulps."""

    def __init__(self, terms: np.ndarray):
        t = terms.astype(np.float64)
        self.sum = math.fsum(t.tolist())
        self.scale = math.fsum(np.abs(t).tolist())
        self.dtype = terms.dtype
        self.value = exact_sum(terms)
        self.rounded = round_fraction(self.value, self.dtype.name)
        p_bits, _, base, _ = FORMATS[self.dtype.name]
        a = abs(self.value)
        e = a.numerator.bit_length() - a.denominator.bit_length() if a else base  # a < 2**(e+1)
        if a and Fraction(2) ** e > a:  # now 2**e <= a
            e -= 1
        self.ulp = Fraction(2) ** max(e - p_bits + 1, base)

    def k(self, got, eps: float) -> float:
        err = abs(float(got) - self.sum)
        if self.scale == 0.0:
            return 0.0 if err == 0.0 else math.inf
        return err / (eps * self.scale)

    def ulps(self, got) -> float:
        """|got - exact sum| in ulps of the exact sum (in the run's dtype)."""
        g = float(got)
        if not math.isfinite(g) or not math.isfinite(self.rounded):
            return 0.0 if g == self.rounded else math.inf
        return float(abs(Fraction(g) - self.value) / self.ulp)

    def correct(self, got) -> bool:
        """Bit for bit the exact sum rounded once (a zero as +0.0)."""
        want = np.asarray(self.rounded, dtype=self.dtype)
        return np.asarray(got, dtype=self.dtype).tobytes() == want.tobytes()
