"""The reverse (docs/reverse.md): plan.reverse(cotangent, **planes) against jax.grad of the same computation in
jax.numpy, and against central finite differences of the forward kernel (fsum of cotangent x output) where the
function is smooth. float64 (one float32 run); several kernels mix constructs.

Cases: elementwise math with if/else and m.where, a Param, x - mean(x), a 3-stage kernel, max with ties and min
with where=, a masked column mean on a grid (over=), a .at stencil on a 2-D grid, a histogram-weighted loss
through +=, colliding = stores, a Table lookup, vector and matrix payloads, a for loop with a carried value, an
if and scatters in it, nested loops, vector cells, cells that keep an axis, several outputs with a cotangent dict,
two stores into one sink, wrt=, bound launches, float32.
"""


import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import eagle
import hawk
import hawk.math as m
from hawk import Grid, Index, Matrix, Mutable, Param, Scalar, Table, Vector

jax.config.update("jax_enable_x64", True)


def grads_of(plan, ct, **planes) -> dict[str, np.ndarray]:
    return {k: np.asarray(v).copy() for k, v in plan.reverse(ct, **planes).items()}


def assert_close(got, want, rtol=1e-12, atol=1e-13, what=""):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)


def weighted(plan, ct, planes) -> float:
    """sum(cotangent x output) over every output, added exactly (math.fsum)."""
    out = plan.run(**planes)
    if not isinstance(out, dict):
        out = {next(iter(ct)): out}
    return math.fsum(float(v) for name, c in ct.items()
                     for v in (np.asarray(c, dtype=np.float64) * np.asarray(out[name])).reshape(-1))


def check_fd(plan, ct: dict, grads: dict, planes: dict, seed=0, rel=1e-6):
    """Central differences along one random direction per input: <grad, d> ~ (f(x + hd) - f(x - hd)) / 2h."""
    rng = np.random.default_rng(seed)
    for name, g in grads.items():
        x = np.asarray(planes[name], dtype=np.float64)
        d = rng.normal(size=x.shape)
        h = 1e-5 * max(1.0, float(np.max(np.abs(x))))
        up = weighted(plan, ct, {**planes, name: x + h * d})
        down = weighted(plan, ct, {**planes, name: x - h * d})
        fd = (up - down) / (2 * h)
        want = math.fsum((np.asarray(g).reshape(-1) * d.reshape(-1)).tolist())
        assert abs(fd - want) <= rel * max(1.0, abs(want)), f"{name}: finite differences {fd} vs reverse {want}"


RNG = np.random.default_rng(2026)


# ================================================================================ elementwise, if/else, Param
@hawk.kernel
def elementwise(x: Scalar, w: Scalar, a: Param) -> Scalar:
    y = m.sin(x) * w + a * m.exp(-x * x) + m.atan2(w, 1.5 + x) - m.tanh(w) * m.log1p(x * x)
    if x > 0.2:
        y = y * m.sqrt(x + 1.0) + m.pow(x + 2.0, w)
    else:
        y = y / (2.0 + m.cos(w)) + m.erf(w) * m.abs(x)
    z = m.where(w > 0.0, y, -y * a) + m.hypot(x, w) + m.max(x, w) - m.clamp(w, -0.5, 0.5)
    return z * z / (3.0 + m.cosh(x)) + m.sinh(w) * m.log(m.abs(x) + 1.0) + m.copysign(x, w)


def test_elementwise_matches_jax_and_finite_differences():
    n = 40
    x, w, ct = RNG.normal(size=n), RNG.normal(size=n), RNG.normal(size=n)
    plan = eagle.deploy(elementwise)
    g = grads_of(plan, ct, x=x, w=w, a=0.7)
    assert sorted(g) == ["a", "w", "x"] and g["a"].shape == (1,) and g["x"].shape == (n,)

    def f(x, w, a):
        y = jnp.sin(x) * w + a * jnp.exp(-x * x) + jnp.arctan2(w, 1.5 + x) - jnp.tanh(w) * jnp.log1p(x * x)
        xs = jnp.where(x > 0.2, x, 1.0)  # jax's where differentiates both sides: keep the untaken one finite
        y = jnp.where(x > 0.2, y * jnp.sqrt(xs + 1.0) + jnp.power(xs + 2.0, w),
                      y / (2.0 + jnp.cos(w)) + jax.scipy.special.erf(w) * jnp.abs(x))
        z = jnp.where(w > 0.0, y, -y * a) + jnp.hypot(x, w) + jnp.maximum(x, w) - jnp.clip(w, -0.5, 0.5)
        r = z * z / (3.0 + jnp.cosh(x)) + jnp.sinh(w) * jnp.log(jnp.abs(x) + 1.0) + jnp.copysign(x, w)
        return jnp.sum(ct * r)

    jx, jw, ja = jax.grad(f, argnums=(0, 1, 2))(x, w, 0.7)
    assert_close(g["x"], jx, what="x")
    assert_close(g["w"], jw, what="w")
    assert_close(g["a"], [ja], what="a")
    # finite differences away from the kinks (|x|, max(x, w), the if at 0.2, clamp at +-0.5, m.where at 0)
    ok = (np.abs(x - 0.2) > 1e-3) & (np.abs(x) > 1e-3) & (np.abs(x - w) > 1e-3) & (np.abs(np.abs(w) - 0.5) > 1e-3)
    planes = {"x": x[ok], "w": w[ok], "a": 0.7}
    check_fd(plan, {"result": ct[ok]}, grads_of(plan, ct[ok], **planes), planes)


@hawk.kernel
def untaken(x: Scalar) -> Scalar:
    y = 0.0
    if x > 0.0:
        y = m.log(x) * m.sqrt(x)
    return y


def test_untaken_branch_gets_exact_zero_not_nan():
    x = np.array([-1.0, 0.0, 2.0, 0.5])
    g = grads_of(eagle.deploy(untaken), np.ones(4), x=x)["x"]
    xp = np.where(x > 0, x, 1.0)
    want = np.where(x > 0, np.sqrt(xp) / xp + np.log(xp) * 0.5 / np.sqrt(xp), 0.0)
    assert np.all(np.isfinite(g))
    assert_close(g, want)


# ================================================================================ reductions and stages
@hawk.kernel
def centred(x: Scalar, c: Mutable[Scalar]):
    c = x - hawk.mean(x)


@hawk.kernel
def three_stage(x: Scalar, w: Scalar, s: Mutable[Scalar]) -> Scalar:
    mu = hawk.mean(x)
    d = x - mu
    v = hawk.sum(d * d * w)
    s = v
    return d / m.sqrt(v + 1.0) + hawk.sum(d * w) * 0.0 + w


def test_x_minus_mean():
    n = 33
    x, ct = RNG.normal(size=n), RNG.normal(size=n)
    plan = eagle.deploy(centred)
    g = grads_of(plan, ct, x=x)
    assert_close(g["x"], jax.grad(lambda x: jnp.sum(ct * (x - jnp.mean(x))))(x))
    check_fd(plan, {"c": ct}, g, {"x": x})


def test_three_stages_forward_and_reverse():
    n = 50
    x, w, ct = RNG.normal(size=n), RNG.uniform(size=n), RNG.normal(size=n)
    assert three_stage.stage_count == 3
    plan = eagle.deploy(three_stage)
    ct_all = {"result": ct, "s": np.array([0.3])}
    g = grads_of(plan, ct_all, x=x, w=w)
    assert len(plan.last_reverse_chunks) >= 3  # the adjoint is staged too

    def f(x, w):
        d = x - jnp.mean(x)
        v = jnp.sum(d * d * w)
        return jnp.sum(ct * (d / jnp.sqrt(v + 1.0) + w)) + 0.3 * v

    jx, jw = jax.grad(f, argnums=(0, 1))(x, w)
    assert_close(g["x"], jx, what="x")
    assert_close(g["w"], jw, what="w")
    check_fd(plan, ct_all, g, {"x": x, "w": w})


@hawk.kernel
def top(x: Scalar, a: Param) -> Scalar:
    return hawk.max(x * a)


@hawk.kernel
def low(x: Scalar, c: Mutable[Scalar]):
    c = hawk.min(x * x, where=x > 0.0)


def test_max_with_ties_splits_equally_as_jax():
    x = np.array([1.0, 3.0, 2.0, 3.0, 0.5, 3.0])
    g = grads_of(eagle.deploy(top), np.array([2.0]), x=x, a=1.5)
    jx, ja = jax.grad(lambda x, a: 2.0 * jnp.max(x * a), argnums=(0, 1))(x, 1.5)
    assert_close(g["x"], jx)
    assert_close(g["a"], [ja])
    assert_close(g["x"], [0, 1.0, 0, 1.0, 0, 1.0])


def test_min_with_where_counts_only_lanes_in_the_mask():
    x = np.array([1.0, -1.0, 2.0, 1.0, 3.0])
    g = grads_of(eagle.deploy(low), 2.0, x=x)
    assert_close(g["x"], [2.0, 0.0, 0.0, 2.0, 0.0])


@hawk.kernel
def column_mean(g: Grid["r", "c":4], u: Scalar) -> Scalar:
    return u - hawk.mean(u, over="r", where=u > -0.5)


def test_masked_column_mean_over_an_axis():
    u, ct = RNG.normal(size=(6, 4)), RNG.normal(size=(6, 4))
    plan = eagle.deploy(column_mean)
    g = grads_of(plan, ct, u=u)

    def f(u):
        msk = u > -0.5
        return jnp.sum(ct * (u - jnp.sum(jnp.where(msk, u, 0), 0) / jnp.sum(msk, 0)))

    assert_close(g["u"], jax.grad(f)(u))


@hawk.kernel
def column_cells(g: Grid["r", "c":3], u: Scalar, w: Vector[2], s: Mutable[Vector[2]]) -> Scalar:
    s = hawk.sum(w * u, over="r")
    return hawk.mean(u * u * w[0], over="r")


def test_cells_that_keep_an_axis():
    u, w = RNG.normal(size=(5, 3)), RNG.normal(size=(2, 5, 3))
    cr, cs = RNG.normal(size=3), RNG.normal(size=(2, 3))
    plan = eagle.deploy(column_cells)
    g = grads_of(plan, {"result": cr, "s": cs}, u=u, w=w)
    g2 = grads_of(plan, {"result": cr, "s_0": cs[0], "s_1": cs[1]}, u=u, w=w)
    np.testing.assert_array_equal(g["u"], g2["u"])

    def f(u, w):
        return jnp.sum(cs * jnp.sum(w * u, 1)) + jnp.sum(cr * jnp.mean(u * u * w[0], 0))

    ju, jw = jax.grad(f, argnums=(0, 1))(u, w)
    assert_close(g["u"], ju)
    assert_close(g["w"], jw)


# ================================================================================ .at, scatters, tables
@hawk.kernel
def stencil(g: Grid["r", "c":5], u: Scalar, k: Param) -> Scalar:
    lap = u.at(r=g.r + 1) + u.at(r=g.r - 1) + u.at(c=g.c + 1) + u.at(c=g.c - 1) - 4.0 * u
    return m.sin(lap * k) + u.at(0) * 0.5


def test_at_stencil_on_a_2d_grid():
    u, ct = RNG.normal(size=(7, 5)), RNG.normal(size=(7, 5))
    plan = eagle.deploy(stencil)
    g = grads_of(plan, ct, u=u, k=0.8)

    def f(u, k):
        up = jnp.concatenate([u[1:], u[-1:]], 0)
        dn = jnp.concatenate([u[:1], u[:-1]], 0)
        rt = jnp.concatenate([u[:, 1:], u[:, -1:]], 1)
        lf = jnp.concatenate([u[:, :1], u[:, :-1]], 1)
        return jnp.sum(ct * (jnp.sin((up + dn + rt + lf - 4.0 * u) * k) + u[0, 0] * 0.5))

    ju, jk = jax.grad(f, argnums=(0, 1))(u, 0.8)
    assert g["u"].shape == (7, 5)
    assert_close(g["u"], ju, what="u")
    assert_close(g["k"], [jk], what="k")
    check_fd(plan, {"result": ct}, g, {"u": u, "k": 0.8})


@hawk.kernel
def histogram_loss(x: Scalar, w: Scalar, h: Mutable["bin":8]):
    hawk.scatter(h)[m.index(x * 8.0, 8)] += w * w * m.exp(x)


def test_histogram_weighted_loss_through_add():
    n = 64
    x, w, cth = RNG.uniform(size=n), RNG.normal(size=n), RNG.normal(size=8)
    plan = eagle.deploy(histogram_loss)
    g = grads_of(plan, cth, x=x, w=w)
    bins = np.clip(np.floor(x * 8.0).astype(int), 0, 7)

    def f(x, w):
        return jnp.sum(jnp.asarray(cth)[bins] * w * w * jnp.exp(x))

    jx, jw = jax.grad(f, argnums=(0, 1))(x, w)
    assert_close(g["x"], jx, what="x")
    assert_close(g["w"], jw, what="w")
    inside = np.abs(x * 8.0 - np.round(x * 8.0)) > 1e-3  # finite differences away from the bin edges
    check_fd(plan, {"h": cth}, grads_of(plan, cth, x=x[inside], w=w[inside]), {"x": x[inside], "w": w[inside]})


@hawk.kernel
def colliding(x: Scalar, k: Index, h: Mutable["slot":3]):
    hawk.scatter(h)[k] = x * x * 3.0


def test_colliding_stores_only_the_last_lane_gets_the_slot():
    x = RNG.normal(size=7)
    k = np.array([0, 2, 0, -1, 2, 1, 2], dtype=np.int32)
    cth = np.array([1.0, 2.0, 4.0])
    g = grads_of(eagle.deploy(colliding), cth, x=x, k=k)
    winner = np.array([False, False, True, False, False, True, True])  # lanes 2, 5, 6 won slots 0, 1, 2
    assert_close(g["x"], np.where(winner, 6.0 * x * cth[np.maximum(k, 0)], 0.0))
    check_fd(eagle.deploy(colliding), {"h": cth}, g, {"x": x, "k": k})

    def f(x):  # the same in jax: .at[].set keeps the last write in index order
        lanes = jnp.asarray([0, 1, 2, 4, 5, 6])  # lane 3 has key -1
        last = jnp.zeros(3).at[jnp.asarray(k)[lanes]].set(jnp.asarray(x)[lanes] ** 2 * 3.0)
        return jnp.sum(cth * last)

    assert_close(g["x"], jax.grad(f)(x))


@hawk.kernel
def two_stores(x: Scalar, k: Index, h: Mutable["slot":4]):
    hawk.scatter(h)[k] = x * x
    hawk.scatter(h)[k + 1] = x * 2.0


def test_two_stores_into_one_sink_the_last_in_lane_then_statement_order_wins():
    x = RNG.normal(size=9)
    k = np.array([0, 2, 1, 1, 0, 2, 1, 0, -1], dtype=np.int32)  # the last: slot 0 by its 2nd store
    cth = np.array([1.0, 10.0, 100.0, 1000.0])
    g = grads_of(eagle.deploy(two_stores), cth, x=x, k=k)
    won = {}
    for lane in range(9):  # the forward's rule, played out (key -1 stores nothing)
        for stmt, key in enumerate((k[lane], k[lane] + 1)):
            if key >= 0:
                won[key] = (lane, stmt)
    want = np.zeros(9)
    for slot, (lane, stmt) in won.items():
        want[lane] += cth[slot] * (2.0 * x[lane] if stmt == 0 else 2.0)
    assert_close(g["x"], want)


def test_passed_sink_initial_contents_get_their_gradient():
    x = RNG.normal(size=7)
    k = np.array([0, 0, 0, 0, 0, -1, 0], dtype=np.int32)
    cth = np.array([1.0, 2.0, 4.0])
    h = np.full(3, 7.0)
    g = grads_of(eagle.deploy(colliding), cth, x=x, k=k, h=h)
    assert_close(g["h"], [0.0, 2.0, 4.0])  # slot 0 was replaced; slots 1 and 2 kept their contents
    np.testing.assert_array_equal(h, [7.0, 7.0, 7.0])  # the reverse writes no array of the caller's
    only = grads_of(eagle.deploy(colliding), cth, x=x, k=k, h=h, wrt=("h",))
    assert sorted(only) == ["h"]
    np.testing.assert_array_equal(only["h"], g["h"])
    g = grads_of(eagle.deploy(histogram_loss), cth.tolist() * 2 + [5.0, 6.0], x=x, w=x, h=np.ones(8))
    assert_close(g["h"], cth.tolist() * 2 + [5.0, 6.0])  # added to: the cotangent itself


@hawk.kernel
def lookup(x: Scalar, t: Table["r":4, "c":3], y: Mutable[Scalar]):
    y = t.at(r=m.index(x, 4), c=m.index(x * 3.0 - 1.0, 3)) * m.sin(x)


@hawk.kernel
def sines(x: Scalar, y: Mutable[Scalar]):
    y = m.sin(x)


def test_table_lookup_scatters_ordered_into_the_table_gradient():
    n = 30
    x, t, cty = RNG.uniform(0, 4, size=n), RNG.normal(size=(4, 3)), RNG.normal(size=n)
    g = grads_of(eagle.deploy(lookup), cty, x=x, t=t)
    r = np.clip(np.floor(x).astype(int), 0, 3)
    c = np.clip(np.floor(x * 3 - 1).astype(int), 0, 2)
    sin = np.asarray(eagle.deploy(sines).run(x=x))  # the kernel's sin (within 1 ulp of NumPy's, not always equal)
    want = np.zeros((4, 3))
    for i in range(4):
        for j in range(3):
            want[i, j] = math.fsum((cty * sin)[(r == i) & (c == j)].tolist())
    assert g["t"].shape == (4, 3)
    np.testing.assert_array_equal(g["t"], want)  # ordered: the exactly rounded sum of each slot's terms
    assert_close(g["x"], cty * t[r, c] * np.cos(x))

    def f(t):
        return jnp.sum(cty * t[r, c] * jnp.sin(x))

    assert_close(g["t"], jax.grad(f)(t))
    inside = (np.abs(x - np.round(x)) > 1e-3) & (np.abs(x * 3 - 1 - np.round(x * 3 - 1)) > 1e-3)
    planes = {"x": x[inside], "t": t}
    plan = eagle.deploy(lookup)
    check_fd(plan, {"y": cty[inside]}, grads_of(plan, cty[inside], **planes), planes)


# ================================================================================ payloads
@hawk.kernel
def vectors(v: Vector[3], a: Param, tot: Mutable[Vector[3]]) -> Scalar:
    tot = hawk.sum(v * a)
    return m.norm(v) + v[1] * a + m.dot(v, m.vec(1.0, 2.0, 3.0))


@hawk.kernel
def matrices(M: Matrix[2, 3], v: Vector[3]) -> Vector[2]:
    return m.vec(m.dot(M.rows[0], v), m.dot(M.rows[1], v)) * M.columns[1].sum() + M.sum(axis="columns")


def test_vector_payloads_and_vector_cells():
    v, ctr, ctt = RNG.normal(size=(3, 9)), RNG.normal(size=9), RNG.normal(size=3)
    plan = eagle.deploy(vectors)
    g = grads_of(plan, {"result": ctr, "tot": ctt}, v=v, a=0.5)
    g2 = grads_of(plan, {"result": ctr, **{f"tot_{k}": ctt[k:k + 1] for k in range(3)}}, v=v, a=0.5)
    np.testing.assert_array_equal(g["v"], g2["v"])  # a vector cell's cotangent as run hands it back

    def f(v, a):
        r = jnp.sqrt(jnp.sum(v * v, 0)) + v[1] * a + v[0] + 2 * v[1] + 3 * v[2]
        return jnp.sum(ctr * r) + jnp.sum(ctt * jnp.sum(v * a, 1))

    jv, ja = jax.grad(f, argnums=(0, 1))(v, 0.5)
    assert g["v"].shape == (3, 9)
    assert_close(g["v"], jv)
    assert_close(g["a"], [ja])
    check_fd(plan, {"result": ctr, **{f"tot_{k}": ctt[k:k + 1] for k in range(3)}}, g, {"v": v, "a": 0.5})


def test_matrix_payloads():
    M, v, ct = RNG.normal(size=(2, 3, 5)), RNG.normal(size=(3, 5)), RNG.normal(size=(2, 5))
    plan = eagle.deploy(matrices)
    g = grads_of(plan, ct, M=M, v=v)

    def f(M, v):
        r = jnp.stack([jnp.sum(M[0] * v, 0), jnp.sum(M[1] * v, 0)]) * jnp.sum(M[:, 1], 0) + jnp.sum(M, 1)
        return jnp.sum(ct * r)

    jM, jv = jax.grad(f, argnums=(0, 1))(M, v)
    assert g["M"].shape == (2, 3, 5)
    assert_close(g["M"], jM)
    assert_close(g["v"], jv)
    check_fd(plan, {"result": ct}, g, {"M": M, "v": v})
    flat = grads_of(plan, ct, M=M.reshape(6, 5), v=v)  # the flat layout comes back flat
    assert flat["M"].shape == (6, 5)
    np.testing.assert_array_equal(flat["M"].reshape(2, 3, 5), g["M"])


# ================================================================================ loops
@hawk.kernel
def looped(x: Scalar, a: Param, h: Mutable["k":3]) -> Scalar:
    y = x
    s = 0.0
    for k in range(4):
        y = m.sin(y) * a + x.at(k)
        if y > 0:
            s = s + y * y
        else:
            s = s - y
        hawk.scatter(h)[k % 3] += y * x
    return s + y


def test_for_loop_with_carried_values_if_at_and_scatter():
    n = 8
    x, ct, cth = RNG.normal(size=n), RNG.normal(size=n), RNG.normal(size=3)
    plan = eagle.deploy(looped)
    g = grads_of(plan, {"result": ct, "h": cth}, x=x, a=0.8)

    def f(x, a):
        y, s, tot = x, jnp.zeros_like(x), 0.0
        for k in range(4):
            y = jnp.sin(y) * a + x[k]
            s = jnp.where(y > 0, s + y * y, s - y)
            tot = tot + cth[k % 3] * jnp.sum(y * x)
        return jnp.sum(ct * (s + y)) + tot

    jx, ja = jax.grad(f, argnums=(0, 1))(x, 0.8)
    assert_close(g["x"], jx)
    assert_close(g["a"], [ja])
    check_fd(plan, {"result": ct, "h": cth}, g, {"x": x, "a": 0.8})


@hawk.kernel
def nested_loops(x: Scalar, a: Param) -> Scalar:
    y = x
    j = 0
    for k in range(3):
        for i in range(k + 1):
            y = m.sin(y * a) + x * i
        j = j + k
    z = 0.0
    if x > 0.0:
        for k in range(2):
            z = z + y * x * k
    return y * j + z


def test_nested_loops_an_integer_carry_and_a_loop_under_an_if():
    x, ct = RNG.normal(size=10), RNG.normal(size=10)
    g = grads_of(eagle.deploy(nested_loops), ct, x=x, a=0.7)

    def f(x, a):
        y, j = x, 0
        for k in range(3):
            for i in range(k + 1):
                y = jnp.sin(y * a) + x * i
            j += k
        return jnp.sum(ct * (y * j + jnp.where(x > 0, y * x, 0.0)))

    jx, ja = jax.grad(f, argnums=(0, 1))(x, 0.7)
    assert_close(g["x"], jx)
    assert_close(g["a"], [ja])


# ================================================================================ the door
@hawk.kernel
def two_outputs(x: Scalar, w: Scalar, a: Param, y: Mutable[Scalar], s: Mutable[Scalar]):
    y = x * w
    s = hawk.sum(x * a)


def test_wrt_and_missing_cotangents_are_zero():
    x, w = RNG.normal(size=5), RNG.normal(size=5)
    plan = eagle.deploy(two_outputs)
    g = grads_of(plan, {"s": 2.0}, x=x, w=w, a=3.0, wrt=("x",))
    assert sorted(g) == ["x"]
    assert_close(g["x"], np.full(5, 6.0))
    g = grads_of(plan, {"y": np.ones(5)}, x=x, w=w, a=3.0)
    assert_close(g["w"], x)
    assert_close(g["a"], [0.0])


@pytest.mark.parametrize("bad, words", [
    (dict(wrt=("k",)), ["integer plane", "'k'", "'colliding'"]),
    (dict(wrt=("nope",)), ["'nope'", "not a plane"]),
    (dict(wrt=("h2",)), ["'h2'", "not a plane"]),
])
def test_refusals_name_the_kernel_and_plane(bad, words):
    x = np.ones(3)
    k = np.zeros(3, dtype=np.int32)
    with pytest.raises(eagle.InputError) as info:
        eagle.deploy(colliding).reverse(np.ones(3), x=x, k=k, **bad)
    for word in words:
        assert word in str(info.value)


def test_cotangent_errors():
    x, w = np.ones(4), np.ones(4)
    plan = eagle.deploy(two_outputs)
    with pytest.raises(eagle.InputError, match="pass cotangent= as a dict"):
        plan.reverse(np.ones(4), x=x, w=w, a=1.0)
    with pytest.raises(eagle.InputError, match="'z', which is not an output"):
        plan.reverse({"z": 1.0}, x=x, w=w, a=1.0)
    with pytest.raises(eagle.InputError, match=r"cotangent of 'y' must be shaped \(4,\)"):
        plan.reverse({"y": np.ones(3)}, x=x, w=w, a=1.0)


@hawk.kernel
def vec_cols(g: Grid["row", "col":3], v: Vector[2]) -> Vector[2]:
    return hawk.sum(v * v, over="row")


def test_a_cotangent_laid_out_otherwise_is_refused_not_read_in_another_order():
    """A Vector kept cell's cotangent is (components, kept slots), as run hands the cell back: flat is the same
    array; a same-size (slots, components) array would be read in the wrong order, so it is refused."""
    v = RNG.normal(size=(2, 5, 3))
    plan = eagle.deploy(vec_cols)
    ct = RNG.normal(size=(2, 3))
    got = np.asarray(plan.reverse(ct, v=v)["v"])
    np.testing.assert_allclose(got, 2.0 * v * ct[:, None, :], rtol=1e-15)
    np.testing.assert_array_equal(np.asarray(plan.reverse(ct.reshape(-1), v=v)["v"]), got)
    np.testing.assert_array_equal(np.asarray(plan.reverse(ct.reshape(1, 2, 3), v=v)["v"]), got)
    with pytest.raises(eagle.InputError, match=r"cotangent of 'result' must be shaped \(2, 3\).*got \(3, 2\)"):
        plan.reverse(np.ascontiguousarray(ct.T), v=v)


def test_bound_reverse_reuses_its_buffers_and_sees_new_cotangents():
    x, w = RNG.normal(size=6), RNG.normal(size=6)
    plan = eagle.deploy(two_outputs)
    bound = plan.bind(x=x, w=w, a=2.0)
    first = {k: np.asarray(v).copy() for k, v in bound.reverse({"y": np.ones(6), "s": 1.0}).items()}
    second = bound.reverse({"y": np.full(6, 3.0), "s": 0.0})
    assert_close(first["x"], w + 2.0)
    assert_close(np.asarray(second["x"]), 3.0 * w)
    assert_close(np.asarray(second["a"]), [0.0])
    one_shot = grads_of(plan, {"y": np.full(6, 3.0), "s": 0.0}, x=x, w=w, a=2.0)
    for k in one_shot:
        np.testing.assert_array_equal(np.asarray(second[k]), one_shot[k])
    k = np.array([1, 1, 0, -1, 2, 1, 0], dtype=np.int32)  # stores: the winners are found again each call
    xs = RNG.normal(size=7)
    bound = eagle.deploy(colliding).bind(x=xs, k=k)
    g1 = np.asarray(bound.reverse(np.ones(3))["x"]).copy()
    k[:] = [0, 0, 0, 0, 0, 0, 0]
    g2 = np.asarray(bound.reverse(np.ones(3))["x"]).copy()
    assert_close(g1, [0, 0, 0, 0, 6 * xs[4], 6 * xs[5], 6 * xs[6]])
    assert_close(g2, [0, 0, 0, 0, 0, 0, 6 * xs[6]])


def test_float32_runs_the_float32_adjoint():
    x = RNG.normal(size=20).astype(np.float32)
    g = eagle.deploy(centred).reverse(np.ones(20, np.float32), x=x)
    assert g["x"].dtype == np.float32
    np.testing.assert_allclose(np.asarray(g["x"]), np.zeros(20), atol=1e-6)


def test_the_adjoint_builds_as_an_artifact_that_runs_without_mlir(tmp_path):
    import hawk.artifact
    from hawk.reverse import adjoint

    x, w, ct = RNG.normal(size=12), RNG.normal(size=12), RNG.normal(size=12)
    adj, design = adjoint(three_stage, ("x", "w"), None)
    hawk.artifact.build_bundle(adj, tmp_path)
    art = hawk.load(tmp_path, adj.name)
    out = art.run(x=x, w=w, **{design.ct["result"]: ct, design.ct["s"]: 0.3})
    want = grads_of(eagle.deploy(three_stage), {"result": ct, "s": 0.3}, x=x, w=w)
    for name in ("x", "w"):
        np.testing.assert_array_equal(np.asarray(out[design.grad[name]]), want[name])
