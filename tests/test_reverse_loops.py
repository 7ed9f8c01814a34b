"""The reverse of `for` loops whose only path to a gradient is a `.at` read inside them.

Such a loop's reverse carries no cotangent out to a value before it (its carried value starts from a constant),
so nothing used its results, and the dead-code sweep erased it with the gradient's scatter inside: the gradient
came back all zero (found by tests/fuzz_reverse.py, case 5:3). Checked against jax.grad and finite differences."""

import jax
import jax.numpy as jnp
import numpy as np
from test_reverse import assert_close, check_fd, grads_of

import eagle
import hawk
import hawk.math as m
from hawk import Grid, Index, Scalar, Table

jax.config.update("jax_enable_x64", True)
RNG = np.random.default_rng(31)


@hawk.kernel
def at_loop_var(x: Scalar) -> Scalar:
    t = 0.0
    for j in range(4):
        t = t + x.at(j) * m.to_float(j + 1)
    return t


@hawk.kernel
def at_by_key(x: Scalar, k: Index) -> Scalar:
    t = 0.0
    for j in range(3, -1, -1):
        t += m.max(x.at(k), m.to_float(j) - 2.5)
    return t


@hawk.kernel
def table_in_loop(x: Scalar, tb: Table["slot":5]) -> Scalar:
    t = 0.0
    for j in range(5):
        t = t + tb.at(slot=j) * m.sin(m.to_float(j) + 0.5)
    return t * 2.0


@hawk.kernel
def neighbours_in_loop(g: Grid["r", "c":4], u: Scalar) -> Scalar:
    t = 0.0
    for j in range(1, 3):
        t = t + u.at(r=g.r + j, c=g.c) * m.to_float(j)
    return t


def test_at_read_in_a_loop_from_a_constant_gets_its_gradient():
    n = 9
    x, ct = RNG.normal(size=n), RNG.normal(size=n)
    g = grads_of(eagle.deploy(at_loop_var), ct, x=x)
    jx = jax.grad(lambda x: jnp.sum(ct * sum(x[j] * (j + 1) for j in range(4))))(x)
    assert np.any(g["x"] != 0.0)
    assert_close(g["x"], jx)
    check_fd(eagle.deploy(at_loop_var), {"result": ct}, g, {"x": x})


def test_at_read_by_key_in_a_descending_loop():
    n = 11
    x, ct = RNG.normal(size=n) * 3.0, RNG.normal(size=n)
    k = RNG.integers(0, n, size=n)
    plan = eagle.deploy(at_by_key)
    g = grads_of(plan, ct, x=x, k=k)
    jx = jax.grad(lambda x: jnp.sum(ct * sum(jnp.maximum(x[k], j - 2.5) for j in range(3, -1, -1))))(x)
    assert_close(g["x"], jx)
    check_fd(plan, {"result": ct}, g, {"x": x, "k": k})


def test_table_read_in_a_loop():
    n = 6
    x, tb, ct = RNG.normal(size=n), RNG.normal(size=5), RNG.normal(size=n)
    plan = eagle.deploy(table_in_loop)
    g = grads_of(plan, ct, x=x, tb=tb)
    jt = jax.grad(lambda tb: jnp.sum(ct) * 2.0 * sum(tb[j] * np.sin(j + 0.5) for j in range(5)))(tb)
    assert_close(g["tb"], jt)
    assert_close(g["x"], np.zeros(n))


def test_grid_neighbour_read_in_a_loop():
    rows, cols = 5, 4
    u, ct = RNG.normal(size=(rows, cols)), RNG.normal(size=(rows, cols))
    plan = eagle.deploy(neighbours_in_loop)

    def f(u):
        down = [np.minimum(np.arange(rows) + j, rows - 1) for j in range(3)]  # clamped at the last row
        return jnp.sum(ct * sum(u[down[j]] * j for j in range(1, 3)))

    g = grads_of(plan, ct, u=u, r=rows)
    assert_close(g["u"], jax.grad(f)(u))
    check_fd(plan, {"result": ct}, g, {"u": u, "r": rows})
