"""The buffers each chunk writes its own part of (private copies of sinks and kept cells, ordered pairs, exact
accumulators, chunk state) start on a pair of cache lines (eagle.launch.lined), and a small sink's copies lie
Layout.stride apart on the host: two chunks' copies that shared a line bounced it between the cores (a 256-bin
float64 histogram at 1e5 lanes ran as slowly on two threads as on one, a 100-bin float32 one 2.5x slower).
What is checked: where they start, how far apart, what they hold, and that the runs still count right."""

import math

import numpy as np
import pytest

import eagle
import hawk
import hawk.math as m
from eagle.launch import LINE, lined
from hawk import Grid, Index, Mutable, Scalar
from hawk.abi.layout import LINE_VALUES

CHUNK_ROLES = ("priv", "mark", "scratch", "exact", "pairs")


@hawk.kernel
def cb_hist(t: Scalar, counts: Mutable["bin":256]):  # noqa: F821 (an axis label)
    hawk.scatter(counts, policy="plain")[m.index(t * 256.0, 256)] += 1.0


@hawk.kernel
def cb_cols(g: Grid["r", "c":100], x: Scalar) -> Scalar:
    return hawk.sum(x, over="r", policy="ordered")


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
@pytest.mark.parametrize("fill", [0.0, -0.0, 1.5, -np.inf])
def test_lined_starts_on_a_line_and_holds_the_fill(dtype, fill):
    for n in (0, 1, 7, 256, 1001):
        if dtype == np.int64 and fill not in (0.0,):
            continue
        a = lined(n, dtype, fill)
        assert a.dtype == np.dtype(dtype) and a.shape == (n,) and a.flags.c_contiguous and a.flags.writeable
        assert n == 0 or a.ctypes.data % LINE == 0  # (an empty view holds no memory to place)
        want = np.full(n, fill, dtype=dtype)
        assert np.array_equal(a.view(np.uint8), want.view(np.uint8))  # (-0.0 keeps its sign bit)


@pytest.mark.parametrize("kernel,planes", [
    (cb_hist, {"t": np.random.default_rng(5).random(100_000)}),
    (cb_cols, {"x": np.random.default_rng(6).standard_normal((500, 100))}),
], ids=["sink copies", "kept cell pairs"])
def test_chunk_buffers_start_on_lines_and_the_runs_count_right(kernel, planes):
    bound = eagle.deploy(kernel, threads=2, min_chunk=1000).bind(**planes)
    stage = bound.stages[0]
    assert stage.nchunks > 1
    roles = [b.role for b in stage.launcher.lay.buffers]
    chunked = [a for role, a in zip(roles, stage.buffers, strict=True) if role in CHUNK_ROLES and a.size]
    assert chunked and all(a.ctypes.data % LINE == 0 for a in chunked), [a.ctypes.data % LINE for a in chunked]
    for _ in range(3):
        got = np.asarray(bound.launch())
        if kernel is cb_hist:
            assert np.array_equal(got, np.histogram(planes["t"], 256, (0.0, 1.0))[0])
        else:
            want = [math.fsum(col) for col in planes["x"].T]
            assert np.array_equal(got, want)


@hawk.kernel
def cb_small(t: Scalar, k: Index, x: Scalar, plain: Mutable["bin":10], comp: Mutable["bin":10],  # noqa: F821
             exact: Mutable["slot":7], last: Mutable["slot":5]):  # noqa: F821
    hawk.scatter(plain, policy="plain")[m.index(t * 10.0, 10)] += 1.0
    hawk.scatter(comp, policy="compensated")[m.index(t * 10.0, 10)] += x
    hawk.scatter(exact, policy="ordered")[k % 7] += x
    hawk.scatter(last)[k % 5] = x


def test_small_sinks_copies_lie_a_stride_apart_on_the_host():
    """Sinks of fewer than PAD_BELOW slots: each chunk's copy (its values, a compensated copy's corrections, a
    stored sink's marks, an ordered sink's pairs) starts LINE_VALUES-rounded slots after the one before on the
    host (Layout.stride), so no two chunks' copies share a line; the results are what they were (the finish
    reads each copy at its stride): counts exact, compensated within its bound, ordered exact, the last store
    wins."""
    rng = np.random.default_rng(7)
    n = 20_000
    t, x = rng.random(n), rng.standard_normal(n) * 10.0 ** rng.integers(-8, 8, n)
    k = rng.integers(0, 1000, n).astype(np.int32)
    bins = np.minimum((t * 10.0).astype(int), 9)
    for threads in (1, 2, 3):
        bound = eagle.deploy(cb_small, threads=threads, min_chunk=1000).bind(t=t, k=k, x=x)
        stage = bound.stages[0]
        lay = stage.launcher.lay
        assert lay.line_pad and all(lay.stride(s) == LINE_VALUES for s in ("plain", "comp", "exact", "last"))
        assert (stage.nchunks > 1) == (threads > 1), stage.nchunks  # (two threads really split the lanes)
        for b, a in zip(lay.buffers, stage.buffers, strict=True):
            if b.role in ("priv", "mark", "pairs") and b.name in lay.sinks:
                per = 2 if b.role == "pairs" or (b.role == "priv" and lay.policy_of(b.name) == "compensated") else 1
                assert a.size == per * LINE_VALUES * stage.nchunks, (b, a.size)
        out = bound.launch()
        assert np.array_equal(out["plain"], np.bincount(bins, minlength=10))
        for j in range(10):
            want = math.fsum(x[bins == j])
            assert abs(out["comp"][j] - want) <= np.finfo(np.float64).eps * math.fsum(np.abs(x[bins == j]))
        assert np.array_equal(out["exact"], [math.fsum(x[k % 7 == j]) for j in range(7)])
        assert np.array_equal(out["last"], [x[np.nonzero(k % 5 == j)[0][-1]] for j in range(5)])


@hawk.kernel
def cb_keyed(k: Index, x: Scalar, s: Mutable["slot":7]):  # noqa: F821
    hawk.scatter(s)[k + 1] += x  # (a computed key: the compiled code checks it as it runs)


def test_a_refused_run_leaves_a_small_sinks_array_as_it_was():
    """A key outside a padded sink, met by the second of two chunks whose copies lie a stride apart: the run is
    refused by sink and key, and the caller's array keeps its content; the same plan then adds as it should."""
    n = 5000
    k = np.arange(n, dtype=np.int32) % 6
    bad = k.copy()
    bad[4000] = 8
    given = np.arange(7.0)
    keep = given.copy()
    plan = eagle.deploy(cb_keyed, threads=2, min_chunk=1000)
    with pytest.raises(Exception, match="'s'") as err:
        plan.run(k=bad, x=np.ones(n), s=given)
    assert "9" in str(err.value)
    assert np.array_equal(given, keep)
    out = np.asarray(plan.run(k=k, x=np.ones(n), s=given))
    assert max(plan.last_chunks) > 1
    assert np.array_equal(out, keep + np.bincount(k + 1, minlength=7))


def test_layouts_from_before_the_stride_read_as_they_were():
    """A sidecar's layout without `line_pad` (artifacts built before 2026-12-05): each copy is its slots long."""
    from hawk.abi.layout import layout_from_json, layout_to_json

    lay = eagle.deploy(cb_small, threads=2).bind(t=np.zeros(8), k=np.zeros(8, np.int32), x=np.zeros(8)) \
        .stages[0].launcher.lay
    d = layout_to_json(lay)
    assert d["line_pad"] is True
    del d["line_pad"]
    old = layout_from_json(d)
    assert not old.line_pad and all(old.stride(s) == old.private[s] for s in old.private)
    assert layout_from_json(layout_to_json(lay)).line_pad
