"""Reading another lane's value with .at: linear index planes, named Grid axes, guarded stencils.

Every test that runs a kernel runs on each target of conftest.BT_TARGETS (the `target` fixture) with the same
expectations. The one exception
is a read outside the lanes: undefined by contract, pinned (clamped) on the host only.
"""

import numpy as np
import pytest
from conftest import bt_close, bt_run_on

import eagle
import hawk
import hawk.math as m
from hawk import Grid, Index, Mutable, Param, Scalar


@hawk.kernel
def a_gather(x: Scalar, src: Index, y: Mutable[Scalar]):
    y = x.at(src) * 3.0 - x


@pytest.mark.parametrize("itype", [np.int32, np.int64])
def test_at_with_a_permutation(target, itype):
    rng = np.random.default_rng(9300)
    x = rng.normal(size=64)
    src = rng.permutation(64).astype(itype)
    got = bt_run_on(target, a_gather, x=x, src=src)
    np.testing.assert_array_equal(got, x[src] * 3.0 - x)


@pytest.mark.parametrize("n", [1, 5, 10_007])
def test_at_with_repeated_indices(target, n):
    rng = np.random.default_rng(9301 + n)
    x = rng.normal(size=n)
    src = rng.integers(0, n, size=n).astype(np.int32)
    got = bt_run_on(target, a_gather, x=x, src=src)
    np.testing.assert_array_equal(got, x[src] * 3.0 - x)


def test_at_f32(target):
    rng = np.random.default_rng(9302)
    x = rng.normal(size=100).astype(np.float32)
    src = (np.arange(100)[::-1]).astype(np.int64)
    got = bt_run_on(target, a_gather, x=x, src=src)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, x[src] * np.float32(3.0) - x)


def test_at_computed_linear_index_with_guard(target):
    @hawk.kernel
    def a_next(x: Scalar, pos: Index, nlanes: Param) -> Scalar:
        if pos + 1.0 < nlanes:
            d = x.at(pos + 1) - x
        else:
            d = 0.0
        return d

    x = np.random.default_rng(9303).normal(size=30)
    got = bt_run_on(target, a_next, x=x, pos=np.arange(30, dtype=np.int32), nlanes=30.0)
    want = np.append(np.diff(x), 0.0)
    np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------ named axes on a Grid

NC = 7


@hawk.kernel
def a_smooth(lane: Grid["row", "col":NC], u: Scalar, wgt: Param) -> Scalar:
    i, j = lane.row, lane.col
    if m.land(m.land(i > 0, i < 4), m.land(j > 0, j < NC - 1)):
        acc = (u.at(row=i - 1, col=j) + u.at(row=i + 1, col=j)
               + u.at(row=i, col=j - 1) + u.at(row=i, col=j + 1)) * wgt + u * (1.0 - 4.0 * wgt)
    else:
        acc = u
    return acc


def test_five_point_stencil_with_guarded_edges(target):
    u = np.random.default_rng(9304).normal(size=(5, NC))
    wgt = 0.125
    got = bt_run_on(target, a_smooth, u=u, wgt=wgt, row=5)
    want = u.copy()
    want[1:-1, 1:-1] = (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]) * wgt + u[1:-1, 1:-1] * (
        1.0 - 4.0 * wgt
    )
    assert got.shape == (5, NC)
    bt_close(got, want)


def test_one_sided_difference_along_columns(target):
    @hawk.kernel
    def a_dcol(lane: Grid["row", "col":NC], u: Scalar) -> Scalar:
        if lane.col < NC - 1:
            g = u.at(row=lane.row, col=lane.col + 1) - u
        else:
            g = u.at(row=lane.row, col=lane.col - 1) - u
        return g

    u = np.random.default_rng(9305).normal(size=(3, NC))
    got = bt_run_on(target, a_dcol, u=u, row=3)
    want = np.empty_like(u)
    want[:, :-1] = u[:, 1:] - u[:, :-1]
    want[:, -1] = u[:, -2] - u[:, -1]
    np.testing.assert_array_equal(got, want)


def test_axis_left_out_keeps_this_lanes_coordinate(target):
    @hawk.kernel
    def a_partial(lane: Grid["row", "col":NC], u: Scalar, left: Mutable[Scalar], up: Mutable[Scalar]):
        if lane.col > 0:
            left = u.at(col=lane.col - 1)
        else:
            left = u
        if lane.row > 0:
            up = u.at(row=lane.row - 1)
        else:
            up = u

    u = np.random.default_rng(9306).normal(size=(4, NC))
    out = bt_run_on(target, a_partial, u=u, row=4)
    want_left = u.copy()
    want_left[:, 1:] = u[:, :-1]
    want_up = u.copy()
    want_up[1:] = u[:-1]
    np.testing.assert_array_equal(out["left"], want_left)
    np.testing.assert_array_equal(out["up"], want_up)


def test_at_on_a_three_axis_grid(target):
    @hawk.kernel
    def a_flip(lane: Grid["p", "q":3, "r":4], u: Scalar) -> Scalar:
        return u.at(q=2 - lane.q, r=3 - lane.r)

    u = np.random.default_rng(9307).normal(size=(2, 3, 4))
    got = bt_run_on(target, a_flip, u=u, p=2)
    np.testing.assert_array_equal(got, u[:, ::-1, ::-1])


def test_linear_at_on_a_grid(target):
    @hawk.kernel
    def a_lin(lane: Grid["row", "col":4], u: Scalar, src: Index) -> Scalar:
        return u.at(src)

    u = np.random.default_rng(9308).normal(size=(3, 4))
    src = np.random.default_rng(9309).permutation(12).reshape(3, 4).astype(np.int32)
    got = bt_run_on(target, a_lin, u=u, src=src, row=3)
    np.testing.assert_array_equal(got, u.reshape(-1)[src])


def test_at_reads_inputs_of_two_planes(target):
    @hawk.kernel
    def a_two(lane: Grid["row", "col":5], a: Scalar, b: Scalar) -> Scalar:
        if lane.row > 0:
            s = a.at(row=lane.row - 1, col=lane.col) * b.at(row=lane.row - 1, col=lane.col)
        else:
            s = a * b
        return s

    rng = np.random.default_rng(9310)
    a, b = rng.normal(size=(2, 6, 5))
    got = bt_run_on(target, a_two, a=a, b=b, row=6)
    want = a * b
    want[1:] = a[:-1] * b[:-1]
    np.testing.assert_array_equal(got, want)


def test_out_of_range_index_is_clamped_on_the_host(target):
    # undefined by contract; docs/semantics.md: the host clamps to the nearest edge. Another target only has to
    # run (no crash, no error) and get the lanes whose index is inside right
    x = np.random.default_rng(9311).normal(size=8)
    src = np.array([-3, -1, 0, 4, 7, 8, 20, 2], dtype=np.int64)
    got = bt_run_on(target, a_gather, x=x, src=src)
    want = x[np.clip(src, 0, 7)] * 3.0 - x
    if target == "host":
        np.testing.assert_array_equal(got, want)
    else:
        inside = (src >= 0) & (src < 8)
        np.testing.assert_array_equal(got[inside], want[inside])


@hawk.kernel
def at_far_neighbours(g: Grid["row", "col":7], u: Scalar) -> Scalar:
    return u.at(col=g.col - 2) + u.at(col=g.col + 3) + u.at(row=g.row + 1) * 2.0 + u.at(row=g.row - 3, col=g.col + 1)


@hawk.kernel
def at_far_clamped(g: Grid["row", "col":7], u: Scalar) -> Scalar:  # the same reads, clamped in the kernel
    last = g.extent("row") - 1
    return u.at(col=m.max(g.col - 2, 0)) + u.at(col=m.min(g.col + 3, 6)) + \
        u.at(row=m.clamp(g.row + 1, 0, last)) * 2.0 + u.at(row=m.max(0, g.row - 3), col=m.clamp(g.col + 1, 0, 6))


@hawk.kernel
def at_line_clamped(g: Grid["i"], x: Scalar) -> Scalar:
    return x.at(i=m.min(g.i + 2, g.extent("i") - 1)) - x.at(i=m.max(g.i - 1, 0)) * x


def _clamped_neighbours(u):
    rows, cols = u.shape
    r, c = np.arange(rows)[:, None], np.arange(cols)[None, :]

    def near(v, n):
        return np.clip(v, 0, n - 1)

    return u[r, near(c - 2, cols)] + u[r, near(c + 3, cols)] + u[near(r + 1, rows), c] * 2.0 + \
        u[near(r - 3, rows), near(c + 1, cols)]


@pytest.mark.parametrize("kernel", [at_far_neighbours, at_far_clamped], ids=["bare", "clamped"])
@pytest.mark.parametrize("rows", [1, 2, 4, 6, 7, 40, 200_001])
def test_neighbour_reads_on_grids_thinner_and_wider_than_their_reach(target, rows, kernel):
    # the host runs the grid's interior (3 rows and 3 columns from every edge here) without the clamps and the
    # rest with them: every lane must read what the clamped coordinates name, whatever the grid's size and the
    # thread count; reads clamped in the kernel (to the grid's edges) take the interior too (the lane's own
    # coordinate plus the offset there)
    u = np.random.default_rng(rows).standard_normal((rows, 7))
    want = _clamped_neighbours(u)
    for threads in (1, 2, 3):
        plan = eagle.deploy(kernel, target=target, threads=threads, min_chunk=1024)  # small chunks
        got = np.asarray(plan.run(u=u))
        assert threads == 1 or u.size < 2048 or max(plan.last_chunks) > 1, plan.last_chunks  # a real split
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 100_003])
def test_a_line_s_reads_clamped_in_the_kernel(target, n):
    x = np.random.default_rng(n).standard_normal(n)
    i = np.arange(n)
    want = x[np.minimum(i + 2, n - 1)] - x[np.maximum(i - 1, 0)] * x
    for threads in (1, 3):
        plan = eagle.deploy(at_line_clamped, target=target, threads=threads, min_chunk=1024)
        np.testing.assert_array_equal(np.asarray(plan.run(x=x)), want)
