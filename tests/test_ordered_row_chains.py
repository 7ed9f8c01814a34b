"""Ordered kept totals of rows of at least 64 lanes take biased chains on the host (hawk/passes/lower/
nested_chains.py): a block of up to 128 groups of 8 lanes adds each term into its chain (M, 0) by one Fast2Sum
and widens the block's range of |term|; the block's end keeps the chains when every term lay in
[2**(p-47), 2**(p-9)] (or was zero) and otherwise gives the block's buffered terms to the pairs. p comes from
the previous block's largest term (its exponent + 12). float32 rows take windowed chains in groups of 16 lanes
(the range on the float32 bits), a row's last 8 lanes past its groups of 16 as one more group. Every row must
still be its exact sum rounded once.

The range tests put terms right at both ends of the range the guess allows, 128 to a chain (so a wider range
loses bits: moving either end by three binades fails them), and terms just past either end. The runs take both of
a block's checks (conftest's chain_check): the range, and the inexact flag (x86-64 with AVX-512F's silent adds,
or float64 terms cut on a grid with AVX and FMA: hawk/passes/lower/flag_chains.py), which must get these rows
right too."""

import numpy as np
import pytest
from conftest import bt_ordered_sum
from exact_families import chain_adversary, same_bits, split_runs

import eagle
import hawk
from hawk import Grid, Mutable, Scalar, Vector
from hawk.passes.lower import nested_chains
from hawk.passes.lower.ordered_chains import F32_START, F32_WINDOW, HEADROOM, LOW_RANGE, P_START

COLS = 1024  # one block a row: 128 terms a chain


@hawk.kernel
def rc_rows(g: Grid["r", "c":1024], x: Scalar) -> Scalar:
    return hawk.sum(x, over="c", policy="ordered")


@hawk.kernel
def rc_long(g: Grid["r", "c":2603], x: Scalar) -> Scalar:  # (two whole blocks, one of 69 groups, 3 lanes after)
    return hawk.sum(x, over="c", policy="ordered")


@hawk.kernel
def rc_half(g: Grid["r", "c":1000], x: Scalar) -> Scalar:  # (float32: 62 groups of 16, then one of 8)
    return hawk.sum(x, over="c", policy="ordered")


@hawk.kernel
def rc_next(g: Grid["r", "c":2061], x: Scalar) -> Scalar:  # (float32: a block of 2048 lanes, one of 8, 5 lanes after)
    return hawk.sum(x, over="c", policy="ordered")


@hawk.kernel
def rc_vec3(g: Grid["r", "c":256], v: Vector[3]) -> Vector[3]:  # (three components: groups of 8)
    return hawk.sum(v, over="c", policy="ordered")


@hawk.kernel
def rc_mixed(g: Grid["r", "c":512], x: Scalar, v: Vector[2], avg: Mutable[Scalar], tot: Mutable[Vector[2]],
             quick: Mutable[Scalar]):
    avg = hawk.mean(x, over="c", policy="ordered", where=x > -1.0)
    tot = hawk.sum(v, over="c", policy="ordered")
    quick = hawk.sum(x, over="c")  # (an "auto" total in the same group loop)


def _rows_want(x, dtype, mask=None):
    return np.array([bt_ordered_sum(x[i], dtype, None if mask is None else mask[i]) for i in range(x.shape[0])],
                    dtype=dtype)


def _schedule(dtype) -> tuple[int, int, int, float]:
    """How the guess moves, for rows whose largest term has exponent t: (the chunk's first row's top exponent,
    the step to the next row's, the binades the range reaches under the top, the largest magnitude allowed at
    exponent t as a factor of 2**t). float64 (biased): M = 1.5 * 2**(t' + ROW_STEP) for the row before's top
    exponent t' allows [2**(t-38), 2**t] with t = t' + 3; float32 (windowed): 2**E with E = t' + WINDOW_STEP
    allows exponents E - 22 .. E."""
    if dtype == np.float64:
        assert P_START - HEADROOM == 7 and nested_chains.ROW_STEP - HEADROOM == 3
        return 7, 3, LOW_RANGE - HEADROOM, 1.0
    return F32_START, nested_chains.WINDOW_STEP, F32_WINDOW, 2.0 - 2.0 ** -23


def _edge_rows(dtype, rng, rows: int, past: str | None = None) -> np.ndarray:
    """Row i's largest magnitude is the most its guess allows (_schedule: the row before sets it), and its
    terms fill the range down to the floor: full mantissas, both signs, terms right at the floor; a few rows
    take every term at the ceiling (128 a chain), or (`past`) terms just over the ceiling or under the floor."""
    first, step, reach, most = _schedule(dtype)
    x = np.empty((rows, COLS))
    for i in range(rows):
        top = first + step * i
        floor = top - reach
        row = np.ldexp(rng.uniform(1.0, 2.0, COLS), rng.integers(floor, top, COLS)) * rng.choice([-1.0, 1.0], COLS)
        row[::97] = np.ldexp(rng.choice([-1.0, 1.0], row[::97].size), floor)  # right at the floor
        row[5] = most * 2.0 ** top
        if i % 7 == 3:
            row[:] = most * 2.0 ** top
        if past == "ceiling" and i % 5 == 2:
            row[::3] = 2.0 ** (top + 3) * rng.uniform(0.5, 1.0, row[::3].size)
        if past == "floor" and i % 5 == 2:
            row[1::3] = np.ldexp(rng.uniform(1.0, 2.0, row[1::3].size), floor - 2)
        x[i] = row
    return x.astype(dtype)


@pytest.mark.parametrize("past", [None, "ceiling", "floor"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_rows_at_the_ends_of_the_chains_range(dtype, past, chain_check):
    rows = 20 if dtype == np.float32 else 60  # (float32 window tops stay <= 2**62)
    x = _edge_rows(dtype, np.random.default_rng(61), rows, past)
    want = _rows_want(x, dtype)
    for threads, out in split_runs(rc_rows, "host", threads=[1], x=x):
        same_bits(out, want, dtype, f"edges past={past}, threads={threads}")


def _adversary(kind: str, dtype) -> np.ndarray:
    """One row (a chunk's first: p = P_START, E = F32_START) whose chains stay exact only because the range stops
    where it does (exact_families.chain_adversary, a chain's terms). Half the chains take the big terms
    negated, so the row's exact sum is a float with the last terms' bit."""
    each = chain_adversary(kind, dtype, P_START, F32_START)
    # lane j of a group of 8 goes to chain j: chains 4-7 take the negated big terms (float32 groups are 16 lanes,
    # so there a chain takes every other group of 8: 64 of the terms, whose sum still drops the last bit)
    groups = np.stack([each] * 4 + [np.where(each == each[-1], each, -each)] * 4, axis=1)
    return groups.reshape(1, -1).astype(dtype)


@pytest.mark.parametrize("kind", ["floor", "ceiling"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_terms_just_outside_the_range_leave_the_chains(kind, dtype, chain_check):
    x = _adversary(kind, dtype)
    assert x.shape == (1, COLS)
    want = _rows_want(x, dtype)
    out = np.asarray(eagle.deploy(rc_rows, threads=1).run(x=x))
    same_bits(out, want, dtype, f"{kind} adversary")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_long_rows_cut_between_chunks(dtype, chain_check):
    """Rows of several blocks, cut between chunks (each chunk's first block guesses P_START), with magnitudes
    that jump from row to row: every block whose guess is off goes to the pairs."""
    rng = np.random.default_rng(62)
    x = rng.standard_normal((24, 2603)) * 10.0 ** rng.integers(-30, 30, (24, 1))
    x[3] *= 10.0 ** rng.integers(-8, 8, 2603)  # many binades in one row
    tiny = 5e-324 if dtype == np.float64 else 1e-45  # subnormal terms: under every floor
    for row, cols, value in [(5, slice(1500, None), 0.0), (6, slice(None), -0.0), (7, 2000, np.inf),
                             (8, [10, 2600], [np.inf, -np.inf]), (9, 1024, np.nan), (10, slice(None, None, 2), tiny)]:
        x[row, cols] = value
    x = x.astype(dtype)
    want = _rows_want(x, dtype)
    for threads, out in split_runs(rc_long, "host", threads=[1, 2, 3], min_chunk=1500, x=x):
        same_bits(out, want, dtype, f"long rows, threads={threads}")


def test_a_masked_mean_a_vector_sum_and_an_auto_sum_in_one_loop():
    rng = np.random.default_rng(63)
    x = rng.standard_normal((40, 512))
    x[4] *= 1e200
    x[5, 7] = np.nan
    v = rng.standard_normal((2, 40, 512)) * 10.0 ** rng.integers(-5, 5, (1, 40, 512))  # (payload first)
    mask = x > -1.0
    want_sum = np.array([bt_ordered_sum(x[i], np.float64, mask[i]) for i in range(40)])
    want_avg = want_sum / mask.sum(axis=1)
    want_tot = np.stack([_rows_want(v[c], np.float64) for c in range(2)])
    for threads, out in split_runs(rc_mixed, "host", threads=[1, 2], min_chunk=1024, x=x, v=v):
        same_bits(out["avg"], want_avg, np.float64, f"masked mean, threads={threads}")
        same_bits(np.stack([out["tot_0"], out["tot_1"]]), want_tot, np.float64, f"vector sum, threads={threads}")
        np.testing.assert_allclose(out["quick"][6:], x[6:].sum(axis=1), rtol=1e-12)


def test_row_groups_prefetch_the_lanes_one_block_on():
    # each group of 8 lanes hints its 64-byte line (float64) one block of 1024 lanes on (planes.prefetch_ahead),
    # as full blocks of sums over every lane do: without them the row chains ran 1.8-2.4x a plain row sum at
    # 1e7 lanes (from memory), with them about 1x. Only hints: the results above do not depend on them.
    text = rc_rows.mlir("float64", after="lower-host-lanes")
    hints = [line for line in text.splitlines() if "prefetch" in line]
    assert hints and all('"llvm.intr.prefetch"' in h and "<{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}>" in h
                         for h in hints), hints


def test_float32_rows_take_groups_of_16_and_a_last_group_of_8(chain_check):
    """Groups of 16 float32 lanes; a row (or a chunk's part of one) whose groups leave 8 lanes runs them as one
    more group, its other 8 terms zeros, into the same chains; the lanes after it one by one. Rows cut between
    chunks, rows whose magnitudes jump, special values in the last group."""
    for kernel in (rc_half, rc_next):
        text = kernel.mlir("float32", after="lower-host-lanes")
        assert "vector<16xi32>" in text and "vector<16xf32>" in text, kernel.name
        cols = 1000 if kernel is rc_half else 2061
        rng = np.random.default_rng(64)
        x = rng.standard_normal((30, cols)) * 10.0 ** rng.integers(-12, 12, (30, 1))
        x[2, -12:] = 3e38  # the last group and the lanes after it: past float32's range together
        x[3, 992:1000] = np.float32(1e-45)  # subnormal terms, under every window
        x[4, 995] = np.nan
        x[5, ::2] *= 1e9
        x = x.astype(np.float32)
        want = _rows_want(x, np.float32)
        for threads, out in split_runs(kernel, "host", threads=[1, 2, 3], min_chunk=3 * cols // 2, x=x):
            same_bits(out, want, np.float32, f"{kernel.name}, threads={threads}")
    assert "vector<16xi32>" not in rc_vec3.mlir("float32", after="lower-host-lanes")
    v = np.random.default_rng(65).standard_normal((3, 12, 256)).astype(np.float32)
    out = np.asarray(eagle.deploy(rc_vec3, threads=1).run(v=v))
    same_bits(out, np.stack([_rows_want(v[c], np.float32) for c in range(3)]), np.float32, "Vector[3]")
