"""eagle.jax: a hawk kernel inside JAX programs through the XLA FFI, checked against Plan.run.

Pinned here: every plane kind and a split kernel give Plan.run's very bits as jax.Arrays, eagerly and under
jax.jit; a passed sink aliases its operand and holds prior content + the lanes' adds; vector cells come back by
component; jax.vmap runs a loop of launches with each element's own bits; a key outside a sink inside jit raises
eagle's own message (an XLA error); float64 with x64 off is refused with the fix named; the call plan is made
once per shape and reused. Gradients (a custom VJP running the adjoint kernel through the same FFI path) match
jax.grad of the same jax.numpy code, carry plan.reverse's bits, are the same under jit, and vmap of grad runs;
kernels that store into sinks with `= v` get the reverse's winners-kernel gradients the same way.
"""

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402

import eagle  # noqa: E402
import eagle.jax  # noqa: E402
import hawk  # noqa: E402
import hawk.math as hm  # noqa: E402
from eagle import InputError  # noqa: E402
from hawk import Grid, Index, Mutable, Param, Scalar, Table, Vector  # noqa: E402


@hawk.kernel
def jb_all(lane: Grid["row", "col":5], x: Scalar, v: Vector[3], key: Index, t: Table["col":5], s: Param,
           acc: Mutable["slot":4], y: Mutable[Scalar], total: Mutable[Scalar]):
    hawk.scatter(acc, policy="ordered")[key] += x
    y = s * x * t.at(col=lane.col) + v[0] - v[2]
    total = hawk.sum(x * v[1], policy="ordered")


@hawk.kernel
def jb_split(v: Vector[3], tot: Mutable[Vector[3]], z: Mutable[Vector[3]]):
    tot = hawk.sum(v, policy="ordered")
    z = v / tot


@hawk.kernel
def jb_centre(x: Scalar) -> Scalar:
    return x - hawk.mean(x)


def _planes(rows=3, seed=0):
    rng = np.random.default_rng(seed)
    return dict(x=rng.normal(size=(rows, 5)), v=rng.normal(size=(3, rows, 5)),
                key=rng.integers(-1, 4, size=(rows, 5)).astype(np.int32), t=rng.normal(size=5), s=0.5)


def _same(got, want):
    if isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want)
        for k in want:
            _same(got[k], want[k])
        return
    g, w = np.asarray(got), np.asarray(want)
    assert g.dtype == w.dtype and g.shape == w.shape and g.tobytes() == w.tobytes()


@hawk.kernel
def jb_decay(x: Scalar, y: Mutable[Scalar], tot: Mutable[Scalar]):
    y = y * 0.5 + x  # reads y before assigning it: zeros when the caller leaves y out
    tot = hawk.sum(y, policy="ordered")


def test_an_omitted_output_read_before_assigned_starts_at_zero_at_every_call():
    """As Plan.run: an output the caller leaves out holds zeros when the body reads it, at every call, eager and
    under jit (XLA hands the call a result buffer that may hold an earlier call's values)."""
    f = eagle.jax.wrap(jb_decay)
    g = jax.jit(lambda x: f(x=x))
    for i in range(12):
        x = np.full(50_000, float(i + 1))
        want = eagle.deploy(jb_decay).run(x=x)
        for got in (f(x=x), g(x)):
            assert np.array_equal(np.asarray(got["y"]), x), i
            assert np.asarray(got["tot"]).tobytes() == np.asarray(want["tot"]).tobytes(), i


@pytest.mark.parametrize("jit", [False, True])
def test_every_plane_kind_gives_plan_runs_bits(jit):
    f = eagle.jax.wrap(jb_all)
    planes = _planes()
    call = jax.jit(lambda p: f(**p)) if jit else (lambda p: f(**p))
    _same(call(planes), eagle.deploy(jb_all).run(**planes))


def test_a_passed_sink_aliases_its_operand_and_keeps_prior_content():
    f = eagle.jax.wrap(jb_all)
    planes = _planes(rows=4, seed=1)
    prior = np.arange(4.0)
    got = jax.jit(lambda p, a: f(**p, acc=a))(planes, prior)
    want = eagle.deploy(jb_all).run(**planes, acc=prior.copy())
    _same(got, want)
    assert np.array_equal(prior, np.arange(4.0))  # the caller's array is JAX's input: never written


def test_split_kernel_and_vector_cells():
    f = eagle.jax.wrap(jb_split)
    v = np.random.default_rng(2).normal(size=(3, 700))
    _same(jax.jit(lambda v: f(v=v))(v), eagle.deploy(jb_split).run(v=v))


def test_vmap_is_a_loop_of_launches_with_each_elements_bits():
    f = eagle.jax.wrap(jb_centre)
    xs = np.random.default_rng(3).normal(size=(5, 333))
    got = jax.jit(jax.vmap(lambda x: f(x=x)))(xs)
    want = np.stack([np.asarray(eagle.deploy(jb_centre).run(x=x)) for x in xs])
    assert np.asarray(got).tobytes() == want.tobytes()


def test_a_key_outside_the_sink_is_eagles_error_inside_jit():
    f = eagle.jax.wrap(jb_all)
    planes = _planes()
    planes["key"][1, 2] = 9
    with pytest.raises(Exception, match="sink 'acc' of kernel 'jb_all'.*first bad key: 9"):
        jax.block_until_ready(jax.jit(lambda p: f(**p))(planes))


def test_float64_without_x64_is_refused_with_the_fix():
    f = eagle.jax.wrap(jb_centre)
    jax.config.update("jax_enable_x64", False)
    try:
        with pytest.raises(InputError, match="jax_enable_x64"):
            f(x=np.ones(4))
        assert np.asarray(f(x=np.ones(4, np.float32))).dtype == np.float32  # float32 runs
    finally:
        jax.config.update("jax_enable_x64", True)


def test_the_call_plan_is_made_once_per_shape():
    f = eagle.jax.wrap(jb_centre)
    for n in (10, 10, 20, 10):
        f(x=np.ones(n))
    assert len(f._calls) == 2


def test_a_gpu_target_is_refused_by_name():
    with pytest.raises(ValueError, match="host target"):
        eagle.jax.wrap(jb_centre, target="spirv")


# ---- gradients: the reverse through a second FFI call -----------------------------------------------------------


@hawk.kernel
def jb_loss(x: Scalar, w: Scalar, s: Param, total: Mutable[Scalar]):
    total = hawk.sum(s * hm.sin(x) * w * w, policy="ordered")


@hawk.kernel
def jb_hist(key: Index, x: Scalar, acc: Mutable["bin":6]):
    hawk.scatter(acc, policy="ordered")[key] += x * x


@hawk.kernel
def jb_stencil(g: Grid["r", "c":6], u: Scalar, k: Param) -> Scalar:
    return k * (u.at(g.r, g.c + 1) - 2.0 * u + u.at(g.r, g.c - 1))


@hawk.kernel
def jb_store(key: Index, x: Scalar, acc: Mutable["bin":6]):
    hawk.scatter(acc)[key] = x


def _edges(u):
    right = jnp.concatenate([u[:, 1:], u[:, -1:]], 1)  # .at clamps to the grid's edge
    left = jnp.concatenate([u[:, :1], u[:, :-1]], 1)
    return right, left


def test_grad_matches_jax_grad_of_the_same_jax_numpy_code():
    rng = np.random.default_rng(10)
    x, w = rng.normal(size=64), rng.normal(size=64)
    f = eagle.jax.wrap(jb_loss)
    ours = jax.grad(lambda x, w, s: f(x=x, w=w, s=s)[0], argnums=(0, 1, 2))(x, w, 0.7)
    theirs = jax.grad(lambda x, w, s: jnp.sum(s * jnp.sin(x) * w * w), argnums=(0, 1, 2))(x, w, 0.7)
    for a, b in zip(ours, theirs, strict=True):
        assert np.allclose(a, b, rtol=1e-13, atol=1e-14)
    jitted = jax.jit(jax.grad(lambda x, w, s: f(x=x, w=w, s=s)[0], argnums=(0, 1, 2)))(x, w, 0.7)
    for a, b in zip(ours, jitted, strict=True):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
    # the bits are the reverse's: plan.reverse with a cotangent of 1
    want = eagle.deploy(jb_loss).reverse(np.ones(1), x=x, w=w, s=0.7)
    assert np.asarray(ours[0]).tobytes() == np.asarray(want["x"]).tobytes()
    assert np.asarray(ours[1]).tobytes() == np.asarray(want["w"]).tobytes()


def test_grad_through_a_split_kernel_a_scatter_and_a_stencil():
    rng = np.random.default_rng(11)
    x = rng.normal(size=48)
    ct = rng.normal(size=48)
    c = eagle.jax.wrap(jb_centre)
    g = jax.grad(lambda x: jnp.sum(c(x=x) * ct))(x)
    assert np.allclose(g, jax.grad(lambda x: jnp.sum((x - x.mean()) * ct))(x), rtol=1e-13, atol=1e-15)
    key = rng.integers(-1, 6, size=48).astype(np.int32)
    h = eagle.jax.wrap(jb_hist)

    def hist_ref(x):
        keep = key >= 0
        return jnp.zeros(6).at[jnp.where(keep, key, 0)].add(jnp.where(keep, x * x, 0.0))

    g = jax.grad(lambda x: jnp.sum(h(key=key, x=x) ** 3))(x)
    assert np.allclose(g, jax.grad(lambda x: jnp.sum(hist_ref(x) ** 3))(x), rtol=1e-12)
    u = rng.normal(size=(5, 6))
    st = eagle.jax.wrap(jb_stencil)
    ours = jax.grad(lambda u, k: jnp.sum(st(u=u, k=k) ** 2), argnums=(0, 1))(u, 0.3)

    def sten_ref(u, k):
        right, left = _edges(u)
        return jnp.sum((k * (right - 2.0 * u + left)) ** 2)

    for a, b in zip(ours, jax.grad(sten_ref, argnums=(0, 1))(u, 0.3), strict=True):
        assert np.allclose(a, b, rtol=1e-12, atol=1e-14)


def test_vmap_of_grad_runs_each_elements_reverse():
    c = eagle.jax.wrap(jb_centre)
    rng = np.random.default_rng(12)
    xs, ct = rng.normal(size=(3, 40)), rng.normal(size=40)
    got = jax.vmap(jax.grad(lambda x: jnp.sum(c(x=x) * ct)))(xs)
    for k in range(3):
        assert np.asarray(got[k]).tobytes() == np.asarray(jax.grad(lambda x: jnp.sum(c(x=x) * ct))(xs[k])).tobytes()


@hawk.kernel
def jb_two_stores(x: Scalar, k: Index, w: Param, h: Mutable["slot":5]):
    hawk.scatter(h)[k] = w * x * x
    hawk.scatter(h)[k + 1] = hm.sin(x)


def _winners(keys_per_stmt, slots):
    """The store that won each slot: the last in lane order, then statement order (-1 keys store nothing)."""
    won = {}
    for lane in range(len(keys_per_stmt[0])):
        for stmt, keys in enumerate(keys_per_stmt):
            if 0 <= keys[lane] < slots:
                won[int(keys[lane])] = (lane, stmt)
    return won


def test_grad_of_a_store_kernel_is_the_reverses_with_winners():
    rng = np.random.default_rng(13)
    x = rng.normal(size=40)
    key = rng.integers(-1, 6, size=40).astype(np.int32)
    ct = rng.normal(size=6)
    s = eagle.jax.wrap(jb_store)
    loss = lambda x: jnp.sum(s(key=key, x=x) * ct)  # noqa: E731
    ours = jax.grad(loss)(x)
    want = eagle.deploy(jb_store).reverse(ct, key=key, x=x)["x"]
    assert np.asarray(ours).tobytes() == np.asarray(want).tobytes()
    won = _winners([key], 6)
    by_hand = np.zeros(40)
    for slot, (lane, _) in won.items():
        by_hand[lane] = ct[slot]  # only the lane that won a slot feeds its cotangent back
    assert np.asarray(ours).tobytes() == by_hand.tobytes()
    assert np.asarray(jax.jit(jax.grad(loss))(x)).tobytes() == by_hand.tobytes()
    out, pull = jax.vjp(lambda x: s(key=key, x=x), x)
    assert np.asarray(out).tobytes() == np.asarray(eagle.deploy(jb_store).run(key=key, x=x)).tobytes()
    assert np.asarray(pull(jnp.asarray(ct))[0]).tobytes() == by_hand.tobytes()


def test_grad_of_two_stores_a_param_and_a_passed_sink_is_the_reverses():
    rng = np.random.default_rng(14)
    x = rng.normal(size=30)
    k = rng.choice(np.array([-1, 1, 2], np.int32), size=30)  # slot 4: no store
    prior, ct = rng.normal(size=5), rng.normal(size=5)
    f = eagle.jax.wrap(jb_two_stores)
    loss = lambda x, w, h: jnp.sum(f(x=x, k=k, w=w, h=h) * ct)  # noqa: E731
    ours = jax.grad(loss, argnums=(0, 1, 2))(x, 0.7, prior)
    jitted = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(x, 0.7, prior)
    want = eagle.deploy(jb_two_stores).reverse(ct, x=x, k=k, w=0.7, h=prior.copy())
    for a, b, name in zip(ours, jitted, ("x", "w", "h"), strict=True):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
        assert np.asarray(a).reshape(-1).tobytes() == np.asarray(want[name]).reshape(-1).tobytes(), name
    won = _winners([k, k + 1], 5)  # key -1 skips the first store; k + 1 = 0 is slot 0
    kept = np.array([slot not in won for slot in range(5)])
    assert kept[4] and not kept[0] and np.array_equal(np.asarray(ours[2]), np.where(kept, ct, 0.0))  # won: no grad
    gx = np.zeros(30)
    gw = 0.0
    for slot, (lane, stmt) in won.items():  # d(w x^2)/dx, d(sin x)/dx of the winning store
        gx[lane] += ct[slot] * (2.0 * 0.7 * x[lane] if stmt == 0 else np.cos(x[lane]))
        gw += ct[slot] * x[lane] ** 2 if stmt == 0 else 0.0
    assert np.allclose(ours[0], gx, rtol=1e-13, atol=1e-15) and np.isclose(ours[1], gw, rtol=1e-12)


def test_vmap_of_grad_of_a_store_kernel():
    rng = np.random.default_rng(15)
    xs, ct = rng.normal(size=(3, 40)), rng.normal(size=6)
    key = rng.integers(0, 6, size=40).astype(np.int32)
    s = eagle.jax.wrap(jb_store)
    got = jax.jit(jax.vmap(jax.grad(lambda x: jnp.sum(s(key=key, x=x) * ct))))(xs)
    plan = eagle.deploy(jb_store)
    for k in range(3):
        assert np.asarray(got[k]).tobytes() == np.asarray(plan.reverse(ct, key=key, x=xs[k])["x"]).tobytes()


def test_a_jitted_program_outlives_its_wrapper():
    """A compiled program names its call plan by address: dropping every Python reference to the wrapper (and
    the traced function) must not free the plan under it."""
    import gc

    x = np.arange(1.0, 301.0)
    f = eagle.jax.wrap(jb_centre)
    want = np.asarray(f(x=x))
    compiled = jax.jit(lambda a: f(x=a)).lower(x).compile()
    del f
    gc.collect()
    for _ in range(3):
        np.testing.assert_array_equal(np.asarray(compiled(x + 0.0)), want)
