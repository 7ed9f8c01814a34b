"""jax.grad through eagle.jax of a stencil runs plan.reverse's gather form (eagle/jax_gather.py): the shares adjoint,
the gather and the Param sums as FFI calls, and the scatter adjoint under `lax.cond` where a lane's pair erred.
Checked: the gather form's kernels are the ones called, the gradients have plan.reverse's bits (jit or not, a
Param's and a 2-D grid's too), and a sum the pair cannot hold (2**53 + 1 + 2**-60, which every order of the pair
rounds to 2**53) comes back correctly rounded, 2**53 + 2, from the scatter adjoint's exact accumulators. Vector
planes too: their share planes components first, a component's erring pair sending the call to the scatter."""

from fractions import Fraction

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from conftest import bt_same_bits  # noqa: E402
from test_reverse_gather import vheat  # noqa: E402

import eagle  # noqa: E402
import eagle.jax  # noqa: E402
import hawk  # noqa: E402
from eagle.reverse import gather_for  # noqa: E402
from hawk import Grid, Param, Scalar, Vector  # noqa: E402

jax.config.update("jax_enable_x64", True)


@hawk.kernel
def jg_line(g: Grid["i"], x: Scalar, a: Param) -> Scalar:
    return (x.at(i=g.i - 1) + x.at(i=g.i + 1) + x) * a


@hawk.kernel
def jg_heat(g: Grid["r", "c":9], u: Scalar, k: Param) -> Scalar:
    lap = u.at(r=g.r + 1) + u.at(r=g.r - 1) + u.at(c=g.c + 1) + u.at(c=g.c - 2) - 4.0 * u
    return u + k * lap * lap


def _grads(f, ct, wrt, **planes):
    def loss(*vals):
        out = f(**{**planes, **dict(zip(wrt, vals, strict=True))})
        return jnp.sum(out * ct)

    return dict(zip(wrt, jax.grad(loss, argnums=tuple(range(len(wrt))))(*(planes[w] for w in wrt)), strict=True))


@pytest.mark.parametrize("jit", [False, True])
def test_a_stencil_s_gradient_is_gathered_with_plan_reverse_s_bits(jit):
    rng = np.random.default_rng(61)
    u, ct = rng.normal(size=(40, 9)), rng.normal(size=(40, 9))
    f = eagle.jax.wrap(jg_heat)
    if jit:
        got = jax.jit(lambda u, k: _grads(f, ct, ("u", "k"), u=u, k=k))(u, 0.3)
    else:
        got = _grads(f, ct, ("u", "k"), u=u, k=0.3)
    plan = eagle.deploy(jg_heat)
    want = plan.reverse(ct, u=u, k=0.3)
    bt_same_bits(np.asarray(got["u"]), np.asarray(want["u"]), "u")
    bt_same_bits(np.asarray(got["k"]).reshape(1), np.asarray(want["k"]).reshape(1), "k")
    adj, _, gk, sk, _ = gather_for(f.plan, ("u", "k"), (40, 9))
    assert {id(adj), id(gk), id(sk)} <= set(f._adjoints), "the gather form's kernels were not the ones called"


def test_a_sum_the_pair_cannot_hold_takes_the_scatter_adjoint():
    x = np.random.default_rng(62).normal(size=30)
    ct = np.random.default_rng(63).normal(size=30)
    ct[4:7] = [2.0**53, 1.0, 2.0**-60]  # lane 5's gradient: the three, whose exact sum rounds to 2**53 + 2
    f = eagle.jax.wrap(jg_line)
    got = _grads(f, ct, ("x", "a"), x=x, a=1.0)
    assert id(gather_for(f.plan, ("x", "a"), (30,))[2]) in f._adjoints  # (the gather ran, and its flag was set)
    assert float(got["x"][5]) == float(Fraction(2**53) + 1 + Fraction(1, 2**60)) == 2.0**53 + 2
    want = eagle.deploy(jg_line).reverse(ct, x=x, a=1.0)
    bt_same_bits(np.asarray(got["x"]), np.asarray(want["x"]), "x")
    bt_same_bits(np.asarray(got["a"]).reshape(1), np.asarray(want["a"]).reshape(1), "a")
    ct[4:7] = [np.inf, 1.0, 2.0]  # a term that is not finite: the same path
    got = _grads(f, ct, ("x",), x=x, a=1.0)
    bt_same_bits(np.asarray(got["x"]), np.asarray(eagle.deploy(jg_line).reverse(ct, x=x, a=1.0)["x"]), "x inf")


def test_vmap_of_grad_runs_the_scatter_adjoint_only_when_some_element_needs_it():
    """Under vmap a lax.cond on a batched flag becomes a select that runs both sides: the scatter adjoint for
    every element. eagle.jax_gather's batch rule keeps one cond on the whole batch's flag: its jaxpr has a cond
    and no select, each element gets plan.reverse's bits, and an element whose pair erred sends the batch
    through the scatter adjoint (same bits for the others)."""
    rng = np.random.default_rng(64)
    us, cts = rng.normal(size=(3, 12, 9)), rng.normal(size=(3, 12, 9))
    f = eagle.jax.wrap(jg_heat)

    def grads(u, ct):
        return jax.grad(lambda u, k: jnp.sum(f(u=u, k=k) * ct), argnums=(0, 1))(u, 0.3)

    text = str(jax.make_jaxpr(jax.vmap(grads))(us, cts))
    assert "cond[" in text and "select_n" not in text, text
    got = jax.jit(jax.vmap(grads))(us, cts)
    plan = eagle.deploy(jg_heat)
    for b in range(3):
        want = plan.reverse(cts[b], u=us[b], k=0.3)
        bt_same_bits(np.asarray(got[0][b]), np.asarray(want["u"]), f"u[{b}]")
        bt_same_bits(np.asarray(got[1][b]).reshape(1), np.asarray(want["k"]).reshape(1), f"k[{b}]")
    xs, ct = rng.normal(size=(3, 30)), rng.normal(size=(3, 30))
    ct[1, 4:7] = [2.0**53, 1.0, 2.0**-60]  # element 1, lane 5: the exact sum rounds to 2**53 + 2
    fl = eagle.jax.wrap(jg_line)
    got = jax.vmap(lambda x, c: jax.grad(lambda x: jnp.sum(fl(x=x, a=1.0) * c))(x))(xs, ct)  # (eager)
    assert float(got[1][5]) == 2.0**53 + 2
    for b in range(3):
        want = eagle.deploy(jg_line).reverse(ct[b], x=xs[b], a=1.0)["x"]
        bt_same_bits(np.asarray(got[b]), np.asarray(want), f"x[{b}]")


@hawk.kernel
def jg_vline(g: Grid["i"], v: Vector[3], a: Param) -> Vector[3]:
    return (v.at(i=g.i - 1) + v.at(i=g.i + 1) + v) * a


@pytest.mark.parametrize("jit", [False, True])
def test_a_vector_stencil_s_gradient_is_gathered_with_plan_reverse_s_bits(jit):
    """A Vector plane's share planes reach the gather components first (payload first, lanes last): the 2-D
    Vector[2] stencil of tests/test_reverse_gather.py, beside a Scalar plane and a Param."""
    rng = np.random.default_rng(65)
    planes = dict(v=rng.normal(size=(2, 20, 24)), u=rng.normal(size=(20, 24)), k=0.3)
    ct = rng.normal(size=(20, 24))
    f = eagle.jax.wrap(vheat)
    wrt = ("v", "u", "k")
    got = jax.jit(lambda **p: _grads(f, ct, wrt, **p))(**planes) if jit else _grads(f, ct, wrt, **planes)
    want = eagle.deploy(vheat).reverse(ct, **planes)
    for x in wrt:
        bt_same_bits(np.asarray(got[x]).reshape(np.shape(want[x])), np.asarray(want[x]), x)
    adj, _, gk, sk, g = gather_for(f.plan, wrt, (20, 24))
    assert "v" in g.grad and g.payload["v"] == 2, g  # (the Vector plane is gathered, not scattered)
    assert {id(adj), id(gk), id(sk)} <= set(f._adjoints), "the gather form's kernels were not the ones called"


def test_a_vector_component_the_pair_cannot_hold_takes_the_scatter_adjoint_also_under_vmap():
    """Lane 5's second component gathers ct[1, 4:7] (a = 1): 1e30 + 1 + 1e-30 spans more than a pair, so that call
    (and, under vmap, that batch) takes the scatter adjoint: plan.reverse's bits, the exact sum."""
    rng = np.random.default_rng(66)
    vs, cts = rng.normal(size=(3, 3, 30)), rng.normal(size=(3, 3, 30))
    cts[1, 1, 4:7] = [1e30, 1.0, 1e-30]
    fl = eagle.jax.wrap(jg_vline)

    def grad(v, c):
        return jax.grad(lambda v: jnp.sum(fl(v=v, a=1.0) * c))(v)

    got = jax.jit(jax.vmap(grad))(vs, cts)
    assert float(got[1][1, 5]) == 1e30
    plan = eagle.deploy(jg_vline)
    for b in range(3):
        bt_same_bits(np.asarray(got[b]), np.asarray(plan.reverse(cts[b], v=vs[b], a=1.0)["v"]), f"v[{b}]")
        bt_same_bits(np.asarray(grad(vs[b], cts[b])), np.asarray(plan.reverse(cts[b], v=vs[b], a=1.0)["v"]),
                     f"v[{b}] alone")
    assert id(gather_for(fl.plan, ("v", "a"), (30,))[2]) in fl._adjoints


def test_a_grid_extent_passed_by_its_label_stays_an_extent_in_the_gather_form():
    """`f(u=u, k=k, r=40)`: the extent goes to the gather form's kernels as the integer it is (custom_vmap traced
    it into an array, which the shares adjoint took for an unknown plane: found by a fuzz campaign), under jit,
    grad and vmap."""
    rng = np.random.default_rng(67)
    us, cts = rng.normal(size=(2, 40, 9)), rng.normal(size=(2, 40, 9))
    f = eagle.jax.wrap(jg_heat)

    def grad(u, ct):
        return jax.grad(lambda u: jnp.sum(f(u=u, k=0.3, r=40) * ct))(u)

    plan = eagle.deploy(jg_heat)
    got = jax.jit(jax.vmap(grad))(us, cts)
    for b in range(2):
        want = np.asarray(plan.reverse(cts[b], u=us[b], k=0.3)["u"])
        bt_same_bits(np.asarray(got[b]), want, f"u[{b}] under vmap")
        bt_same_bits(np.asarray(jax.jit(grad)(us[b], cts[b])), want, f"u[{b}]")
