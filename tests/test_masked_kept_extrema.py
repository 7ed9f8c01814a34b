"""Masked max/min that keep lane axes (`hawk.max(x, over="col", where=m)`): a masked-out lane offers the identity
(-inf for max, +inf for min) to the slot, through a value the host's LLVM cannot fold (reduce_kept.masked_extremum),
so the loop stays a plain max/min reduction it vectorizes. The result must be bit for bit the unmasked reduction of
`m.where(mask, x, identity)`: NaNs (canonical), signed zeros, infinities, slots with no lane, float32, Vector
payloads, rows (nested shape) and columns (column shape), block reductions read in the body (block.py), on 1 and 3
threads."""

import math
import warnings

import numpy as np
import pytest

import eagle
import hawk
import hawk.math as m
from hawk import Grid, Scalar, Vector

C = 37
INF = math.inf


@hawk.kernel
def mk_row_max(lane: Grid["row", "col":C], x: Scalar, t: Scalar) -> Scalar:
    return hawk.max(x, over="col", where=x < t)


@hawk.kernel
def mk_row_max_ref(lane: Grid["row", "col":C], x: Scalar, t: Scalar) -> Scalar:
    return hawk.max(m.where(x < t, x, -INF), over="col")


@hawk.kernel
def mk_row_min(lane: Grid["row", "col":C], x: Scalar, t: Scalar) -> Scalar:
    return hawk.min(x, over="col", where=x < t)


@hawk.kernel
def mk_row_min_ref(lane: Grid["row", "col":C], x: Scalar, t: Scalar) -> Scalar:
    return hawk.min(m.where(x < t, x, INF), over="col")


@hawk.kernel
def mk_col_max(lane: Grid["row", "col":C], x: Scalar, t: Scalar) -> Scalar:
    return hawk.max(x, over="row", where=x < t)


@hawk.kernel
def mk_col_max_ref(lane: Grid["row", "col":C], x: Scalar, t: Scalar) -> Scalar:
    return hawk.max(m.where(x < t, x, -INF), over="row")


@hawk.kernel
def mk_col_min(lane: Grid["row", "col":C], x: Scalar, t: Scalar) -> Scalar:
    return hawk.min(x, over="row", where=x < t)


@hawk.kernel
def mk_col_min_ref(lane: Grid["row", "col":C], x: Scalar, t: Scalar) -> Scalar:
    return hawk.min(m.where(x < t, x, INF), over="row")


@hawk.kernel
def mk_vec_max(lane: Grid["row", "col":C], v: Vector[2], t: Scalar) -> Vector[2]:
    return hawk.max(v, over="col", where=v[0] < t)


@hawk.kernel
def mk_vec_max_ref(lane: Grid["row", "col":C], v: Vector[2], t: Scalar) -> Vector[2]:
    return hawk.max(m.vec(m.where(v[0] < t, v[0], -INF), m.where(v[0] < t, v[1], -INF)), over="col")


@hawk.kernel
def mk_block_max(lane: Grid["row", "col":C], x: Scalar, t: Scalar) -> Scalar:
    return x - hawk.max(x, over="col", where=x < t)  # (read in the body: a block reduction, one stage)


@hawk.kernel
def mk_block_max_ref(lane: Grid["row", "col":C], x: Scalar, t: Scalar) -> Scalar:
    return x - hawk.max(m.where(x < t, x, -INF), over="col")


@hawk.kernel
def mk_block_min(lane: Grid["row", "col":C], x: Scalar, t: Scalar) -> Scalar:
    return x - hawk.min(x, over="col", where=x < t)


@hawk.kernel
def mk_block_min_ref(lane: Grid["row", "col":C], x: Scalar, t: Scalar) -> Scalar:
    return x - hawk.min(m.where(x < t, x, INF), over="col")


PAIRS = [(mk_row_max, mk_row_max_ref), (mk_row_min, mk_row_min_ref), (mk_col_max, mk_col_max_ref),
         (mk_col_min, mk_col_min_ref)]


def _data(rows: int, dtype, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Values with NaNs, both zeros and both infinities; thresholds that mask out whole rows and columns."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, C))
    flat = x.reshape(-1)
    for value, share in ((np.nan, 0.01), (0.0, 0.05), (-0.0, 0.05), (INF, 0.01), (-INF, 0.01)):
        flat[rng.random(flat.size) < share] = value
    x[3] = rng.choice([0.0, -0.0], size=C)  # (a row of zeros only: the sign of the result)
    t = rng.uniform(-1.0, 2.0, size=(rows, C))
    t[5] = -INF  # (a row with no lane: the identity)
    t[:, 7] = -INF  # (a column with no lane)
    return x.astype(dtype), t.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kernel,ref", PAIRS, ids=[k.name for k, _ in PAIRS])
def test_masked_kept_extrema_are_the_unmasked_reduction_of_the_identity_where_masked(kernel, ref, dtype):
    x, t = _data(2000, dtype, 41)
    want = np.asarray(eagle.deploy(ref, threads=1).run(x=x, t=t))
    for threads in (1, 3):
        plan = eagle.deploy(kernel, threads=threads, min_chunk=4096)
        got = np.asarray(plan.run(x=x, t=t))
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (threads, np.flatnonzero(got != want))
        if threads == 3:
            assert max(plan.last_chunks) > 1, plan.last_chunks
    axis = 1 if kernel.name.startswith("mk_row") else 0
    clean = ~np.any(np.isnan(x), axis=axis)  # NumPy on the slots without a NaN among their lanes
    fn = np.nanmax if kernel.name.endswith("max") else np.nanmin
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (a slot with no lane: all NaN)
        num = fn(np.where(x < t, x, np.nan), axis=axis)
    num = np.where(np.isnan(num), -INF if kernel.name.endswith("max") else INF, num)  # (no lane: the identity)
    assert np.array_equal(got[clean], num[clean].astype(dtype)), np.flatnonzero(got[clean] != num[clean])


def test_masked_vector_row_max_is_the_unmasked_reduction_of_the_identity_where_masked():
    x, t = _data(1500, np.float64, 43)
    v = np.stack([x, np.random.default_rng(44).normal(size=x.shape)])
    want = np.asarray(eagle.deploy(mk_vec_max_ref, threads=1).run(v=v, t=t))
    for threads in (1, 3):
        got = np.asarray(eagle.deploy(mk_vec_max, threads=threads, min_chunk=4096).run(v=v, t=t))
        assert got.tobytes() == want.tobytes(), threads


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kernel,ref", [(mk_block_max, mk_block_max_ref), (mk_block_min, mk_block_min_ref)],
                         ids=["max", "min"])
def test_masked_block_extrema_read_in_the_body_are_the_unmasked_ones_of_the_identity(kernel, ref, dtype):
    """A masked max/min read in the same stage (a block reduction: each row folded in one loop) the same way."""
    assert kernel.stage_count == 1
    x, t = _data(2000, dtype, 45)
    want = np.asarray(eagle.deploy(ref, threads=1).run(x=x, t=t))
    for threads in (1, 3):
        plan = eagle.deploy(kernel, threads=threads, min_chunk=4096)
        got = np.asarray(plan.run(x=x, t=t))
        assert got.tobytes() == want.tobytes(), (threads, np.flatnonzero(got != want))
        if threads == 3:
            assert max(plan.last_chunks) > 1, plan.last_chunks
