"""Gradients of hawk.reduce folds (docs/reverse.md, "Folds"; hawk/reverse/folds.py).

Products (`m.mul`, or a func returning a * b) against jax.grad of jnp.prod (no zero, one zero, two zeros, NaN,
where=, rows of a Grid, a vector payload, a product read later in the body), sums written as a func, folds of
truth values (no share), the same bits at every thread count (runs that really split) and on spirv, a product
keeping more slots of a trailing axis than one keyed scan takes (other funcs: test_fold_func_reverse.py); running
products (hawk.scan with op=m.mul: every mode, segmented and keyed) against jax.grad of jnp.cumprod."""

import numpy as np
import pytest
from conftest import bt_grads_spirv_bits, bt_grads_split_bits

import eagle
import hawk
import hawk.math as m
from hawk import Grid, Mutable, Scalar, Vector
from hawk.abi.layout import ORDERED_BLOCK

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

COLS = 40


@hawk.func
def times(a, b):
    return b * a


@hawk.func
def plus(a, b):
    return a + b


@hawk.kernel
def prod(x: Scalar, p: Mutable[Scalar]):
    p = hawk.reduce(m.mul, x)


@hawk.kernel
def prod_where(x: Scalar, p: Mutable[Scalar]):
    p = hawk.reduce(m.mul, x, where=x > -1.0)


@hawk.kernel
def prod_func(x: Scalar, w: Scalar, p: Mutable[Scalar], s: Mutable[Scalar]):
    p = hawk.reduce(times, x * w)
    s = hawk.reduce(plus, x * x, where=w > 0.0)


@hawk.kernel
def prod_rows(lane: Grid["row", "col":COLS], x: Scalar) -> Scalar:  # noqa: F821
    return hawk.reduce(m.mul, x, over="col")


@hawk.kernel
def prod_staged(x: Scalar) -> Scalar:
    return x * hawk.reduce(m.mul, 1.0 + 0.01 * x)  # a product read later in the body: two stages


@hawk.kernel
def prod_rows_staged(lane: Grid["row", "col":COLS], x: Scalar) -> Scalar:  # noqa: F821
    return m.sin(x) / hawk.reduce(m.mul, x, over="col", where=x > -1.5)


@hawk.kernel
def prod_vec(v: Vector[3], p: Mutable[Vector[3]]):
    p = hawk.reduce(m.mul, v * 2.0)


@hawk.kernel
def all_positive(x: Scalar) -> Scalar:
    return x * hawk.reduce(m.land, x > 0.0)


def _near_one(rng, n):
    return 1.0 + 0.01 * rng.standard_normal(n)


def _grad(kernel, ct, **planes):
    return {k: np.asarray(v) for k, v in eagle.deploy(kernel).reverse(ct, **planes).items()}


def _close(got, want, what=""):
    """Within a few ulps of the largest share (a share summing terms of both signs loses the ulps of its terms)."""
    want = np.asarray(want)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13 * np.max(np.abs(want)), err_msg=what)


@pytest.mark.parametrize("zeros", [(), (5,), (5, 2500)])
@pytest.mark.parametrize("n", [1, 10, 3 * ORDERED_BLOCK + 7])
def test_product_against_jax(n, zeros):
    x = _near_one(np.random.default_rng(n), n)
    x[[z for z in zeros if z < n]] = 0.0
    g = _grad(prod, {"p": 0.75}, x=x)["x"]
    _close(g, jax.grad(lambda v: 0.75 * jnp.prod(v))(x), f"zeros {zeros}")
    if len([z for z in zeros if z < n]) == 1:  # the zero lane gets the product of the others, the rest 0
        z = zeros[0]
        assert g[z] != 0.0 and np.count_nonzero(g) == 1


def test_product_with_a_nan_gives_nan_shares():
    x = _near_one(np.random.default_rng(1), 50)
    x[7] = np.nan
    g = _grad(prod, {"p": 1.0}, x=x)["x"]
    want = np.asarray(jax.grad(lambda v: jnp.prod(v))(x))
    assert np.array_equal(np.isnan(g), np.isnan(want)) and not np.isnan(g[7])


def test_product_under_where_against_jax():
    x = np.random.default_rng(2).standard_normal(3000)
    x[100] = 0.0
    g = _grad(prod_where, {"p": 1.0}, x=x)["x"]
    _close(g, jax.grad(lambda v: jnp.prod(jnp.where(v > -1.0, v, 1.0)))(x))
    assert np.all(g[x <= -1.0] == 0.0)


def test_funcs_for_products_and_sums():
    rng = np.random.default_rng(3)
    x, w = _near_one(rng, 2100), rng.standard_normal(2100)
    w[w == 0.0] = 0.5
    g = _grad(prod_func, {"p": 1.5, "s": -2.0}, x=x, w=w)

    def f(x, w):
        return 1.5 * jnp.prod(x * w) - 2.0 * jnp.sum(jnp.where(w > 0.0, x * x, 0.0))

    gx, gw = jax.grad(f, argnums=(0, 1))(x, w)
    _close(g["x"], gx, "x")
    _close(g["w"], gw, "w")


def test_rows_of_a_grid_against_jax():
    rng = np.random.default_rng(4)
    rows = 70
    x = _near_one(rng, rows * COLS).reshape(rows, COLS)
    x[3, 7] = 0.0
    x[9, [1, 30]] = 0.0
    ct = rng.standard_normal(rows)
    g = _grad(prod_rows, ct, x=x)["x"]
    want = jax.grad(lambda v: jnp.sum(ct * jnp.prod(v, axis=1)))(x)
    _close(g.reshape(rows, COLS), want)


def test_a_product_read_later_in_the_body():
    rng = np.random.default_rng(5)
    x = rng.standard_normal(2500)
    ct = rng.standard_normal(2500)
    g = _grad(prod_staged, ct, x=x)["x"]
    _close(g, jax.grad(lambda v: jnp.sum(ct * v * jnp.prod(1.0 + 0.01 * v)))(x))

    rows = 33
    x = rng.standard_normal((rows, COLS))
    ct = rng.standard_normal((rows, COLS))
    g = _grad(prod_rows_staged, ct, x=x)["x"]

    def f(v):
        p = jnp.prod(jnp.where(v > -1.5, v, 1.0), axis=1, keepdims=True)
        return jnp.sum(ct * jnp.sin(v) / p)

    np.testing.assert_allclose(g.reshape(rows, COLS), jax.grad(f)(x), rtol=1e-9)


@hawk.kernel
def col_sums_read(lane: Grid["row", "col":COLS], x: Scalar) -> Scalar:  # noqa: F821
    return x * hawk.reduce(plus, x * x, over="row")  # a sum by a func keeping the trailing axis, read later


def test_a_func_sum_keeping_a_trailing_axis_read_later():
    rng = np.random.default_rng(13)
    x = rng.standard_normal((50, COLS))
    ct = rng.standard_normal((50, COLS))
    g = _grad(col_sums_read, ct, x=x)["x"]
    _close(g.reshape(50, COLS), jax.grad(lambda v: jnp.sum(ct * v * jnp.sum(v * v, axis=0)))(x))


def test_vector_payload_against_jax():
    rng = np.random.default_rng(6)
    v = 0.5 + 0.005 * rng.standard_normal((3, 1500))  # (payload first, lanes last)
    v[1, 10] = 0.0
    ct = np.array([1.0, -2.0, 0.5])
    g = _grad(prod_vec, {"p": ct}, v=v)["v"]
    _close(g, jax.grad(lambda a: jnp.sum(ct * jnp.prod(a * 2.0, axis=1)))(v))


def test_a_fold_of_truth_values_has_no_share():
    x = np.abs(np.random.default_rng(7).standard_normal(100)) + 0.1
    ct = np.arange(100.0)
    assert np.array_equal(_grad(all_positive, ct, x=x)["x"], ct)  # d(x * 1.0)/dx, the fold constant
    x[3] = -1.0
    assert np.array_equal(_grad(all_positive, ct, x=x)["x"], np.zeros(100))


_SPLIT = {
    "prod": lambda rng, n: (prod, {"p": 1.0}, {"x": _near_one(rng, n)}),
    "prod_where": lambda rng, n: (prod_where, {"p": 1.0}, {"x": rng.standard_normal(n)}),
    # (a chunk holds whole rows and whole scan blocks, lcm(COLS, SCAN_BLOCK) lanes: 1024 rows split evenly)
    "prod_rows_staged": lambda rng, n: (prod_rows_staged, rng.standard_normal((1024, COLS)),
                                        {"x": rng.standard_normal((1024, COLS))}),
    "prod_vec": lambda rng, n: (prod_vec, {"p": np.ones(3)}, {"v": 0.5 + 0.005 * rng.standard_normal((3, n))}),
}


@pytest.mark.parametrize("case", sorted(_SPLIT))
def test_same_bits_on_every_thread_count(case):
    kernel, ct, planes = _SPLIT[case](np.random.default_rng(8), 9 * ORDERED_BLOCK + 40)
    bt_grads_split_bits(kernel, ct, planes, ORDERED_BLOCK, case)


@pytest.mark.parametrize("case", sorted(_SPLIT))
def test_spirv_gradients_have_the_hosts_bits(case):
    kernel, ct, planes = _SPLIT[case](np.random.default_rng(9), 3 * ORDERED_BLOCK + 40)
    bt_grads_spirv_bits(kernel, ct, planes, case)


@hawk.kernel
def prod_cols(lane: Grid["row", "col":COLS], x: Scalar) -> Scalar:  # noqa: F821
    return m.cos(x) * hawk.reduce(m.mul, x, over="row", where=x > -1.0)  # a trailing axis kept, read later


def test_a_product_keeping_a_trailing_axis_against_jax():
    rng = np.random.default_rng(15)
    x = 1.0 + 0.05 * rng.standard_normal((300, COLS))
    x[[4, 7, 7, 250], [3, 9, 10, 9]] = [0.0, 0.0, -2.0, 0.0]
    ct = rng.standard_normal((300, COLS))
    g = _grad(prod_cols, ct, x=x)["x"].reshape(300, COLS)

    def f(v):
        p = jnp.prod(jnp.where(v > -1.0, v, 1.0), axis=0, keepdims=True)
        return jnp.sum(ct * jnp.cos(v) * p)

    _close(g, jax.grad(f)(x))
    bt_grads_split_bits(prod_cols, ct, {"x": x}, ORDERED_BLOCK, "prod_cols")
    bt_grads_spirv_bits(prod_cols, ct[:100], {"x": x[:100]}, "prod_cols")


@hawk.kernel
def prod_wide(lane: Grid["row", "col":5000], x: Scalar) -> Scalar:  # noqa: F821
    return m.cos(x) * hawk.reduce(m.mul, x, over="row", where=x > -1.0)  # more slots than a keyed scan's keys


def test_a_product_keeping_more_trailing_slots_than_a_keyed_scan_takes():
    """5000 columns: the running products' keyed scans run as one scan per group of 4096 keys; zeros and masked
    lanes in both groups, against jax.grad, the same bits on every thread count."""
    rng = np.random.default_rng(18)
    x = 1.0 + 0.05 * rng.standard_normal((5, 5000))
    x[[1, 2, 2, 3], [7, 4100, 4101, 4999]] = [0.0, 0.0, -2.0, 0.0]
    ct = rng.standard_normal((5, 5000))
    g = _grad(prod_wide, ct, x=x)["x"].reshape(5, 5000)

    def f(v):
        p = jnp.prod(jnp.where(v > -1.0, v, 1.0), axis=0, keepdims=True)
        return jnp.sum(ct * jnp.cos(v) * p)

    _close(g, jax.grad(f)(x))
    bt_grads_split_bits(prod_wide, ct, {"x": x}, ORDERED_BLOCK, "prod_wide")


@hawk.kernel
def keyed_prods(x: Scalar, k: hawk.Index, y: Mutable[Scalar], z: Mutable[Scalar]):
    y = hawk.scan(x, op=m.mul, by=k, keys=4)
    z = hawk.scan(x, op=m.mul, by=k, keys=4, exclusive=True, reverse=True)


@pytest.mark.parametrize("zeros", [(), (3, 4, 5, 6, 900, 1800)])
def test_running_products_per_key_against_jax(zeros):
    rng = np.random.default_rng(14)
    n = 2 * ORDERED_BLOCK + 300
    x = _near_one(rng, n)
    x[list(zeros)] = 0.0
    k = rng.integers(-1, 4, n).astype(np.int32)
    cy, cz = rng.standard_normal(n), rng.standard_normal(n)
    g = _grad(keyed_prods, {"y": cy, "z": cz}, x=x, k=k)["x"]

    def f(v):
        total = 0.0
        for key in range(4):
            idx = np.flatnonzero(k == key)
            s = v[idx]
            down = jnp.cumprod(s[::-1])[::-1]
            total += jnp.sum(cy[idx] * jnp.cumprod(s)) + jnp.sum(cz[idx] * jnp.concatenate([down[1:], jnp.ones(1)]))
        return total

    _close(g, jax.grad(f)(x), f"zeros {zeros}")
    assert np.all(g[k < 0] == 0.0)


# ---- running products: hawk.scan(x, op=m.mul) -------------------------------------------------------------
@hawk.kernel
def cumprods(x: Scalar, start: Scalar, y: Mutable[Scalar], z: Mutable[Scalar], w: Mutable[Scalar],
             v: Mutable[Scalar]):
    y = hawk.scan(x, op=m.mul, reset=start > 0.5)
    z = hawk.scan(x, op=m.mul, reset=start > 0.5, exclusive=True)
    w = hawk.scan(x, op=m.mul, reset=start > 0.5, reverse=True)
    v = hawk.scan(x, op=m.mul, reset=start > 0.5, reverse=True, exclusive=True)


def _segments(start: np.ndarray) -> list[slice]:
    cuts = sorted({0, *np.flatnonzero(start > 0.5).tolist(), start.size})
    return [slice(a, b) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]


def _jax_cumprods(x, start):
    """The four running products of `cumprods` in jax.numpy, segment by segment."""
    parts = {k: [] for k in "yzwv"}
    for sl in _segments(start):
        s = x[sl]
        inc, down = jnp.cumprod(s), jnp.cumprod(s[::-1])[::-1]
        parts["y"].append(inc)
        parts["z"].append(jnp.concatenate([jnp.ones(1), inc[:-1]]))
        parts["w"].append(down)
        parts["v"].append(jnp.concatenate([down[1:], jnp.ones(1)]))
    return {k: jnp.concatenate(v) for k, v in parts.items()}


@pytest.mark.parametrize("zeros", [(), (3,), (3, 700), (3, 9, 700, 2000)])
def test_running_products_against_jax(zeros):
    rng = np.random.default_rng(10)
    n = 2 * ORDERED_BLOCK + 500
    x = _near_one(rng, n)
    x[list(zeros)] = 0.0
    start = np.zeros(n)
    start[[600, 1500]] = 1.0
    ct = {k: rng.standard_normal(n) for k in "yzwv"}
    g = _grad(cumprods, ct, x=x, start=start)["x"]
    want = jax.grad(lambda v: sum(jnp.sum(ct[k] * r) for k, r in _jax_cumprods(v, start).items()))(x)
    _close(g, want, f"zeros {zeros}")


@hawk.kernel
def compound(r: Scalar) -> Scalar:
    w = hawk.scan(1.0 + r, op=m.mul)
    return w * hawk.scan(r, op=m.mul, exclusive=True)  # (no reset=: one segment)


@pytest.mark.parametrize("zeros", [(), (100,), (100, 101)])
def test_running_products_without_segments_against_jax(zeros):
    rng = np.random.default_rng(12)
    r = 0.01 * rng.standard_normal(3000)
    r[list(zeros)] = -1.0  # 1 + r = 0 there
    ct = rng.standard_normal(3000)

    def f(q):
        excl = jnp.concatenate([jnp.ones(1), jnp.cumprod(q)[:-1]])
        return jnp.sum(ct * jnp.cumprod(1.0 + q) * excl)

    _close(_grad(compound, ct, r=r)["r"], jax.grad(f)(r), f"zeros {zeros}")


def test_running_product_gradients_have_the_same_bits_split_and_on_spirv():
    rng = np.random.default_rng(11)
    n = 9 * ORDERED_BLOCK + 40
    x = _near_one(rng, n)
    x[[5, 5000, 5001]] = 0.0
    start = (rng.random(n) < 0.001).astype(np.float64)
    ct = {k: rng.standard_normal(n) for k in "yzwv"}
    bt_grads_split_bits(cumprods, ct, {"x": x, "start": start}, 4096, "cumprods")
    # (one scan a kernel on spirv: the four's adjoint binds more storage buffers than lavapipe allows a shader)
    bt_grads_spirv_bits(cumprod_down, ct["v"][:5000], {"x": x[:5000], "start": start[:5000]}, "cumprod_down")


@hawk.kernel
def cumprod_down(x: Scalar, start: Scalar) -> Scalar:
    return hawk.scan(x, op=m.mul, reset=start > 0.5, reverse=True, exclusive=True)
