"""Integer outputs (`Mutable[Index]`) and output planes written by key (`hawk.scatter(out)[k] = v`) through the
JAX and torch bridges: the same values and dtypes as Plan.run, left out (fresh results: an integer output int64,
a keyed output zero where no lane writes, at every call) or passed (written in place: an int32 array stays int32,
a keyed output keeps what no lane writes), under jax.jit, jax.vmap, torch.compile and torch.library.opcheck;
gradients of the float results beside them; which sharded wraps take them."""

import numpy as np
import pytest

import eagle
import hawk
import hawk.math as m
from eagle.errors import InputError
from hawk import Index, Mutable, Scalar

jax = pytest.importorskip("jax")
torch = pytest.importorskip("torch")
jnp = jax.numpy
jax.config.update("jax_enable_x64", True)

import eagle.jax  # noqa: E402
import eagle.torch  # noqa: E402

# torch's own modules warn on import under torch.compile (torch.jit.script_method): not this suite's to fix
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:torch.jit")


@hawk.kernel
def bi_bins(x: Scalar, bins: Mutable[Index], y: Mutable[Scalar]):
    bins = m.index(x * 4.0, 4)
    y = x * x


@hawk.kernel
def bi_centred(x: Scalar, out: Mutable[Index]):
    out = (x - hawk.mean(x)) * 10.0  # a later stage stores it


@hawk.kernel
def bi_bump(k: Index, out: Mutable[Index]):
    out = out + k  # reads the caller's array


@hawk.kernel
def bi_place(key: Index, x: Scalar, out: Mutable[Scalar]):
    hawk.scatter(out)[key] = x * 2.0


@hawk.kernel
def bi_place_ids(key: Index, x: Scalar, ids: Mutable[Index], total: Mutable[Scalar]):
    hawk.scatter(ids)[key] = m.index(x * 4.0, 4)
    total = hawk.sum(x * x, policy="ordered")


X = np.random.default_rng(3).uniform(0.0, 1.0, 40)
KEY = np.random.default_rng(4).permutation(40)
KEY[::3] = -1  # (every third lane writes nothing: its position stays as it was, zero when left out)
CASES = [(bi_bins, {"x": X}), (bi_centred, {"x": X}), (bi_bump, {"k": KEY}), (bi_place, {"key": KEY, "x": X}),
         (bi_place_ids, {"key": KEY, "x": X})]


def _same(got: dict, want: dict) -> None:
    assert sorted(got) == sorted(want)
    for n, w in want.items():
        w, g = np.asarray(w), np.asarray(got[n])
        assert g.dtype == w.dtype and g.shape == w.shape, (n, g.dtype, w.dtype, g.shape, w.shape)
        assert w.tobytes() == g.tobytes(), (n, g, w)


def _plan(kernel, planes) -> dict:
    out = eagle.deploy(kernel).run(**{n: v.copy() for n, v in planes.items()})
    return out if isinstance(out, dict) else {"out": out}


@pytest.mark.parametrize("kernel, planes", CASES, ids=[k.name for k, _ in CASES])
def test_jax_matches_plan_run_eager_jit_and_vmap(kernel, planes):
    want = _plan(kernel, planes)
    f = eagle.jax.wrap(kernel)
    args = {n: jnp.asarray(v) for n, v in planes.items()}
    for call in (f, jax.jit(lambda **p: f(**p))):
        for _ in range(2):  # (a keyed output's unwritten positions are zero at every call, not the last one's)
            got = call(**args)
            _same(got if isinstance(got, dict) else {"out": got}, want)
    first = next(iter(planes))
    batch = {**args, first: jnp.stack([args[first], args[first]])}
    got = jax.vmap(lambda v: f(**{**args, first: v}))(batch[first])
    for n, w in want.items():
        g = np.asarray(got[n] if isinstance(got, dict) else got)
        assert g.dtype == np.asarray(w).dtype and (g == np.asarray(w)).all(), n


@pytest.mark.parametrize("kernel, planes", CASES, ids=[k.name for k, _ in CASES])
def test_torch_matches_plan_run_eager_compiled_and_opcheck(kernel, planes):
    want = _plan(kernel, planes)
    f = eagle.torch.wrap(kernel)
    args = {n: torch.from_numpy(v.copy()) for n, v in planes.items()}
    compiled = torch.compile(lambda **p: f(**p), fullgraph=True)
    for call in (f, compiled):
        for _ in range(2):
            got = call(**args)
            _same({n: t.numpy() for n, t in (got if isinstance(got, dict) else {"out": got}).items()}, want)
    torch.library.opcheck(f.op, tuple(args[n] for n in f.inputs))


def test_passed_outputs_are_written_in_place_in_their_dtype():
    out0 = np.full(45, 7.0)  # longer than the lanes: a keyed output's positions are its flat ones
    want = eagle.deploy(bi_place).run(key=KEY, x=X, out=out0.copy())
    hit = KEY >= 0
    by_hand = out0.copy()
    by_hand[KEY[hit]] = X[hit] * 2.0
    assert np.array_equal(np.asarray(want), by_hand)  # (unwritten positions keep 7.0)
    t = torch.from_numpy(out0.copy())
    got = eagle.torch.wrap(bi_place)(key=torch.from_numpy(KEY), x=torch.from_numpy(X), out=t)
    assert got is t and np.array_equal(t.numpy(), np.asarray(want))
    got = eagle.jax.wrap(bi_place)(key=jnp.asarray(KEY), x=jnp.asarray(X), out=jnp.asarray(out0))
    assert np.array_equal(np.asarray(got), np.asarray(want))
    k = np.arange(40, dtype=np.int64)
    prior = np.arange(40, dtype=np.int32) * 5
    want = prior + k.astype(np.int32)
    t = torch.from_numpy(prior.copy())
    assert eagle.torch.wrap(bi_bump)(k=torch.from_numpy(k), out=t) is t
    assert t.dtype == torch.int32 and np.array_equal(t.numpy(), want)
    got = eagle.jax.wrap(bi_bump)(k=jnp.asarray(k), out=jnp.asarray(prior))
    assert got.dtype == jnp.int32 and np.array_equal(np.asarray(got), want)


def test_gradients_of_the_float_results_beside_an_integer_output():
    """The float results' gradients through the reverse; an integer output takes no cotangent."""
    f = eagle.jax.wrap(bi_bins)
    g = jax.grad(lambda x: f(x=x)["y"].sum())(jnp.asarray(X))
    np.testing.assert_allclose(np.asarray(g), 2.0 * X, rtol=1e-15)
    h = eagle.jax.wrap(bi_place_ids)  # (an integer output written by key: no cotangent, as any integer output)
    g = jax.grad(lambda x: h(key=jnp.asarray(KEY), x=x)["total"][0])(jnp.asarray(X))
    assert np.asarray(g).tobytes() == np.asarray(eagle.deploy(bi_place_ids).reverse(
        {"total": np.ones(1)}, x=X, key=KEY)["x"]).tobytes()
    x = torch.from_numpy(X.copy()).requires_grad_()
    r = eagle.torch.wrap(bi_bins)(x=x)
    assert not r["bins"].requires_grad
    (r["y"] * 3.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 6.0 * X, rtol=1e-15)


def test_x64_off_refuses_an_omitted_int64_output_and_takes_an_int32_one():
    jax.config.update("jax_enable_x64", False)
    try:
        f = eagle.jax.wrap(bi_bins)
        with pytest.raises(InputError, match=r"plane 'bins' of kernel 'bi_bins'.*int64.*int32"):
            f(x=jnp.asarray(X, dtype=jnp.float32))
        got = f(x=jnp.asarray(X, dtype=jnp.float32), bins=jnp.zeros(40, jnp.int32))
        assert got["bins"].dtype == jnp.int32
        np.testing.assert_array_equal(np.asarray(got["bins"]), np.clip(np.floor(X.astype(np.float32) * 4), 0, 3))
    finally:
        jax.config.update("jax_enable_x64", True)


def test_sharded_wraps_take_keyed_and_integer_outputs():
    """An output written by key runs inside shard_map and under torch's group runs, each shard storing into the
    whole array passed (tests/test_dist_jax.py, tests/test_dist_torch.py); under plain jit (partition=True) it runs
    over gathered lanes, warned. A per-lane integer output stays sharded like a float one. Wrapping takes both."""
    for kernel in (bi_place, bi_bins):
        for how in ({"axis_name": "d"}, {"partition": True}):
            eagle.jax.wrap(kernel, **how)
        eagle.torch.wrap(kernel, group=object())  # (the group is used when called)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32])
def test_narrow_integer_outputs_passed_are_written_in_their_dtype(dtype):
    want = np.asarray(eagle.deploy(bi_bins).run(x=X, bins=np.zeros(40, dtype))["bins"])
    t = torch.zeros(40, dtype=getattr(torch, np.dtype(dtype).name))
    assert eagle.torch.wrap(bi_bins)(x=torch.from_numpy(X), bins=t)["bins"] is t
    assert t.numpy().tobytes() == want.tobytes()
    got = eagle.jax.wrap(bi_bins)(x=jnp.asarray(X), bins=jnp.zeros(40, dtype))["bins"]
    assert got.dtype == dtype and np.asarray(got).tobytes() == want.tobytes()
