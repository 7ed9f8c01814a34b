"""A max or min whose result is NaN has the canonical quiet NaN's bits (docs/semantics.md): which of several NaNs
the lanes hold (signs, payloads) wins would otherwise depend on how the lanes are split into chunks and vectors,
and max/min promise the same bits on every thread count and target. Found by the split fuzzer (seed 32002:138:
+NaN on one thread, -NaN on three)."""

import numpy as np
import pytest
from conftest import bt_spirv_missing, bt_target_missing

import eagle
import hawk
from hawk import Grid, Mutable, Scalar

N = 20_011
ROWS, COLS = 301, 64


@hawk.kernel
def nan_max(x: Scalar, hi: Mutable[Scalar]):
    hi = hawk.max(x)


@hawk.kernel
def nan_min(x: Scalar, lo: Mutable[Scalar]):
    lo = hawk.min(x * 2.0)


@hawk.kernel
def nan_rows(g: Grid["r", "c":COLS], x: Scalar, hi: Mutable[Scalar]):
    hi = hawk.max(x, over="c")


def _wild(shape, dtype, seed):
    """Ordinary values with NaNs of both signs and several payloads here and there."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    bits = np.uint64 if dtype == np.float64 else np.uint32
    quiet = np.array([float("nan")], dtype).view(bits)[0]
    sign = bits(1) << bits(63 if dtype == np.float64 else 31)
    nans = [quiet, quiet | sign, quiet | bits(5), quiet | sign | bits(77), quiet | bits(1 << 20)]
    at = rng.choice(flat.size, size=40, replace=False)
    flat[at] = np.array([nans[i % len(nans)] for i in range(at.size)], bits).view(dtype)
    return x


CANON = {np.float64: np.array([float("nan")]).tobytes(), np.float32: np.array([float("nan")], np.float32).tobytes()}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_nan_max_or_min_is_the_canonical_nan_at_every_split(dtype):
    x = _wild(N, dtype, 1)
    for kernel in (nan_max, nan_min):
        for threads, min_chunk in ((1, None), (3, 64), (2, 1000)):
            plan = eagle.deploy(kernel, threads=threads, min_chunk=min_chunk)
            out = plan.run(x=x)
            assert np.asarray(out).reshape(-1).tobytes() == CANON[dtype], (kernel.name, threads)
            if threads > 1:
                assert max(plan.last_chunks) > 1


def test_kept_rows_and_spirv():
    x = _wild((ROWS, COLS), np.float64, 2)
    want = np.max(x, axis=1)  # (NumPy's NaN rows hold some NaN: compare NaN-ness, then hawk's bits)
    rows = [np.asarray(eagle.deploy(nan_rows, threads=t, min_chunk=64).run(x=x)) for t in (1, 3)]
    assert rows[0].tobytes() == rows[1].tobytes()
    nan = np.isnan(want)
    assert nan.any() and np.array_equal(np.isnan(rows[0]), nan) and np.array_equal(rows[0][~nan], want[~nan])
    assert np.all(rows[0][nan].view(np.uint64) == np.uint64(0x7FF8000000000000))
    why = bt_target_missing("spirv")
    if why:
        bt_spirv_missing(why)
    for kernel in (nan_max, nan_min):
        dev = eagle.deploy(kernel, target="spirv").run(x=_wild(N, np.float64, 1))
        assert np.asarray(dev).reshape(-1).tobytes() == CANON[np.float64]
