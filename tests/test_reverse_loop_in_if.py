"""The reverse of `for` loops with `.at` reads inside an `if`.

Such a loop's reverse scatters its reads' cotangents, and a scatter may not sit in an `if`, so the sweep takes the
loop out of the if (hawk/reverse/sweep.py, split_if): the if splits around it and the loop's end bound becomes its
start bound where the lane took the other side, so it runs no pass there, forward or reverse. Checked against
jax.grad of the same code and central differences: then and else sides, nested ifs, values carried into and out of
the loop, a trip count read from lane data (huge on the side not taken: a loop that ran there would not end), an
if inside a for around the loop, Table and Grid neighbour reads, Param gradients, float32. (The same bits on
every thread count and on spirv: tests/test_reverse_bits.py, case loop_in_if.)"""

import jax
import jax.numpy as jnp
import numpy as np
from test_reverse import assert_close, check_fd, grads_of

import eagle
import hawk
import hawk.math as m
from hawk import Grid, Param, Scalar, Table

jax.config.update("jax_enable_x64", True)
RNG = np.random.default_rng(61)


@hawk.kernel
def then_side(x: Scalar) -> Scalar:
    y = 0.0
    if x > 0.0:
        for k in range(2):
            y = y + x.at(k) * m.sin(x)
    return y


def then_side_ref(x):
    inner = sum(x[k] for k in range(2)) * jnp.sin(x)
    return jnp.where(x > 0.0, inner, 0.0)


@hawk.kernel
def both_sides(x: Scalar, w: Scalar, a: Param) -> Scalar:
    y = x * w
    if x > 0.1:
        s = m.exp(w) * a  # read by the loop and after it
        for k in range(3):
            y = y * 0.5 + x.at(k + 1) * s
        y = y + s * s
    else:
        c = m.cos(w)
        for k in range(2):
            y = y + w.at(k) * c * x
        y = y * c
    return y * w


def both_sides_ref(x, w, a):
    s = jnp.exp(w) * a
    y1 = x * w
    for k in range(3):
        y1 = y1 * 0.5 + x[k + 1] * s
    y1 = y1 + s * s
    c = jnp.cos(w)
    y2 = x * w
    for k in range(2):
        y2 = y2 + w[k] * c * x
    y2 = y2 * c
    return jnp.where(x > 0.1, y1, y2) * w


@hawk.kernel
def nested_and_counted(x: Scalar, n: Scalar) -> Scalar:
    y = m.sin(x)
    if x > -0.5:
        t = int(n)  # a pass count from lane data: enormous in lanes that do not take this side
        if x < 1.0:
            for k in range(t):
                y = y * 0.9 + x.at(k) * x
        y = y + 1.0
    return y


def nested_and_counted_ref(x, n, counts):
    out = []
    for i in range(len(counts)):
        y = jnp.sin(x[i])
        if -0.5 < x[i]:
            if x[i] < 1.0:
                for k in range(counts[i]):
                    y = y * 0.9 + x[k] * x[i]
            y = y + 1.0
        out.append(y)
    return jnp.stack(out)


@hawk.kernel
def if_in_a_loop(x: Scalar, tb: Table["slot":4]) -> Scalar:
    y = 0.0
    for j in range(3):
        if x > m.to_float(j) * 0.4 - 0.5:
            for k in range(2):
                y = y + x.at(j + k) * tb.at(slot=k + j % 2) * x
        else:
            y = y - x
    return y


def if_in_a_loop_ref(x, tb):
    y = jnp.zeros_like(x)
    for j in range(3):
        inner = sum(x[j + k] * tb[k + j % 2] * x for k in range(2))
        y = jnp.where(x > j * 0.4 - 0.5, y + inner, y - x)
    return y


@hawk.kernel
def grid_in_if(g: Grid["r", "c":5], u: Scalar) -> Scalar:
    y = u
    if u < 0.3:
        for j in range(1, 3):
            y = y + u.at(r=g.r + j, c=g.c - 1) * u
    return y


def grid_in_if_ref(u):
    rows, cols = u.shape
    y = u
    for j in range(1, 3):
        r = np.minimum(np.arange(rows) + j, rows - 1)[:, None]
        c = np.maximum(np.arange(cols) - 1, 0)[None, :]
        y = y + jnp.where(u < 0.3, u[r, c] * u, 0.0)
    return y


def _against_jax(kernel, ref, name: str, x: np.ndarray) -> None:
    """The gradient of sum(ct * kernel(x)) against jax.grad of `ref` and central differences."""
    ct = RNG.normal(size=x.shape)
    plan = eagle.deploy(kernel)
    g = grads_of(plan, ct, **{name: x})
    assert_close(g[name], jax.grad(lambda v: jnp.sum(ct * ref(v)))(x))
    check_fd(plan, {"result": ct}, g, {name: x})


def test_a_loop_on_the_then_side():
    _against_jax(then_side, then_side_ref, "x", RNG.normal(size=9))


def test_loops_on_both_sides_with_values_around_them():
    n = 12
    x, w, ct = RNG.normal(size=n), RNG.normal(size=n), RNG.normal(size=n)
    a = 0.7
    plan = eagle.deploy(both_sides)
    g = grads_of(plan, ct, x=x, w=w, a=a)
    want = jax.grad(lambda x, w, a: jnp.sum(ct * both_sides_ref(x, w, a)), argnums=(0, 1, 2))(x, w, a)
    assert 0 < np.sum(x > 0.1) < n
    for name, ref in zip(("x", "w", "a"), want, strict=True):
        assert_close(g[name], np.reshape(ref, np.shape(g[name])), what=name)
    check_fd(plan, {"result": ct}, g, {"x": x, "w": w, "a": np.array([a])})


def test_nested_ifs_and_a_pass_count_from_lane_data():
    x = np.array([0.3, -0.9, 1.4, 0.8, -0.2, 0.05, 2.5, 0.6])
    n = np.array([3.0, 4e15, 5e17, 0.0, 6.0, 1.0, 2e16, 8.0])  # huge only where x's sides skip the loop
    ct = RNG.normal(size=x.size)
    counts = [int(v) if -0.5 < x[i] < 1.0 else 0 for i, v in enumerate(n)]
    plan = eagle.deploy(nested_and_counted)
    out = np.asarray(plan.run(x=x, n=n))
    assert_close(out, nested_and_counted_ref(x, n, counts))
    g = grads_of(plan, ct, x=x, n=n)
    assert_close(g["x"], jax.grad(lambda x: jnp.sum(ct * nested_and_counted_ref(x, n, counts)))(x))
    assert_close(g["n"], np.zeros_like(n))
    check_fd(plan, {"result": ct}, {"x": g["x"]}, {"x": x, "n": n})


def test_an_if_inside_a_loop_reading_a_table():
    n = 10
    x, tb, ct = RNG.normal(size=n), RNG.normal(size=4), RNG.normal(size=n)
    plan = eagle.deploy(if_in_a_loop)
    g = grads_of(plan, ct, x=x, tb=tb)
    want = jax.grad(lambda x, tb: jnp.sum(ct * if_in_a_loop_ref(x, tb)), argnums=(0, 1))(x, tb)
    assert_close(g["x"], want[0], what="x")
    assert_close(g["tb"], want[1], what="tb")
    check_fd(plan, {"result": ct}, g, {"x": x, "tb": tb})


def test_grid_neighbours_in_an_if():
    _against_jax(grid_in_if, grid_in_if_ref, "u", RNG.normal(size=(6, 5)) * 0.5)


def test_float32():
    n = 500
    x = RNG.normal(size=n).astype(np.float32)
    ct = RNG.normal(size=n).astype(np.float32)
    g = np.asarray(eagle.deploy(then_side).reverse(ct, x=x)["x"])
    assert g.dtype == np.float32
    want = jax.grad(lambda x: jnp.sum(ct.astype(np.float64) * then_side_ref(x)))(x.astype(np.float64))
    assert_close(g, want, rtol=1e-4, atol=1e-3)
