"""Ordered sums over every lane whose body reads neighbours (`.at`) or writes (a store): on the host, a full
block's lanes run first in one plain loop that writes their terms to the block's term buffer, then the two-float
chains add the buffer (chunk_loops.terms_first). These check that this route gives the exact sum rounded once at
every thread count, with the other reductions of the body (a fast sum, a masked ordered mean) counted once per
lane, on data that keeps the chains exact and on data that makes every block lose bits (retry and deposit).
"""

import numpy as np
import pytest
from conftest import bt_ordered_sum
from exact_families import assert_exact, same_bits, split_runs

import hawk
import hawk.math as m
from hawk import Index, Mutable, Scalar

N = 12_000  # several chunks of exact_families.SMALL lanes: full blocks, chunk ends inside blocks


@hawk.kernel
def tl_gather(x: Scalar, src: Index, y: Scalar, tot: Mutable[Scalar], fast: Mutable[Scalar],
              avg: Mutable[Scalar]):
    v = x.at(src) * y
    tot = hawk.sum(v, policy="ordered")
    fast = hawk.sum(v)
    avg = hawk.mean(v, where=y > 0.0, policy="ordered")


@hawk.kernel
def tl_math_store(x: Scalar, z: Mutable[Scalar], tot: Mutable[Scalar]):
    z = m.exp(x * 0.5)
    tot = hawk.sum(z * x, policy="ordered")


def _data(kind: str, dtype, rng) -> np.ndarray:
    if kind == "plain":
        return rng.normal(size=N).astype(dtype)
    span = 400 if dtype == np.float64 else 100  # exponents far apart: no block's chains stay exact
    e = rng.integers(-span, span, N).astype(np.float64)
    return (rng.choice([-1.0, 1.0], N) * rng.uniform(1.0, 2.0, N) * np.exp2(e)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kind", ["plain", "lost"])
def test_gathered_terms_sum_exactly_beside_other_reductions(kind, dtype):
    rng = np.random.default_rng([1311, len(kind), int(dtype == np.float32)])
    x = _data(kind, dtype, rng)
    src = rng.integers(0, N, N).astype(np.int32)
    y = rng.choice([-1.0, 0.5, 2.0], N).astype(dtype)
    v = x[src] * y
    for threads, out in split_runs(tl_gather, "host", x=x, src=src, y=y):
        what = f"{kind} {np.dtype(dtype).name} threads={threads}"
        assert_exact(out["tot"], v, dtype, what)
        mean = bt_ordered_sum(v, dtype, y > 0.0) / dtype(np.count_nonzero(y > 0.0))
        same_bits(out["avg"].reshape(-1)[:1], [mean], dtype, f"{what} mean")
        if kind == "plain":  # (a fast sum promises no bits: close to the exact one)
            np.testing.assert_allclose(out["fast"].reshape(-1)[0], np.sum(v.astype(np.float64)), rtol=1e-4)


def test_math_term_beside_a_store_matches_its_own_stored_terms():
    """The stored plane is the body's own value, so the exact sum of z * x (NumPy, from the stored z) is what
    the ordered sum must give, bit for bit, whatever the split."""
    x = np.random.default_rng(1312).normal(size=N)
    for threads, out in split_runs(tl_math_store, "host", x=x):
        np.testing.assert_allclose(out["z"], np.exp(x * 0.5), rtol=1e-15)
        assert_exact(out["tot"], out["z"] * x, np.float64, f"threads={threads}")
