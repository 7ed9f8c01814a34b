"""The host's shortcut for ordered sums over every lane, when a block's two-float chains lose a bit (issue #11).

Full blocks add their terms into TwoSum (high, low) pairs per chain; when a pair cannot hold its chain's exact
sum, the block's terms are deposited one by one instead: re-read from a term buffer when the body writes
something (a store, a scatter), else recomputed by running the body again (no buffer). These kernels take both
routes on data that makes every block's chains lose bits (exponents spread over hundreds of binades), and check
that the rerun adds each term once, keeps the stores right and does not count other reductions twice.
"""

import math
import re

import numpy as np
import pytest
from conftest import bt_ordered_sum
from exact_families import FAMILIES, assert_exact, same_bits, split_runs

import hawk
from hawk import Mutable, Scalar

DTYPES = [np.float64, np.float32]
N = 12_000  # several chunks of exact_families.SMALL lanes, many full blocks each


@hawk.kernel
def xr_with_store(x: Scalar, y: Mutable[Scalar], tot: Mutable[Scalar]):
    y = x * 2.0
    tot = hawk.sum(x, policy="ordered")


@hawk.kernel
def xr_with_others(x: Scalar, tot: Mutable[Scalar], avg: Mutable[Scalar], fast: Mutable[Scalar],
                   comp: Mutable[Scalar]):
    tot = hawk.sum(x, policy="ordered")
    avg = hawk.mean(x * 0.5, policy="ordered")
    fast = hawk.sum(x)
    comp = hawk.sum(x, policy="compensated")


def _bits_lost_everywhere(n: int, dtype, rng) -> np.ndarray:
    """Terms of random sign and exponents far apart (float64: 2^-400..2^400; float32: 2^-100..2^100): no chain
    of any block keeps its exact sum in two floats."""
    span = 400 if dtype == np.float64 else 100
    e = rng.integers(-span, span, n)
    return (rng.choice([-1.0, 1.0], n) * rng.uniform(1.0, 2.0, n) * np.exp2(e.astype(np.float64))).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("family", ["lost", "kahan", "span", "subnormal"])
def test_ordered_sum_beside_a_store_redoes_from_the_term_buffer(family, dtype):
    rng = np.random.default_rng([12_700, len(family), int(dtype == np.float32)])
    x = _bits_lost_everywhere(N, dtype, rng) if family == "lost" else FAMILIES[family](N, dtype, rng)
    for threads, out in split_runs(xr_with_store, "host", x=x):
        assert_exact(out["tot"], x, dtype, f"{family} threads={threads}")
        with np.errstate(over="ignore"):
            same_bits(out["y"], x * dtype(2.0), dtype, f"{family} store threads={threads}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("family", ["lost", "kahan", "span"])
def test_rerun_blocks_count_every_other_reduction_once(family, dtype):
    rng = np.random.default_rng([12_800, len(family), int(dtype == np.float32)])
    x = _bits_lost_everywhere(N, dtype, rng) if family == "lost" else FAMILIES[family](N, dtype, rng)
    half = (x * dtype(0.5)).astype(dtype)
    for threads, out in split_runs(xr_with_others, "host", x=x):
        where = f"{family} threads={threads}"
        assert_exact(out["tot"], x, dtype, where)
        # the mean: the exact sum of the halves rounded once, divided once by the lane count (counted once)
        same_bits(out["avg"], [dtype(bt_ordered_sum(half)) / dtype(N)], dtype, f"{where} mean")
        # the unordered sums: within their error bounds of the exact sum (a block counted twice is far off)
        exact = math.fsum(x.astype(np.float64))
        scale = float(np.abs(x.astype(np.float64)).sum())
        for name in ("fast", "comp"):
            assert abs(float(out[name][0]) - exact) <= 1e-5 * scale, (where, name, out[name], exact)


def test_term_buffer_only_where_the_body_writes():
    # the route each kernel takes, read from its lowered lanes function: a body that stores keeps a term buffer
    # (a stack buffer of ORDERED_BLOCK floats per ordered component); one that only reads reruns its lanes
    # instead (float64: the biased chains' retry runs the group's copies again) and keeps none.
    with_store = xr_with_store.mlir("float32", after="lower-host-lanes")
    read_only = xr_with_others.mlir("float32", after="lower-host-lanes")
    assert "memref.alloca() {alignment = 64 : i64} : memref<1024xf32>" in with_store
    assert "memref<1024xf32>" not in read_only
    text64 = xr_with_store.mlir("float64", after="lower-host-lanes")
    assert "memref.alloca() {alignment = 64 : i64} : memref<1024xf64>" in text64
    assert "memref<2048xf64>" not in xr_with_others.mlir("float64", after="lower-host-lanes")
    # chains per block: 8 float64 ones alone; beside a compensated sum, its 32 (reduce_full.merge_chains)
    for kernel, n, w in ((xr_with_store, 1, 8), (xr_with_others, 2, 32)):
        text = kernel.mlir("float64", after="lower-host-lanes")
        # the chunk's own (high, low) vectors and bias per ordered component (a sum; a sum and a mean)
        assert f"memref.alloca() {{alignment = 64 : i64}} : memref<{3 * w * n}xf64>" in text
        assert f"vector<{w}xi64>" in text  # one lost-bit flag per chain: bits ORed
        for pred in ("ugt", "ult"):  # the range test on the terms' bits (ordered_chains._out_of_range)
            assert re.search(rf"arith.cmpi {pred}, %\S+, %\S+ : vector<{w}xi64>", text), pred
    # float32 chains are float64 sums of the widened terms, and the chunk's pairs float64 too (16 chains x 3; a
    # sum and a mean beside a compensated sum: 2 x 32 x 3)
    assert ": vector<16xf32> to vector<16xf64>" in with_store and ": vector<32xf32> to vector<32xf64>" in read_only
    aligned = "memref.alloca() {alignment = 64 : i64} : "  # (local buffers start on a line: context.local_buffer)
    assert aligned + "memref<48xf64>" in with_store and aligned + "memref<192xf64>" in read_only
    # float32 chains: 16 side by side (one 512-bit vector), or 32 beside a compensated sum (its chains)
    assert "vector<16xf32>" in with_store and "vector<16xi32>" in with_store
    assert "vector<16xi32>" not in read_only and "vector<32xi32>" in read_only
