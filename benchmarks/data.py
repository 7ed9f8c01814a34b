"""Inputs of one (dtype, size) and the NumPy references every implementation's output is checked against."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

KEYS = 1024
BINS = 256
RATE = 0.1
DT = 0.01  # the particles' time step


def grid_shape(n: int) -> tuple[int, int]:
    """(rows, cols) of the 2-D grid for about n lanes: 1000 columns from 10^5 lanes on, fewer for tiny runs."""
    cols = 1000 if n >= 100_000 else max(4, min(64, n // 4))
    return max(3, n // cols), cols


@dataclass
class Data:
    """Inputs for one dtype and size, made once and shared by every operation and implementation."""

    dtype: np.dtype
    n: int
    seed: int = 2024
    cache: dict = field(default_factory=dict)  # peers keep converted inputs here (torch tensors, jax arrays...)

    def __post_init__(self):
        rng = np.random.default_rng(self.seed)
        dt = np.dtype(self.dtype)
        self.dtype = dt
        # x ~ N(0.25, 1): a sum far from zero, about half the lanes positive (the masked sum's mask)
        self.x = (rng.standard_normal(self.n) + 0.25).astype(dt)
        self.keys = rng.integers(0, KEYS, self.n, dtype=np.int64)
        self.skeys = np.sort(self.keys)
        self.t = rng.random(self.n, dtype=dt)  # [0, 1) in the run's dtype
        self.rows, self.cols = grid_shape(self.n)
        self.u = (rng.standard_normal(self.rows * self.cols)).astype(dt).reshape(self.rows, self.cols)
        m = max(1, self.n // 3)  # the particles: n // 3 lanes of Vector[3] positions in [0, 1) and velocities
        self.p = self.t[:3 * m].reshape(3, m) if 3 * m <= self.n else np.zeros((3, m), dt)
        self.v = self.x[:3 * m].reshape(3, m) if 3 * m <= self.n else np.zeros((3, m), dt)
        self._memo: dict = {}

    def memo(self, key, fn):
        if key not in self._memo:
            self._memo[key] = fn()
        return self._memo[key]

    # ---- references ---------------------------------------------------------------------------------
    def exact_sum(self, values: np.ndarray) -> float:
        """A sum accurate well below the dtype's rounding (long double for float64 data)."""
        wide = np.longdouble if values.dtype == np.float64 else np.float64
        return float(np.sum(values.astype(wide)))

    def abs_sum(self) -> float:
        return self.memo("abs_sum", lambda: float(np.abs(self.x).sum(dtype=np.float64)))


def exact_sum(x: np.ndarray) -> Fraction:
    """The exact sum of finite float values as a Fraction, nothing rounded (hawk.exact.fraction_sum)."""
    from hawk.exact import fraction_sum

    return fraction_sum(x)


def ordered_sum(x: np.ndarray) -> np.generic:
    """The "ordered" policy's result (docs/ordered.md): the exact sum of the finite values rounded once to nearest
    even in x's own dtype (float32 straight from the exact value, never through float64); zero gives +0.0."""
    from hawk.exact import round_fraction

    if x.dtype == np.float64:
        return np.float64(math.fsum(x.tolist()) + 0.0)
    return x.dtype.type(round_fraction(exact_sum(x), x.dtype.name))


def ordered_scatter(keys: np.ndarray, x: np.ndarray, slots: int) -> np.ndarray:
    """Ordered scatter (docs/ordered.md), in x's dtype: each slot gets the exact sum of its lanes' values rounded
    once (slots no lane adds to stay +0.0)."""
    order = np.argsort(keys, kind="stable")
    k, v = keys[order], x[order]
    edges = np.searchsorted(k, np.arange(slots + 1))
    out = np.zeros(slots, dtype=x.dtype)
    for s in range(slots):
        seg = v[edges[s]:edges[s + 1]]
        if seg.size:
            out[s] = ordered_sum(seg)
    return out
