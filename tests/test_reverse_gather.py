"""A stencil's gradient in gather form (hawk/reverse/gather.py, docs/reverse.md "Performance"): a plane read with
`.at` at constant offsets only gets its gradient from a shares adjoint and a gather kernel instead of an ordered
scatter. The gradients must be the scatter's bit for bit (each slot the exact sum of its terms, rounded once), on
every thread count (runs that really split), on spirv as on the host, with the clamped edge lanes right on grids
thinner than the reads' reach, and through the fallback when a lane's pair cannot hold its sum exactly. Reads
inside `for` loops of constant pass counts (a causal filter, a 3 x 3 convolution) are gathered once the loops
are unrolled (hawk/reverse/unroll.py); longer loops and pass counts read from data keep the scatter."""

import math

import numpy as np
import pytest
from conftest import bt_same_bits

import eagle
import hawk
import hawk.math as m
from eagle.reverse import Reverse, plan_source
from hawk import Grid, Param, Scalar, Table, Vector

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
def vheat(g: Grid["r", "c":24], v: Vector[2], u: Scalar, k: Param) -> Scalar:  # a Vector plane's shares
    lap = v.at(r=g.r + 1) + v.at(r=g.r - 1) + v.at(c=g.c + 1) + v.at(c=g.c - 1) - 4.0 * v
    return (lap * lap).sum() * k + (v * lap).sum() * u.at(c=g.c + 2)


@hawk.kernel
def vline(g: Grid["i"], v: Vector[3], a: Param) -> Vector[3]:
    d = v.at(i=g.i + 1) - v.at(i=g.i - 1)
    return d * d * a + v * v.at(i=g.i + 2)


@hawk.kernel
def cheat(g: Grid["r", "c":7], u: Scalar, k: Param) -> Scalar:  # reads clamped as docs/semantics.md writes them
    a = u.at(r=m.clamp(g.r + 1, 0, g.extent("r") - 1), c=m.min(g.c + 1, 6))
    b = u.at(r=m.max(g.r - 1, 0), c=m.clamp(g.c - 2, 0, 6))
    return a * b * k + u.at(r=m.min(g.r + 2, g.extent("r") - 1)) * u


@hawk.kernel
def cvline(g: Grid["i"], v: Vector[2], a: Param) -> Vector[2]:
    return (v.at(i=m.max(g.i - 1, 0)) + v.at(i=m.clamp(g.i + 2, 0, g.extent("i") - 1))) * v * a


@hawk.kernel
def short_clamp(g: Grid["r", "c":7], u: Scalar) -> Scalar:  # bounds short of the edges: not the lane plus k
    return u.at(r=m.clamp(g.r + 1, 0, g.extent("r") - 2)) * u.at(c=m.min(g.c + 1, 5))


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
    if name == "vheat":
        shape = (max(1, lanes // 24), 24)
        return vheat, rng.normal(size=shape), {"v": rng.normal(size=(2, *shape)), "u": rng.normal(size=shape),
                                               "k": 0.7}
    if name == "vline":
        return vline, rng.normal(size=(3, lanes)), {"v": rng.normal(size=(3, lanes)), "a": 1.3}
    if name == "vonly":
        return vonly, rng.normal(size=(4, lanes)), {"v": rng.normal(size=(4, lanes))}
    if name == "cheat":
        shape = (max(1, lanes // 7), 7)
        return cheat, rng.normal(size=shape), {"u": rng.normal(size=shape), "k": 0.7}
    if name == "cvline":
        return cvline, rng.normal(size=(2, lanes)), {"v": rng.normal(size=(2, lanes)), "a": 1.3}
    shape = (max(1, lanes // 7), 7)
    return far, rng.normal(size=shape), {"u": rng.normal(size=shape), "w": rng.normal(size=shape)}


def _launches(name: str) -> int:
    """Kernels a gathered reverse runs: the shares adjoint, the gather, and the Param sums if it has a Param."""
    return 2 if name in ("far", "conv3", "vonly") else 3


def _gather(kernel, ct, planes, target="host", threads=None, min_chunk=None):
    plan = eagle.deploy(kernel, target=target, threads=threads, min_chunk=min_chunk)
    g = {k: np.asarray(v).copy() for k, v in plan.reverse(ct, **planes).items()}
    return g, plan


def _scatter(kernel, ct, planes, target="host", threads=None):
    """The same gradients through the ordered scatter adjoint (what the door runs where a lane's pair erred)."""
    plan = eagle.deploy(kernel, target=target, threads=threads)
    scatter = Reverse(plan, planes, None, plan_source(plan, gather=False))
    assert scatter.gather_run is None
    return {k: np.asarray(v).copy() for k, v in scatter(ct).items()}


@pytest.mark.parametrize("name,lanes", [("heat", 24), ("heat", 48), ("heat", 3000), ("line", 1), ("line", 2),
                                        ("line", 3), ("line", 3000), ("far", 7), ("far", 14), ("far", 28),
                                        ("far", 2100), ("vheat", 24), ("vheat", 72), ("vheat", 2400),
                                        ("vline", 1), ("vline", 3), ("vline", 2000), ("vonly", 3), ("vonly", 300),
                                        ("cheat", 7), ("cheat", 14), ("cheat", 2100), ("cvline", 1), ("cvline", 2),
                                        ("cvline", 2000)])
def test_same_bits_as_the_scatter_adjoint(name, lanes):
    # thin grids: one or two rows (or lanes) against reads reaching 1-3 lanes away, so that several sources
    # clamp onto one edge lane (which then receives every one of their terms)
    kernel, ct, planes = _case(name, lanes)
    got, plan = _gather(kernel, ct, planes, threads=1)
    assert len(plan.last_reverse_chunks) == _launches(name), plan.last_reverse_chunks
    want = _scatter(kernel, ct, planes, threads=1)
    assert sorted(got) == sorted(want)
    bt_same_bits(got, want, f"{name} {lanes}")


@pytest.mark.parametrize("name", ["heat", "line", "far", "vheat", "vline", "cheat", "cvline"])
def test_same_bits_on_every_thread_count(name):
    kernel, ct, planes = _case(name, 6000)
    want, plan = _gather(kernel, ct, planes, threads=1, min_chunk=SMALL)
    assert max(plan.last_reverse_chunks) == 1
    for threads in (2, 3, 4):
        got, plan = _gather(kernel, ct, planes, threads=threads, min_chunk=SMALL)
        assert len(plan.last_reverse_chunks) == _launches(name) and min(plan.last_reverse_chunks) > 1, \
            f"threads={threads}: chunks {plan.last_reverse_chunks}"  # every kernel really split
        bt_same_bits(got, want, f"{name} threads={threads}")


@pytest.mark.parametrize("name", ["heat", "line", "fir", "conv3", "vheat", "vline", "cheat"])
def test_same_bits_on_the_gpu_target_as_on_the_host(name, target):
    if target == "host":
        pytest.skip("the host is the reference")
    kernel, ct, planes = _case(name, 3000) if name in ("heat", "line", "vheat", "vline", "cheat") else \
        _loop_case(name, 2200)  # (unrolled)
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


@hawk.kernel
def vonly(g: Grid["i"], v: Vector[4]) -> Vector[4]:  # v read only with .at: no placeholder scatter into its sink
    return v.at(i=g.i + 4)


@hawk.kernel
def vlinear(g: Grid["i"], v: Vector[2], a: Param) -> Vector[2]:
    return (v.at(i=g.i - 1) + v.at(i=g.i + 1) + v) * a


def test_a_vector_component_the_pair_cannot_hold_takes_the_exact_path():
    """A Vector plane's gather keeps a (high, low) pair per component; one component's pair erring (lane 5's
    second component: 1e30 + 1 + 1e-30) sends the call to the scatter adjoint, as a Scalar's does."""
    planes = {"v": np.random.default_rng(3).normal(size=(2, 40)), "a": 1.0}
    rev = Reverse(eagle.deploy(vlinear, threads=2, min_chunk=8), planes)
    assert rev.gather_run is not None
    for calls, special in enumerate(([1e30, 1.0, 1e-30], None)):
        ct = np.random.default_rng(4).normal(size=(2, 40))
        if special is not None:
            ct[1, 4:7] = special
        got = {k: np.asarray(v).copy() for k, v in rev(ct).items()}
        assert rev.exact_calls == 1
        bt_same_bits(got, _scatter(vlinear, ct, planes, threads=1), f"call {calls}")
        if special is not None:
            assert got["v"][1, 5] == math.fsum(special) == 1e30


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
    assert gather_kernels(short_clamp, ("u",), (4, 7)) is None  # clamped short of the grid's edges
    assert gather_kernels(cheat, ("u", "k"), (4, 7)) is not None  # (clamped to them: the same reads as bare)
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


# ---- reads inside `for` loops: unrolled for the gather form (hawk/reverse/unroll.py) ---------------------------
@hawk.kernel
def fir(g: Grid["r", "t":40], x: Scalar, taps: Table["tap":4], a: Param) -> Scalar:
    acc = 0.0
    for j in range(4):  # each row a signal
        acc = acc + taps.at(tap=j) * x.at(t=g.t - j)
    return acc * acc * a + x


@hawk.kernel
def fir_1d(g: Grid["t"], x: Scalar, taps: Table["tap":4]) -> Scalar:
    acc = 0.0
    for j in range(4):  # a causal filter on a 1-D grid
        acc = acc + taps.at(tap=j) * x.at(t=g.t - j)
    return acc * acc


@hawk.kernel
def conv3(g: Grid["r", "c":11], u: Scalar, w: Table["i":3, "j":3]) -> Scalar:
    acc = u * 0.5
    for i in range(3):
        for j in range(3):
            acc = acc + w.at(i=i, j=j) * u.at(r=g.r + i - 1, c=g.c + j - 1)
    return acc * acc


@hawk.kernel
def fir_in_if(g: Grid["r", "t":30], x: Scalar, a: Param) -> Scalar:
    y = x * a
    if x > 0.0:
        acc = 0.0
        for j in range(1, 4, 2):
            acc = acc + x.at(t=g.t + j) * x.at(t=g.t - j)
        y = y + acc
    return y * y


@hawk.kernel
def own_reads(g: Grid["r", "t":30], x: Scalar, a: Param) -> Scalar:
    acc = 0.0
    for j in range(3):  # the lane's own x and a Param, loaded in every pass
        acc = acc + x.at(t=g.t + j) * x * a
    return acc


@hawk.kernel
def own_twice(g: Grid["r", "t":30], x: Scalar, a: Param) -> Scalar:
    y = 0.0
    for j in range(1, 4, 2):  # x loaded in the loop and after it: its adjoint gathers both (unroll.py keeps it)
        y = y + x.at(t=g.t + j) * x
    return y * y + x * a


@hawk.kernel
def outer_float(g: Grid["r", "t":30], x: Scalar, a: Param) -> Scalar:
    s = m.sin(x.at(t=g.t + 1)) * a
    acc = 0.0
    for j in range(2):  # s, a float defined before the loop, read in every pass
        acc = acc + x.at(t=g.t - j) * s
    return acc


@hawk.kernel
def long_loop(g: Grid["r", "t":50], x: Scalar) -> Scalar:
    acc = 0.0
    for j in range(40):  # more passes than hawk.reverse.unroll.MAX_PASSES: the scatter serves
        acc = acc + x.at(t=g.t - j)
    return acc * acc


@hawk.kernel
def data_loop(g: Grid["r", "t":30], x: Scalar, n: Param) -> Scalar:
    acc = 0.0
    for j in range(m.to_int(n)):  # a pass count read from data: not unrolled
        acc = acc + x.at(t=g.t - j) * x
    return acc


def _loop_case(name: str, lanes: int):
    rng = np.random.default_rng(lanes + 7)
    if name == "conv3":
        shape = (max(1, lanes // 11), 11)
        return conv3, rng.normal(size=shape), {"u": rng.normal(size=shape), "w": rng.normal(size=(3, 3))}
    kernel = {"fir": fir, "fir_in_if": fir_in_if, "long_loop": long_loop, "data_loop": data_loop,
              "own_reads": own_reads, "own_twice": own_twice, "outer_float": outer_float, "fir_1d": fir_1d}[name]
    cols = {"fir": 40, "fir_in_if": 30, "own_reads": 30, "own_twice": 30, "outer_float": 30, "long_loop": 50,
            "data_loop": 30}.get(name)
    planes = {"x": rng.normal(size=(max(1, lanes // cols), cols) if cols else lanes)}
    if name in ("fir", "fir_1d"):
        planes["taps"] = rng.normal(size=4)
    if name == "fir":
        planes["a"] = 0.3
    if name in ("fir_in_if", "own_reads", "own_twice", "outer_float"):
        planes["a"] = 0.6
    if name == "data_loop":
        planes["n"] = 3.0
    return kernel, rng.normal(size=np.shape(next(iter(planes.values())))), planes


@pytest.mark.parametrize("name,lanes", [("fir", 40), ("fir", 3000), ("conv3", 11), ("conv3", 2200),
                                        ("fir_in_if", 30), ("fir_in_if", 3000), ("own_reads", 3000),
                                        ("fir_1d", 3), ("fir_1d", 3000)])
def test_reads_in_loops_of_constant_passes_are_gathered_with_the_scatter_s_bits(name, lanes):
    kernel, ct, planes = _loop_case(name, lanes)
    want = _scatter(kernel, ct, planes, threads=1)
    for threads in (1, 3):
        rev = Reverse(eagle.deploy(kernel, threads=threads, min_chunk=SMALL), planes)
        got = {k: np.asarray(v).copy() for k, v in rev(ct).items()}
        assert rev.gather_run is not None and rev.exact_calls == 0, name
        if threads > 1 and lanes >= 2000:  # every kernel of the gradient really split
            assert min(rev.plan.last_reverse_chunks) > 1, (name, rev.plan.last_reverse_chunks)
        bt_same_bits(got, want, f"{name} {lanes} threads={threads}")


def test_loops_it_cannot_unroll_keep_the_scatter():
    for name in ("long_loop", "data_loop", "own_twice", "outer_float"):
        kernel, ct, planes = _loop_case(name, 300)
        rev = Reverse(eagle.deploy(kernel), planes)
        assert rev.gather_run is None, name
        got = rev(ct)
        x = planes["x"]
        if name == "long_loop":  # per row: d/dx_i of sum_t ct_t acc_t^2, acc_t = sum_j x[clamp(t - j)]
            src = np.maximum(np.arange(50)[:, None] - np.arange(40)[None, :], 0)  # (t, j) -> the lane read
            acc = x[:, src].sum(axis=2)
            want = np.zeros_like(x)
            for j in range(40):
                for r in range(x.shape[0]):
                    np.add.at(want[r], src[:, j], 2.0 * ct[r] * acc[r])
            np.testing.assert_allclose(np.asarray(got["x"]), want, rtol=1e-12, atol=1e-12)


@hawk.kernel
def no_pass(g: Grid["i"], x: Scalar, out: Table["slot":3]) -> Scalar:  # noqa: F821
    t = 0.0
    for j in range(1, 1, -1):  # no pass: once unrolled, x's only .at read is gone
        t += x.at(i=g.i - j)
    return t * out.at(slot=1) + m.round(x)  # (round: a zero derivative, so no share of x is ever stored)


def test_a_plane_whose_reads_all_unroll_away_keeps_the_scatter():
    """Fuzz case 64003:18: a loop of no passes held x's only `.at` read, so the gather form had no share plane,
    and its gather kernel, with no per-lane plane, could not tell its lane count ("cannot tell how many lanes to
    run"). No share plane: no gather form; the scatter adjoint gives x's zero gradient."""
    x = np.random.default_rng(3).normal(size=50)
    planes = {"x": x, "out": np.array([0.5, 2.0, -1.0])}
    ct = np.random.default_rng(4).normal(size=50)
    rev = Reverse(eagle.deploy(no_pass), planes)
    assert rev.gather_run is None
    got = rev(ct)
    assert np.asarray(got["x"]).tobytes() == np.zeros(50).tobytes()
    assert np.asarray(got["out"]).tobytes() == np.zeros(3).tobytes()  # (t is 0: no term of out)


@hawk.kernel
def vector_unrolled_away(g: Grid["i"], v: Vector[2], x: Scalar) -> Scalar:
    t = x.at(i=g.i + 1) * x
    for j in range(2, 2):  # no pass: v's only .at read is gone once unrolled, x keeps its sites
        t += v.at(i=g.i - j).sum()
    return t


def test_a_vector_plane_whose_reads_unroll_away_gets_a_vector_of_zeros():
    """A gathered Vector plane left with no read site still gets its gradient shaped like the plane (its
    components read off the design, not off the shares it stored)."""
    rng = np.random.default_rng(6)
    planes = {"v": rng.normal(size=(2, 30)), "x": rng.normal(size=30)}
    ct = rng.normal(size=30)
    got, plan = _gather(vector_unrolled_away, ct, planes)
    assert len(plan.last_reverse_chunks) == 2  # the shares adjoint and the gather: v and x gathered
    assert got["v"].shape == (2, 30) and not got["v"].any()
    bt_same_bits(got, _scatter(vector_unrolled_away, ct, planes), "v unrolled away")


def test_a_causal_filter_s_gathered_gradient_matches_jax():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    jax.config.update("jax_enable_x64", True)
    kernel, ct, planes = _loop_case("fir", 200)
    got = eagle.deploy(kernel).reverse(ct, **planes)

    def loss(x, taps, a):  # each row clamped at its first sample
        acc = sum(taps[j] * jnp.concatenate([jnp.repeat(x[:, :1], j, axis=1), x[:, :40 - j]], axis=1)
                  for j in range(4))
        return jnp.sum(ct * (acc * acc * a + x))

    want = jax.grad(loss, argnums=(0, 1, 2))(planes["x"], planes["taps"], planes["a"])
    for name, w in zip(("x", "taps", "a"), want, strict=True):
        np.testing.assert_allclose(np.asarray(got[name]).reshape(np.shape(w)), w, rtol=1e-12, atol=1e-13,
                                   err_msg=name)
