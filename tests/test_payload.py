"""Vector and Matrix payloads, in-lane sums by named axis, vector/matrix cells, Table reads, Param, m.vec.

Every test that runs a kernel runs on each target of conftest.BT_TARGETS (the `target` fixture) with the same
expectations.
"""

import numpy as np
import pytest
from conftest import bt_close, bt_run_on, bt_sum_k, bt_sum_ulps

import hawk
import hawk.math as m
from hawk import Grid, Index, Matrix, Mutable, Param, Scalar, Table, Vector

LANES = 37


def _rand(shape, seed, dtype=np.float64):
    return np.random.default_rng(seed).normal(size=shape).astype(dtype)


# ------------------------------------------------------------------ per-lane vector work


@hawk.kernel
def p_vec_parts(v: Vector[3], total: Mutable[Scalar], mid: Mutable[Scalar], folded: Mutable[Scalar]):
    total = v.sum(axis="components")
    mid = v.components[1] * 2.0
    folded = v.sum()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_vector_components_and_in_lane_sum(target, dtype):
    v = _rand((3, LANES), 9100, dtype)
    out = bt_run_on(target, p_vec_parts, v=v)
    assert sorted(out) == ["folded", "mid", "total"]
    rtol = 1e-14 if dtype == np.float64 else 1e-6
    for name in out:
        assert out[name].shape == (LANES,) and out[name].dtype == dtype
    bt_close(out["total"], v.sum(axis=0), rtol=rtol)
    bt_close(out["folded"], v.sum(axis=0), rtol=rtol)
    np.testing.assert_array_equal(out["mid"], v[1] * dtype(2.0))


def test_vector_arithmetic_per_lane(target):
    @hawk.kernel
    def p_vec_ops(a: Vector[4], b: Vector[4], s: Scalar, out: Mutable[Vector[4]]):
        out = (a + b) * s - a / 2.0 + b * 3.0

    a, b = _rand((2, 4, LANES), 9101)
    s = _rand(LANES, 9102)
    got = bt_run_on(target, p_vec_ops, a=a, b=b, s=s)
    assert got.shape == (4, LANES)
    bt_close(got, (a + b) * s - a / 2.0 + b * 3.0)


def test_vector_returned_per_lane_from_m_vec(target):
    @hawk.kernel
    def p_pair(x: Scalar, y: Scalar) -> Vector[2]:
        return m.vec(x + y, x * y)

    x, y = _rand((2, LANES), 9103)
    got = bt_run_on(target, p_pair, x=x, y=y)
    assert got.shape == (2, LANES)
    bt_close(got, np.stack([x + y, x * y]))


def test_m_vec_dot_with_table_weights(target):
    @hawk.kernel
    def p_dot(x: Scalar, y: Scalar, w: Table["slot":3]) -> Scalar:
        u = m.vec(x, y, x - y)
        return (u * m.vec(w.at(slot=0), w.at(slot=1), w.at(slot=2))).sum()

    x, y = _rand((2, LANES), 9104)
    w = np.array([0.5, -1.25, 2.0])
    got = bt_run_on(target, p_dot, x=x, y=y, w=w)
    bt_close(got, w[0] * x + w[1] * y + w[2] * (x - y))


# ------------------------------------------------------------------ per-lane matrix work

RM, CM = 2, 3


@hawk.kernel
def p_mat_parts(
    mm: Matrix[RM, CM],
    row1: Mutable[Vector[CM]],
    col2: Mutable[Vector[RM]],
    down: Mutable[Vector[CM]],
    across: Mutable[Vector[RM]],
    corner: Mutable[Scalar],
):
    row1 = mm.rows[1]
    col2 = mm.columns[2]
    down = mm.sum(axis="rows")
    across = mm.sum(axis="columns")
    corner = mm.rows[1].components[2]


@pytest.mark.parametrize("layout", ["flat", "rc"])
def test_matrix_rows_columns_and_axis_sums(target, layout):
    mm = _rand((RM * CM, LANES), 9105)
    cube = mm.reshape(RM, CM, LANES)
    arg = mm if layout == "flat" else cube.copy()
    out = bt_run_on(target, p_mat_parts, mm=arg)
    assert sorted(out) == ["across", "col2", "corner", "down", "row1"]
    np.testing.assert_array_equal(out["row1"], cube[1])
    np.testing.assert_array_equal(out["col2"], cube[:, 2])
    bt_close(out["down"], cube.sum(axis=0))
    bt_close(out["across"], cube.sum(axis=1))
    np.testing.assert_array_equal(out["corner"], cube[1, 2])


def test_matrix_per_lane_output(target):
    @hawk.kernel
    def p_mat_scale(mm: Matrix[2, 2], s: Scalar, out: Mutable[Matrix[2, 2]]):
        out = mm * s + 1.0

    mm = _rand((4, LANES), 9106)
    s = _rand(LANES, 9107)
    got = bt_run_on(target, p_mat_scale, mm=mm, s=s)
    assert got.size == 4 * LANES
    bt_close(got.reshape(4, LANES), mm * s + 1.0)


# ------------------------------------------------------------------ cells of vectors and matrices


@hawk.kernel
def p_cells(
    mm: Matrix[RM, CM],
    whole: Mutable[Matrix[RM, CM]],
    first: Mutable[Vector[CM]],
    side: Mutable[Vector[RM]],
    lower: Mutable[Vector[CM]],
):
    whole = hawk.sum(mm)
    first = hawk.sum(mm.rows[0])
    side = hawk.sum(mm.columns[1])
    lower = hawk.sum(mm.sum(axis="rows"))


@pytest.mark.parametrize("lanes", [1, 50, 10_001])
def test_matrix_and_vector_cells_come_back_per_entry(target, lanes):
    mm = _rand((RM * CM, lanes), 9108 + lanes)
    cube = mm.reshape(RM, CM, lanes)
    out = bt_run_on(target, p_cells, mm=mm)
    want_names = (
        [f"first_{k}" for k in range(CM)]
        + [f"lower_{k}" for k in range(CM)]
        + [f"side_{k}" for k in range(RM)]
        + [f"whole_{k}" for k in range(RM * CM)]
    )
    assert sorted(out) == sorted(want_names)
    assert list(out) == sorted(out)
    for name in want_names:
        assert out[name].shape == (1,)
    k = bt_sum_k(lanes, np.float64)
    for e in range(RM * CM):  # row-major entries
        assert bt_sum_ulps(out[f"whole_{e}"][0], mm[e]) <= k
    for j in range(CM):
        assert bt_sum_ulps(out[f"first_{j}"][0], cube[0, j]) <= k
        assert bt_sum_ulps(out[f"lower_{j}"][0], cube[:, j, :]) <= k
    for i in range(RM):
        assert bt_sum_ulps(out[f"side_{i}"][0], cube[i, 1]) <= k


def test_vector_cell_sum_and_mean(target):
    @hawk.kernel
    def p_vcell(v: Vector[3], tot: Mutable[Vector[3]], avg: Mutable[Vector[3]]):
        tot = hawk.sum(v)
        avg = hawk.mean(v)

    v = _rand((3, 999), 9109)
    out = bt_run_on(target, p_vcell, v=v)
    assert sorted(out) == ["avg_0", "avg_1", "avg_2", "tot_0", "tot_1", "tot_2"]
    for c in range(3):
        bt_close(out[f"tot_{c}"], np.array([v[c].sum()]), rtol=1e-12)
        bt_close(out[f"avg_{c}"], np.array([v[c].mean()]), rtol=1e-12)


def test_vector_cell_with_where(target):
    @hawk.kernel
    def p_vcell_where(v: Vector[2], x: Scalar, tot: Mutable[Vector[2]]):
        tot = hawk.sum(v * x, where=x > 0.0)

    v = _rand((2, 500), 9110)
    x = _rand(500, 9111)
    out = bt_run_on(target, p_vcell_where, v=v, x=x)
    sel = x > 0
    for c in range(2):
        bt_close(out[f"tot_{c}"], np.array([(v[c] * x)[sel].sum()]), rtol=1e-12)


def test_returned_vector_reduction_is_payload_shaped(target):
    @hawk.kernel
    def p_vret(v: Vector[4]) -> Vector[4]:
        return hawk.sum(v * v)

    v = _rand((4, 321), 9112)
    got = bt_run_on(target, p_vret, v=v)
    assert got.shape == (4,)
    bt_close(got, (v * v).sum(axis=1), rtol=1e-12)


def test_returned_vector_reduction_over_grid_axis(target):
    NB, NS = 3, 16

    @hawk.kernel
    def p_grad(lane: Grid["chan", "term":4, "samp":NS],
               feat: Table["slot":2, "term":4, "samp":NS],
               res: Table["chan":NB, "samp":NS]) -> Vector[2]:
        g = res.at(chan=lane.chan, samp=lane.samp)
        t = m.vec(feat.at(slot=0, term=lane.term, samp=lane.samp),
                  feat.at(slot=1, term=lane.term, samp=lane.samp)) * g
        return hawk.sum(t, over="samp")

    rng = np.random.default_rng(9113)
    feat, res = rng.uniform(size=(2, 4, NS)), rng.uniform(size=(NB, NS))
    got = bt_run_on(target, p_grad, feat=feat, res=res, chan=NB)
    assert got.shape == (2, NB, 4)
    bt_close(got, np.einsum("ktn,cn->kct", feat, res), rtol=1e-12)


# ------------------------------------------------------------------ Table and Param


def test_table_reads_fixed_and_by_index(target):
    @hawk.kernel
    def p_lookup(k: Index, x: Scalar, t: Table["a":3, "b":5]) -> Scalar:
        return t.at(a=2, b=k) * x + t.at(a=0, b=4)

    rng = np.random.default_rng(9114)
    t = rng.normal(size=(3, 5))
    k = rng.integers(0, 5, size=LANES).astype(np.int64)
    x = rng.normal(size=LANES)
    got = bt_run_on(target, p_lookup, k=k, x=x, t=t)
    bt_close(got, t[2, k] * x + t[0, 4])


def test_table_read_at_computed_index(target):
    @hawk.kernel
    def p_binned(x: Scalar, lut: Table["bin":6]) -> Scalar:
        return lut.at(bin=m.index(x * 6.0, 6))

    rng = np.random.default_rng(9115)
    x = rng.uniform(-0.2, 1.2, size=200)
    lut = rng.normal(size=6)
    got = bt_run_on(target, p_binned, x=x, lut=lut)
    np.testing.assert_array_equal(got, lut[np.clip(np.floor(x * 6.0), 0, 5).astype(int)])


@pytest.mark.parametrize("form", ["float", "int", "0d", "1elem"])
def test_param_forms(target, form):
    @hawk.kernel
    def p_affine(x: Scalar, gain: Param, bias: Param) -> Scalar:
        return gain * x + bias

    x = _rand(LANES, 9116)
    gain = {"float": 2.5, "int": 3, "0d": np.array(2.5), "1elem": np.array([2.5])}[form]
    got = bt_run_on(target, p_affine, x=x, gain=gain, bias=-0.75)
    g = float(np.asarray(gain).reshape(-1)[0])
    bt_close(got, g * x - 0.75)


def test_param_with_f32_planes(target):
    @hawk.kernel
    def p_affine32(x: Scalar, gain: Param) -> Scalar:
        return gain * x

    x = _rand(LANES, 9117, np.float32)
    got = bt_run_on(target, p_affine32, x=x, gain=0.5)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, x * np.float32(0.5))


def test_component_cells_and_f32_matrix_cell(target):
    @hawk.kernel
    def p_comp_cells(v: Vector[3], mm: Matrix[2, 2], c2: Mutable[Scalar], g: Mutable[Matrix[2, 2]]):
        c2 = hawk.sum(v.components[2])
        g = hawk.sum(mm)

    v = _rand((3, 400), 9118, np.float32)
    mm = _rand((4, 400), 9119, np.float32)
    out = bt_run_on(target, p_comp_cells, v=v, mm=mm)
    assert sorted(out) == ["c2", "g_0", "g_1", "g_2", "g_3"]
    k = bt_sum_k(400, np.float32)
    assert out["c2"].dtype == np.float32
    assert bt_sum_ulps(out["c2"][0], v[2]) <= k
    for e in range(4):
        assert bt_sum_ulps(out[f"g_{e}"][0], mm[e]) <= k


def test_vector_per_lane_output_on_a_grid(target):
    @hawk.kernel
    def p_grid_vec(lane: Grid["row", "col":5], x: Scalar, o: Mutable[Vector[2]]):
        o = m.vec(x, lane.col * 1.0)

    x = _rand((3, 5), 9120)
    got = bt_run_on(target, p_grid_vec, x=x, row=3)
    assert got.shape == (2, 3, 5)
    np.testing.assert_array_equal(got[0], x)
    np.testing.assert_array_equal(got[1], np.broadcast_to(np.arange(5.0), (3, 5)))
