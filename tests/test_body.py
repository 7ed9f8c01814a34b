"""One lane's code: arithmetic, comparisons, control flow, hawk.math, per-lane and in-place outputs.

Every test that runs a kernel runs on each target of conftest.BT_TARGETS (the `target` fixture) with the same
expectations. Where a target
refuses a kernel by contract (spirv: float64 pow), the test asserts that refusal.
"""

import numpy as np
import pytest
from conftest import bt_close, bt_run_on

import hawk
import hawk.math as m
from hawk import Grid, Index, Mutable, Param, Scalar, Table

N = 203  # odd on purpose
DTYPES = [np.float64, np.float32]


def _rtol(dtype):
    return 1e-14 if np.dtype(dtype) == np.float64 else 2e-6


def _xy(seed, dtype=np.float64, n=N, lo=-3.0, hi=3.0):
    rng = np.random.default_rng(seed)
    return rng.uniform(lo, hi, size=n).astype(dtype), rng.uniform(lo, hi, size=n).astype(dtype)


# ------------------------------------------------------------------ arithmetic


@hawk.kernel
def b_arith(x: Scalar, y: Scalar, s: Mutable[Scalar], d: Mutable[Scalar], p: Mutable[Scalar],
            q: Mutable[Scalar], neg: Mutable[Scalar]):
    s = x + y + 1.5
    d = x - 2.0 * y
    p = x * y
    q = x / (y * y + 0.5)
    neg = -x


@pytest.mark.parametrize("dtype", DTYPES)
def test_float_arithmetic(target, dtype):
    x, y = _xy(9400, dtype)
    out = bt_run_on(target, b_arith, x=x, y=y)
    assert sorted(out) == ["d", "neg", "p", "q", "s"]
    c = dtype
    r = _rtol(dtype)
    bt_close(out["s"], x + y + c(1.5), rtol=r)
    bt_close(out["d"], x - c(2.0) * y, rtol=r)
    bt_close(out["p"], x * y, rtol=r)
    bt_close(out["q"], x / (y * y + c(0.5)), rtol=r)
    np.testing.assert_array_equal(out["neg"], -x)
    for v in out.values():
        assert v.dtype == dtype and v.shape == (N,)


@hawk.kernel
def b_floor_ops(x: Scalar, fd: Mutable[Scalar], md: Mutable[Scalar], fd7: Mutable[Scalar], md7: Mutable[Scalar],
                sq: Mutable[Scalar], cu: Mutable[Scalar]):
    fd = x // 0.25
    md = x % 0.25
    fd7 = x // 0.7
    md7 = x % 0.7
    sq = x ** 2
    cu = x ** 3


@hawk.kernel
def b_pow(a: Scalar, b: Scalar, rt: Mutable[Scalar], pw: Mutable[Scalar]):
    # a kernel of its own: the spirv target has no float64 pow (a ** 0.5 is one too) and refuses the whole kernel
    rt = a ** 0.5
    pw = a ** b


def test_floor_division_modulo_and_power_on_floats(target):
    x, _ = _xy(9401)
    rng = np.random.default_rng(9402)
    a, b = rng.uniform(0.1, 4.0, size=N), rng.uniform(-2.0, 2.0, size=N)
    out = bt_run_on(target, b_floor_ops, x=x)
    np.testing.assert_array_equal(out["fd"], np.floor_divide(x, 0.25))
    np.testing.assert_array_equal(out["md"], np.mod(x, 0.25))  # sign of the divisor, as Python
    bt_close(out["fd7"], np.floor_divide(x, 0.7), rtol=1e-12)
    bt_close(out["md7"], np.mod(x, 0.7), rtol=1e-12)
    assert (out["md7"] >= 0.0).all()
    bt_close(out["sq"], x ** 2)
    bt_close(out["cu"], x ** 3)
    out = bt_run_on(target, b_pow, a=a, b=b)  # (spirv: float64 pow through a double-double log, spirv_math64)
    bt_close(out["rt"], np.sqrt(a))
    bt_close(out["pw"], a ** b, rtol=1e-13)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)  # float32 pow runs everywhere
    out = bt_run_on(target, b_pow, a=a32, b=b32)
    assert out["pw"].dtype == np.float32
    np.testing.assert_allclose(out["rt"], np.sqrt(a32.astype(np.float64)), rtol=_rtol(np.float32))
    np.testing.assert_allclose(out["pw"], a32.astype(np.float64) ** b32.astype(np.float64), rtol=_rtol(np.float32))


@hawk.kernel
def b_int_ops(i: Index, j: Index, fdiv: Mutable[Scalar], rem: Mutable[Scalar], sqr: Mutable[Scalar],
              lin: Mutable[Scalar], tdiv: Mutable[Scalar], mixed: Mutable[Scalar]):
    fdiv = (i // 3) * 1.0
    rem = (i % j) * 1.0
    sqr = (i ** 2) * 1.0
    lin = (i * 4 + j - 7) * 1.0
    tdiv = i / 4
    mixed = i * 0.5 + j


@pytest.mark.parametrize("itype", [np.int32, np.int64])
def test_integer_arithmetic_on_index_planes(target, itype):
    rng = np.random.default_rng(9403)
    i = rng.integers(0, 1000, size=N).astype(itype)
    j = rng.integers(1, 9, size=N).astype(itype)
    out = bt_run_on(target, b_int_ops, i=i, j=j)
    ii, jj = i.astype(np.int64), j.astype(np.int64)
    np.testing.assert_array_equal(out["fdiv"], (ii // 3).astype(float))
    np.testing.assert_array_equal(out["rem"], (ii % jj).astype(float))
    np.testing.assert_array_equal(out["sqr"], (ii ** 2).astype(float))
    np.testing.assert_array_equal(out["lin"], (ii * 4 + jj - 7).astype(float))
    np.testing.assert_array_equal(out["tdiv"], ii / 4)
    np.testing.assert_array_equal(out["mixed"], ii * 0.5 + jj)


def test_integer_floor_division_and_modulo_of_negatives(target):
    @hawk.kernel
    def b_neg_ints(lane: Grid["k":21], x: Scalar, q3: Mutable[Scalar], r3: Mutable[Scalar],
                   qn: Mutable[Scalar], rn: Mutable[Scalar]):
        t = lane.k - 10
        q3 = (t // 3) * 1.0 + 0.0 * x
        r3 = (t % 3) * 1.0
        qn = (t // -4) * 1.0
        rn = (t % -4) * 1.0

    x = np.zeros(21)
    out = bt_run_on(target, b_neg_ints, x=x)
    t = np.arange(21) - 10
    np.testing.assert_array_equal(out["q3"], np.floor_divide(t, 3).astype(float))
    np.testing.assert_array_equal(out["r3"], np.mod(t, 3).astype(float))
    np.testing.assert_array_equal(out["qn"], np.floor_divide(t, -4).astype(float))
    np.testing.assert_array_equal(out["rn"], np.mod(t, -4).astype(float))


# ------------------------------------------------------------------ comparisons and logic


@hawk.kernel
def b_compare(x: Scalar, y: Scalar, lt: Mutable[Scalar], le: Mutable[Scalar], gt: Mutable[Scalar],
              ge: Mutable[Scalar], eq: Mutable[Scalar], ne: Mutable[Scalar]):
    lt = m.where(x < y, 1.0, 0.0)
    le = m.where(x <= y, 1.0, 0.0)
    gt = m.where(x > y, 1.0, 0.0)
    ge = m.where(x >= y, 1.0, 0.0)
    eq = m.where(x == y, 1.0, 0.0)
    ne = m.where(x != y, 1.0, 0.0)


def test_comparisons(target):
    rng = np.random.default_rng(9404)
    x = rng.integers(-3, 4, size=N) * 0.5  # many ties
    y = rng.integers(-3, 4, size=N) * 0.5
    out = bt_run_on(target, b_compare, x=x, y=y)
    for name, op in [("lt", np.less), ("le", np.less_equal), ("gt", np.greater),
                     ("ge", np.greater_equal), ("eq", np.equal), ("ne", np.not_equal)]:
        np.testing.assert_array_equal(out[name], op(x, y).astype(float), err_msg=name)


@hawk.kernel
def b_logic(x: Scalar, y: Scalar, both: Mutable[Scalar], either: Mutable[Scalar], neither: Mutable[Scalar]):
    both = m.where(m.land(x > 0.0, y > 0.0), x + y, 0.0)
    either = m.where(m.lor(x > 1.0, y < -1.0), 1.0, -1.0)
    neither = m.where(m.lnot(m.lor(x > 0.0, y > 0.0)), x * y, 7.0)


def test_land_lor_lnot_and_where(target):
    x, y = _xy(9405)
    out = bt_run_on(target, b_logic, x=x, y=y)
    np.testing.assert_array_equal(out["both"], np.where((x > 0) & (y > 0), x + y, 0.0))
    np.testing.assert_array_equal(out["either"], np.where((x > 1) | (y < -1), 1.0, -1.0))
    np.testing.assert_array_equal(out["neither"], np.where(~((x > 0) | (y > 0)), x * y, 7.0))


# ------------------------------------------------------------------ control flow


def test_if_else_assigning_variables_in_both_branches(target):
    @hawk.kernel
    def b_branch(x: Scalar, y: Mutable[Scalar], z: Mutable[Scalar]):
        if x > 0.5:
            a = x * 2.0
            b = 1.0
        else:
            a = -x
            b = x + 3.0
        y = a + b
        z = b

    x, _ = _xy(9406)
    out = bt_run_on(target, b_branch, x=x)
    np.testing.assert_array_equal(out["y"], np.where(x > 0.5, x * 2.0 + 1.0, -x + (x + 3.0)))
    np.testing.assert_array_equal(out["z"], np.where(x > 0.5, 1.0, x + 3.0))


def test_if_without_else_keeps_earlier_value(target):
    @hawk.kernel
    def b_relu(x: Scalar) -> Scalar:
        r = x
        if x < 0.0:
            r = 0.1 * x
        return r

    x, _ = _xy(9407)
    np.testing.assert_array_equal(bt_run_on(target, b_relu, x=x), np.where(x < 0, 0.1 * x, x))


def test_nested_if_and_elif(target):
    @hawk.kernel
    def b_nested(x: Scalar, y: Scalar) -> Scalar:
        if x > 0.0:
            if y > 0.0:
                r = 1.0
            else:
                r = 2.0
        elif x > -1.0:
            r = 3.0 + y
        else:
            if y < x:
                r = 4.0
            else:
                r = 5.0 * y
        return r

    x, y = _xy(9408)
    want = np.where(x > 0, np.where(y > 0, 1.0, 2.0),
                    np.where(x > -1, 3.0 + y, np.where(y < x, 4.0, 5.0 * y)))
    np.testing.assert_array_equal(bt_run_on(target, b_nested, x=x, y=y), want)


def test_for_over_range_with_loop_carried_locals(target):
    @hawk.kernel
    def b_series(x: Scalar, poly: Mutable[Scalar], stepped: Mutable[Scalar]):
        acc = 0.0
        p = 1.0
        for k in range(6):
            acc = acc + p / (k + 1.0)
            p = p * x
        poly = acc
        s = x
        for k in range(2, 11, 3):
            s = s * 0.5 + k
        stepped = s

    x, _ = _xy(9409, lo=-1.0, hi=1.0)
    out = bt_run_on(target, b_series, x=x)
    acc = np.zeros_like(x)
    p = np.ones_like(x)
    for k in range(6):
        acc = acc + p / (k + 1.0)
        p = p * x
    s = x.copy()
    for k in range(2, 11, 3):
        s = s * 0.5 + k
    bt_close(out["poly"], acc)
    bt_close(out["stepped"], s)


def test_nested_for_with_if_inside(target):
    @hawk.kernel
    def b_grid_walk(x: Scalar) -> Scalar:
        t = 0.0
        for a in range(3):
            for b in range(4):
                if a * 4 + b > 5:
                    t = t + x * a
                else:
                    t = t - b * 1.0
        return t

    x, _ = _xy(9410)
    want = np.zeros_like(x)
    for a in range(3):
        for b in range(4):
            want = want + x * a if a * 4 + b > 5 else want - b * 1.0
    bt_close(bt_run_on(target, b_grid_walk, x=x), want)


def test_ternary_expression(target):
    @hawk.kernel
    def b_tern(x: Scalar, y: Scalar) -> Scalar:
        return x * y if x > y else x - y

    x, y = _xy(9411)
    np.testing.assert_array_equal(bt_run_on(target, b_tern, x=x, y=y), np.where(x > y, x * y, x - y))


# ------------------------------------------------------------------ hawk.math


@hawk.kernel
def bm_sqrt(x: Scalar) -> Scalar:
    return m.sqrt(x)


@hawk.kernel
def bm_exp(x: Scalar) -> Scalar:
    return m.exp(x)


@hawk.kernel
def bm_log(x: Scalar) -> Scalar:
    return m.log(x)


@hawk.kernel
def bm_sin(x: Scalar) -> Scalar:
    return m.sin(x)


@hawk.kernel
def bm_cos(x: Scalar) -> Scalar:
    return m.cos(x)


@hawk.kernel
def bm_abs(x: Scalar) -> Scalar:
    return m.abs(x)


@hawk.kernel
def bm_floor(x: Scalar) -> Scalar:
    return m.floor(x) + 0.0


@hawk.kernel
def bm_clamp(x: Scalar) -> Scalar:
    return m.clamp(x, -0.75, 1.25)


@hawk.kernel
def bm_index(x: Scalar) -> Scalar:
    return m.index(x * 2.0, 5) * 1.0


# (kernel, numpy reference, domain, exact?)
UNARY = [
    (bm_sqrt, np.sqrt, (0.0, 50.0), True),
    (bm_exp, np.exp, (-20.0, 20.0), False),
    (bm_log, np.log, (1e-6, 1e6), False),
    (bm_sin, np.sin, (-20.0, 20.0), False),
    (bm_cos, np.cos, (-20.0, 20.0), False),
    (bm_abs, np.abs, (-5.0, 5.0), True),
    (bm_floor, np.floor, (-5.0, 5.0), True),
    (bm_clamp, lambda v: np.clip(v, -0.75, 1.25), (-3.0, 3.0), True),
    (bm_index, lambda v: np.clip(np.floor(v * 2.0), 0, 4), (-2.0, 4.0), True),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "kernel, ref, domain, exact", UNARY,
    ids=["sqrt", "exp", "log", "sin", "cos", "abs", "floor", "clamp", "index"],
)
def test_unary_math(target, kernel, ref, domain, exact, dtype):
    rng = np.random.default_rng(9412)
    x = rng.uniform(*domain, size=N).astype(dtype)
    got = bt_run_on(target, kernel, x=x)
    assert got.dtype == dtype and got.shape == (N,)
    if exact:
        np.testing.assert_array_equal(got, ref(x).astype(dtype))
    elif dtype == np.float64:
        np.testing.assert_allclose(got, ref(x), rtol=1e-13, atol=1e-15)
    else:
        np.testing.assert_allclose(got, ref(x.astype(np.float64)), rtol=2e-6, atol=2e-6)


def test_math_min_max_binary(target):
    @hawk.kernel
    def bm_minmax(x: Scalar, y: Scalar, lo: Mutable[Scalar], hi: Mutable[Scalar], mix: Mutable[Scalar]):
        lo = m.min(x, y)
        hi = m.max(x, y)
        mix = m.max(m.min(x, 0.5), -0.5)

    x, y = _xy(9413)
    out = bt_run_on(target, bm_minmax, x=x, y=y)
    np.testing.assert_array_equal(out["lo"], np.minimum(x, y))
    np.testing.assert_array_equal(out["hi"], np.maximum(x, y))
    np.testing.assert_array_equal(out["mix"], np.maximum(np.minimum(x, 0.5), -0.5))


def test_math_index_as_table_and_arith_key(target):
    @hawk.kernel
    def bm_bucket(x: Scalar, edges: Table["e":4]) -> Scalar:
        k = m.index(x, 4)
        return edges.at(e=k) + k * 10.0

    x = np.random.default_rng(9414).uniform(-1.0, 5.0, size=N)
    edges = np.array([0.5, 1.5, 2.5, 3.5])
    k = np.clip(np.floor(x), 0, 3).astype(int)
    np.testing.assert_array_equal(bt_run_on(target, bm_bucket, x=x, edges=edges), edges[k] + k * 10.0)


# ------------------------------------------------------------------ outputs


def test_per_lane_return_next_to_mutable_outputs(target):
    @hawk.kernel
    def b_multi(x: Scalar, y: Scalar, half: Mutable[Scalar]) -> Scalar:
        half = x * 0.5
        return x + y

    x, y = _xy(9415)
    out = bt_run_on(target, b_multi, x=x, y=y)
    assert list(out) == ["half", "result"]
    np.testing.assert_array_equal(out["half"], x * 0.5)
    np.testing.assert_array_equal(out["result"], x + y)


def test_passed_per_lane_mutable_is_written_in_place(target):
    @hawk.kernel
    def b_accumulate(x: Scalar, acc: Mutable[Scalar]):
        acc = acc + x * 2.0

    x, _ = _xy(9416)
    start = np.random.default_rng(9417).normal(size=N)
    acc = start.copy()
    got = bt_run_on(target, b_accumulate, x=x, acc=acc)
    np.testing.assert_array_equal(got, start + x * 2.0)
    np.testing.assert_array_equal(acc, start + x * 2.0)


@hawk.kernel
def b_masked_store(x: Scalar, y: Mutable[Scalar]):
    y = m.where(x > 0.0, x * 10.0, y)


@pytest.mark.parametrize("dtype", DTYPES)
def test_where_store_keeps_old_values_where_false(target, dtype):
    x, _ = _xy(9418, dtype)
    old = np.random.default_rng(9419).normal(size=N).astype(dtype)
    y = old.copy()
    got = bt_run_on(target, b_masked_store, x=x, y=y)
    want = np.where(x > 0, x * dtype(10.0), old)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(y, want)


def test_where_store_into_omitted_output_starts_at_zero(target):
    x, _ = _xy(9420)
    got = bt_run_on(target, b_masked_store, x=x)
    np.testing.assert_array_equal(got, np.where(x > 0, x * 10.0, 0.0))


def test_inputs_are_never_modified(target):
    @hawk.kernel
    def b_touch_all(x: Scalar, k: Index, t: Table["s":3], g: Param, y: Mutable[Scalar],
                    bins: Mutable["b":3]):
        y = x.at(k) * g + t.at(s=k % 3)
        hawk.scatter(bins)[k % 3] += x

    rng = np.random.default_rng(9421)
    x = rng.normal(size=N)
    k = rng.integers(0, N, size=N).astype(np.int32)
    t = rng.normal(size=3)
    g = np.array([1.5])
    copies = [a.copy() for a in (x, k, t, g)]
    out = bt_run_on(target, b_touch_all, x=x, k=k, t=t, g=g)
    for before, after in zip(copies, (x, k, t, g), strict=True):
        np.testing.assert_array_equal(after, before)
        assert after.dtype == before.dtype
    bt_close(out["y"], x[k] * 1.5 + t[k % 3])
    np.testing.assert_allclose(out["bins"], np.bincount(k % 3, x, minlength=3), rtol=1e-12)


def test_not_equal_in_an_if(target):
    @hawk.kernel
    def b_ne_branch(x: Scalar, y: Scalar) -> Scalar:
        if x != y:
            r = x - y
        else:
            r = 100.0
        return r

    x = np.array([1.0, 2.0, 2.0, -0.5, 0.0])
    y = np.array([1.0, 3.0, 2.0, 0.5, -0.0])
    np.testing.assert_array_equal(bt_run_on(target, b_ne_branch, x=x, y=y), np.where(x != y, x - y, 100.0))


def test_index_comparisons(target):
    @hawk.kernel
    def b_int_cmp(i: Index, eq: Mutable[Scalar], ne: Mutable[Scalar], lt: Mutable[Scalar]):
        eq = m.where(i == 3, 1.0, 0.0)
        ne = m.where(i != 3, 1.0, 0.0)
        lt = m.where(i < 3, 1.0, 0.0)

    i = np.arange(7, dtype=np.int32)
    out = bt_run_on(target, b_int_cmp, i=i)
    np.testing.assert_array_equal(out["eq"], (i == 3).astype(float))
    np.testing.assert_array_equal(out["ne"], (i != 3).astype(float))
    np.testing.assert_array_equal(out["lt"], (i < 3).astype(float))


def test_passed_f32_per_lane_mutable_in_place(target):
    @hawk.kernel
    def b_scale_in_place(x: Scalar, y: Mutable[Scalar]):
        y = y * 0.5 + x

    x = np.linspace(-1.0, 1.0, 9, dtype=np.float32)
    y = np.arange(9, dtype=np.float32)
    start = y.copy()
    got = bt_run_on(target, b_scale_in_place, x=x, y=y)
    want = start * np.float32(0.5) + x
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(y, want)
