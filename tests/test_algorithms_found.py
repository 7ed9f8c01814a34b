"""Regression tests for what the algorithms fuzzer (tests/fuzz_algorithms.py) found in eagle.algorithms.

uint64 values from 2**63 up, converted to a float: docs/algorithms.md promises one rounding to nearest ("an
integer into a float rounds once to the nearest (uint64 included)"; statistics convert integers to the run's
precision before any arithmetic). The kernels read uint64 as int64 and added 2**64 after converting, which rounds
twice: `float(k)` rounds k = u - 2**64 on its own binade's grid, and adding 2**64 rounds again on u's, so a
value just off a tie of u's grid landed on the tie and went to even, the wrong way. Found by the fuzzer's
first runs as `dot(int32, uint64)` and `copy_with_offset(uint64 -> float64)` one unit off the reference.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from eagle.algorithms import absmax, copy, dot, exclusive_scan, fill_value, histogram, inclusive_scan, norm, var

# u = 3 * 2**62 - 1025: u - 2**64 rounds to -(2**62 + 1024) in float64, and 2**64 less that is a tie of the grid
# of [2**63, 2**64) (spacing 2048), which goes to even: 3 * 2**62. One rounding of u gives 3 * 2**62 - 2048.
# The float32 twin: 3 * 2**62 - 2**39 - 2**37 (spacing 2**40 there).
TRAP64 = 3 * 2**62 - 1025
TRAP32 = 3 * 2**62 - 2**39 - 2**37


def _once(v: int, dtype) -> float:
    """v rounded once to `dtype` (float64: Python's float(int) is correctly rounded; float32: by hand)."""
    if np.dtype(dtype) == np.float64:
        return float(v)
    q, r = divmod(v, 1 << (v.bit_length() - 24))
    half = 1 << (v.bit_length() - 25)
    q += r > half or (r == half and q & 1)
    return math.ldexp(q, v.bit_length() - 24)


def _traps(n: int = 3000) -> np.ndarray:
    """uint64 values of few set bits from 2**63 up (many sit next to a float64 or float32 tie), and the two."""
    rng = np.random.default_rng(5)
    out = [TRAP64, TRAP32, 2**64 - 1, 2**63, 2**63 + 1]
    while len(out) < n:
        v = (1 << 63) + (1 << 62) * int(rng.integers(2))
        for _ in range(int(rng.integers(1, 4))):
            v += int(rng.choice([-1, 1])) << int(rng.integers(0, 42))
        out.append(min(max(v + int(rng.integers(-2, 3)), 1 << 63), 2**64 - 1))
    return np.array(out, np.uint64)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_copy_of_uint64_rounds_once(dtype):
    u = _traps()
    out = np.zeros(u.size, dtype)
    copy(u, out)
    want = np.array([_once(int(v), dtype) for v in u], dtype)
    assert out.tobytes() == want.tobytes()
    assert out[0 if dtype == np.float64 else 1] == want[0 if dtype == np.float64 else 1]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_scans_of_uint64_into_floats_round_each_value_once(dtype):
    for v in (TRAP64, TRAP32, 2**64 - 1):
        u = np.array([v], np.uint64)
        inc, exc = np.zeros(1, dtype), np.zeros(1, dtype)
        assert inclusive_scan(u, inc) == _once(v, dtype) == inc[0]
        assert exclusive_scan(u, exc) == _once(v, dtype) and exc[0] == 0.0  # the total: the value itself
    u = _traps(500)
    out = np.zeros(u.size, dtype)
    inclusive_scan(u, out)
    assert out.tobytes() == np.cumsum(np.array([_once(int(v), dtype) for v in u], dtype), dtype=dtype).tobytes()


def test_statistics_read_uint64_rounded_once():
    u = np.array([TRAP32], np.uint64)  # integers alone: float32 terms
    w = _once(TRAP32, np.float32)
    assert absmax(u) == w and norm(u, ord=1) == w
    assert norm(u, ord=2) == math.sqrt(float(np.float32(w) * np.float32(w)))
    assert dot(u, np.ones(1, np.float64)) == _once(TRAP32, np.float64)  # float64 terms beside float64
    assert dot(u, np.ones(1, np.int32)) == w
    assert dot(np.array([TRAP64], np.uint64), np.ones(1)) == _once(TRAP64, np.float64)
    two = np.array([TRAP32, TRAP32], np.uint64)
    assert var(two) == 0.0


def test_histogram_bins_uint64_by_the_once_rounded_value():
    # one rounding puts TRAP32 at 3 * 2**62 - 2**40, the bottom of the range: bin 0; twice-rounded it was 3 * 2**62
    lo = _once(TRAP32, np.float32)
    counts, _ = histogram(np.array([TRAP32], np.uint64), bins=2, range=(lo, lo + 2.0**41))
    assert np.asarray(counts).tolist() == [1, 0]



# Arrays in the other byte order ('>i8' on this little-endian machine: what np.frombuffer or a file in network
# order gives). Integer inputs other than int32/int64 were widened with astype(np.int32), which narrowed a '>i8'
# array to 32 bits: sum([2**40 + 5, 3]) was 8.0, unique and reduce_by_key returned wrong keys, and a '>u8' array
# was read as int32. Float inputs were refused by an internal kernel's plane ("plane 'x' of kernel 'float_var'").
# Inputs are now read in the machine's byte order (a copy); a dst in the other order is refused by name.
def test_inputs_in_the_other_byte_order_are_read_by_value():
    import eagle
    from eagle.algorithms import argsort, count_nonzero, gather, reduce_by_key, sort_by_key, std, unique

    b = np.array([2**40 + 5, 3, -7], ">i8")
    native = b.astype(np.int64)
    assert eagle.asarray(b).sum() == float(2**40 + 1) and eagle.asarray(b).max() == float(2**40 + 5)
    assert eagle.asarray(np.array([2**63 + 2**40], ">u8")).sum() == float(2**63 + 2**40)
    assert count_nonzero(np.array([2**40, 0], ">i8")) == 1
    assert var(b) == var(native) and dot(b, b) == dot(native, native)
    out = np.zeros(3, np.int64)
    assert inclusive_scan(b, out) == 2**40 + 1 and out.tolist() == np.cumsum(native).tolist()
    keys, counts = unique(np.array([2**40, 2**40, 2**41], ">i8"))
    assert np.asarray(keys).tolist() == [2**40, 2**41] and np.asarray(counts).tolist() == [2, 1]
    keys, sums = reduce_by_key(np.array([1, 1, 2], ">i8"), b)
    assert np.asarray(keys).tolist() == [1, 2] and np.asarray(sums).tolist() == [2**40 + 8, -7]
    assert np.asarray(argsort(b)).tolist() == [2, 1, 0]
    assert np.asarray(sort_by_key(b, b)[1]).tolist() == sorted(native.tolist())
    assert np.asarray(gather(b, np.array([0, 2], ">i4"))).tolist() == [2**40 + 5, -7]
    x = np.random.default_rng(2).normal(size=999)
    for f in (var, std, absmax, lambda a: norm(a, ord=1), lambda a: eagle.asarray(a).sum()):
        assert f(x.astype(">f8")) == f(x) and f(x.astype(">f4")) == f(x.astype(np.float32))
    copied = np.zeros(999)
    copy(x.astype(">f8"), copied)
    assert copied.tolist() == x.tolist()


def test_a_dst_in_the_other_byte_order_is_refused_by_name_and_left_alone():
    for dt in (">f8", ">i4", ">u8"):
        dst = np.arange(4).astype(dt)
        before = dst.copy()
        for call, args in ((copy, (np.ones(4), dst)), (fill_value, (dst, 3)), (inclusive_scan, (np.ones(4), dst))):
            with pytest.raises(TypeError, match="byte order"):
                call(*args)
        assert dst.tobytes() == before.tobytes()


def test_a_float_wider_than_float64_is_refused_by_name():
    from eagle.algorithms import gather

    x = np.ones(4, np.longdouble)
    if x.dtype.itemsize <= 8:
        pytest.skip("longdouble is float64 here")
    for call, who in ((lambda: var(x), "var"), (lambda: gather(x, np.array([1])), "gather"),
                      (lambda: copy(np.ones(4), np.zeros(4, np.longdouble)), "copy")):
        with pytest.raises(TypeError, match=who):
            call()
