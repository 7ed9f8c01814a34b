"""Segmented scans whose reset flag comes from integer data (a key differing from its neighbour's, as in
reduce_by_key): on the host the running float value restarts through a compare and a blend, not a branch
(hawk.passes.host_emit.Emit.blend). The values are those of a Python loop, bit for bit, with signed zeros,
infinities and NaNs at and around the restarts, in float64 and float32, inclusive and exclusive, sum, min and
max, at several thread counts; and the lane loop's assembly holds the blend."""

import platform
import re

import numpy as np
import pytest
from test_scan import _ref_scan
from test_vectorise import _lanes_asm

import eagle
import hawk
import hawk.math as m
from hawk import Grid, Index, Mutable, Scalar
from hawk.abi.layout import SCAN_BLOCK


@hawk.kernel
def keyed_runs(lane: Grid["i"], k: Index, x: Scalar, y: Mutable[Scalar], z: Mutable[Scalar]):
    i = lane.i
    start = (i == 0) | (k != k.at(m.max(i - 1, 0)))
    y = hawk.scan(x, reset=start)
    z = hawk.scan(x, reset=start, exclusive=True)


@hawk.kernel
def keyed_min(lane: Grid["i"], k: Index, x: Scalar, y: Mutable[Scalar]):
    i = lane.i
    y = hawk.scan(x, reset=(i == 0) | (k != k.at(m.max(i - 1, 0))), op=m.min)


@hawk.kernel
def keyed_max(lane: Grid["i"], k: Index, x: Scalar, y: Mutable[Scalar]):
    i = lane.i
    y = hawk.scan(x, reset=(i == 0) | (k != k.at(m.max(i - 1, 0))), op=m.max)


def _ref(*args, **kw) -> np.ndarray:
    with np.errstate(invalid="ignore"):  # inf + -inf: NaN, as in the kernel
        return _ref_scan(*args, **kw)


def _data(n: int, dtype, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted keys in short random runs (1 to 6 lanes), values with -0.0, +0.0, infinities and NaNs placed at
    run starts, run ends and inside runs; and the reset flags."""
    rng = np.random.default_rng(seed)
    k = np.repeat(np.arange(n), rng.integers(1, 7, n))[:n].astype(np.int64)
    x = rng.standard_normal(n).astype(dtype)
    for value in (-0.0, 0.0, np.inf, -np.inf, np.nan):
        x[rng.integers(0, n, max(1, n // 50))] = value
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    x[starts[1::7]] = -0.0  # runs that start with -0.0, some of them all -0.0
    for s in starts[2::11]:
        x[s:s + 3] = -0.0
    return k, x, np.r_[True, k[1:] != k[:-1]]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n", [5, 1000, 3 * SCAN_BLOCK + 11])
def test_sum_restarts_like_a_python_loop(n, dtype):
    k, x, flags = _data(n, dtype, n)
    out = eagle.deploy(keyed_runs).run(k=k, x=x)
    y, z = np.asarray(out["y"]), np.asarray(out["z"])
    assert y.dtype == dtype
    assert y.tobytes() == _ref(x, np.add, flags, ident=dtype(-0.0)).tobytes()
    assert z.tobytes() == _ref(x, np.add, flags, excl=True, ident=dtype(-0.0)).tobytes()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kernel,ufunc,ident", [(keyed_min, np.minimum, np.inf), (keyed_max, np.maximum, -np.inf)])
def test_min_max_restart_like_a_python_loop(kernel, ufunc, ident, dtype):
    k, x, flags = _data(2 * SCAN_BLOCK + 5, dtype, 7)
    y = np.asarray(eagle.deploy(kernel).run(k=k, x=x))
    assert y.tobytes() == _ref(x, ufunc, flags, ident=dtype(ident)).tobytes()


def test_same_bits_at_every_thread_count():
    k, x, _ = _data(9 * SCAN_BLOCK + 5, np.float64, 3)
    results = []
    for t in (1, 2, 3):
        plan = eagle.deploy(keyed_runs, threads=t, min_chunk=SCAN_BLOCK)
        out = plan.run(k=k, x=x)
        if t > 1:
            assert max(plan.last_chunks) > 1, f"threads={t}: ran {plan.last_chunks} chunk(s)"
        results.append((np.asarray(out["y"]).tobytes(), np.asarray(out["z"]).tobytes()))
    assert all(r == results[0] for r in results[1:])


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="the blend is x86's")
@pytest.mark.parametrize("dtype,blend", [("float64", "vblendvpd"), ("float32", "vblendvps")])
def test_the_lane_loop_blends_instead_of_branching(dtype, blend):
    """The second stage (each lane's running value, from its block's offset) restarts with a blend. Without
    Emit.blend, LLVM makes the restart a conditional jump around a move (x86 has no float cmov). Built for an
    AVX2 CPU (x86-64-v3) whatever this host is: with AVX-512, LLVM selects under a mask register either way."""
    asm = _lanes_asm(keyed_runs, "keyed_runs_2", dtype, stage=1, cpu="x86-64-v3")
    assert re.search(rf"{blend}\s", asm), asm[:4000]
