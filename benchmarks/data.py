"""Inputs of one (dtype, size) and the NumPy references every implementation's output is checked against."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hawk.layout import ORDERED_BLOCK, ORDERED_CHAINS

KEYS = 1024
BINS = 256
RATE = 0.1


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


def ordered_sum(x: np.ndarray) -> np.generic:
    """The "ordered" tree of docs/ordered.md, step by step in NumPy, in x's own dtype (no wider accumulator).

    Blocks of ORDERED_BLOCK lanes; inside a block lane i feeds chain i mod ORDERED_CHAINS, a strict sequential sum
    from -0.0; the block partial is ((c0+c1)+(c2+c3))+((c4+c5)+(c6+c7)); block partials are added pairwise level by
    level, an odd last one moving up unchanged. Padding the last block with -0.0 changes no bit (x + -0.0 == x).
    """
    dt = x.dtype
    if x.size == 0:
        return dt.type(0.0)
    nblocks = -(-x.size // ORDERED_BLOCK)
    padded = np.full(nblocks * ORDERED_BLOCK, -0.0, dtype=dt)
    padded[: x.size] = x
    lanes = padded.reshape(nblocks, ORDERED_BLOCK // ORDERED_CHAINS, ORDERED_CHAINS)
    chains = np.full((nblocks, ORDERED_CHAINS), -0.0, dtype=dt)
    for i in range(lanes.shape[1]):  # strict lane order inside each chain
        chains += lanes[:, i, :]
    level = chains.T.copy()  # (chains, blocks)
    while level.shape[0] > 1:  # ((c0+c1)+(c2+c3))+((c4+c5)+(c6+c7))
        level = level[0::2] + level[1::2]
    parts = level[0]
    while parts.size > 1:
        pairs = parts[: parts.size // 2 * 2]
        summed = pairs[0::2] + pairs[1::2]
        parts = np.concatenate([summed, parts[pairs.size:]])
    return parts[0]


def ordered_scatter(keys: np.ndarray, x: np.ndarray, slots: int) -> np.ndarray:
    """Ordered scatter (docs/ordered.md), in x's dtype: within each segment of lanes each slot's lanes are added
    in lane order (np.add.at is sequential in index order), then the segments' partials in segment order."""
    from hawk.layout import ordered_segment

    q, count = ordered_segment(slots, keys.size)
    total = np.full(slots, -0.0, dtype=x.dtype)
    for s in range(count):
        part = np.full(slots, -0.0, dtype=x.dtype)
        np.add.at(part, keys[s * q:(s + 1) * q], x[s * q:(s + 1) * q])
        total += part
    return np.zeros(slots, dtype=x.dtype) + total
