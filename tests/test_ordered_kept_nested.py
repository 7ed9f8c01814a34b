"""Ordered sums that keep the leading Grid axes run in the nested shape on the host (hawk/passes/chunk_form.py,
chunk_loops.nested_driver): a loop per kept slot over its contiguous lanes, whose terms go, eight lanes at a
time, into eight float64 TwoSum pairs side by side in registers (reduce_kept.reduce_nested_pair,
nested_group_step); a large term, an inf or a NaN, and a non-zero second error go to the slot's exact
accumulator. The lane-by-lane form ran one TwoSum chain into the slot's pair in memory per lane (7-11 ms for a
1000 x 1000 grid's row sums on one thread, 0.85 ms now). Every slot must still be its exact sum rounded once,
with the same bits on any thread count (rows cut between chunks too)."""

import numpy as np
import pytest
from conftest import bt_ordered_sum
from exact_families import fsum_or_none, same_bits, split_runs

import hawk
from hawk import Grid, Scalar, Vector


@hawk.kernel
def xn_rows(g: Grid["r", "c":37], x: Scalar) -> Scalar:  # (37 columns: four groups of 8 and a tail of 5)
    return hawk.sum(x, over="c", policy="ordered")


@hawk.kernel
def xn_mixed(g: Grid["r", "c":64], x: Scalar, tot: hawk.Mutable[Scalar], avg: hawk.Mutable[Scalar],
             quick: hawk.Mutable[Scalar]):
    tot = hawk.sum(x * x, over="c", policy="ordered", where=x > -0.5)
    avg = hawk.mean(x, over="c", policy="ordered")
    quick = hawk.sum(x, over="c")  # (an "auto" sum beside them in the same slot loop)


@hawk.kernel
def xn_vec(g: Grid["r", "c":20], v: Vector[3]) -> Vector[3]:
    return hawk.sum(v, over="c", policy="ordered")


def _spread(shape, dtype, rng):
    """Terms over many binades, with cancellations."""
    x = rng.standard_normal(shape) * 10.0 ** rng.integers(-12, 12, shape)
    x[..., ::5] = -x[..., 1::5][..., : x[..., ::5].shape[-1]] if shape[-1] > 5 else x[..., ::5]
    return x.astype(dtype)


def _rows_want(x, dtype, mask=None, op=None):
    """Each row's exact sum rounded once: math.fsum for finite float64 rows (about 100 times faster than the
    Fraction sum, which a 70,000-slot case spent 11 s in), bt_ordered_sum for the rest."""
    out = []
    for i in range(x.shape[0]):
        t = x[i] if op is None else op(x[i])
        t = t if mask is None else t[np.asarray(mask[i], dtype=bool)]
        f = fsum_or_none(t) if dtype == np.float64 else None
        out.append(f + 0.0 if f is not None else bt_ordered_sum(t, dtype))  # (+ 0.0: a zero result is +0.0)
    return np.array(out, dtype=dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_row_sums_are_exact_on_any_split(dtype):
    rng = np.random.default_rng(51)
    x = _spread((301, 37), dtype, rng)
    want = _rows_want(x, dtype)
    for threads, out in split_runs(xn_rows, "host", threads=[1, 2, 3], min_chunk=100, x=x):
        same_bits(out, want, dtype, f"rows, threads={threads}")


def test_row_sums_with_specials_and_huge_terms():
    rng = np.random.default_rng(52)
    x = rng.standard_normal((400, 37))
    x[3, 5] = np.inf
    x[4, [1, 30]] = [np.inf, -np.inf]
    x[5, 9] = np.nan
    x[6, [2, 20]] = [1e300, -1e300]  # past the pairs' 2**960: to the accumulator as they are
    x[7, [0, 8, 16]] = [1.7e308, 1.7e308, -1.7e308]  # a naive sum overflows, the exact one does not
    x[8, :] = -0.0  # a zero result is +0.0
    x[9, :] = 0.0  # three pairs whose values one pair cannot hold: 1 + 2**-53 is a tie that 2**-120 breaks
    x[9, :3] = [1.0, 2.0 ** -53, 2.0 ** -120]
    want = _rows_want(x, np.float64)
    assert want[9] == 1.0 + 2.0 ** -52
    assert np.isposinf(want[3]) and np.isnan(want[4]) and np.isnan(want[5]) and want[7] == 1.7e308
    for threads, out in split_runs(xn_rows, "host", threads=[1, 3], min_chunk=100, x=x):
        same_bits(out, want, np.float64, f"specials, threads={threads}")


def test_a_mask_a_mean_and_an_auto_sum_in_the_same_loop():
    rng = np.random.default_rng(53)
    x = rng.standard_normal((90, 64))
    tot = _rows_want(x, np.float64, mask=x > -0.5, op=lambda r: r * r)
    sums = _rows_want(x, np.float64)
    for threads, out in split_runs(xn_mixed, "host", threads=[1, 3], min_chunk=256, x=x):
        same_bits(out["tot"], tot, np.float64, f"masked squares, threads={threads}")
        same_bits(out["avg"], sums / 64.0, np.float64, f"mean, threads={threads}")
        np.testing.assert_allclose(out["quick"], x.sum(axis=1), rtol=1e-12, atol=1e-12)


def test_vector_payloads():
    rng = np.random.default_rng(54)
    v = _spread((3, 500, 20), np.float64, rng)
    want = np.stack([_rows_want(v[c], np.float64) for c in range(3)])
    for threads, out in split_runs(xn_vec, "host", threads=[1, 3], min_chunk=100, v=v):
        same_bits(out, want, np.float64, f"Vector[3], threads={threads}")


@pytest.mark.parametrize("j", range(8))
def test_a_second_error_in_any_pair_of_a_group_reaches_the_slot(j):
    """Pair j of a group (lanes j, 8 + j and 16 + j of a row) takes 2**60, then 128 (a tie: the high stays
    2**60, the low holds 128), then 2**-60, whose second TwoSum errs by 2**-60: that error must reach the
    slot's accumulator, and it decides the rounding (2**60 + 256 with it, the tie's 2**60 without)."""
    x = np.zeros((3, 37))
    x[1, [j, 8 + j, 16 + j]] = [2.0 ** 60, 128.0, 2.0 ** -60]
    for _, out in split_runs(xn_rows, "host", threads=[1], min_chunk=100, x=x):
        same_bits(out, np.array([0.0, 2.0 ** 60 + 256.0, 0.0]), np.float64, f"pair {j}")
