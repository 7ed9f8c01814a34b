"""Gradients of scans by a @hawk.func (docs/reverse.md, "Scans by a func"; hawk/reverse/chains.py): every mode
and direction, with and without segments, against jax.grad of the same fold written as a Python loop over
jax.numpy values; a func with a branch; a scan read later in the body; the same bits at every thread count (runs
that really split) and on spirv; through eagle.jax.wrap; Vector and Matrix values (a linear recurrence as a scan
of affine maps, running matrix products: their Jacobians); keyed scans (by=, order="lane")."""

import numpy as np
import pytest
from conftest import bt_grads_spirv_bits, bt_grads_split_bits
from test_scan_func import products, then  # (the forward tests' affine maps and matrix products)

import eagle
import hawk
import hawk.math as m
from hawk import Mutable, Scalar
from hawk.abi.layout import SCAN_BLOCK

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy


@hawk.func
def wobble(a, b):
    return 0.9 * a + 0.1 * a * b + 0.01 * b * b  # nonlinear in both (adds and products: the same bits on spirv)


@hawk.func
def soft(a, b):
    if a > b:  # a branch: each lane's partials are its side's
        return a - 0.5 * b * b
    return m.exp(0.1 * a) + b


def _wobble(a, b):
    return 0.9 * a + 0.1 * a * b + 0.01 * b * b


def _soft(a, b):
    return jnp.where(a > b, a - 0.5 * b * b, jnp.exp(0.1 * a) + b)


@hawk.kernel
def four(x: Scalar, start: Scalar, y: Mutable[Scalar], ye: Mutable[Scalar], r: Mutable[Scalar],
         re: Mutable[Scalar]):
    s = start > 0.5
    y = hawk.scan(x, op=wobble, reset=s)
    ye = hawk.scan(x, op=wobble, reset=s, exclusive=True, identity=0.25)
    r = hawk.scan(x, op=wobble, reset=s, reverse=True)
    re = hawk.scan(x, op=wobble, reset=s, reverse=True, exclusive=True, identity=-0.5)


@hawk.kernel
def plain(x: Scalar, y: Mutable[Scalar], re: Mutable[Scalar]):
    y = hawk.scan(x, op=soft)
    re = hawk.scan(x, op=soft, reverse=True, exclusive=True, identity=1.0)


@hawk.kernel
def read_later(x: Scalar, w: Scalar, t: Mutable[Scalar]):
    h = hawk.scan(w * x, op=wobble)  # its values feed an ordered sum: three stages
    t = hawk.sum(h * h, policy="ordered")


@hawk.kernel
def recurrence(a: Scalar, b: Scalar, start: Scalar, h: Mutable[Scalar], back: Mutable[Scalar]):
    h = hawk.scan(m.vec(a, b), op=then, reset=start > 0.5)[1]  # h[i] = a[i] * h[i - 1] + b[i] in each segment
    r = hawk.scan(m.vec(a, b), op=then, reverse=True, exclusive=True, identity=0.5, reset=start > 0.5)
    back = r[0] - r[1] * r[0]


def _then(p, q):
    return jnp.stack([q[0] * p[0], q[0] * p[1] + q[1]])


def _fold(x, f, start=None, exclusive=False, reverse=False, identity=0.0):
    """The scan as a loop of jax.numpy values (a run's first lane takes x; exclusive: the value before)."""
    n = x.shape[0]
    out, run = [None] * n, None
    for i in (range(n - 1, -1, -1) if reverse else range(n)):
        fresh = run is None or (start is not None and (start[i] if not reverse else (i + 1 < n and start[i + 1])))
        before = jnp.full(x.shape[1:], identity, x.dtype) if fresh else run
        run = x[i] if fresh else f(run, x[i])
        out[i] = before if exclusive else run
    return jnp.stack(out)


def _planes(rng, n: int) -> dict:
    start = (rng.random(n) < 0.1) * 1.0
    start[n // 2] = 1.0
    return {"x": rng.standard_normal(n), "start": start}


def test_four_modes_with_segments_against_jax():
    rng = np.random.default_rng(1)
    n = 30
    p = _planes(rng, n)
    ct = {k: rng.standard_normal(n) for k in ("y", "ye", "r", "re")}
    s = p["start"] > 0.5

    def loss(x):
        outs = {"y": _fold(x, _wobble, s), "ye": _fold(x, _wobble, s, exclusive=True, identity=0.25),
                "r": _fold(x, _wobble, s, reverse=True),
                "re": _fold(x, _wobble, s, exclusive=True, reverse=True, identity=-0.5)}
        return sum(jnp.sum(outs[k] * ct[k]) for k in ct)

    got = eagle.deploy(four).reverse(ct, **p)
    want = jax.grad(loss)(jnp.asarray(p["x"]))
    assert np.allclose(np.asarray(got["x"]), np.asarray(want), rtol=1e-12, atol=1e-13)


def test_a_func_with_a_branch_and_no_segments_against_jax():
    rng = np.random.default_rng(2)
    n = 24
    x = rng.standard_normal(n)
    ct = {"y": rng.standard_normal(n), "re": rng.standard_normal(n)}

    def loss(x):
        return (jnp.sum(_fold(x, _soft) * ct["y"])
                + jnp.sum(_fold(x, _soft, exclusive=True, reverse=True, identity=1.0) * ct["re"]))

    got = eagle.deploy(plain).reverse(ct, x=x)
    assert np.allclose(np.asarray(got["x"]), np.asarray(jax.grad(loss)(jnp.asarray(x))), rtol=1e-12, atol=1e-13)


def test_a_scan_read_later_against_jax():
    rng = np.random.default_rng(3)
    n = 30
    x, w = rng.standard_normal(n), rng.uniform(0.5, 1.5, n)

    def loss(x, w):
        h = _fold(w * x, _wobble)
        return 0.7 * jnp.sum(h * h)

    got = eagle.deploy(read_later).reverse({"t": 0.7}, x=x, w=w)
    want = jax.grad(loss, argnums=(0, 1))(jnp.asarray(x), jnp.asarray(w))
    for name, g in zip(("x", "w"), want, strict=True):
        assert np.allclose(np.asarray(got[name]), np.asarray(g), rtol=1e-11, atol=1e-12), name


def test_a_linear_recurrence_of_vector_values_against_jax():
    rng = np.random.default_rng(7)
    n = 24
    a, b = rng.uniform(0.5, 1.0, n), rng.standard_normal(n)
    start = (rng.random(n) < 0.15) * 1.0
    ct = {"h": rng.standard_normal(n), "back": rng.standard_normal(n)}
    s = start > 0.5

    def loss(a, b):
        xs = jnp.stack([a, b], 1)
        h = _fold(xs, _then, s)[:, 1]
        r = _fold(xs, _then, s, exclusive=True, reverse=True, identity=0.5)
        return jnp.sum(h * ct["h"]) + jnp.sum((r[:, 0] - r[:, 1] * r[:, 0]) * ct["back"])

    got = eagle.deploy(recurrence).reverse(ct, a=a, b=b, start=start)
    want = jax.grad(loss, argnums=(0, 1))(jnp.asarray(a), jnp.asarray(b))
    for name, w in zip(("a", "b"), want, strict=True):
        assert np.allclose(np.asarray(got[name]), np.asarray(w), rtol=1e-12, atol=1e-13), name


def test_running_matrix_products_against_jax():
    rng = np.random.default_rng(8)
    n = 12
    u = 0.5 * rng.standard_normal((n, 2, 2)) + np.eye(2)
    ct = rng.standard_normal((n, 2, 2))
    got = eagle.deploy(products).reverse(np.ascontiguousarray(ct.transpose(1, 2, 0)),
                                         u=np.ascontiguousarray(u.transpose(1, 2, 0)))["u"]
    want = jax.grad(lambda v: jnp.sum(_fold(v, jnp.matmul) * ct))(jnp.asarray(u))
    assert np.allclose(np.asarray(got).transpose(2, 0, 1), np.asarray(want), rtol=1e-12, atol=1e-12)


@hawk.kernel
def keyed(x: Scalar, key: hawk.Index, y: Mutable[Scalar], ye: Mutable[Scalar], w: Mutable[Scalar]):
    y = hawk.scan(x, op=wobble, by=key, keys=4)
    ye = hawk.scan(x, op=soft, by=key, keys=4, exclusive=True, identity=0.5, reverse=True)
    w = hawk.scan(m.vec(0.9 + 0.0 * x, x), op=then, by=key, keys=4, exclusive=True, identity=0.25)[1]


def _keyed_fold(x, key, f, exclusive=False, reverse=False, identity=0.0):
    """Each key's lanes folded in lane order (reverse: from the last down) as jax.numpy values; key -1 lanes get
    the identity."""
    n = x.shape[0]
    out, runs = [None] * n, {}
    for i in (range(n - 1, -1, -1) if reverse else range(n)):
        k = int(key[i])
        ident = jnp.full(x.shape[1:], identity, x.dtype)
        if k < 0:
            out[i] = ident
            continue
        run = runs.get(k)
        before = ident if run is None else run
        runs[k] = run = x[i] if run is None else f(run, x[i])
        out[i] = before if exclusive else run
    return jnp.stack(out)


def test_keyed_scans_against_jax():
    rng = np.random.default_rng(9)
    n = 40
    x, key = 0.5 * rng.standard_normal(n), rng.integers(-1, 4, n).astype(np.int32)
    ct = {k: rng.standard_normal(n) for k in ("y", "ye", "w")}

    def loss(x):
        pairs = jnp.stack([jnp.full(n, 0.9), x], 1)
        return (jnp.sum(_keyed_fold(x, key, _wobble) * ct["y"])
                + jnp.sum(_keyed_fold(x, key, _soft, exclusive=True, reverse=True, identity=0.5) * ct["ye"])
                + jnp.sum(_keyed_fold(pairs, key, _then, exclusive=True, identity=0.25)[:, 1] * ct["w"]))

    got = eagle.deploy(keyed).reverse(ct, x=x, key=key)["x"]
    want = jax.grad(loss)(jnp.asarray(x))
    assert np.allclose(np.asarray(got), np.asarray(want), rtol=1e-12, atol=1e-13)
    assert np.all(np.asarray(got)[key < 0] == 0.0)


def _big(rng, n: int):
    p = _planes(rng, n)
    p["x"] = 0.1 * p["x"]
    return {k: rng.standard_normal(n) for k in ("y", "ye", "r", "re")}, p


def _big_vector(rng, n: int):
    p = {"a": rng.uniform(0.9, 1.0, n), "b": rng.standard_normal(n), "start": (rng.random(n) < 0.01) * 1.0}
    return {k: rng.standard_normal(n) for k in ("h", "back")}, p


def _big_keyed(rng, n: int):
    p = {"x": 0.1 * rng.standard_normal(n), "key": rng.integers(-1, 4, n).astype(np.int32)}
    return {k: rng.standard_normal(n) for k in ("y", "ye", "w")}, p


_SPLIT = {"four": (four, _big), "recurrence": (recurrence, _big_vector), "keyed": (keyed, _big_keyed)}


@pytest.mark.parametrize("case", sorted(_SPLIT))
def test_gradients_have_the_same_bits_at_every_thread_count(case):
    kernel, make = _SPLIT[case]
    ct, p = make(np.random.default_rng(4), 9 * SCAN_BLOCK + 5)
    bt_grads_split_bits(kernel, ct, p, SCAN_BLOCK, case)


@pytest.mark.parametrize("case", sorted(_SPLIT))
def test_spirv_gradients_have_the_hosts_bits(case):
    kernel, make = _SPLIT[case]
    ct, p = make(np.random.default_rng(5), 2 * SCAN_BLOCK + 9)
    bt_grads_spirv_bits(kernel, ct, p, case)


def test_jax_grad_through_the_bridge_is_the_reverse():
    import eagle.jax

    rng = np.random.default_rng(6)
    n = 3000
    x = 0.1 * rng.standard_normal(n)
    cy, cr = rng.standard_normal(n), rng.standard_normal(n)
    f = eagle.jax.wrap(plain)

    def loss(x):
        out = f(x=x)
        return jnp.sum(out["y"] * cy) + jnp.sum(out["re"] * cr)

    got = jax.jit(jax.grad(loss))(jnp.asarray(x))
    want = eagle.deploy(plain).reverse({"y": cy, "re": cr}, x=x)["x"]
    assert np.asarray(got).tobytes() == np.asarray(want).tobytes()
