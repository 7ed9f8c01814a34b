"""Ordered sums of wide payloads (more than host_emit.WIDE_PAYLOAD components, up to wide.PAIR_PAYLOAD) on the host:
each lane's components go, side by side, into the chunk's float64 (high, low) vectors by two vector TwoSums
(hawk/passes/lower/wide.py reduce_ordered_wide); a component at or above 2**(emax - 64), an inf or a NaN, and a
non-zero second error go to the chunk's exact accumulator for that component; the vectors are deposited when the
chunk ends. Before, every component of every lane was deposited (a Vector[16] sum of 62,500 lanes: 6-14 ms on
one thread, 0.74 ms now). Each component must still be its exact sum rounded once, on any split."""

import numpy as np
import pytest
from conftest import bt_ordered_sum
from exact_families import same_bits, split_runs

import hawk
from hawk import Vector


@hawk.kernel
def xw_sum(v: Vector[16]) -> Vector[16]:
    return hawk.sum(v, policy="ordered", where=v[0] > -1.0)


@hawk.kernel
def xw_mean(v: Vector[12]) -> Vector[12]:
    return hawk.mean(v, policy="ordered")


def _spread(shape, dtype, rng):
    return (rng.standard_normal(shape) * 10.0 ** rng.integers(-20, 20, shape)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_wide_ordered_sums_are_exact_on_any_split(dtype):
    rng = np.random.default_rng(61)
    v = _spread((16, 20001), dtype, rng)
    v[3, 7] = np.inf
    v[4, 9] = np.nan
    v[5, [1, 2]] = [1e300 if dtype == np.float64 else 3e38] * 2  # past the pairs' bound: straight to the accumulator
    v[6] = 0.0  # component 6: 1 + 2**-53 is a float64 tie that a third term breaks, which no pair can hold
    v[6, [10, 4000, 4001]] = [1.0, 2.0 ** -53, 2.0 ** -120]
    mask = v[0] > -1.0
    mask[[10, 4000, 4001]] = True
    v[0, [10, 4000, 4001]] = 0.0
    want = np.array([bt_ordered_sum(v[c], dtype, mask) for c in range(16)], dtype=dtype)
    assert np.isposinf(want[3]) and np.isnan(want[4])
    assert dtype == np.float32 or want[6] == 1.0 + 2.0 ** -52
    for threads, out in split_runs(xw_sum, "host", threads=[1, 3], min_chunk=1000, v=v):
        same_bits(out, want, dtype, f"Vector[16], threads={threads}")


def test_wide_ordered_means():
    rng = np.random.default_rng(62)
    v = _spread((12, 9001), np.float64, rng)
    want = np.array([bt_ordered_sum(v[c], np.float64) for c in range(12)]) / 9001
    for threads, out in split_runs(xw_mean, "host", threads=[1, 3], min_chunk=1000, v=v):
        same_bits(out, want, np.float64, f"Vector[12] mean, threads={threads}")
