"""Outputs a host Plan.run allocates (the caller omitted them): an output every lane assigns before reading it
starts uninitialized when the run covers every lane (eagle/launch.py Launcher.buffers `whole`; zeroing 8 MB
took 0.3-0.9 ms a run), every other one zeroed: a run over part of the lanes (base=/count=), an output read
before it is assigned, one stored by key, a cell. Each case runs after the heap held NaNs of the output's size
(so memory handed back uninitialized would show), first and again (the second run rebinds the prepared stages:
eagle/stage.py), and must give exactly the values the contract names.
"""

import numpy as np
import pytest

import eagle
import hawk
import hawk.math as m
from hawk import Index, Mutable, Scalar, Vector

N = 300_000  # (2.4 MB an output: past glibc's first mmap threshold, so freed blocks come back dirty)


@hawk.kernel
def fo_lanes(x: Scalar, y: Mutable[Scalar], v: Mutable[Vector[2]]) -> Scalar:
    y = x * 2.0
    v = m.vec(x, x * 3.0)
    return x + 1.0


@hawk.kernel
def fo_reads(x: Scalar, y: Mutable[Scalar]):
    y = y + x  # (read before assigned: starts at zero when omitted)


@hawk.kernel
def fo_staged(x: Scalar, y: Mutable[Scalar]):
    y = x - hawk.mean(x)  # (assigned in the second stage)


@hawk.kernel
def fo_keyed(k: Index, x: Scalar, y: Mutable[Scalar]):
    hawk.scatter(y)[k] = x  # (stored by key: positions no lane stores stay zero)


def _poison(values: int) -> None:
    """Leave freed heap memory full of NaNs, several blocks of `values` float64 values."""
    blocks = [np.full(values, np.nan) for _ in range(4)]
    del blocks


def _runs(plan, **planes):
    for _ in range(2):
        _poison(N * 2)
        _poison(N)
        yield plan.run(**planes)


def test_outputs_every_lane_assigns():
    x = np.arange(N, dtype=np.float64)
    plan = eagle.deploy(fo_lanes)
    for got in _runs(plan, x=x):
        np.testing.assert_array_equal(np.asarray(got["y"]), 2.0 * x)
        np.testing.assert_array_equal(np.asarray(got["v"]), np.stack([x, 3.0 * x]))
        np.testing.assert_array_equal(np.asarray(got["result"]), x + 1.0)
    fresh = [how for st in next(iter(plan._runs.entries.values())).stages for how in st.recipe
             if how[0] == "fresh"]
    assert sorted((how[1], how[3]) for how in fresh) == [("result", True), ("v", True), ("y", True)]


@pytest.mark.parametrize("base, count", [(1000, N - 2000), (0, N - 1), (1, N - 1)])
def test_a_run_over_part_of_the_lanes_leaves_zeros_elsewhere(base, count):
    x = np.arange(N, dtype=np.float64) + 1.0
    want = np.zeros(N)
    want[base:base + count] = 2.0 * x[base:base + count]
    for got in _runs(eagle.deploy(fo_lanes), x=x, base=base, count=count):
        np.testing.assert_array_equal(np.asarray(got["y"]), want)


@pytest.mark.parametrize("kernel", [fo_reads, fo_staged])
def test_outputs_read_first_or_assigned_later(kernel):
    x = np.arange(N, dtype=np.float64)
    want = x if kernel is fo_reads else x - x.mean()
    for got in _runs(eagle.deploy(kernel), x=x):
        np.testing.assert_allclose(np.asarray(got), want, rtol=0, atol=1e-9)
        assert not np.isnan(np.asarray(got)).any()


def test_outputs_stored_by_key_keep_zeros_where_no_lane_stores():
    x = np.arange(N, dtype=np.float64) + 1.0
    k = np.where(np.arange(N) % 3 == 0, np.arange(N), -1).astype(np.int64)  # (every third position)
    want = np.where(np.arange(N) % 3 == 0, x, 0.0)
    for got in _runs(eagle.deploy(fo_keyed), k=k, x=x):
        np.testing.assert_array_equal(np.asarray(got), want)


def test_unspecified_outputs_are_not_zeroed():
    """Plan.unspecified (what eagle.algorithms sets for its compactions): an output stored by key starts
    uninitialized; the positions lanes store are right, the others are whatever memory held."""
    x = np.arange(N, dtype=np.float64) + 1.0
    k = np.where(np.arange(N) % 3 == 0, np.arange(N) // 3, -1).astype(np.int64)  # (a compaction: the first third)
    plan = eagle.deploy(fo_keyed)
    plan.unspecified = frozenset({"y"})
    for got in _runs(plan, k=k, x=x):
        np.testing.assert_array_equal(np.asarray(got)[:N // 3], x[::3])
    fresh = [how for st in next(iter(plan._runs.entries.values())).stages for how in st.recipe if how[0] == "fresh"]
    assert [(how[1], how[3]) for how in fresh] == [("y", True)]
