"""Ordered sums that keep the trailing Grid axes (column sums) run in the column shape on the host
(hawk/passes/chunk_form.py, columns.column_driver): rows of the reduced axes, each lane's term into this
chunk's (high, low) pair of its slot by two TwoSums, branch-free so that the loop over a row vectorizes; what
the pair cannot take (a large term, an inf or a NaN, or a non-zero second error) waits in the row's late
buffer and after the row goes to the slot's exact accumulator (reduce_kept.reduce_column_pair, column_flush).
The lane-by-lane form (a division for the slot and a branch per lane) took 4.9 ms for a 1000 x 1000 grid's
column sums on one thread, 1.1 ms now. Every slot must still be its exact sum rounded once, with the same bits
on any thread count (rows cut between chunks too)."""

import numpy as np
import pytest
from conftest import bt_lanes_func
from exact_families import same_bits, split_runs
from test_chunk_form import _form_of
from test_ordered_kept_nested import _rows_want

import hawk
from hawk import Grid, Scalar, Vector
from hawk.passes import chunk_form
from hawk.passes.lower import context


@hawk.kernel
def xc_cols(g: Grid["r", "c":37], x: Scalar) -> Scalar:
    return hawk.sum(x, over="r", policy="ordered")


@hawk.kernel
def xc_mixed(g: Grid["r", "c":64], x: Scalar, tot: hawk.Mutable[Scalar], avg: hawk.Mutable[Scalar],
             quick: hawk.Mutable[Scalar]):
    tot = hawk.sum(x * x, over="r", policy="ordered", where=x > -0.5)
    avg = hawk.mean(x, over="r", policy="ordered")
    quick = hawk.sum(x, over="r")  # (an "auto" sum beside them in the same row loop)


@hawk.kernel
def xc_vec(g: Grid["r", "c":20], v: Vector[3]) -> Vector[3]:
    return hawk.sum(v, over="r", policy="ordered")


@hawk.kernel
def xc_wide(g: Grid["r", "c":5000], x: Scalar, a: hawk.Mutable[Scalar], b: hawk.Mutable[Scalar]):
    a = hawk.sum(x, over="r", policy="ordered")  # two totals of 5000 slots each: the row's buffers on the heap
    b = hawk.sum(x * 2.0, over="r", policy="ordered")


@hawk.kernel
def xc_wide_out(g: Grid["r", "c":3000], x: Scalar, a: hawk.Mutable[Scalar]) -> Scalar:
    a = hawk.sum(x, over="r", policy="ordered")  # a body that writes: the column chains, buffers on the heap
    return x * 2.0


@hawk.kernel
def xc_flat(g: Grid["r", "c":40000], v: Vector[27]) -> Vector[27]:
    return hawk.sum(v, over="r", policy="ordered")  # 40000 slots x 27 components: past COLUMN_LATE


@hawk.kernel
def xc_broad(g: Grid["r", "c":70000], x: Scalar, a: hawk.Mutable[Scalar], b: hawk.Mutable[Scalar]):
    a = hawk.sum(x, over="r", policy="ordered")  # two totals of 70000 slots each: the column shape (flat until
    b = hawk.sum(x * 2.0, over="r", policy="ordered")  # 2026-12-05, 65,536 slots x components at most)


def _spread(shape, dtype, rng):
    """Terms over many binades, with cancellations down each column."""
    x = rng.standard_normal(shape) * 10.0 ** rng.integers(-12, 12, shape)
    n = (shape[0] - 1) // 5
    x[0:5 * n:5] = -x[1:5 * n + 1:5]
    return x.astype(dtype)


def _cols_want(x, dtype, mask=None, op=None):
    """Each column's exact sum rounded once: the nested test's row sums of the transposed grid."""
    return _rows_want(x.T, dtype, None if mask is None else mask.T, op)


def test_the_column_shape_takes_ordered_sums_on_the_host_only():
    assert _form_of(xc_cols, 0) == "column"
    assert _form_of(xc_mixed, 0) == "column"
    assert _form_of(xc_cols, 0, pairs=False) == "flat"  # (GPU threads: every ordered term to the accumulators)
    assert 2 * 5000 * 8 * 3 > context.HEAP_BYTES and _form_of(xc_wide, 0) == "column"  # (buffers on the heap)
    assert 40000 * 27 > chunk_form.COLUMN_LATE and _form_of(xc_flat, 0) == "flat"
    assert 2 * 70000 > 1 << 16 and _form_of(xc_broad, 0) == "column"


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_column_sums_are_exact_on_any_split(dtype):
    rng = np.random.default_rng(61)
    x = _spread((301, 37), dtype, rng)
    want = _cols_want(x, dtype)
    for threads, out in split_runs(xc_cols, "host", threads=[1, 2, 3], min_chunk=100, x=x):
        same_bits(out, want, dtype, f"columns, threads={threads}")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_column_sums_with_specials_and_huge_terms(dtype):
    rng = np.random.default_rng(62)
    x = rng.standard_normal((400, 37))
    big, top = (1e300, 1.7e308) if dtype == np.float64 else (1e38, 3.0e38)
    x[5, 3] = np.inf
    x[[1, 30], 4] = [np.inf, -np.inf]
    x[9, 5] = np.nan
    x[[2, 200], 6] = [big, -big]  # a pair cannot take them: to the accumulator as they are
    x[[0, 8, 399], 7] = [top, top, -top]  # a naive sum overflows, the exact one does not
    x[:, 8] = -0.0  # a zero result is +0.0
    x[:, 9] = 0.0  # 1 + 2**-53 is a tie that 2**-120 breaks: a second error that must reach the slot
    x[:3, 9] = [1.0, 2.0 ** -53, 2.0 ** -120]
    x = x.astype(dtype)
    want = _cols_want(x, dtype)
    assert np.isposinf(want[3]) and np.isnan(want[4]) and np.isnan(want[5]) and want[7] == dtype(top)
    if dtype == np.float64:
        assert want[9] == 1.0 + 2.0 ** -52
    for threads, out in split_runs(xc_cols, "host", threads=[1, 3], min_chunk=100, x=x):
        same_bits(out, want, dtype, f"specials, threads={threads}")


@pytest.mark.parametrize("row", [0, 1, 150, 299])
def test_a_second_error_in_any_row_reaches_the_slot(row):
    """Column 11 takes 2**60, then 128 (a tie: the high stays 2**60, the low holds 128), then 2**-60 in `row`,
    whose second TwoSum errs by 2**-60: it must wait in the late buffer and reach the slot's accumulator, and it
    decides the rounding (2**60 + 256 with it, the tie's 2**60 without). Every other column stays zero."""
    x = np.zeros((300, 37))
    rows = sorted({0, 1, 2} - {row}) if row < 3 else [0, 1]
    x[rows[0], 11], x[rows[1], 11], x[row, 11] = 2.0 ** 60, 128.0, 2.0 ** -60
    want = np.zeros(37)
    want[11] = 2.0 ** 60 + 256.0
    for threads, out in split_runs(xc_cols, "host", threads=[1, 2], min_chunk=100, x=x):
        same_bits(out, want, np.float64, f"row {row}, threads={threads}")


def test_a_mask_a_mean_and_an_auto_sum_in_the_same_loop():
    rng = np.random.default_rng(63)
    x = rng.standard_normal((90, 64))
    tot = _cols_want(x, np.float64, mask=x > -0.5, op=lambda c: c * c)
    sums = _cols_want(x, np.float64)
    for threads, out in split_runs(xc_mixed, "host", threads=[1, 3], min_chunk=256, x=x):
        same_bits(out["tot"], tot, np.float64, f"masked squares, threads={threads}")
        same_bits(out["avg"], sums / 90.0, np.float64, f"mean, threads={threads}")
        np.testing.assert_allclose(out["quick"], x.sum(axis=0), rtol=1e-12, atol=1e-12)


def test_vector_payloads():
    rng = np.random.default_rng(64)
    v = np.stack([_spread((500, 20), np.float64, rng) for _ in range(3)])  # (payload first, lanes last)
    want = np.stack([_cols_want(v[c], np.float64) for c in range(3)])
    for threads, out in split_runs(xc_vec, "host", threads=[1, 3], min_chunk=100, v=v):
        same_bits(out, want, np.float64, f"Vector[3], threads={threads}")


def test_past_the_column_budget_sums_run_flat_and_exact():
    rng = np.random.default_rng(64)
    v = rng.standard_normal((27, 3, 40000)) * 10.0 ** rng.integers(-3, 4, (27, 3, 40000))
    v[:, 2] = -v[:, 0]  # each column's exact sum is its middle term, which a sum in lane order often misses
    want = v[:, 1].copy()
    for threads, out in split_runs(xc_flat, "host", threads=[1, 2], min_chunk=20_000, v=v):
        same_bits(out, want, np.float64, f"Vector[27] over 40000 columns, threads={threads}")


@pytest.mark.parametrize("kernel, cols", [("xc_wide", 5000), ("xc_broad", 70000)])
def test_wide_rows_are_exact(kernel, cols):
    # the column shape with its row buffers on the heap (tiles, and chains when the body writes)
    rng = np.random.default_rng(65)
    x = _spread((40 if cols == 5000 else 3, cols), np.float64, rng)
    a, b = _cols_want(x, np.float64), _cols_want(x, np.float64, op=lambda c: c * 2.0)
    for threads, out in split_runs(globals()[kernel], "host", threads=[1, 2], min_chunk=20_000, x=x):
        same_bits(out["a"], a, np.float64, f"{kernel}, threads={threads}")
        same_bits(out["b"], b, np.float64, f"{kernel}, doubled")


def test_wide_rows_with_a_per_lane_output_take_the_chains_exactly():
    rng = np.random.default_rng(66)
    x = _spread((150, 3000), np.float64, rng)
    x[:, :1500] = rng.standard_normal((150, 1500))  # (half the columns of one scale: the chains take them)
    assert _form_of(xc_wide_out, 0) == "column"
    want = _cols_want(x, np.float64)
    for threads, out in split_runs(xc_wide_out, "host", threads=[1, 2], min_chunk=100_000, x=x):
        same_bits(out["a"], want, np.float64, f"threads={threads}")
        np.testing.assert_array_equal(out["result"].reshape(x.shape), x * 2.0)


def test_row_buffers_past_the_stack_budget_are_on_the_heap_and_freed():
    # the lanes function keeps at most context.HEAP_BYTES of its buffers on the stack (a thread's stack may be
    # small); the rest it allocates on the heap and frees before it returns
    wide, narrow = bt_lanes_func(xc_wide), bt_lanes_func(xc_cols)
    assert wide.count("memref.alloc(") > 0 and wide.count("memref.alloc(") == wide.count("memref.dealloc")
    assert narrow.count("memref.alloc(") == 0 and narrow.count("memref.alloca(") > 0
