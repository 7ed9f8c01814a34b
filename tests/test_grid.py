"""Grid lane axes: runtime/fixed extents, over= by label, position or tuple, result shapes, coordinates.

Every test that runs a kernel runs on each target of conftest.BT_TARGETS (the `target` fixture) with the same
expectations.
"""

import numpy as np
import pytest
from conftest import bt_close, bt_run_on

import hawk
from hawk import Grid, Mutable, Param, Scalar, Table, Vector

TICKS = 40


@hawk.kernel
def g_energy(lane: Grid["band", "tick":TICKS], x: Scalar) -> Scalar:
    return hawk.sum(x * x, over="tick")


def _plane(shape, seed, dtype=np.float64):
    return np.random.default_rng(seed).normal(size=shape).astype(dtype)


@pytest.mark.parametrize("bands", [1, 3, 6])
def test_runtime_extent_bound_by_label(target, bands):
    x = _plane((bands, TICKS), 8100 + bands)
    got = bt_run_on(target, g_energy, x=x, band=bands)
    assert got.shape == (bands,)
    bt_close(got, (x * x).sum(axis=1), rtol=1e-12)


def test_runtime_extent_inferred_from_planes(target):
    x = _plane((5, TICKS), 8101)
    got = bt_run_on(target, g_energy, x=x)
    assert got.shape == (5,)
    bt_close(got, (x * x).sum(axis=1), rtol=1e-12)


def test_grid_f32(target):
    x = _plane((4, TICKS), 8102, np.float32)
    got = bt_run_on(target, g_energy, x=x, band=4)
    assert got.dtype == np.float32 and got.shape == (4,)
    np.testing.assert_allclose(got, (x.astype(np.float64) ** 2).sum(axis=1), rtol=2e-6)


@hawk.kernel
def _k_fast_label(lane: Grid["band", "tick":TICKS], x: Scalar, spec: Param) -> Scalar:
    return hawk.sum(x + spec, over="tick")


@hawk.kernel
def _k_fast_neg(lane: Grid["band", "tick":TICKS], x: Scalar, spec: Param) -> Scalar:
    return hawk.sum(x + spec, over=-1)


@hawk.kernel
def _k_fast_pos(lane: Grid["band", "tick":TICKS], x: Scalar, spec: Param) -> Scalar:
    return hawk.sum(x + spec, over=1)


@hawk.kernel
def _k_fast_tuple(lane: Grid["band", "tick":TICKS], x: Scalar, spec: Param) -> Scalar:
    return hawk.sum(x + spec, over=("tick",))


@pytest.mark.parametrize(
    "kernel", [_k_fast_label, _k_fast_neg, _k_fast_pos, _k_fast_tuple], ids=["label", "-1", "1", "tuple"]
)
def test_over_the_fastest_axis_spelled_four_ways(target, kernel):
    x = _plane((3, TICKS), 8103)
    got = bt_run_on(target, kernel, x=x, spec=0.5, band=3)
    assert got.shape == (3,)
    bt_close(got, (x + 0.5).sum(axis=1), rtol=1e-12)


def test_over_the_first_axis_keeps_the_fast_one(target):
    @hawk.kernel
    def g_fold_slow(lane: Grid["band", "tick":TICKS], x: Scalar) -> Scalar:
        return hawk.sum(x, over="band")

    x = _plane((7, TICKS), 8104)
    got = bt_run_on(target, g_fold_slow, x=x, band=7)
    assert got.shape == (TICKS,)
    bt_close(got, x.sum(axis=0), rtol=1e-12)


def test_over_every_axis_and_no_over_give_one_value(target):
    @hawk.kernel
    def g_all_named(lane: Grid["band", "tick":TICKS], x: Scalar) -> Scalar:
        return hawk.sum(x, over=("band", "tick"))

    @hawk.kernel
    def g_all_plain(lane: Grid["band", "tick":TICKS], x: Scalar) -> Scalar:
        return hawk.sum(x)

    x = _plane((6, TICKS), 8105)
    for k in (g_all_named, g_all_plain):
        got = bt_run_on(target, k, x=x, band=6)
        assert got.shape == (1,)
        bt_close(got, np.array([x.sum()]), rtol=1e-12)


def test_cell_reduced_over_an_axis_has_kept_shape(target):
    @hawk.kernel
    def g_cells(lane: Grid["band", "tick":TICKS], x: Scalar, tot: Mutable[Scalar], avg: Mutable[Scalar]):
        tot = hawk.sum(x, over="tick")
        avg = hawk.mean(x, over="tick")

    x = _plane((4, TICKS), 8106)
    out = bt_run_on(target, g_cells, x=x, band=4)
    assert sorted(out) == ["avg", "tot"]
    assert out["tot"].shape == (4,) and out["avg"].shape == (4,)
    bt_close(out["tot"], x.sum(axis=1), rtol=1e-12)
    bt_close(out["avg"], x.mean(axis=1), rtol=1e-12)


def test_where_with_over(target):
    @hawk.kernel
    def g_pos_part(lane: Grid["band", "tick":TICKS], x: Scalar, s: Mutable[Scalar], mu: Mutable[Scalar]):
        s = hawk.sum(x, over="tick", where=x > 0.0)
        mu = hawk.mean(x, over="tick", where=x > 0.0)

    x = _plane((5, TICKS), 8107)
    x[2] = -np.abs(x[2])  # one band with no selected lane: sum 0, mean NaN
    out = bt_run_on(target, g_pos_part, x=x, band=5)
    want_s = np.where(x > 0, x, 0.0).sum(axis=1)
    bt_close(out["s"], want_s, rtol=1e-12)
    counts = (x > 0).sum(axis=1)
    with np.errstate(invalid="ignore"):
        want_mu = want_s / counts
    assert np.isnan(out["mu"][2])
    keep = counts > 0
    np.testing.assert_allclose(out["mu"][keep], want_mu[keep], rtol=1e-12)


def test_fixed_extents_per_lane_plane_and_coordinates(target):
    @hawk.kernel
    def g_coords(lane: Grid["u":3, "v":8], x: Scalar) -> Scalar:
        return x + lane.u * 100.0 + lane.v * 1.0

    x = _plane((3, 8), 8108)
    got = bt_run_on(target, g_coords, x=x)
    assert got.shape == (3, 8)
    uu, vv = np.indices((3, 8))
    bt_close(got, x + uu * 100.0 + vv * 1.0)


def test_lane_coordinates_with_runtime_first_extent(target):
    @hawk.kernel
    def g_where_am_i(lane: Grid["row", "col":9], x: Scalar, r: Mutable[Scalar], c: Mutable[Scalar]):
        r = lane.row * 1.0 + 0.0 * x
        c = lane.col * 1.0 + 0.0 * x

    x = _plane((4, 9), 8109)
    out = bt_run_on(target, g_where_am_i, x=x, row=4)
    rr, cc = np.indices((4, 9))
    np.testing.assert_array_equal(out["r"], rr.astype(float))
    np.testing.assert_array_equal(out["c"], cc.astype(float))


def test_max_and_min_over_every_lane_of_a_grid(target):
    @hawk.kernel
    def g_peak(lane: Grid["band", "tick":TICKS], x: Scalar) -> Scalar:
        return hawk.max(x)

    @hawk.kernel
    def g_trough(lane: Grid["band", "tick":TICKS], x: Scalar, lo: Mutable[Scalar]):
        lo = hawk.min(x)

    x = _plane((3, TICKS), 8110)
    assert bt_run_on(target, g_peak, x=x, band=3)[0] == x.max()
    assert bt_run_on(target, g_trough, x=x, band=3)[0] == x.min()


# ------------------------------------------------------------------ three axes

P, Q, R = 4, 3, 5


@hawk.kernel
def g3_keep_mid(lane: Grid["p", "q":Q, "r":R], x: Scalar) -> Scalar:
    return hawk.sum(x, over=("p", "r"))


@hawk.kernel
def g3_drop_mid(lane: Grid["p", "q":Q, "r":R], x: Scalar) -> Scalar:
    return hawk.sum(x, over="q")


@hawk.kernel
def g3_drop_last(lane: Grid["p", "q":Q, "r":R], x: Scalar) -> Scalar:
    return hawk.sum(x, over=-1)


@hawk.kernel
def g3_drop_first_two(lane: Grid["p", "q":Q, "r":R], x: Scalar) -> Scalar:
    return hawk.sum(x, over=(0, 1))


@pytest.mark.parametrize(
    "kernel, axes",
    [(g3_keep_mid, (0, 2)), (g3_drop_mid, (1,)), (g3_drop_last, (2,)), (g3_drop_first_two, (0, 1))],
    ids=["keep-mid", "drop-mid", "drop-last", "drop-first-two"],
)
def test_three_axis_over(target, kernel, axes):
    x = _plane((P, Q, R), 8111)
    got = bt_run_on(target, kernel, x=x, p=P)
    want = x.sum(axis=axes)
    assert got.shape == want.shape
    bt_close(got, want, rtol=1e-12)


def test_three_axis_coordinates(target):
    @hawk.kernel
    def g3_code(lane: Grid["p", "q":Q, "r":R], x: Scalar) -> Scalar:
        return lane.p * 100.0 + lane.q * 10.0 + lane.r * 1.0 + x

    x = _plane((2, Q, R), 8112)
    got = bt_run_on(target, g3_code, x=x, p=2)
    pp, qq, rr = np.indices((2, Q, R))
    assert got.shape == (2, Q, R)
    bt_close(got, pp * 100.0 + qq * 10.0 + rr + x)


# ------------------------------------------------------------------ payloads on a grid


def test_vector_reduced_over_an_axis_is_payload_first(target):
    @hawk.kernel
    def g_vec_fold(lane: Grid["band", "tick":TICKS], v: Vector[3]) -> Vector[3]:
        return hawk.sum(v * 2.0, over="tick")

    v = _plane((3, 5, TICKS), 8113)  # (components, band, tick)
    got = bt_run_on(target, g_vec_fold, v=v, band=5)
    assert got.shape == (3, 5)
    bt_close(got, (v * 2.0).sum(axis=-1), rtol=1e-12)


def test_grid_with_a_table_and_lane_coordinates(target):
    @hawk.kernel
    def g_weighted(lane: Grid["band", "tick":6], x: Scalar, w: Table["tick":6]) -> Scalar:
        return hawk.sum(x * w.at(tick=lane.tick), over="tick")

    x = _plane((3, 6), 8114)
    w = np.random.default_rng(8115).uniform(size=6)
    got = bt_run_on(target, g_weighted, x=x, w=w, band=3)
    bt_close(got, x @ w, rtol=1e-12)


def test_grid_per_lane_mutable_output(target):
    @hawk.kernel
    def g_twice(lane: Grid["band", "tick":TICKS], x: Scalar, y: Mutable[Scalar]):
        y = 2.0 * x - lane.band

    x = _plane((3, TICKS), 8116)
    got = bt_run_on(target, g_twice, x=x, band=3)
    assert got.shape == (3, TICKS)
    bt_close(got, 2.0 * x - np.arange(3)[:, None])
