"""The buffers each chunk writes its own part of (private copies of sinks and kept cells, ordered pairs, exact
accumulators, chunk state) start on a cache line (eagle.launch.lined): two chunks' copies that shared the line
between them bounced it between the cores (a 256-bin float64 histogram at 1e5 lanes ran as slowly on two
threads as on one). What is checked: where they start, what they hold, and that the runs still count right."""

import math

import numpy as np
import pytest

import eagle
import hawk
import hawk.math as m
from eagle.launch import LINE, lined
from hawk import Grid, Mutable, Scalar

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
