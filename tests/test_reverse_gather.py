"""A stencil's gradient in gather form (hawk/reverse/gather.py, docs/reverse.md "Performance"): a plane read with
`.at` at constant offsets only gets its gradient from a shares adjoint and a gather kernel instead of an ordered
scatter. The gradients must be the scatter's bit for bit (each slot the exact sum of its terms, rounded once), on
every thread count (runs that really split), on spirv as on the host, with the clamped edge lanes right on grids
thinner than the reads' reach, and through the fallback when a lane's pair cannot hold its sum exactly."""

import math

import numpy as np
import pytest
from conftest import bt_same_bits

import eagle
import hawk
import hawk.math as m
from eagle.reverse import Reverse, plan_source
from hawk import Grid, Param, Scalar

SMALL = 64  # min_chunk: a few thousand lanes take several chunks


@hawk.kernel
def heat(g: Grid["r", "c":24], u: Scalar, k: Param) -> Scalar:
    lap = u.at(r=g.r + 1) + u.at(r=g.r - 1) + u.at(c=g.c + 1) + u.at(c=g.c - 1) - 4.0 * u
    return lap * lap * k + u * lap  # no libm: its functions differ by target


@hawk.kernel
def line(g: Grid["i"], x: Scalar, a: Param) -> Scalar:
    d = x.at(i=g.i + 1) - x.at(i=g.i - 1)
    return d * d * a + x * x.at(i=g.i + 2)


@hawk.kernel
def far(g: Grid["row", "col":7], u: Scalar, w: Scalar) -> Scalar:
    return u.at(col=g.col - 2) * w + m.sin(u.at(col=g.col + 3)) + u.at(row=g.row + 1) * u + \
        u.at(row=g.row - 3, col=g.col + 1) * 0.5


@hawk.kernel
def linear(g: Grid["i"], x: Scalar, a: Param) -> Scalar:
    return (x.at(i=g.i - 1) + x.at(i=g.i + 1) + x) * a


@hawk.kernel
def flat_read(g: Grid["r", "c":5], u: Scalar, k: Param) -> Scalar:
    return u.at(r=g.r + 1) * k + u.at(0) * 0.5  # a flat index: the scatter adjoint serves this plane


@hawk.kernel
def named_like_shares(g: Grid["r", "c":4], u: Scalar, share0_grad_u: Scalar, share_grad_k: Param,
                      gather_flag: Scalar, k: Param) -> Scalar:
    return (u.at(r=g.r + 1) * share0_grad_u + u * gather_flag) * k * share_grad_k


def _case(name: str, lanes: int):
    rng = np.random.default_rng(lanes)
    if name == "heat":
        shape = (max(1, lanes // 24), 24)
        return heat, rng.normal(size=shape), {"u": rng.normal(size=shape), "k": 0.7}
    if name == "line":
        return line, rng.normal(size=lanes), {"x": rng.normal(size=lanes), "a": 1.3}
    shape = (max(1, lanes // 7), 7)
    return far, rng.normal(size=shape), {"u": rng.normal(size=shape), "w": rng.normal(size=shape)}


def _launches(name: str) -> int:
    """Kernels a gathered reverse runs: the shares adjoint, the gather, and the Param sums if it has a Param."""
    return 2 if name == "far" else 3


def _gather(kernel, ct, planes, target="host", threads=None, min_chunk=None):
    plan = eagle.deploy(kernel, target=target, threads=threads, min_chunk=min_chunk)
    g = {k: np.asarray(v).copy() for k, v in plan.reverse(ct, **planes).items()}
    return g, plan


def _scatter(kernel, ct, planes, target="host", threads=None):
    """The same gradients through the ordered scatter adjoint (what the door runs where a lane's pair erred)."""
    plan = eagle.deploy(kernel, target=target, threads=threads)
    return {k: np.asarray(v).copy() for k, v in Reverse(plan, planes, None, plan_source(plan))(ct).items()}


@pytest.mark.parametrize("name,lanes", [("heat", 24), ("heat", 48), ("heat", 3000), ("line", 1), ("line", 2),
                                        ("line", 3), ("line", 3000), ("far", 7), ("far", 14), ("far", 28),
                                        ("far", 2100)])
def test_same_bits_as_the_scatter_adjoint(name, lanes):
    # thin grids: one or two rows (or lanes) against reads reaching 1-3 lanes away, so that several sources
    # clamp onto one edge lane (which then receives every one of their terms)
    kernel, ct, planes = _case(name, lanes)
    got, plan = _gather(kernel, ct, planes, threads=1)
    assert len(plan.last_reverse_chunks) == _launches(name), plan.last_reverse_chunks
    want = _scatter(kernel, ct, planes, threads=1)
    assert sorted(got) == sorted(want)
    bt_same_bits(got, want, f"{name} {lanes}")


@pytest.mark.parametrize("name", ["heat", "line", "far"])
def test_same_bits_on_every_thread_count(name):
    kernel, ct, planes = _case(name, 6000)
    want, plan = _gather(kernel, ct, planes, threads=1, min_chunk=SMALL)
    assert max(plan.last_reverse_chunks) == 1
    for threads in (2, 3, 4):
        got, plan = _gather(kernel, ct, planes, threads=threads, min_chunk=SMALL)
        assert len(plan.last_reverse_chunks) == _launches(name) and min(plan.last_reverse_chunks) > 1, \
            f"threads={threads}: chunks {plan.last_reverse_chunks}"  # every kernel really split
        bt_same_bits(got, want, f"{name} threads={threads}")


@pytest.mark.parametrize("name", ["heat", "line"])
def test_same_bits_on_the_gpu_target_as_on_the_host(name, target):
    if target == "host":
        pytest.skip("the host is the reference")
    kernel, ct, planes = _case(name, 3000)
    want, _ = _gather(kernel, ct, planes)
    got, plan = _gather(kernel, ct, planes, target=target)
    assert len(plan.last_reverse_chunks) == _launches(name)
    bt_same_bits(got, want, f"{name} on {target}")


def _weighted(plan, ct, planes) -> float:
    return math.fsum((np.asarray(ct) * np.asarray(plan.run(**planes))).reshape(-1).tolist())


def test_matches_jax_and_central_differences():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    jax.config.update("jax_enable_x64", True)
    kernel, ct, planes = _case("far", 70)
    g, plan = _gather(kernel, ct, planes)
    rows, cols = ct.shape

    def near(u, dr, dc):  # u at the clamped coordinates (r + dr, c + dc)
        r = np.clip(np.arange(rows) + dr, 0, rows - 1)[:, None]
        c = np.clip(np.arange(cols) + dc, 0, cols - 1)[None, :]
        return u[r, c]

    def f(u, w):
        y = near(u, 0, -2) * w + jnp.sin(near(u, 0, 3)) + near(u, 1, 0) * u + near(u, -3, 1) * 0.5
        return jnp.sum(ct * y)

    ju, jw = jax.grad(f, argnums=(0, 1))(planes["u"], planes["w"])
    np.testing.assert_allclose(g["u"], ju, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(g["w"], jw, rtol=1e-12, atol=1e-13)
    kernel, ct, planes = _case("line", 50)
    g, plan = _gather(kernel, ct, planes)
    rng = np.random.default_rng(5)
    for name in ("x", "a"):
        x = np.asarray(planes[name], dtype=np.float64)
        d = rng.normal(size=x.shape)
        h = 1e-5
        fd = (_weighted(plan, ct, {**planes, name: x + h * d}) -
              _weighted(plan, ct, {**planes, name: x - h * d})) / (2 * h)
        want = math.fsum((g[name].reshape(-1) * np.reshape(d, -1)).tolist())
        assert abs(fd - want) <= 1e-6 * max(1.0, abs(want)), f"{name}: finite differences {fd} vs {want}"


def test_a_sum_the_pair_cannot_hold_takes_the_exact_path():
    # lane 5 of `linear` gets ct[4] + ct[5] + ct[6] (a = 1): 1e30 + 1 + 1e-30 spans more than two doubles, so
    # its pair errs and the door reruns the scatter adjoint (exact accumulators); a non-finite term does the same
    planes = {"x": np.random.default_rng(3).normal(size=40), "a": 1.0}
    rev = Reverse(eagle.deploy(linear, threads=2, min_chunk=8), planes)  # the door's own (bound) reverse
    for calls, special in enumerate(([1e30, 1.0, 1e-30], [np.inf, 1.0, 2.0], [np.nan, 0.0, 1.0], None)):
        ct = np.random.default_rng(4).normal(size=40)
        if special is not None:  # (then ordinary cotangents: gathered again after the fallbacks)
            ct[4:7] = special
        got = {k: np.asarray(v).copy() for k, v in rev(ct).items()}
        assert rev.exact_calls == min(calls + 1, 3)
        want = _scatter(linear, ct, planes, threads=1)
        for name in ("x", "a"):
            np.testing.assert_array_equal(got[name], want[name])
        if special is not None and np.isfinite(special).all():
            assert got["x"][5] == math.fsum(special) and got["x"][5] == 1e30


def test_bound_reverse_reuses_the_gather():
    kernel, ct, planes = _case("heat", 480)
    plan = eagle.deploy(kernel)
    bound = plan.bind(**planes)
    for scale in (1.0, -2.5, 0.0):
        got = {k: np.asarray(v).copy() for k, v in bound.reverse(ct * scale).items()}
        bt_same_bits(got, _scatter(kernel, ct * scale, planes), f"scale {scale}")
        assert len(plan.last_reverse_chunks) == _launches("heat")


def test_reads_it_cannot_gather_keep_the_scatter():
    from hawk.reverse.gather import gather_kernels

    assert gather_kernels(flat_read, ("u", "k"), (4, 5)) is None
    assert gather_kernels(heat, ("k",), (4, 24)) is None  # no plane read with .at differentiated
    u, ct = np.random.default_rng(1).normal(size=(4, 5)), np.random.default_rng(2).normal(size=(4, 5))
    got, plan = _gather(flat_read, ct, {"u": u, "k": 0.5})
    assert len(plan.last_reverse_chunks) == 1
    want = np.zeros_like(u)
    want[1:] += ct[:-1] * 0.5  # u.at(r + 1), clamped at the last row
    want[-1] += ct[-1] * 0.5
    want[0, 0] += 0.5 * ct.sum()
    np.testing.assert_allclose(got["u"], want, rtol=1e-14, atol=1e-14)


def test_planes_named_like_the_gather_planes():
    rng = np.random.default_rng(8)
    planes = {"u": rng.normal(size=(6, 4)), "share0_grad_u": rng.normal(size=(6, 4)), "share_grad_k": 0.5,
              "gather_flag": rng.normal(size=(6, 4)), "k": 1.5}
    ct = rng.normal(size=(6, 4))
    got, plan = _gather(named_like_shares, ct, planes)
    assert len(plan.last_reverse_chunks) == 3  # shares, gather, Param sums
    assert sorted(got) == sorted(planes)
    bt_same_bits(got, _scatter(named_like_shares, ct, planes), "named like shares")
