"""Which `hawk.scatter(sink)[k] = v` store won each slot, as the reverse sees it (docs/reverse.md, "Outputs").

A lane's stores run in the order it makes them, pass after pass inside `for` loops, so of the stores into one
slot the last lane's last one wins; only that store gets the slot's cotangent. The winners kernel records each
slot's winning store as its number and the pass of each loop around it, in 24-bit parts. Checked against the
forward's rule played out store by store (loops with constant and lane-dependent pass counts, a negative start,
nested loops, stores before and after the loop into the same sink, key -1, vector payloads, a passed sink's
content), jax.grad of the same stores made one by one with `.at[].set`, central finite differences, the same bits
on 1-4 threads (runs that really split), spirv (lavapipe), jax.grad through eagle.jax.wrap and an artifact built
with its reverse; the adjoint and winners kernels assemble with ptxas and link with ld.lld. A float32 run past
2**24 lanes still tells neighbouring lanes' stores apart (a store's number is not one float32)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import bt_grads_spirv_bits, bt_grads_split_bits, bt_same_bits, bt_stages_assemble

import eagle
import hawk
import hawk.math as m
from hawk import Grid, Index, Mutable, Param, Scalar, Vector

jax.config.update("jax_enable_x64", True)


@hawk.kernel
def ls_passes(x: Scalar, k: Index, h: Mutable["slot":5]):
    for j in range(4):  # (passes 0 and 3 store into one slot: the later one wins; slots 3 and 4: never)
        hawk.scatter(h)[m.where(k < 0, -1, (k + j) % 3)] = x * (j + 1.0)


@hawk.kernel
def ls_nested(x: Scalar, k: Index, t: Index, a: Param, h: Mutable["slot":9]):
    hawk.scatter(h)[k] = x * a
    for i in range(-1, t):  # (a pass count of its own per lane, from a negative start)
        for j in range(i + 2):
            hawk.scatter(h)[m.where(k < 0, -1, (k + i + j + 1) % 9)] = m.sin(x * (i + 2.0)) * a + j
    hawk.scatter(h)[m.where(k < 0, -1, (k + 7) % 9)] = x * x


@hawk.kernel
def ls_vector(x: Vector[2], k: Index, h: Mutable["slot":4]):
    for j in range(3):  # (passes 0 and 2 store into one slot)
        hawk.scatter(h)[m.where(k < 0, -1, (k + j) % 2)] = x * (j + 1.0)


@hawk.kernel
def ls_neighbour(g: Grid["r", "c":6], x: Scalar, k: Index, h: Mutable["slot":7]):
    for j in range(2):  # (a neighbour's value stored: x's gradient takes the gather form, which unrolls loops)
        hawk.scatter(h)[(k - 2 + j) % 7] = x.at(c=m.clamp(g.c + 1, 0, 5))


def _passes_events(k):
    """(lane, j, slot) of ls_passes' stores in the order the forward makes them."""
    return [(lane, j, (int(k[lane]) + j) % 3) for lane in range(len(k)) if k[lane] >= 0 for j in range(4)]


def _nested_events(k, t):
    """(lane, which, i, j, slot) of ls_nested's stores in the forward's order (which: 0 before, 1 in, 2 after)."""
    out = []
    for lane in range(len(k)):
        if k[lane] < 0:
            continue
        kk = int(k[lane])
        out.append((lane, 0, 0, 0, kk))
        for i in range(-1, int(t[lane])):
            for j in range(i + 2):
                out.append((lane, 1, i, j, (kk + i + j + 1) % 9))
        out.append((lane, 2, 0, 0, (kk + 7) % 9))
    return out


def _nested_data(rng, n):
    k = rng.integers(0, 4, n).astype(np.int32)  # (slots 8 and a few others: from loops or after them only)
    k[rng.random(n) < 0.15] = -1
    return dict(x=rng.normal(size=n), k=k, t=rng.integers(-1, 4, n).astype(np.int32), a=0.7,
                h=rng.normal(size=9))


def test_only_the_last_store_into_a_slot_gets_its_cotangent():
    rng = np.random.default_rng(1)
    n = 23
    x, k = rng.normal(size=n), rng.integers(-1, 5, n).astype(np.int32)
    ct = rng.normal(size=5)
    prior = rng.normal(size=5)
    passed = prior.copy()
    g = eagle.deploy(ls_passes).reverse({"h": ct}, x=x, k=k, h=passed)
    np.testing.assert_array_equal(passed, prior)  # (the reverse writes no array of the caller's)
    won = {slot: (lane, j) for lane, j, slot in _passes_events(k)}
    want = np.zeros(n)
    for slot, (lane, j) in won.items():
        want[lane] += ct[slot] * (j + 1.0)
    np.testing.assert_array_equal(np.asarray(g["x"]), want)  # (one product per lane: exact)
    np.testing.assert_array_equal(np.asarray(g["h"]), [0.0 if s in won else ct[s] for s in range(5)])

    def f(x, prior):  # the forward's stores made one by one: the last one into a slot stays
        h = prior
        for lane, j, slot in _passes_events(k):
            h = h.at[slot].set(x[lane] * (j + 1.0))
        return jnp.sum(h * ct)

    jx, jp = jax.grad(f, argnums=(0, 1))(jnp.asarray(x), jnp.asarray(prior))
    np.testing.assert_allclose(np.asarray(g["x"]), jx, rtol=1e-15)
    np.testing.assert_array_equal(np.asarray(g["h"]), jp)


def test_a_later_pass_storing_a_neighbours_value_gets_its_cotangent():
    """A loop that stores by key is not unrolled for the gather form of a neighbour read's gradient (an unrolled
    copy loses the pass its store's number names): each slot's cotangent reaches the lane its winning pass read.
    Until 2026-12-07 a slot won by pass j = 1 gave nothing (the fuzzer's seed 68006, case 24)."""
    rng = np.random.default_rng(68_006)
    k = rng.integers(0, 7, (5, 6)).astype(np.int32)
    x, ct = rng.normal(size=(5, 6)), rng.normal(size=7)
    g = eagle.deploy(ls_neighbour).reverse({"h": ct}, x=x, k=k)
    won = {}
    for r in range(5):
        for c in range(6):
            for j in range(2):
                won[(int(k[r, c]) - 2 + j) % 7] = (r, min(c + 1, 5))
    want = np.zeros((5, 6))
    for slot, at in won.items():
        want[at] += ct[slot]
    np.testing.assert_allclose(np.asarray(g["x"]).reshape(5, 6), want, rtol=1e-15, atol=0.0)


@pytest.mark.parametrize("small", [False, True])
def test_nested_loops_with_lane_dependent_passes_and_stores_around_them(small):
    rng = np.random.default_rng(2)
    planes = _nested_data(rng, 40)
    if small:  # (slots 3 to 6: no store; a lane with no pass at all)
        planes.update(x=planes["x"][:5], k=np.array([0, -1, 1, 0, 1], np.int32),
                      t=np.array([-1, 2, 0, 1, -1], np.int32))
    x, k, t, a = planes["x"], planes["k"], planes["t"], planes["a"]
    ct = rng.normal(size=9)
    plan = eagle.deploy(ls_nested)
    out = np.asarray(plan.run(**{**planes, "h": planes["h"].copy()}))
    g = plan.reverse({"h": ct}, **{**planes, "h": planes["h"].copy()})

    def f(x, a, prior):
        h = jnp.asarray(prior)
        for lane, which, i, j, slot in _nested_events(k, t):
            v = (x[lane] * a, jnp.sin(x[lane] * (i + 2.0)) * a + j, x[lane] * x[lane])[which]
            h = h.at[slot].set(v)
        return h

    np.testing.assert_allclose(out, f(x, a, planes["h"]), rtol=1e-15)  # the forward's rule, as played out
    jx, ja, jp = jax.grad(lambda *v: jnp.sum(f(*v) * ct), argnums=(0, 1, 2))(jnp.asarray(x), a,
                                                                           jnp.asarray(planes["h"]))
    np.testing.assert_allclose(np.asarray(g["x"]), jx, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(np.asarray(g["a"])[0], ja, rtol=1e-13)
    np.testing.assert_array_equal(np.asarray(g["h"]), jp)
    if small:
        np.testing.assert_array_equal(np.flatnonzero(jp), [3, 4, 5, 6])  # (the kept slots' cotangent)
    for lane in (0, 3, 4):  # central differences through x
        step = 1e-6 * max(1.0, abs(x[lane]))
        hi, lo = x.copy(), x.copy()
        hi[lane] += step
        lo[lane] -= step
        fd = (np.sum(f(hi, a, planes["h"]) * ct) - np.sum(f(lo, a, planes["h"]) * ct)) / (2 * step)
        assert math.isclose(float(g["x"][lane]), float(fd), rel_tol=1e-6, abs_tol=1e-8)


def test_vector_payloads_stored_inside_a_loop():
    rng = np.random.default_rng(3)
    n = 17
    x, k = rng.normal(size=(2, n)), rng.integers(-1, 4, n).astype(np.int32)
    ct = rng.normal(size=(2, 4))
    g = eagle.deploy(ls_vector).reverse({"h": ct}, x=x, k=k)
    want = np.zeros((2, n))
    won = {}
    for lane in range(n):
        for j in range(3):
            if k[lane] >= 0:
                won[(k[lane] + j) % 2] = (lane, j)
    for slot, (lane, j) in won.items():
        want[:, lane] += ct[:, slot] * (j + 1.0)
    np.testing.assert_array_equal(np.asarray(g["x"]), want)


_CASES = {
    "passes": lambda rng, n: (ls_passes, {"h": rng.normal(size=5)},
                              dict(x=rng.normal(size=n), k=rng.integers(-1, 5, n).astype(np.int32))),
    "nested": lambda rng, n: (ls_nested, {"h": rng.normal(size=9)}, _nested_data(rng, n)),
}


@pytest.mark.parametrize("case", sorted(_CASES))
def test_same_bits_on_every_thread_count(case):
    kernel, ct, planes = _CASES[case](np.random.default_rng(12), 4000)
    bt_grads_split_bits(kernel, ct, planes, 256, case)


@pytest.mark.parametrize("case", sorted(_CASES))
def test_spirv_has_the_hosts_bits(case):
    kernel, ct, planes = _CASES[case](np.random.default_rng(13), 700)
    bt_grads_spirv_bits(kernel, ct, planes, case)


def test_jax_grad_through_the_bridge_is_plan_reverse():
    import eagle.jax

    rng = np.random.default_rng(4)
    planes = _nested_data(rng, 300)
    ct = rng.normal(size=9)
    want = eagle.deploy(ls_nested).reverse({"h": ct}, **{**planes, "h": planes["h"].copy()})
    f = eagle.jax.wrap(ls_nested)
    got = jax.grad(lambda x, a, h: jnp.sum(f(x=x, k=planes["k"], t=planes["t"], a=a, h=h) * ct),
                   argnums=(0, 1, 2))(planes["x"], planes["a"], planes["h"])
    bt_same_bits(dict(zip(("x", "a", "h"), (np.asarray(v) for v in got), strict=True)),
                 {"x": np.asarray(want["x"]), "a": np.asarray(want["a"])[0], "h": np.asarray(want["h"])})


def test_an_artifact_built_with_its_reverse(tmp_path):
    import hawk.artifact

    rng = np.random.default_rng(6)
    planes = _nested_data(rng, 500)
    ct = {"h": rng.normal(size=9)}
    hawk.artifact.build(ls_nested, tmp_path, reverse=True)
    want = eagle.deploy(ls_nested).reverse(ct, **{**planes, "h": planes["h"].copy()})
    got = hawk.load(tmp_path, "ls_nested", threads=2, min_chunk=64).reverse(ct, **{**planes, "h": planes["h"].copy()})
    bt_same_bits({k: np.asarray(v) for k, v in got.items()}, {k: np.asarray(v) for k, v in want.items()})


def test_adjoint_and_winners_build_for_nvvm_and_rocdl():
    from hawk.reverse import adjoint, winners

    adj, _ = adjoint(ls_nested, ("x", "a"), None)
    for kernel in (adj, winners(ls_nested, None)):
        assert bt_stages_assemble(kernel, kernel.spec_for("float64", {"k": "int32", "t": "int32"})) >= 1


@hawk.kernel
def ls_twice32(x: Scalar, k: Index, h: Mutable["slot":3]):
    hawk.scatter(h)[k] = x * 2.0


def test_float32_past_2_to_the_24_lanes_only_the_winner_gets_the_slot():
    """Lanes 2**24 and 2**24 + 1 store into one slot: their numbers round to one float32, so a store number kept
    as one float32 handed the cotangent to both."""
    n = 2**24 + 2
    k = np.full(n, -1, np.int32)
    k[-2:] = 0
    g = eagle.deploy(ls_twice32).reverse(np.ones(3, np.float32), x=np.ones(n, np.float32), k=k)
    gx = np.asarray(g["x"])
    assert gx.dtype == np.float32
    np.testing.assert_array_equal(np.flatnonzero(gx), [n - 1])
    assert gx[-1] == 2.0
