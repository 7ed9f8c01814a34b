"""Plain and compensated kept totals in the column shape take tiles on the host when they are the stage's only
reductions and the body writes nothing (hawk/passes/lower/column_plain.py): "auto" and "compensated" sums and
means, max and min keeping the trailing axes accumulate per slot in registers while a tile of slots walks down a
block of rows, and each block's accumulators go into the slots at its end; the slots after the last tile and the
lanes of a row a chunk holds in part take the row loop's step. "auto" sums must stay within the plain bound
against math.fsum (and give the same bits on a rerun of the same chunking), compensated ones within k <= 1 on
data where a plain sum is not; max and min are exact, NaN and signed zeros included."""

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
def pt_comp(g: Grid["r", "c":43], x: Scalar) -> Scalar:  # (two vectors a slot: tiles of WIDE // 2, then TILE)
    return hawk.sum(x, over="r", policy="compensated")


@hawk.kernel
def pt_comp_mean(g: Grid["r", "c":37], x: Scalar) -> Scalar:
    return hawk.mean(x, over="r", policy="compensated", where=x > -0.5)


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
@pytest.mark.parametrize("rows", [3, 24])
def test_chunks_of_few_rows(dtype, rows):
    """Chunks shorter than a row (3 rows in 12 chunks: no whole row, MIN_ROWS being 1) run the row loop; chunks
    of two whole rows (24 rows) take tiles over a short block. Either way within the same bound."""
    assert column_tiles.MIN_ROWS == 1
    rng = np.random.default_rng(96)
    x = rng.standard_normal((rows, 43)).astype(dtype)
    plan = eagle.deploy(pt_sum, threads=3, min_chunk=10)
    out = np.asarray(plan.run(x=x))
    assert plan.last_chunks == (12,), plan.last_chunks
    _within_bound(out, x, dtype, "short chunks")


def _cancelling(rows: int, cols: int, dtype, seed: int) -> np.ndarray:
    """Columns whose second half cancels the first but for a relative 1e-9, with one term 1e12 times the rest
    and terms spread over 24 binades: a plain sum of them errs by several eps x sum(|terms|)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols)) * 10.0 ** rng.integers(-4, 4, (rows, cols))
    x[rows // 2:] = -x[:rows - rows // 2] * (1 + 1e-9)
    x[0] *= 1e12
    return x.astype(dtype)


@pytest.mark.parametrize("rows", [60, 150, 700])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_compensated_sums_within_one_eps(dtype, rows):
    x = _cancelling(rows, 43, dtype, 97 + rows)
    eps = float(np.finfo(dtype).eps)
    for t, out in _runs(pt_comp, x=x):
        for j in range(43):
            col = x[:, j].astype(np.float64)
            err = abs(float(out[j]) - math.fsum(col.tolist()))
            k = err / (eps * float(np.abs(col).sum()))
            assert k <= 1.0, f"threads={t}, column {j}: k = {k}"


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_compensated_masked_mean(dtype):
    x = _cancelling(300, 37, dtype, 98)
    x[:, 30] = -1.0  # (no lane takes part: NaN)
    mask = x > -0.5
    eps = float(np.finfo(dtype).eps)
    for t, out in _runs(pt_comp_mean, x=x):
        assert np.isnan(out[30])
        for j in (j for j in range(37) if j != 30):
            col = np.where(mask[:, j], x[:, j].astype(np.float64), 0.0)
            n = int(mask[:, j].sum())
            err = abs(float(out[j]) * n - math.fsum(col.tolist()))
            assert err <= eps * (float(np.abs(col).sum()) + abs(float(out[j])) * n), f"threads={t}, column {j}"


def test_compensated_special_values():
    """An infinity gives it, both infinities or a NaN give NaN, as IEEE addition of the terms does."""
    rng = np.random.default_rng(99)
    x = rng.standard_normal((200, 43))
    x[10, 1] = np.inf
    x[20, 2], x[150, 2] = np.inf, -np.inf
    x[90, 3] = np.nan
    x[5, 41] = -np.inf  # (a slot after the tiles)
    for t, out in _runs(pt_comp, x=x):
        assert out[1] == np.inf and np.isnan(out[2]) and np.isnan(out[3]) and out[41] == -np.inf, f"threads={t}"
        _within_bound(np.delete(out, [1, 2, 3, 41]), np.delete(x, [1, 2, 3, 41], axis=1), np.float64, "rest")


@hawk.kernel
def pt_wide(g: Grid["r", "c":70000], x: Scalar, s: Mutable[Scalar], cs: Mutable[Scalar]):
    s = hawk.sum(x, over="r")  # (70000 slots each: past PRIVATE_SLOTS, within CELL_SLOTS)
    cs = hawk.sum(x, over="r", policy="compensated")


@hawk.kernel
def pt_wide_max(g: Grid["r", "c":70000], x: Scalar) -> Scalar:
    return hawk.max(x, over="r")


def test_wide_rows_keep_copies_on_the_host_and_split():
    """On the host, totals keeping axes of more than PRIVATE_SLOTS slots keep a copy per chunk too (up to
    CELL_SLOTS: Spec.cell_slots of a host plan's specs), so their chunks run on every thread (until 2026-12-05
    they ran as one chunk); a GPU target's specs keep the old limit (a thread per slot there). The split runs
    give the plain bound, k <= 1 and the exact max."""
    from hawk.abi.layout import CELL_SLOTS, PRIVATE_SLOTS

    assert PRIVATE_SLOTS < 70000 <= CELL_SLOTS
    host = eagle.deploy(pt_wide_max).binder.bind({"x": np.zeros((2, 70000))}).spec
    gpu = eagle.deploy(pt_wide_max, target="spirv").binder.bind({"x": np.zeros((2, 70000))}).spec
    assert (host.cell_slots, gpu.cell_slots) == (CELL_SLOTS, 0)
    cell = pt_wide_max.layout(host, 0).reductions[0].cell
    assert cell in pt_wide_max.layout(host, 0).private and cell not in pt_wide_max.layout(gpu, 0).private
    x = _cancelling(6, 70000, np.float64, 99)
    exact = np.array([math.fsum(col) for col in x.T.tolist()])
    size = np.abs(x).sum(axis=0)
    eps = float(np.finfo(np.float64).eps)
    for t, out in split_runs(pt_wide, "host", threads=[1, 2], min_chunk=50_000, x=x):
        assert np.all(np.abs(out["s"] - exact) <= 6 * eps * size), f"auto, threads={t}"
        assert np.all(np.abs(out["cs"] - exact) <= eps * size), f"compensated, threads={t}"
    for t, out in split_runs(pt_wide_max, "host", threads=[1, 2], min_chunk=50_000, x=x):
        assert np.array_equal(out, x.max(axis=0)), f"max, threads={t}"
    plan = eagle.deploy(pt_wide_max, threads=2)  # (the default chunk: CELL_LANES lanes a copy value)
    tall = np.tile(x, (6, 1))  # (36 rows: 2 chunks of at least 16 x 70000 lanes)
    assert np.array_equal(np.asarray(plan.run(x=tall)), x.max(axis=0)) and plan.last_chunks == (2,), plan.last_chunks


def test_one_chunk_adds_into_the_cell_itself_and_keeps_earlier_results():
    """A one-chunk host launch hands a kept sum's or max's cell as its only copy (eagle.launch, alias_cells) and
    the finish leaves it as the lanes left it: the same bits as a separate copy from -0.0 (a column of -0.0 and
    +0.0 terms, or of -0.0 alone, sums to +0.0 on one chunk and on many). A reused run (Plan.run's prepared
    buffers, rebound to fresh cells) never writes into the cells an earlier run handed back."""
    rng = np.random.default_rng(100)
    xs = [rng.standard_normal((7, 43)) for _ in range(3)]
    for x in xs:
        x[:, 0] = -0.0
        x[:, 1] = 0.0
        x[3, 2] = -0.0
    one = eagle.deploy(pt_sum, threads=1)
    many = eagle.deploy(pt_sum, threads=3, min_chunk=10)
    mx = eagle.deploy(pt_max, threads=1)
    kept = []
    for x in xs:
        a, b, m = one.run(x=x), many.run(x=x), mx.run(x=x)
        assert one.last_chunks == (1,) and many.last_chunks[0] > 1
        got, split = np.asarray(a), np.asarray(b)
        assert got[0] == 0.0 and not np.signbit(got[0]) and not np.signbit(split[0]), (got[:3], split[:3])
        _within_bound(got, x, np.float64, "one chunk")
        assert np.array_equal(np.asarray(m), x.max(axis=0))
        kept.append((a, np.asarray(a).copy(), m, x.max(axis=0)))
    for a, first, m, want in kept:  # (each earlier result as it was handed back)
        assert np.array_equal(np.asarray(a).view(np.uint64), first.view(np.uint64))
        assert np.array_equal(np.asarray(m), want)
