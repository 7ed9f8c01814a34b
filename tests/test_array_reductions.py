"""eagle.asarray and Array.sum/min/max/mean: the reference's rules (NaN, signed zeros, empty arrays, integer
sums exact modulo 2**64, float32 results), checked against NumPy and math.fsum on the host (several thread
counts, chunks forced small) and on spirv (lavapipe), with the same bits everywhere for float sums."""

from __future__ import annotations

import math

import numpy as np
import pytest

import eagle
from eagle.algorithms import _common

THREADS = (1, 2, 3)


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    monkeypatch.setenv("EAGLE_MIN_CHUNK", "1024")  # so that a few thousand values split over threads
    monkeypatch.setattr(_common, "_PLANS", {})  # this test's plans only, so _assert_split sees its own runs


def _assert_split():
    """Several threads really split a run into chunks (what a thread-count test claims to test)."""
    runs = [max(p.last_chunks) for (_, _, threads, _), p in _common._PLANS.items() if threads and threads > 1
            and p.last_chunks]
    assert runs and max(runs) > 1, f"no run split into chunks: {runs}"


def _values(n: int, dtype, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(n) * np.exp(rng.uniform(-8, 8, n))).astype(dtype)


def test_asarray_wraps_numpy_without_copy_and_keeps_arrays():
    x = np.arange(6.0).reshape(2, 3)
    a = eagle.asarray(x)
    assert isinstance(a, eagle.Array) and np.asarray(a) is x and a.device == "cpu"
    assert eagle.asarray(a) is a
    assert eagle.asarray([1, 2, 3]).dtype == np.asarray([1, 2, 3]).dtype
    with pytest.raises(ValueError, match="device"):
        eagle.asarray(x, device="gpu")


def test_reference_example():
    data = eagle.asarray(np.arange(8, dtype=np.float32))
    got = (data.sum(), data.min(), data.max(), data.mean())
    assert got == (28.0, 0.0, 7.0, 3.5) and all(type(v) is float for v in got)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_sum_against_fsum_and_same_bits_for_every_thread_count(dtype):
    x = _values(5000, dtype)
    sums = {t: eagle.asarray(x).sum(threads=t) for t in THREADS}
    assert len({s.hex() for s in sums.values()}) == 1, sums  # ordered: the thread count changes no bit
    _assert_split()
    exact = math.fsum(x.astype(np.float64))
    eps = np.finfo(dtype).eps
    assert abs(sums[1] - exact) <= 20 * eps * math.fsum(np.abs(x.astype(np.float64)))
    if dtype == np.float32:
        assert sums[1] == float(np.float32(sums[1]))  # accumulated in float32: a float32 value


def test_reduces_every_component_whatever_the_shape():
    x = _values(3 * 40 * 7, np.float64).reshape(3, 40, 7)
    a = eagle.asarray(x)
    assert a.sum() == eagle.asarray(x.reshape(-1)).sum() == eagle.asarray(x.reshape(40, 21)).sum()
    assert a.min() == x.min() and a.max() == x.max()
    assert a.mean() == a.sum() / x.size
    t = np.asfortranarray(x)  # not C-contiguous: read in row-major order all the same
    assert eagle.asarray(t).sum() == a.sum()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nan_and_infinities(dtype):
    x = _values(3000, dtype)
    y = x.copy()
    y[1777] = np.nan
    a = eagle.asarray(y)
    assert math.isnan(a.sum()) and math.isnan(a.min()) and math.isnan(a.max()) and math.isnan(a.mean())
    z = x.copy()
    z[5] = np.inf
    assert eagle.asarray(z).sum() == math.inf and eagle.asarray(z).max() == math.inf
    z[9] = -np.inf
    assert math.isnan(eagle.asarray(z).sum()) and eagle.asarray(z).min() == -math.inf


@pytest.mark.parametrize("order", [[0.0, -0.0], [-0.0, 0.0], [0.0, 1.0, -0.0, 2.0], [-0.0, 3.0, 0.0]])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_signed_zeros(order, dtype):
    a = eagle.asarray(np.array(order, dtype))
    assert math.copysign(1.0, a.min()) == -1.0 and a.min() == 0.0
    neg = eagle.asarray(np.array([-v for v in order], dtype))
    assert math.copysign(1.0, neg.max()) == 1.0 and neg.max() == 0.0
    only_neg = eagle.asarray(np.array([-0.0, -0.0], dtype))
    assert math.copysign(1.0, only_neg.max()) == -1.0 and math.copysign(1.0, only_neg.min()) == -1.0


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.uint8])
def test_empty_arrays(dtype):
    a = eagle.asarray(np.zeros((0, 3), dtype))
    assert a.sum() == 0.0 and math.isnan(a.mean())
    for which in ("min", "max"):
        with pytest.raises(ValueError, match=f"{which} reduction requires a nonempty array"):
            getattr(a, which)()


INT_CASES = {
    "int8": np.array([-128, 127, -1, 5] * 300, np.int8),
    "int16": np.array([-32768, 32767, 12] * 400, np.int16),
    "uint16": np.array([65535, 0, 9] * 400, np.uint16),
    "int32": np.array([-2**31, 2**31 - 1, 7, -9] * 700, np.int32),
    "uint32": np.array([2**32 - 1, 0, 2**31, 3] * 700, np.uint32),
    "int64 wrapping": np.array([2**63 - 1, 2**62, -5, 2**40 + 3] * 700, np.int64),
    "uint64 wrapping": np.array([2**64 - 1, 2**63, 5, 2**53 + 1] * 700, np.uint64),
    "bool": np.array([True, False, True] * 500),
}


def _exact_sum(x: np.ndarray) -> int:
    total = sum(int(v) for v in x) % (1 << 64)
    if x.dtype.kind != "u" and x.dtype != np.bool_ and total >= 1 << 63:
        total -= 1 << 64
    return total


@pytest.mark.parametrize("name", INT_CASES)
def test_integer_sums_exact_modulo_2_64_and_exact_extrema(name):
    x = INT_CASES[name].copy()
    np.random.default_rng(1).shuffle(x)
    a = eagle.asarray(x)
    for t in THREADS:
        assert a.sum(threads=t) == float(_exact_sum(x))
    if x.size > 4096:
        _assert_split()
    assert a.min() == float(int(x.min())) and a.max() == float(int(x.max()))
    assert a.mean() == float(_exact_sum(x)) / x.size
    assert all(type(v) is float for v in (a.sum(), a.min(), a.max(), a.mean()))


def test_integer_extrema_separate_close_64_bit_values():
    x = np.array([2**40 + 7, 2**40 + 9, -(2**40) - 9, -(2**40) - 7, 2**40 + 8], np.int64)
    assert eagle.asarray(x).max() == float(2**40 + 9) and eagle.asarray(x).min() == float(-(2**40) - 9)
    u = np.array([2**63 + 2, 2**63 + 1, 2**62, 1], np.uint64)
    assert eagle.asarray(u).max() == float(2**63 + 2) and eagle.asarray(u).min() == 1.0


def test_large_run_against_numpy():
    x = _values(300_001, np.float64, seed=3)
    a = eagle.asarray(x)
    assert a.min() == x.min() and a.max() == x.max()
    assert abs(a.sum() - math.fsum(x)) <= 1e-12 * math.fsum(np.abs(x))


def test_every_target_gives_the_host_bits(target):
    x = _values(4100, np.float32, seed=5)
    host = eagle.asarray(x)
    assert host.sum(target=target).hex() == host.sum().hex()
    assert host.min(target=target) == x.min() and host.max(target=target) == x.max()
    z = eagle.asarray(np.array([0.0, 2.0, -0.0, 1.0]))
    assert math.copysign(1.0, z.min(target=target)) == -1.0
    assert math.copysign(1.0, eagle.asarray(np.array([-0.0, -3.0, 0.0])).max(target=target)) == 1.0
    nan = eagle.asarray(np.array([1.0, np.nan, -0.0], np.float32))
    assert all(math.isnan(f(target=target)) for f in (nan.sum, nan.min, nan.max, nan.mean))
    i = eagle.asarray(INT_CASES["int64 wrapping"][:1000])
    assert i.sum(target=target) == float(_exact_sum(INT_CASES["int64 wrapping"][:1000]))
    assert i.max(target=target) == float(2**63 - 1) and i.min(target=target) == -5.0


def test_bad_target_names_the_choices():
    with pytest.raises(ValueError, match="target="):
        eagle.asarray(np.ones(3)).sum(target="gpu")


def test_numpy_functions_still_reduce_with_numpy():
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    a = eagle.asarray(x)
    assert np.sum(a) == x.sum() and isinstance(np.sum(a), np.integer)  # NumPy passes axis=/out=: NumPy's answer
    np.testing.assert_array_equal(a.sum(axis=0), x.sum(axis=0))
    np.testing.assert_array_equal(np.max(a, axis=1), x.max(axis=1))
    assert np.min(a) == 0 and np.mean(a) == x.mean()
    assert a.sum() == 66.0 and type(a.sum()) is float  # the plain method is the reduction above
