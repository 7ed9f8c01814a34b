"""Reductions keeping a middle block of Grid axes (a per-channel total of Grid["batch", "channel":C, "pixel":P])
take the nested shape on the host (chunk_form.nest_wraps): each run of lanes that shares a kept slot is reduced
in registers and added into this chunk's copy of the slot, the run's number modulo the kept slots. They ran
lane by lane through the copy before (about 2.5 ns a lane, 20x an auto sum over every lane). Against NumPy:
max and min bit for bit (NaN, signed zeros, masks), sums and means within rounding, on split runs, on lane
ranges that cut runs at either end, and for runs short enough for the straight-line copies."""

import numpy as np
import pytest
from test_chunk_form import _form_of

import eagle
import hawk
from hawk import Grid, Scalar, Vector


@hawk.kernel
def nm_max(g: Grid["n", "c":6, "p":12], x: Scalar) -> Scalar:
    return hawk.max(x, over=("n", "p"), where=x > -1.0)


@hawk.kernel
def nm_min(g: Grid["n", "c":6, "p":12], x: Scalar) -> Scalar:
    return hawk.min(x, over=("n", "p"))


@hawk.kernel
def nm_mean(g: Grid["n", "c":6, "p":12], x: Scalar, s: hawk.Mutable[Scalar], mu: hawk.Mutable[Scalar]):
    s = hawk.sum(x * x, over=("n", "p"))
    mu = hawk.mean(x, over=("n", "p"), where=x < 1.0)


@hawk.kernel
def nm_short(g: Grid["n", "c":5, "p":3], x: Scalar) -> Scalar:  # (runs of 3 lanes: straight-line copies)
    return hawk.max(x, over=("n", "p"))


@hawk.kernel
def nm_two(g: Grid["n", "c":4, "d":3, "p":7], v: Vector[2]) -> Vector[2]:  # (two kept axes, a vector)
    return hawk.sum(v, over=("n", "p"))


@hawk.kernel
def nm_ordered(g: Grid["n", "c":6, "p":12], x: Scalar, s: hawk.Mutable[Scalar], mu: hawk.Mutable[Scalar]):
    s = hawk.sum(x, over=("n", "p"), policy="ordered")
    mu = hawk.mean(x, over=("n", "p"), policy="ordered", where=x > 0.0)


@hawk.kernel
def nm_comp(g: Grid["n", "c":6, "p":12], x: Scalar, s: hawk.Mutable[Scalar], mu: hawk.Mutable[Scalar]):
    s = hawk.sum(x, over=("n", "p"), policy="compensated")
    mu = hawk.mean(x, over=("n", "p"), policy="compensated", where=x > 0.0)


def _data(shape, rng):
    x = rng.standard_normal(shape)
    x[3, 1, 1] = np.nan  # (a NaN in channel 1; channel 2 all zeros, of both signs)
    x[:, 2, :] = -0.0
    x[9, 2, ::2] = 0.0
    return x


def _masked_max(x, keep, axis):
    return np.where(keep, x, -np.inf).max(axis=axis)


def _runs(kernel, **planes):
    for t in (1, 2, 3):
        plan = eagle.deploy(kernel, threads=t, min_chunk=256)
        out = plan.run(**{k: v.copy() for k, v in planes.items()})
        if t > 1:
            assert max(plan.last_chunks) > 1, f"{kernel.name} threads={t}: ran {plan.last_chunks} chunk(s)"
        yield t, ({k: np.asarray(v) for k, v in out.items()} if isinstance(out, dict) else np.asarray(out))


def _bits(a):
    a = np.asarray(a, dtype=np.float64)
    return np.where(np.isnan(a), np.nan, a).tobytes()  # (NaN results are the canonical NaN)


def test_the_nested_shape_is_picked_on_the_host_only():
    for kernel in (nm_max, nm_min, nm_mean, nm_short, nm_two, nm_ordered, nm_comp):
        assert _form_of(kernel, 0) == "nested", kernel.name
        assert _form_of(kernel, 0, pairs=False) != "nested", kernel.name


def test_max_and_min_bit_for_bit():
    x = _data((700, 6, 12), np.random.default_rng(91))
    want = _masked_max(x, x > -1.0, (0, 2))  # (the NaN fails the mask: dropped)
    want[2] = 0.0  # (max's rule for zeros of both signs: +0.0)
    for t, got in _runs(nm_max, x=x):
        assert _bits(got) == _bits(want), f"max, threads={t}"
    for t, got in _runs(nm_min, x=x):
        want = x.min(axis=(0, 2))
        want[2] = -0.0  # (np.min of -0.0 and 0.0 may give either; min's rule: -0.0)
        assert _bits(got) == _bits(want), f"min, threads={t}"


def test_sums_and_masked_means():
    x = np.random.default_rng(92).standard_normal((700, 6, 12))
    keep = x < 1.0
    for t, out in _runs(nm_mean, x=x):
        np.testing.assert_allclose(out["s"], (x * x).sum(axis=(0, 2)), rtol=1e-12, err_msg=f"threads={t}")
        np.testing.assert_allclose(out["mu"], np.where(keep, x, 0.0).sum(axis=(0, 2)) / keep.sum(axis=(0, 2)),
                                   rtol=1e-12)


def test_short_runs_and_two_kept_axes():
    x = _data((2000, 5, 3), np.random.default_rng(93))
    for t, got in _runs(nm_short, x=x):
        want = x.max(axis=(0, 2))
        want[2] = 0.0  # (max's rule for zeros of both signs: +0.0)
        assert _bits(got) == _bits(want), f"short runs, threads={t}"
    v = np.random.default_rng(94).standard_normal((2, 400, 4, 3, 7))
    for t, got in _runs(nm_two, v=v):
        np.testing.assert_allclose(got, v.sum(axis=(1, 4)), rtol=1e-12, err_msg=f"two kept axes, threads={t}")


@pytest.mark.parametrize("base, count", [(5, 3000), (12, 3001), (0, 11), (30, 7), (71, 2)])
def test_lane_ranges_that_cut_runs(base, count):
    """run(base=, count=) may start or end inside a run of 12 lanes: those runs reduce only their lanes inside."""
    x = np.random.default_rng(95).standard_normal((100, 6, 12))
    lanes = np.arange(x.size).reshape(x.shape)
    inside = (lanes >= base) & (lanes < base + count)
    got = np.asarray(eagle.deploy(nm_min, threads=1).run(base=base, count=count, x=x.copy()))
    assert _bits(got) == _bits(np.where(inside, x, np.inf).min(axis=(0, 2)))


def test_ordered_and_compensated_sums():
    """Ordered: each run's (high, low) pairs into the chunk's pair of its slot, the exact sum rounded once;
    compensated: each run's Neumaier chains into the chunk's (sum, correction) pair, within the bound."""
    from conftest import bt_ordered_sum, bt_sum_ulps

    rng = np.random.default_rng(96)
    x = rng.standard_normal((700, 6, 12)) * 10.0 ** rng.integers(-9, 9, (700, 6, 12))
    for t, out in _runs(nm_ordered, x=x):
        for c in range(6):
            terms = x[:, c, :]
            assert out["s"][c] == bt_ordered_sum(terms, np.float64), f"ordered sum {c}, threads={t}"
            pos = terms[terms > 0.0]
            assert out["mu"][c] == bt_ordered_sum(pos, np.float64) / pos.size, f"ordered mean {c}, threads={t}"
    for t, out in _runs(nm_comp, x=x):
        for c in range(6):
            assert bt_sum_ulps(out["s"][c], x[:, c, :]) <= 1.0, f"compensated {c}, threads={t}"
            pos = x[:, c, :][x[:, c, :] > 0.0]  # (each run's count into the chunk's copy: threads=3 counted
            assert bt_sum_ulps(out["mu"][c] * pos.size, pos) <= 2.0, f"compensated mean {c}, threads={t}"  # wrong)
