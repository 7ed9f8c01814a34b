"""The reverse of a kernel that reads an output before assigning it (`y = y * w + x`: the output's initial
contents are an input). The adjoint reads those contents as an input plane of the output's name; a float output's
initial contents get a gradient like a passed sink's (when passed, or when wrt= names the output), checked against
jax.grad of the same formula; an integer output's feed the recompute only. Every door: plan.reverse,
bound.reverse, a loaded artifact, the JAX and torch bridges (docs/reverse.md)."""

import numpy as np
import pytest
from conftest import bt_spirv_missing, bt_target_missing

import eagle
import hawk
import hawk.math as m
from eagle.errors import InputError
from hawk import Grid, Index, Mutable, Param, Scalar, Table, Vector

jax = pytest.importorskip("jax")
jnp = jax.numpy
jax.config.update("jax_enable_x64", True)

N = 300
RNG = np.random.default_rng(7)
X, Y0, CT = RNG.standard_normal(N), RNG.standard_normal(N), RNG.standard_normal(N)
W = 0.7


@hawk.kernel
def ri_decay(x: Scalar, w: Param, y: Mutable[Scalar], tot: Mutable[Scalar]):
    y = y * w + m.sin(x)
    tot = hawk.sum(y * y)  # noqa: F841


def _decay(x, w, y0):
    y = y0 * w + jnp.sin(x)
    return jnp.dot(CT, y) + 1.3 * jnp.sum(y * y)


@hawk.kernel
def ri_vec(x: Scalar, v: Mutable[Vector[3]]):
    v = v * x + m.vec(x, 2.0 * x, x * x)


@hawk.kernel
def ri_count(i: Index, x: Scalar, k: Mutable[Index], y: Mutable[Scalar]):
    k = k + i
    y = x * m.to_float(k)  # noqa: F841


@hawk.kernel
def ri_plain(x: Scalar, y: Mutable[Scalar]):
    y = x * 2.0  # noqa: F841


@hawk.kernel
def ri_cond(x: Scalar, y: Mutable[Scalar]):
    if x > 0.0:
        y = y * x
    else:
        y = y  # (the lane keeps the initial contents: their cotangent passes through)


@hawk.kernel
def ri_keyed(key: Index, x: Scalar, y: Mutable[Scalar], s: Mutable["slot":16]):
    y = y + x
    hawk.scatter(s)[key] = y * x  # (a store: the winners kernel reads y's initial contents too)


@hawk.kernel
def ri_grid(cell: Grid["r", "c":40], u: Scalar, taps: Table["t":3], y: Mutable[Scalar]):
    y = y * taps.at(t=1) + u.at(cell.r, cell.c - 1) * taps.at(t=0) + u.at(cell.r, cell.c + 1) * taps.at(t=2)


def _grads(got: dict) -> dict:
    return {k: np.array(v, copy=True) for k, v in got.items()}  # (a bound reverse reuses its buffers)


def test_scalar_output_gradient_matches_jax():
    plan = eagle.deploy(ri_decay)
    y0 = Y0.copy()
    got = _grads(plan.reverse({"y": CT, "tot": 1.3}, x=X, w=W, y=y0))
    want = jax.grad(_decay, argnums=(0, 1, 2))(X, W, Y0)
    assert sorted(got) == ["w", "x", "y"]
    np.testing.assert_allclose(got["x"], want[0], rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(got["w"][0], want[1], rtol=1e-13)
    np.testing.assert_allclose(got["y"], want[2], rtol=1e-13, atol=1e-13)
    assert np.array_equal(y0, Y0)  # the reverse reads the caller's array, never writes it


def test_omitted_output_reads_zeros():
    plan = eagle.deploy(ri_decay)
    got = _grads(plan.reverse({"y": CT, "tot": 1.3}, x=X, w=W))
    assert sorted(got) == ["w", "x"]  # (as a sink's initial contents: a gradient when passed)
    want = jax.grad(_decay, argnums=(0, 1, 2))(X, W, np.zeros(N))
    np.testing.assert_allclose(got["x"], want[0], rtol=1e-13, atol=1e-13)
    named = _grads(plan.reverse({"y": CT, "tot": 1.3}, wrt=("y",), x=X, w=W))
    assert sorted(named) == ["y"]
    np.testing.assert_allclose(named["y"], want[2], rtol=1e-13, atol=1e-13)


def test_bits_do_not_depend_on_threads():
    n = 20_011
    x, y0, ct = RNG.standard_normal(n), RNG.standard_normal(n), RNG.standard_normal(n)
    runs = []
    for threads in (1, 3):
        plan = eagle.deploy(ri_decay, threads=threads, min_chunk=64)
        runs.append(_grads(plan.reverse({"y": ct, "tot": 0.5}, x=x, w=W, y=y0)))
        if threads == 3:
            assert max(plan.last_reverse_chunks) > 1  # the adjoint really ran in several chunks
    for name in ("x", "w", "y"):
        assert np.array_equal(runs[0][name].view(np.int64), runs[1][name].view(np.int64)), name


def test_vector_output():
    v0 = RNG.standard_normal((3, N))  # (payload first)
    ct = RNG.standard_normal((3, N))
    plan = eagle.deploy(ri_vec)
    out = np.asarray(plan.run(x=X, v=v0.copy()))
    got = _grads(plan.reverse(ct, x=X, v=v0))

    def f(x, v):
        return jnp.sum(ct * (v * x + jnp.stack([x, 2.0 * x, x * x])))

    gx, gv = jax.grad(f, argnums=(0, 1))(X, v0)
    assert out.shape == v0.shape
    np.testing.assert_allclose(got["x"], gx, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(got["v"].reshape(v0.shape), gv, rtol=1e-13, atol=1e-13)


def test_integer_output_feeds_the_recompute():
    k0 = np.arange(N, dtype=np.int16)
    i = np.full(N, 3, np.int64)
    plan = eagle.deploy(ri_count)
    got = _grads(plan.reverse({"y": CT}, i=i, x=X, k=k0.copy()))
    assert sorted(got) == ["x"]
    np.testing.assert_allclose(got["x"], CT * (k0 + 3.0), rtol=1e-15)
    with pytest.raises(InputError, match=r"plane 'k' of kernel 'ri_count'.*integer output"):
        plan.reverse({"y": CT}, wrt=("k",), i=i, x=X, k=k0)


def test_unread_output_is_refused_in_wrt():
    with pytest.raises(InputError, match=r"plane 'y' of kernel 'ri_plain'.*never reads"):
        eagle.deploy(ri_plain).reverse(CT, wrt=("y",), x=X)


def test_conditional_assignment_passes_the_initial_contents_through():
    plan = eagle.deploy(ri_cond)
    got = _grads(plan.reverse(CT, x=X, y=Y0))
    np.testing.assert_allclose(got["y"], np.where(X > 0, CT * X, CT), rtol=1e-15)
    np.testing.assert_allclose(got["x"], np.where(X > 0, CT * Y0, 0.0), rtol=1e-15)


def test_stores_by_key_read_the_initial_contents():
    key = RNG.integers(-1, 16, N)
    ct_s = RNG.standard_normal(16)
    plan = eagle.deploy(ri_keyed)
    got = _grads(plan.reverse({"y": CT, "s": ct_s}, key=key, x=X, y=Y0))
    last = {k: j for j, k in enumerate(key) if k >= 0}  # the lane that won each slot
    won = np.zeros(N)
    for k, j in last.items():
        won[j] = ct_s[k]
    y = Y0 + X
    np.testing.assert_allclose(got["y"], CT + won * X, rtol=1e-14)
    np.testing.assert_allclose(got["x"], CT + won * (y + X), rtol=1e-14)


def test_grid_stencil_with_an_initial_read():
    r, c = 7, 40
    u, y0, ct = RNG.standard_normal((r, c)), RNG.standard_normal((r, c)), RNG.standard_normal((r, c))
    taps = np.array([0.25, 0.5, -0.75])
    plan = eagle.deploy(ri_grid)
    got = _grads(plan.reverse(ct, u=u, taps=taps, y=y0))

    def f(u, taps, y0):
        left = jnp.concatenate([u[:, :1], u[:, :-1]], axis=1)  # (.at clamps at the edges)
        right = jnp.concatenate([u[:, 1:], u[:, -1:]], axis=1)
        return jnp.sum(ct * (y0 * taps[1] + left * taps[0] + right * taps[2]))

    want = jax.grad(f, argnums=(0, 1, 2))(u, taps, y0)
    for name, w in zip(("u", "taps", "y"), want, strict=True):
        np.testing.assert_allclose(got[name].reshape(np.shape(w)), w, rtol=1e-13, atol=1e-13, err_msg=name)


def test_bound_reverse_differentiates_the_last_launch():
    """A bound launch writes y in place; its reverse differentiates the launch last run (from the contents y had
    when it began), or before any launch the one the bound arrays describe."""
    plan = eagle.deploy(ri_decay)
    y = Y0.copy()
    bound = plan.bind(x=X, w=W, y=y)
    ct = {"y": CT, "tot": 1.3}
    starts = [Y0.copy()]
    before = _grads(bound.reverse(ct))
    for _ in range(2):
        bound.launch()
        starts.append(y.copy())
    assert not np.array_equal(starts[1], starts[0])  # (the launches really wrote y)
    after = _grads(bound.reverse(ct))  # the second launch began from starts[1]
    for got, start in ((before, starts[0]), (after, starts[1])):
        want = _grads(plan.reverse(ct, x=X, w=W, y=start))
        for name in ("x", "w", "y"):
            assert np.array_equal(got[name], want[name]), name


def test_a_bound_integer_output_is_kept_too():
    k0 = np.arange(N, dtype=np.int16)
    k = k0.copy()
    i = np.full(N, 3, np.int64)
    bound = eagle.deploy(ri_count).bind(i=i, x=X, k=k)
    bound.launch()
    got = _grads(bound.reverse({"y": CT}))
    np.testing.assert_allclose(got["x"], CT * (k0 + 3.0), rtol=1e-15)  # the launch began from k0
    bound.launch()  # ... this one from k0 + 3
    np.testing.assert_allclose(_grads(bound.reverse({"y": CT}))["x"], CT * (k0 + 6.0), rtol=1e-15)


def test_artifact_reverse(tmp_path):
    from hawk.artifact import build

    build(ri_decay, tmp_path, reverse=True)
    loaded = hawk.load(tmp_path, "ri_decay")
    assert "y" in loaded.reverse_wrt
    got = _grads(loaded.reverse({"y": CT, "tot": 1.3}, x=X, w=W, y=Y0))
    want = _grads(eagle.deploy(ri_decay).reverse({"y": CT, "tot": 1.3}, x=X, w=W, y=Y0))
    assert sorted(got) == sorted(want) == ["w", "x", "y"]
    for name in want:
        assert np.array_equal(got[name], want[name]), name
    omitted = _grads(loaded.reverse({"y": CT, "tot": 1.3}, x=X, w=W))
    assert sorted(omitted) == ["w", "x"]


def test_jax_bridge_gradient_of_a_passed_output():
    import eagle.jax

    f = eagle.jax.wrap(ri_decay)

    def loss(x, w, y0):
        out = f(x=x, w=w, y=y0)
        return jnp.dot(CT, out["y"]) + 1.3 * out["tot"].reshape(())

    got = jax.grad(loss, argnums=(0, 1, 2))(X, jnp.float64(W), Y0)
    want = jax.grad(_decay, argnums=(0, 1, 2))(X, W, Y0)
    for g, w_ in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w_), rtol=1e-13, atol=1e-13)
    jitted = jax.jit(jax.grad(loss, argnums=2))(X, jnp.float64(W), Y0)
    assert np.array_equal(np.asarray(jitted), np.asarray(got[2]))


def test_torch_bridge_with_the_output_omitted():
    torch = pytest.importorskip("torch")
    import eagle.torch

    f = eagle.torch.wrap(ri_decay)
    x = torch.tensor(X, requires_grad=True)
    w = torch.tensor(W, dtype=torch.float64, requires_grad=True)
    out = f(x=x, w=w)
    (torch.dot(torch.tensor(CT), out["y"]) + 1.3 * out["tot"].reshape(())).backward()
    want = jax.grad(_decay, argnums=(0, 1))(X, W, np.zeros(N))
    np.testing.assert_allclose(x.grad.numpy(), want[0], rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(float(w.grad), float(want[1]), rtol=1e-13)


def test_spirv_matches_host():
    why = bt_target_missing("spirv")
    if why:
        bt_spirv_missing(why)
    host = _grads(eagle.deploy(ri_decay).reverse({"y": CT, "tot": 1.3}, x=X, w=W, y=Y0))
    dev = _grads(eagle.deploy(ri_decay, target="spirv").reverse({"y": CT, "tot": 1.3}, x=X, w=W, y=Y0))
    for name in host:
        assert np.array_equal(host[name], dev[name]), name
