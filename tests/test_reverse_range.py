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
def rr_neighbour(x: Scalar) -> Scalar:
    return x.at(2) * x


@hawk.kernel
def rr_grid(g: Grid["i"], x: Scalar) -> Scalar:
    return x * m.to_float(g.i)


def _planes():
    return {"x": RNG.normal(size=N), "v": RNG.normal(size=(2, N)), "k": RNG.integers(0, 9, size=N).astype(np.int32),
            "a": 0.8, "t": RNG.normal(size=3), "h": RNG.normal(size=4)}


def _weighted(plan, ct: dict, planes: dict) -> float:
    """sum(ct x output) over the range launch's outputs (added exactly)."""
    planes = {n: (v.copy() if isinstance(v, np.ndarray) else v) for n, v in planes.items()}
    out = plan.bind(base=LO, count=COUNT, **planes).launch()
    out = out if isinstance(out, dict) else {"result": out}
    return math.fsum(float(v) for n, c in ct.items()
                     for v in (np.asarray(c, dtype=np.float64) * np.asarray(out[n])).reshape(-1))


def test_a_range_s_gradients_are_its_own():
    plan, planes = eagle.deploy(rr_mix), _planes()
    ct = {"y": RNG.normal(size=N), "total": 1.7, "h": RNG.normal(size=4)}
    g = {n: np.asarray(v).copy() for n, v in plan.bind(base=LO, count=COUNT, **planes).reverse(ct).items()}
    assert sorted(g) == ["a", "h", "t", "v", "x"]
    for n in ("x", "v"):  # no lane outside the range ran: nothing flows there
        assert g[n].shape == np.shape(planes[n])
        assert not np.any(g[n][..., :LO]) and not np.any(g[n][..., LO + COUNT:]), n
        assert np.all(g[n][..., LO:LO + COUNT] != 0.0), n
    # central differences of the range launch, one random direction per input
    for n in ("x", "v", "a", "t", "h"):
        base = np.asarray(planes[n], dtype=np.float64)
        d = RNG.normal(size=base.shape)
        h = 1e-6
        fd = (_weighted(plan, ct, {**planes, n: base + h * d}) - _weighted(plan, ct, {**planes, n: base - h * d})) / (
            2 * h)
        want = math.fsum((g[n].reshape(-1) * d.reshape(-1)).tolist())
        assert abs(fd - want) <= 1e-6 * max(1.0, abs(want)), (n, fd, want)
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
    want_y = np.zeros(N)
    want_y[LO:LO + COUNT] = ct[LO:LO + COUNT] * 1.3
    np.testing.assert_allclose(np.asarray(g["y"]), want_y, rtol=1e-15)
    np.testing.assert_allclose(np.asarray(g["x"])[LO:LO + COUNT], ct[LO:LO + COUNT] * np.exp(x[LO:LO + COUNT]),
                               rtol=1e-15)
    assert float(np.asarray(g["s"]).reshape(())) == pytest.approx(float(np.sum((ct * y0)[LO:LO + COUNT])), rel=1e-14)


@pytest.mark.parametrize("kernel, words", [(rr_neighbour, "plane 'x' is read at other lanes"),
                                           (rr_grid, "a Grid kernel's lanes have coordinates")])
def test_kernels_whose_lanes_see_other_lanes_are_refused(kernel, words):
    plan = eagle.deploy(kernel)
    x = np.linspace(0.5, 1.4, 10)
    bound = plan.bind(base=2, count=5, x=x)
    bound.launch()
    ct = np.ones(10)
    with pytest.raises(eagle.InputError) as info:
        bound.reverse(ct)
    np.testing.assert_array_equal(x, np.linspace(0.5, 1.4, 10))  # the caller's arrays as they were
    np.testing.assert_array_equal(ct, np.ones(10))
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
