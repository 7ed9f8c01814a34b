"""eagle.algorithms.exclusive_scan / inclusive_scan against np.cumsum: bit for bit up to 4096 values, exact
integers at any size, the reference's total / n / dtype / in-place rules, the same bits for every host thread
count and on spirv (lavapipe)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from algorithms_plans import assert_split, small_chunks  # noqa: F401 (small_chunks: an autouse fixture)

import eagle
from eagle.algorithms import exclusive_scan, inclusive_scan

THREADS = (1, 2, 3)


def _excl(x: np.ndarray, dtype) -> np.ndarray:
    """The exclusive scan the reference defines, from np.cumsum in dst's dtype (element 0: the empty sum)."""
    c = np.cumsum(x, dtype=dtype)
    return np.concatenate([np.zeros(1, dtype), c[:-1]])


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    return got.dtype == want.dtype and got.tobytes() == want.tobytes()


# --- floats: np.cumsum's bits up to 4096 values -------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 2, 7, 1000, 4096])
def test_float_scans_equal_cumsum_bit_for_bit(dtype, n):
    x = np.random.default_rng(n).standard_normal(n).astype(dtype) * 1e3
    out = np.full(n + 3, 99.0, dtype)
    total = inclusive_scan(x, out, n)
    assert _same(out[:n], np.cumsum(x)) and (out[n:] == 99.0).all()
    assert type(total) is float and total == float(np.cumsum(x)[-1])
    total = exclusive_scan(x, out, n)
    assert _same(out[:n], _excl(x, dtype))  # element 0 is +0.0, the empty sum
    assert total == float(np.cumsum(x)[-1])  # the exclusive total is the inclusive one, bits included


def test_exclusive_starts_from_plus_zero_and_keeps_cumsum_bits():
    out = np.full(3, 5.0)
    assert math.copysign(1.0, exclusive_scan(np.array([-0.0, -0.0, 1.0]), out, 2)) == -1.0  # the inclusive total
    assert math.copysign(1.0, out[0]) == 1.0 and math.copysign(1.0, out[1]) == -1.0  # 0.0, then cumsum's -0.0
    assert math.copysign(1.0, exclusive_scan(np.array([-0.0], np.float32), out[:1].astype(np.float32))) == -1.0
    assert _same(out[:2], np.array([0.0, -0.0])) and out[2] == 5.0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_long_float_scans_are_close_and_thread_independent(dtype):
    x = np.random.default_rng(3).uniform(0.0, 1.0, 40_000).astype(dtype)
    runs = {}
    for t in THREADS:
        out = np.empty_like(x)
        runs[t] = (inclusive_scan(x, out, threads=t), out.copy())
    assert len({(tot, o.tobytes()) for tot, o in runs.values()}) == 1
    assert_split()
    total, out = runs[1]
    exact = np.cumsum(x.astype(np.float64))
    assert np.allclose(out, exact, rtol=50 * np.finfo(dtype).eps * 40)
    assert _same(out[:4096], np.cumsum(x[:4096]))  # the first block is np.cumsum's order exactly
    assert total == float(out[-1])


# --- integers: exact, wrapping at dst's width ---------------------------------------------------------------
@pytest.mark.parametrize("src, dst", [(np.int32, np.int32), (np.int32, np.int64), (np.int64, np.int64),
                                      (np.uint8, np.int32), (np.uint32, np.uint32), (np.uint64, np.uint64),
                                      (np.int16, np.int16), (np.bool_, np.int64)])
def test_integer_scans_are_exact(src, dst):
    info = np.iinfo(src) if src is not np.bool_ else None
    rng = np.random.default_rng(5)
    x = rng.integers(0, 2, 30_000).astype(np.bool_) if info is None else \
        rng.integers(info.min, info.max, 30_000, endpoint=True, dtype=src)
    out = np.empty(x.size, dst)
    total = inclusive_scan(x, out)
    want = np.cumsum(x, dtype=dst)
    assert _same(out, want) and type(total) is int and total == int(want[-1])
    total = exclusive_scan(x, out)
    assert _same(out, _excl(x, dst)) and total == int(want[-1])


def test_scans_into_8_and_16_bit_dst_wrap_like_cumsum(target):
    """The compiled scan adds in int64 and stores into the narrow dst directly (wrapping like a store): the bits
    of np.cumsum(src, dtype=dst.dtype), across blocks and threads; unsigned dst through their signed views; a
    device dst is written on the device."""
    rng = np.random.default_rng(12)
    x = rng.integers(-2**40, 2**40, 9000)  # three scan blocks
    f = rng.uniform(-100.0, 100.0, 9000)  # truncated toward zero first, as the store into an integer does
    kw = {"threads": 3} if target == "host" else {}
    for dst in (np.int8, np.int16, np.uint8, np.uint16):
        out = np.full(x.size + 2, 5, dst)
        total = inclusive_scan(x, out, x.size, target=target, **kw)
        want = np.cumsum(x, dtype=dst)
        assert _same(out[:-2], want) and (out[-2:] == 5).all() and type(total) is int and total == int(want[-1])
        assert exclusive_scan(x, out, x.size, target=target, **kw) == int(want[-1])
        assert _same(out[:-2], _excl(x, dst)), dst
    out = np.empty(f.size, np.int8)
    inclusive_scan(f, out, target=target, **kw)
    assert _same(out, np.cumsum(np.trunc(f).astype(np.int64)).astype(np.int8))
    if target == "host":
        assert_split()
        return
    d = eagle.asarray(np.zeros(x.size, np.uint16), device=target)
    assert inclusive_scan(eagle.asarray(x, device=target), d) == int(np.cumsum(x, dtype=np.uint16)[-1])
    assert _same(d.numpy(), np.cumsum(x, dtype=np.uint16))


def test_int32_counts_into_int64_offsets_past_2_31():
    counts = np.full(5000, 1_000_000, np.int32)
    offsets = np.empty(5000, np.int64)
    total = exclusive_scan(counts, offsets)
    assert total == 5_000_000_000 and offsets[-1] == 4_999_000_000 and offsets.dtype == np.int64
    narrow = np.empty(5000, np.int32)
    assert exclusive_scan(counts, narrow) == np.int64(5_000_000_000).astype(np.int32)  # wraps at int32


def test_conversions_follow_the_output_dtype():
    ints = np.array([1, 2, 3], np.int32)
    f32 = np.empty(3, np.float32)
    assert inclusive_scan(ints, f32) == 6.0 and f32.dtype == np.float32 and f32.tolist() == [1.0, 3.0, 6.0]
    floats = np.array([2.7, -2.7, 1.5])
    i64 = np.empty(3, np.int64)
    assert inclusive_scan(floats, i64) == 1 and i64.tolist() == [2, 0, 1]  # each value truncated, then summed
    x = np.array([0.1, 0.2, 0.3])
    out32 = np.empty(3, np.float32)
    inclusive_scan(x, out32)
    assert _same(out32, np.cumsum(x, dtype=np.float32))
    big = np.array([2**64 - 1, 1], np.uint64)
    f64 = np.empty(2, np.float64)
    assert inclusive_scan(big, f64) == float(np.float64(2.0**64) + 1.0)


def test_in_place_total_false_and_untouched_tail():
    x = np.arange(1, 11, dtype=np.int64)
    assert exclusive_scan(x, x, 6, total=False) is None
    assert x.tolist() == [0, 1, 3, 6, 10, 15, 7, 8, 9, 10]
    f = np.array([0.5, 0.25, 0.125, 9.0])
    assert inclusive_scan(f, f, 3) == 0.875 and f.tolist() == [0.5, 0.75, 0.875, 9.0]
    f = np.array([0.5, 0.25, 0.125])
    assert exclusive_scan(f, f) == 0.875 and f.tolist() == [0.0, 0.5, 0.75]  # the last value read before


def test_eagle_arrays_and_flat_order():
    src = eagle.asarray(np.arange(12, dtype=np.float64).reshape(3, 4))
    dst = eagle.asarray(np.zeros((4, 3)))
    assert inclusive_scan(src, dst, 5) == 10.0
    assert np.asarray(dst).reshape(-1).tolist()[:6] == [0.0, 1.0, 3.0, 6.0, 10.0, 0.0]


def test_n_zero_and_n_rules():
    out = np.full(4, 7, np.int32)
    assert exclusive_scan(np.ones(4, np.int32), out, 0) == 0 and out.tolist() == [7] * 4
    assert inclusive_scan(np.ones(4), np.full(4, 7.0), 0) == 0.0
    assert inclusive_scan(np.ones(4), np.zeros(4), 0, total=False) is None
    for bad in (-1, 5):
        with pytest.raises(ValueError, match="n="):
            exclusive_scan(np.ones(4), np.zeros(4), bad)
    with pytest.raises(ValueError, match="dst, which has 3 elements"):
        inclusive_scan(np.ones(4), np.zeros(3))  # n=None is src.size: past dst
    with pytest.raises(TypeError, match="n="):
        inclusive_scan(np.ones(4), np.zeros(4), 2.0)


def test_refusals():
    with pytest.raises(TypeError, match="inclusive_scan: dst is bool"):
        inclusive_scan(np.ones(3), np.zeros(3, bool))
    with pytest.raises(ValueError, match="C-contiguous"):
        exclusive_scan(np.ones(3), np.zeros((3, 2))[:, 0])
    with pytest.raises(TypeError, match="NumPy array or an eagle.Array"):
        exclusive_scan(np.ones(3), [0.0, 0.0, 0.0])
    with pytest.raises(TypeError, match="src must hold numbers"):
        exclusive_scan(np.array(["a"]), np.zeros(1))


# --- every target: the host's bits ------------------------------------------------------------------------------
def _scans(target: str) -> list[np.ndarray]:
    rng = np.random.default_rng(9)
    x32 = rng.standard_normal(9000).astype(np.float32)
    x64 = rng.standard_normal(9000)
    ints = rng.integers(-2**40, 2**40, 9000)
    res = []
    for src, dt in ((x32, np.float32), (x64, np.float64), (ints, np.int64), (ints.astype(np.int32), np.int32),
                    (ints, np.float64), (x64, np.int64)):
        for f in (inclusive_scan, exclusive_scan):
            out = np.empty(src.size, dt)
            total = f(src, out, target=target)
            res += [out, np.array([total], dt)]
    return res


def test_every_target_gives_the_host_bits(target):
    host, got = _scans("host"), _scans(target)
    bad = [k for k, (g, w) in enumerate(zip(got, host, strict=True)) if not _same(g, w)]
    assert not bad, bad
