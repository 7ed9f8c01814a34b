"""Gradients of hawk.reduce folds by a @hawk.func that is neither a product nor a sum (docs/reverse.md, "Folds";
hawk/reverse/chains.py): over every lane (blocks of ORDERED_BLOCK lanes, then the blocks' results, in the
contract's order), under where=, keeping a Grid's rows, read later in the body, a func with a branch; against
jax.grad of the same fold written as a Python loop in that order; the same bits at every thread count (runs that
really split) and on spirv; through eagle.jax.wrap; a Vector payload (the func's Jacobians); a trailing axis
kept (a keyed chain per slot), also past the keys one keyed scan takes."""

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

COLS = 24


@hawk.func
def mix(a, b):
    return 0.25 * a + 0.75 * b * b + 0.1 * a * b  # neither associative nor commutative


@hawk.func
def keep_larger(a, b):
    if a > b:  # a branch: each lane's partials are its side's
        return a + 0.01 * b
    return b + 0.01 * a


def _mix(a, b):
    return 0.25 * a + 0.75 * b * b + 0.1 * a * b


def _keep_larger(a, b):
    return jnp.where(a > b, a + 0.01 * b, b + 0.01 * a)


@hawk.kernel
def whole(x: Scalar, t: Mutable[Scalar], u: Mutable[Scalar]):
    t = hawk.reduce(mix, x)
    u = hawk.reduce(keep_larger, x, where=x > -0.5)


@hawk.kernel
def rows(lane: Grid["row", "col":COLS], x: Scalar) -> Scalar:  # noqa: F821
    return m.sin(x) * hawk.reduce(mix, x, over="col", where=x > -1.0)  # read later: two stages


def _masked_fold(f, x, keep):
    """The left-to-right fold of x's kept entries along the first axis (jax.lax.scan, so jax.grad stays quick):
    (the value, whether any was kept); the entries' trailing axes fold side by side."""

    def step(carry, item):
        s, h = carry
        v, k = item
        hb, kb = (c.reshape(c.shape + (1,) * (s.ndim - c.ndim)) for c in (h, k))  # (over a value's components)
        new = jnp.where(hb, f(s, v), v)
        return (jnp.where(kb, new, s), h | k), None

    (s, h), _ = jax.lax.scan(step, (jnp.zeros_like(x[0]), jnp.zeros(keep.shape[1:], bool)), (x, keep))
    return s, h


def _contract(x, f, keep):
    """The fold over every lane in the contract's order: each block's kept lanes, then the non-empty blocks'."""
    n = x.shape[0]
    pad = -n % ORDERED_BLOCK
    xs = jnp.concatenate([x, jnp.zeros((pad, *x.shape[1:]))]).reshape(-1, ORDERED_BLOCK, *x.shape[1:])
    ks = jnp.concatenate([jnp.asarray(keep), jnp.zeros(pad, bool)]).reshape(-1, ORDERED_BLOCK)
    parts, has = _masked_fold(f, jnp.swapaxes(xs, 0, 1), ks.T)  # every block side by side
    return _masked_fold(f, parts, has)[0]


def _close(got, want):
    want = np.asarray(want)
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-12 * max(1.0, float(np.max(np.abs(want)))))


@pytest.mark.parametrize("n", [1, 10, 3 * ORDERED_BLOCK + 7])
def test_over_every_lane_against_jax(n):
    x = 0.3 * np.random.default_rng(n).standard_normal(n)
    keep = x > -0.5
    keep[0] = True  # (a slice that keeps no lane is refused: no identity=)

    @hawk.kernel
    def whole_kept(x: Scalar, k: Scalar, t: Mutable[Scalar], u: Mutable[Scalar]):
        t = hawk.reduce(mix, x)
        u = hawk.reduce(keep_larger, x, where=k > 0.5)

    def loss(v):
        return 0.7 * _contract(v, _mix, np.ones(n, bool)) + 1.3 * _contract(v, _keep_larger, keep)

    got = eagle.deploy(whole_kept).reverse({"t": 0.7, "u": 1.3}, x=x, k=keep * 1.0)["x"]
    _close(np.asarray(got), jax.grad(loss)(jnp.asarray(x)))


def test_rows_read_later_against_jax():
    rng = np.random.default_rng(4)
    x = 0.3 * rng.standard_normal((50, COLS))
    x[3, :] = -2.0  # a row keeping one lane only
    x[3, 5] = 0.2
    ct = rng.standard_normal((50, COLS))

    def loss(v):
        folded, _ = _masked_fold(_mix, v.T, (x > -1.0).T)  # each row's kept lanes, in column order
        return jnp.sum(ct * jnp.sin(v) * folded[:, None])

    got = eagle.deploy(rows).reverse(ct, x=x)["x"]
    _close(np.asarray(got).reshape(50, COLS), jax.grad(loss)(jnp.asarray(x)))


def test_the_last_lane_wins_for_a_fold_that_keeps_the_second_value():
    @hawk.func
    def second(a, b):
        return b

    @hawk.kernel
    def last(x: Scalar, t: Mutable[Scalar]):
        t = hawk.reduce(second, 2.0 * x, where=x > 0.0)

    x = np.array([0.5, 1.0, -1.0, 3.0, -2.0, 0.25, -0.5])
    got = np.asarray(eagle.deploy(last).reverse({"t": 1.5}, x=x)["x"])
    assert np.array_equal(got, [0.0, 0.0, 0.0, 0.0, 0.0, 3.0, 0.0])  # d(2 x[5])/dx[5] * 1.5, nothing else


def _whole_planes(rng, n):
    return whole, {"t": 0.7, "u": -1.1}, {"x": 0.3 * rng.standard_normal(n)}


def _rows_planes(rng, n):
    # (a chunk holds whole rows and whole scan blocks: lcm(COLS, SCAN_BLOCK) lanes, 512 rows of 24 split evenly)
    return rows, rng.standard_normal((1024, COLS)), {"x": 0.3 * rng.standard_normal((1024, COLS))}


def _vector_planes(rng, n):
    return vfold, {"t": np.array([0.7, -1.3])}, {"v": 0.3 * rng.standard_normal((2, n))}


_SPLIT = {"whole": _whole_planes, "rows": _rows_planes, "vector": _vector_planes}


@pytest.mark.parametrize("case", sorted(_SPLIT))
def test_same_bits_on_every_thread_count(case):
    kernel, ct, planes = _SPLIT[case](np.random.default_rng(8), 9 * ORDERED_BLOCK + 40)
    bt_grads_split_bits(kernel, ct, planes, ORDERED_BLOCK, case)


@pytest.mark.parametrize("case", sorted(_SPLIT))
def test_spirv_gradients_have_the_hosts_bits(case):
    kernel, ct, planes = _SPLIT[case](np.random.default_rng(9), 3 * ORDERED_BLOCK + 40)
    bt_grads_spirv_bits(kernel, ct, planes, case)


def test_jax_grad_through_the_bridge_is_the_reverse():
    import eagle.jax

    x = 0.3 * np.random.default_rng(6).standard_normal(3000)
    f = eagle.jax.wrap(whole)

    def loss(v):
        out = f(x=v)  # (one call: one adjoint, as plan.reverse runs it)
        return 0.7 * out["t"][0] - 1.1 * out["u"][0]

    got = jax.jit(jax.grad(loss))(jnp.asarray(x))
    want = eagle.deploy(whole).reverse({"t": 0.7, "u": -1.1}, x=x)["x"]
    assert np.asarray(got).tobytes() == np.asarray(want).tobytes()


@hawk.func
def vmix(a, b):
    return m.vec(0.5 * a[0] + b[0] * b[1], a[1] * b[0] + 0.25 * b[1])  # components mixed: a Jacobian


@hawk.kernel
def vfold(v: Vector[2], t: Mutable[Vector[2]]):
    t = hawk.reduce(vmix, v, where=v[0] > -0.5)


def _vmix(a, b):
    return jnp.stack([0.5 * a[..., 0] + b[..., 0] * b[..., 1], a[..., 1] * b[..., 0] + 0.25 * b[..., 1]], -1)


@pytest.mark.parametrize("n", [9, 2 * ORDERED_BLOCK + 5])
def test_a_vector_fold_against_jax(n):
    rng = np.random.default_rng(n)
    v = 0.3 * rng.standard_normal((n, 2))
    keep = v[:, 0] > -0.5
    ct = np.array([0.7, -1.3])
    got = eagle.deploy(vfold).reverse({"t": ct}, v=np.ascontiguousarray(v.T))["v"]
    want = jax.grad(lambda w: jnp.sum(ct * _contract(w, _vmix, keep)))(jnp.asarray(v))
    _close(np.asarray(got).T, want)


@hawk.kernel
def cols(lane: Grid["row", "col":COLS], x: Scalar) -> Scalar:  # noqa: F821
    return m.cos(x) * hawk.reduce(mix, x, over="row", where=x > -1.0)  # a trailing axis kept: a key per column


def test_a_fold_keeping_a_trailing_axis_against_jax():
    rng = np.random.default_rng(16)
    x = 0.3 * rng.standard_normal((40, COLS))
    x[:, 3] = -2.0  # a column keeping one lane only
    x[7, 3] = 0.1
    ct = rng.standard_normal((40, COLS))

    def loss(v):
        folded, _ = _masked_fold(_mix, v, x > -1.0)  # each column's kept lanes, in row order
        return jnp.sum(ct * jnp.cos(v) * folded[None, :])

    got = eagle.deploy(cols).reverse(ct, x=x)["x"]
    _close(np.asarray(got).reshape(40, COLS), jax.grad(loss)(jnp.asarray(x)))
    big = 0.3 * rng.standard_normal((1024, COLS))  # (a chunk holds whole scan blocks: 1024 rows split evenly)
    bt_grads_split_bits(cols, rng.standard_normal((1024, COLS)), {"x": big}, ORDERED_BLOCK, "cols")


WIDE = 5000  # more slots than one keyed scan takes (MAX_KEYS = 4096): the adjoint's scans run per group of keys


@hawk.kernel
def wide_cols(lane: Grid["row", "col":WIDE], x: Scalar) -> Scalar:  # noqa: F821
    return m.cos(x) * hawk.reduce(mix, x, over="row", where=x > -1.0)


def test_a_fold_keeping_more_trailing_slots_than_a_keyed_scan_takes():
    """5000 columns: the chains' keyed scans run as two scans over key groups (keys 0..4095 and 4096..4999); each
    column's gradient is still its own chain's, against jax.grad, in both groups and on every thread count."""
    rng = np.random.default_rng(17)
    x = 0.3 * rng.standard_normal((6, WIDE))
    x[:5, [3, 4500]] = -2.0  # columns keeping one lane only, one in each group
    ct = rng.standard_normal((6, WIDE))

    def loss(v):
        folded, _ = _masked_fold(_mix, v, x > -1.0)
        return jnp.sum(ct * jnp.cos(v) * folded[None, :])

    got = eagle.deploy(wide_cols).reverse(ct, x=x)["x"]
    _close(np.asarray(got).reshape(6, WIDE), jax.grad(loss)(jnp.asarray(x)))
    big = 0.3 * rng.standard_normal((4, WIDE))
    bt_grads_split_bits(wide_cols, rng.standard_normal((4, WIDE)), {"x": big}, ORDERED_BLOCK, "wide_cols")
