"""The reverse of a launch bound to a lane range, `plan.bind(base=, count=, ...).reverse(ct)` (eagle/reverse_range.py;
refused until stop 61): the gradients of what the range computed (its lanes' outputs, totals over its lanes only,
a sink's adds from its lanes), checked against central differences of the bound launch itself, against
plan.reverse of the planes' slices bit for bit, zero outside the range, for per-lane Scalar, Vector and Index
planes, a Param, a Table, a cell, a sink and an output read before it is assigned, and on the GPU targets that run
here (spirv); kernels whose lanes read other lanes or their position are refused by name, and nothing is
launched."""

import math

import numpy as np
import pytest
from conftest import bt_same_bits

import eagle
import hawk
import hawk.math as m
from hawk import Grid, Index, Mutable, Param, Scalar, Table, Vector

RNG = np.random.default_rng(611)
N, LO, COUNT = 23, 6, 11


@hawk.kernel
def rr_mix(x: Scalar, v: Vector[2], k: Index, a: Param, t: Table["r":3], h: Mutable["bin":4],
           y: Mutable[Scalar], total: Mutable[Scalar]):
    y = m.sin(x) * v[0] + a * t.at(r=k % 3) * x
    hawk.scatter(h)[k % 4] += x * v[1] * a
    total = hawk.sum(x * x * v[1], policy="ordered")


@hawk.kernel
def rr_update(x: Scalar, s: Param, y: Mutable[Scalar]):
    y = y * s + m.exp(x)  # reads y before assigning it: its initial contents get a gradient


@hawk.kernel
def rr_grid_update(g: Grid["i"], x: Scalar, y: Mutable[Scalar]):
    y = y * x.at(i=g.i + 1) + m.to_float(g.i)


@hawk.kernel
def rr_neighbour(x: Scalar) -> Scalar:
    return x.at(2) * x


@hawk.kernel
def rr_grid(g: Grid["i"], x: Scalar) -> Scalar:
    return x * m.to_float(g.i)


def _planes():
    return {"x": RNG.normal(size=N), "v": RNG.normal(size=(2, N)), "k": RNG.integers(0, 9, size=N).astype(np.int32),
            "a": 0.8, "t": RNG.normal(size=3), "h": RNG.normal(size=4)}


def _weighted(plan, ct: dict, planes: dict, lo: int = LO, count: int = COUNT) -> float:
    """sum(ct x output) over the outputs of the launch bound to lanes [lo, lo + count) (added exactly)."""
    planes = {n: (v.copy() if isinstance(v, np.ndarray) else v) for n, v in planes.items()}
    out = plan.bind(base=lo, count=count, **planes).launch()
    out = out if isinstance(out, dict) else {next(iter(ct)): out}
    return math.fsum(float(v) for n, c in ct.items()
                     for v in (np.asarray(c, dtype=np.float64) * np.asarray(out[n])).reshape(-1))


def _against_differences(plan, ct: dict, planes: dict, g: dict, wrt, lo: int = LO, count: int = COUNT) -> None:
    """Each gradient of `wrt` along one random direction against central differences of the bound launch."""
    for n in wrt:
        base = np.asarray(planes[n], dtype=np.float64)
        d, h = RNG.normal(size=base.shape), 1e-6
        fd = (_weighted(plan, ct, {**planes, n: base + h * d}, lo, count) -
              _weighted(plan, ct, {**planes, n: base - h * d}, lo, count)) / (2 * h)
        want = math.fsum((g[n].reshape(-1) * d.reshape(-1)).tolist())
        assert abs(fd - want) <= 1e-6 * max(1.0, abs(want)), (plan.kernel.name, n, fd, want)


def test_a_range_s_gradients_are_its_own():
    plan, planes = eagle.deploy(rr_mix), _planes()
    ct = {"y": RNG.normal(size=N), "total": 1.7, "h": RNG.normal(size=4)}
    g = {n: np.asarray(v).copy() for n, v in plan.bind(base=LO, count=COUNT, **planes).reverse(ct).items()}
    assert sorted(g) == ["a", "h", "t", "v", "x"]
    for n in ("x", "v"):  # no lane outside the range ran: nothing flows there
        assert g[n].shape == np.shape(planes[n])
        assert not np.any(g[n][..., :LO]) and not np.any(g[n][..., LO + COUNT:]), n
        assert np.all(g[n][..., LO:LO + COUNT] != 0.0), n
    _against_differences(plan, ct, planes, g, ("x", "v", "a", "t", "h"))  # one random direction per input
    # the bits of plan.reverse over the slices
    cut = {n: (v[..., LO:LO + COUNT] if n in ("x", "v", "k") else v) for n, v in planes.items()}
    want = plan.reverse({**ct, "y": ct["y"][LO:LO + COUNT]}, **cut)
    for n in ("a", "t", "h"):
        bt_same_bits(g[n], np.asarray(want[n]), n)
    for n in ("x", "v"):
        bt_same_bits(g[n][..., LO:LO + COUNT], np.asarray(want[n]), n)


def test_an_output_read_before_it_is_assigned():
    x, y0 = RNG.normal(size=N), RNG.normal(size=N)
    y = y0.copy()
    bound = eagle.deploy(rr_update).bind(base=LO, count=COUNT, x=x, s=1.3, y=y)
    bound.launch()
    ct = RNG.normal(size=N)
    g = bound.reverse({"y": ct})
    want_y = ct.copy()  # outside the range y passes through the launch: its own cotangent (until stop 63: zero)
    want_y[LO:LO + COUNT] = ct[LO:LO + COUNT] * 1.3
    np.testing.assert_allclose(np.asarray(g["y"]), want_y, rtol=1e-15)
    _span_check(rr_update, {"x": x, "s": 1.3, "y": y0}, {"y": ct}, LO, COUNT, ("x", "s", "y"))
    _span_check(rr_grid_update, {"x": x, "y": y0}, {"y": ct}, LO, COUNT, ("x", "y"))  # (the adjoint's span)
    np.testing.assert_allclose(np.asarray(g["x"])[LO:LO + COUNT], ct[LO:LO + COUNT] * np.exp(x[LO:LO + COUNT]),
                               rtol=1e-15)
    assert float(np.asarray(g["s"]).reshape(())) == pytest.approx(float(np.sum((ct * y0)[LO:LO + COUNT])), rel=1e-14)


def _span_check(kernel, planes: dict, ct, lo: int, count: int, wrt: tuple[str, ...]) -> dict:
    """The range's gradients (the adjoint run over the range's lanes) against central differences of the bound
    launch itself, one random direction per input; returns them."""
    plan = eagle.deploy(kernel, threads=2, min_chunk=2)
    bound = plan.bind(base=lo, count=count, **{n: (v.copy() if isinstance(v, np.ndarray) else v)
                                               for n, v in planes.items()})
    g = {n: np.asarray(v).copy() for n, v in bound.reverse(ct).items()}
    _against_differences(plan, ct if isinstance(ct, dict) else {"result": ct}, planes, g, wrt, lo, count)
    return g


@hawk.kernel
def rr_stencil(g: Grid["r", "c":5], u: Scalar, k: Param) -> Scalar:
    lap = u.at(r=g.r + 1) + u.at(r=g.r - 1) + u.at(c=g.c + 1) + u.at(c=g.c - 1) - 4.0 * u
    return m.sin(lap * k)


@hawk.kernel
def rr_place(x: Scalar, key: Index, out: Mutable[Scalar]):
    hawk.scatter(out)[key] = x * x


@hawk.kernel
def rr_row_softmax(g: Grid["r", "c":4], x: Scalar) -> Scalar:
    e = m.exp(x)
    return e / hawk.sum(e, over="c")  # a block reduction: read in the same launch


def test_lanes_that_read_other_lanes_run_the_adjoint_over_the_range():
    """Kernels whose lanes read other lanes or their coordinates (no run over slices stands in): the adjoint's
    lanes run over the range, and lanes outside it get exactly what the range's reads sent them."""
    x = np.linspace(0.5, 1.4, 10)
    g = _span_check(rr_neighbour, {"x": x}, np.ones(10), 2, 5, ("x",))["x"]  # y = x[2] * x, lanes 2..6
    want = np.zeros(10)
    want[2:7] = x[2]
    want[2] += x[2:7].sum()
    np.testing.assert_allclose(g, want, rtol=1e-15)
    ct = RNG.normal(size=10)
    g = _span_check(rr_grid, {"x": x}, ct, 3, 4, ("x",))["x"]
    np.testing.assert_array_equal(g, np.where((np.arange(10) >= 3) & (np.arange(10) < 7), ct * np.arange(10), 0.0))
    soft = RNG.normal(size=(5, 4))
    _span_check(rr_row_softmax, {"x": soft}, RNG.normal(size=(5, 4)), 6, 9, ("x",))  # (cut rows: its own lanes)


def test_a_stencil_range_gathers_with_the_bits_of_a_cotangent_zero_outside():
    """A stencil's range runs the gather form (the shares over the range, the gather over every lane): the
    gradients are plan.reverse's for the cotangent set to zero outside the range, bit for bit where not zero."""
    u, ct = RNG.normal(size=(4, 5)), RNG.normal(size=(4, 5))
    g = _span_check(rr_stencil, {"u": u, "k": 0.7}, ct, 3, 9, ("u", "k"))
    plan = eagle.deploy(rr_stencil, threads=3, min_chunk=2)
    bound = plan.bind(base=3, count=9, u=u, k=0.7)
    bound.reverse(ct)
    rev = bound._reverse[None]
    assert rev.gather_run is not None and rev.exact_calls == 0 and len(plan.last_reverse_chunks) == 3
    masked = np.where((np.arange(20) >= 3) & (np.arange(20) < 12), ct.reshape(-1), 0.0).reshape(4, 5)
    want = plan.reverse(masked, u=u, k=0.7)
    np.testing.assert_array_equal(g["u"], np.asarray(want["u"]))  # (a lane no read reaches: +0.0 against -0.0)
    live = g["u"] != 0.0
    bt_same_bits(g["u"][live], np.asarray(want["u"])[live], "u")
    bt_same_bits(g["k"], np.asarray(want["k"]), "k")
    flat = g["u"].reshape(-1)  # lanes 3..11 read one row up and down: lanes 0..16 get shares, 17.. none
    assert np.all(flat[:17] != 0.0) and not np.any(flat[17:])


def test_an_output_written_by_key_from_a_range():
    x = RNG.normal(size=10)
    key = np.array([3, 1, 4, 0, 5, 9, 2, 6, 8, 7], dtype=np.int32)
    out0, ct = RNG.normal(size=10), RNG.normal(size=10)
    g = _span_check(rr_place, {"x": x, "key": key, "out": out0}, {"out": ct}, 2, 5, ("x", "out"))
    stored = key[2:7]
    np.testing.assert_allclose(g["x"], np.where((np.arange(10) >= 2) & (np.arange(10) < 7), 2 * x * ct[key], 0.0),
                               rtol=1e-15)
    np.testing.assert_array_equal(g["out"], np.where(np.isin(np.arange(10), stored), 0.0, ct))


@hawk.kernel
def rr_grid_max(g: Grid["i"], x: Scalar, top: Mutable[Scalar]):
    top = hawk.max(x.at(i=g.i + 1) * x)


@hawk.kernel
def rr_rows(g: Grid["r", "c":5], x: Scalar, s: Mutable[Scalar]):
    s = hawk.sum(x * x, over="c")


@pytest.mark.parametrize("kernel, words", [(rr_grid_max, "its adjoint runs in 3 stages"),
                                           (rr_rows, "cell 's' keeps a lane axis")])
def test_what_no_range_can_run_is_refused(kernel, words):
    plan = eagle.deploy(kernel)
    x = np.linspace(0.5, 1.4, 10).reshape((2, 5) if kernel is rr_rows else (10,))
    bound = plan.bind(base=2, count=5, x=x)
    bound.launch()
    ct = {n: np.ones(np.shape(v)) for n, v in plan.run(x=x).items()} if isinstance(plan.run(x=x), dict) else \
        {next(iter(kernel.outputs)): np.ones(np.shape(plan.run(x=x)))}
    with pytest.raises(eagle.InputError) as info:
        bound.reverse(ct)
    np.testing.assert_array_equal(x.reshape(-1), np.linspace(0.5, 1.4, 10))  # the caller's arrays as they were
    text = str(info.value)
    assert f"kernel '{kernel.name}'" in text and "lanes [2, 7) of 10" in text and words in text, text
    assert getattr(plan, "last_reverse_chunks", ()) == ()  # nothing was launched


def test_a_range_on_a_gpu_target(target):
    if target == "host":
        pytest.skip("the host is the reference")
    planes = _planes()
    ct = {"y": RNG.normal(size=N), "total": 0.9, "h": RNG.normal(size=4)}
    want = eagle.deploy(rr_mix).bind(base=LO, count=COUNT, **planes).reverse(ct)
    got = eagle.deploy(rr_mix, target=target).bind(base=LO, count=COUNT, **planes).reverse(ct)
    assert sorted(got) == sorted(want)
    for n in want:  # (m.sin: the target's math library may differ from the host's in the last bit)
        np.testing.assert_allclose(np.asarray(got[n]), np.asarray(want[n]), rtol=1e-13, atol=1e-15, err_msg=n)
    assert not np.any(np.asarray(got["x"])[:LO]) and not np.any(np.asarray(got["x"])[LO + COUNT:])
    u, ct = RNG.normal(size=(4, 5)), RNG.normal(size=(4, 5))  # a stencil's range: the span, its gather form
    want = eagle.deploy(rr_stencil).bind(base=3, count=9, u=u, k=0.7).reverse(ct)
    got = eagle.deploy(rr_stencil, target=target).bind(base=3, count=9, u=u, k=0.7).reverse(ct)
    for n in want:
        np.testing.assert_allclose(np.asarray(got[n]), np.asarray(want[n]), rtol=1e-13, atol=1e-15, err_msg=n)
