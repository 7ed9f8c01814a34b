"""Plain kept totals in the column shape take tiles on the host when they are the stage's only reductions and the
body writes nothing (hawk/passes/lower/column_plain.py): "auto" sums and means, max and min keeping the trailing
axes accumulate per slot in registers while a tile of slots walks down a block of rows, and each block's
accumulators go into the slots at its end; the slots after the last tile and the lanes of a row a chunk holds in
part take the row loop's step. Sums must stay within the plain bound against math.fsum (and give the same bits
on a rerun of the same chunking); max and min are exact, NaN and signed zeros included."""

import math

import numpy as np
import pytest
from exact_families import split_runs

import eagle
import hawk
from hawk import Grid, Mutable, Scalar, Vector
from hawk.passes.lower import column_tiles

# ruff: noqa: UP037 (axis labels in annotations are strings, not forward references)


@hawk.kernel
def pt_sum(g: Grid["r", "c":43], x: Scalar) -> Scalar:  # (a tile of WIDE slots, one of TILE, three alone)
    return hawk.sum(x, over="r")


@hawk.kernel
def pt_mean(g: Grid["r", "c":37], x: Scalar) -> Scalar:  # (a sum and a count: tiles of WIDE // 2, then TILE)
    return hawk.mean(x * 2.0, over="r", where=x > -0.5)


@hawk.kernel
def pt_max(g: Grid["r", "c":43], x: Scalar) -> Scalar:
    return hawk.max(x, over="r")


@hawk.kernel
def pt_min(g: Grid["r", "c":43], x: Scalar) -> Scalar:
    return hawk.min(x, over="r", where=x < 1.0)


@hawk.kernel
def pt_vec(g: Grid["r", "c":20], v: Vector[3]) -> Vector[3]:
    return hawk.sum(v, over="r")


@hawk.kernel
def pt_out(g: Grid["r", "c":43], x: Scalar, y: Scalar, total: Mutable[Scalar]) -> Scalar:  # (a body that writes:
    total = hawk.sum(x, over="r")  # the row loop)
    return x + y


def _within_bound(got, x, dtype, what, mask=None):
    """Each column within rows x eps x sum(|terms|) of math.fsum of its terms (the plain bound)."""
    eps = float(np.finfo(dtype).eps)
    terms = x.astype(np.float64) if mask is None else np.where(mask, x.astype(np.float64), 0.0)
    for j in range(x.shape[1]):
        exact = math.fsum(terms[:, j].tolist())
        bound = x.shape[0] * eps * float(np.abs(terms[:, j]).sum()) + float(np.finfo(dtype).tiny)
        assert abs(float(got[j]) - exact) <= bound, f"{what}: column {j}: {got[j]!r} against {exact!r}"


def _runs(kernel, **planes):
    """One chunk, then chunks cut inside rows, as split_runs gives them (a run with threads > 1 really splits)."""
    return split_runs(kernel, "host", threads=[1, 2, 3], min_chunk=256, **planes)


@pytest.mark.parametrize("rows", [17, 64, 100, 333])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_sums_within_the_bound(dtype, rows):
    rng = np.random.default_rng(91 + rows)
    x = (rng.standard_normal((rows, 43)) * 10.0 ** rng.integers(-6, 6, 43)).astype(dtype)
    for t, out in _runs(pt_sum, x=x):
        _within_bound(out, x, dtype, f"threads={t}")
    plan = eagle.deploy(pt_sum, threads=2, min_chunk=256)
    first = np.asarray(plan.run(x=x)).copy()
    assert np.array_equal(np.asarray(plan.run(x=x)).view(f"u{x.itemsize}"), first.view(f"u{x.itemsize}"))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_masked_mean(dtype):
    rng = np.random.default_rng(92)
    x = rng.standard_normal((150, 37)).astype(dtype)
    x[:, 30] = -1.0  # (no lane of column 30 takes part: NaN)
    mask = x > -0.5
    for t, out in _runs(pt_mean, x=x):
        counts = mask.sum(axis=0)
        assert np.isnan(out[30])
        ok = counts > 0
        _within_bound(out[ok] * counts[ok], (2 * x)[:, ok], dtype, f"mean, threads={t}", mask[:, ok])


def _ieee_extremum(x, kind):
    """Per column: NaN if any; else the max (min) with +0.0 above -0.0."""
    out = []
    for col in x.T:
        if np.isnan(col).any():
            out.append(np.nan)
            continue
        v = col.max() if kind == "max" else col.min()
        if v == 0:
            zeros = col[col == 0]
            neg = np.signbit(zeros)
            v = (0.0 if (~neg).any() else -0.0) if kind == "max" else (-0.0 if neg.any() else 0.0)
        out.append(v)
    return np.array(out, dtype=x.dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_max_and_min_exact(dtype):
    """NaN propagates; +0.0 is above -0.0 whichever comes first; infinities; a masked min's lanes past its mask
    offer nothing; in tiles, the slots after them, and rows a chunk holds in part."""
    rng = np.random.default_rng(93)
    x = rng.standard_normal((200, 43)).astype(dtype)
    x[120, 5] = x[7, 41] = np.nan
    x[:, 7], x[150, 7] = -0.0, 0.0  # (max +0.0, min -0.0)
    x[:, 33], x[3, 33] = 0.0, -0.0
    x[:, 40] = np.inf
    x[66, 2] = -np.inf
    x[:, 12] = 5.0  # (the masked min takes no lane: +inf)
    x[:, 20] = -np.abs(x[:, 20]) - 1.0  # (every lane below zero: the max's start is -inf, not 0)
    x[:, 36] = np.abs(x[:, 36]) + 0.5  # (and the masked min's +inf)
    for t, out in _runs(pt_max, x=x):
        want = _ieee_extremum(x, "max")
        assert np.array_equal(out.view(f"u{x.itemsize}"), want.view(f"u{x.itemsize}")), f"max, threads={t}"
    masked = np.where(x < 1.0, x, np.inf).astype(dtype)  # (a NaN lane fails x < 1.0: masked out)
    for t, out in _runs(pt_min, x=x):
        want = _ieee_extremum(masked, "min")
        assert np.array_equal(out.view(f"u{x.itemsize}"), want.view(f"u{x.itemsize}")), f"min, threads={t}"


def test_a_vector_total():
    rng = np.random.default_rng(94)
    v = rng.standard_normal((3, 130, 20))
    for t, out in _runs(pt_vec, v=v):
        for c in range(3):
            _within_bound(out[c], v[c], np.float64, f"component {c}, threads={t}")


def test_a_body_that_writes_keeps_the_row_loop():
    """(the same totals: within the bound; the per-lane output exact)"""
    rng = np.random.default_rng(95)
    x, y = rng.standard_normal((2, 90, 43))
    for t, out in _runs(pt_out, x=x, y=y):
        np.testing.assert_array_equal(out["result"].reshape(x.shape), x + y)
        _within_bound(out["total"], x, np.float64, f"threads={t}")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_chunks_of_few_rows_take_the_row_loop(dtype):
    """Chunks with fewer than MIN_ROWS whole rows run the row loop: within the same bound."""
    rng = np.random.default_rng(96)
    x = rng.standard_normal((60, 43)).astype(dtype)
    plan = eagle.deploy(pt_sum, threads=3, min_chunk=43 * column_tiles.MIN_ROWS // 2)
    out = np.asarray(plan.run(x=x))
    assert max(plan.last_chunks) > 1 and 60 / max(plan.last_chunks) < column_tiles.MIN_ROWS, plan.last_chunks
    _within_bound(out, x, dtype, "short chunks")
