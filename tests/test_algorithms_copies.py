"""The conversions of eagle.algorithms.copy, copy_with_offset, fill_value and gather: into integers (integer output
planes: truncation toward zero, wrapping at the destination's width, every integer dtype) and between float widths
(a float output plane of its own dtype: NumPy's astype bits), the same results on every host thread count and on
spirv (lavapipe)."""

from __future__ import annotations

import numpy as np
import pytest
from algorithms_plans import small_chunks  # noqa: F401 (an autouse fixture)

import eagle
from eagle.algorithms import copy, copy_with_offset, fill_value, gather

INTS = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]


def test_reference_conversions():
    dst = np.zeros(4, np.int32)
    copy(np.array([2.7, -2.7, 0.5, -0.5]), dst)
    assert dst.tolist() == [2, -2, 0, 0]  # floats truncate toward zero
    u8 = np.zeros(3, np.uint8)
    fill_value(u8, 300)
    assert u8.tolist() == [44] * 3  # integers wrap
    i32 = np.full(3, -1, np.int32)
    fill_value(i32, 2.5, 2)
    assert i32.tolist() == [2, 2, -1]


@pytest.mark.parametrize("src", [np.int64, np.uint64, np.int32, np.float64, np.float32])
@pytest.mark.parametrize("dst", INTS)
def test_copy_into_every_integer_dtype(src, dst):
    rng = np.random.default_rng(1)
    if np.dtype(src).kind == "f":
        x = rng.uniform(-1e4, 1e4, 3000).astype(src)
        if np.dtype(dst).kind == "u":
            x = np.abs(x)
        want = np.trunc(x).astype(np.int64).astype(dst)  # in range for the int64 step, then wrapped
    else:
        info = np.iinfo(src)
        x = rng.integers(info.min, info.max, 3000, dtype=src, endpoint=True)
        want = x.astype(dst)  # NumPy's integer casts wrap
    out = np.full(3005, 7, dst)
    copy(x, out, threads=2)
    assert out.dtype == dst and out[:3000].tolist() == want.tolist() and (out[3000:] == 7).all()


def test_copy_with_offset_and_integer_to_float():
    dst = np.zeros(6, np.int64)
    copy_with_offset(np.array([2**62, -3], np.int64), dst, 3)
    assert dst.tolist() == [0, 0, 0, 2**62, -3, 0]
    f32 = np.zeros(2, np.float32)
    copy(np.array([2**24 + 1, 3], np.int64), f32)
    assert f32.tolist() == [float(np.float32(2**24 + 1)), 3.0]


@pytest.mark.parametrize("dst", INTS)
def test_fill_value_wraps_and_truncates(dst):
    out = np.zeros(5, dst)
    for value in (300, -1, 2**63 - 1, 2**64 - 5, -2**63, 70000):
        fill_value(out, value, 4)
        assert out[:4].tolist() == [np.array(value % 2**64, np.uint64).astype(dst).item()] * 4 and out[4] == 0
    fill_value(out, -2.9 if np.dtype(dst).kind == "i" else 9.9, 4)
    assert out[:4].tolist() == [-2 if np.dtype(dst).kind == "i" else 9] * 4
    with pytest.raises(ValueError, match="outside the int64 and uint64 ranges"):
        fill_value(out, 2**64)


@pytest.mark.parametrize("vdtype", INTS + [np.bool_, np.float16])
def test_gather_of_every_dtype(vdtype):
    rng = np.random.default_rng(2)
    v = rng.integers(0, 120, 4000).astype(vdtype)
    perm = rng.permutation(4000)[:2500]
    got = gather(v, perm)
    assert isinstance(got, eagle.Array) and got.dtype == vdtype
    np.testing.assert_array_equal(np.asarray(got), v[perm])
    np.testing.assert_array_equal(np.asarray(gather(v, perm, n=10)), v[perm[:10]])


def _doubles() -> np.ndarray:
    """float64 values whose float32 rounding is delicate (ties, subnormals, overflow, signed zeros, NaN)."""
    top = float(np.finfo(np.float32).max)
    special = [1 + 2.0 ** -24, 1 + 3 * 2.0 ** -24, 2.0 ** -150, 3 * 2.0 ** -151, 1e-40, top, top + 2.0 ** 103,
               np.nextafter(top + 2.0 ** 103, 0), 1e39, -np.inf, np.inf, -0.0, 0.0, np.nan, 0.1]
    rng = np.random.default_rng(8)
    return np.concatenate([special, rng.standard_normal(2000) * 10.0 ** rng.integers(-45, 40, 2000)])


@pytest.mark.parametrize(("sdt", "ddt"), [(np.float64, np.float32), (np.float32, np.float64),
                                          (np.float16, np.float64), (np.float16, np.float32)])
def test_copy_between_float_widths(target, sdt, ddt):
    with np.errstate(over="ignore"):
        x = _doubles().astype(sdt)
        want = x.astype(ddt)  # NumPy's astype: round once to nearest even, or widen exactly
    out = np.full(x.size + 3, 5, ddt)
    copy(x, out, target=target)
    got = out[:x.size]
    nan = np.isnan(want)
    assert np.isnan(got[nan]).all() and got[~nan].tobytes() == want[~nan].tobytes() and (out[x.size:] == 5).all()
    if target == "host":
        assert got.tobytes() == want.tobytes()  # NaN's bits too
    part = np.zeros(20, ddt)
    copy_with_offset(x, part, 7, n=10, target=target)
    assert part[7:17].tobytes() == want[:10].tobytes() and not part[:7].any() and not part[17:].any()


def test_fill_value_rounds_once_into_floats(target):
    for value in (0.1, 1 / 3, 1e39, -1e-40, 2.0 ** -150, 16777217, 2**64 - 1, -2**63, -0.0, float("nan")):
        for ddt in (np.float32, np.float64):
            out = np.full(6, 5, ddt)
            fill_value(out, value, 4, target=target)
            with np.errstate(over="ignore"):
                want = np.full(4, value, np.float64).astype(ddt)  # the value's nearest float64, then astype
            if isinstance(value, int):
                want = np.full(4, np.float64(value) if ddt == np.float64 else np.float32(value), ddt)
            assert out[:4].tobytes() == want.tobytes() or np.isnan(want).all() and np.isnan(out[:4]).all(), value
            assert (out[4:] == 5).all()


def test_float_to_integer_outside_the_range(target):
    """A float truncates toward zero into int64, then wraps to the destination's width; NaN, +-inf and values beyond
    int64 give -2**63 first (so 0 in a narrower destination). The reference leaves these undefined."""
    x = np.array([np.nan, np.inf, -np.inf, 1e19, -1e19, 3e9, -3e9, 2.0 ** 63, 2.0 ** 62 + 2.0 ** 40])
    for dst in (np.int64, np.int32, np.uint64, np.int16, np.uint8):
        for src in (np.float64, np.float32):
            out = np.zeros(x.size, dst)
            copy(x.astype(src), out, target=target)
            wide = np.array([-2**63 if not abs(v) < 2.0 ** 63 else int(v) for v in x.astype(src)], np.int64)
            assert out.tolist() == wide.astype(dst).tolist(), (dst, src)


def test_refusals_name_the_gap():
    with pytest.raises(TypeError, match="float32, float64 or integer"):
        fill_value(np.zeros(3, np.complex128), 1)
    with pytest.raises(IndexError, match="position 9"):
        gather(np.arange(9), np.array([9]))


def test_every_target_gives_the_host_values(target):
    x = np.random.default_rng(3).uniform(-1e6, 1e6, 5000)
    ints = np.random.default_rng(4).integers(-2**62, 2**62, 5000)
    perm = np.random.default_rng(5).permutation(5000)

    def calls(tgt: str) -> list[np.ndarray]:
        a, b, c = np.zeros(5000, np.int32), np.zeros(5000, np.int64), np.zeros(5000, np.uint64)
        d, e = np.zeros(4999, np.uint8), np.zeros(4999, np.int16)  # 8/16-bit planes, ending inside a word
        copy(x, a, target=tgt)
        copy(ints, b, target=tgt)
        fill_value(c, 2**64 - 3, 4000, target=tgt)
        copy(x, d, 4999, target=tgt)
        copy(ints, e, 4999, target=tgt)
        return [a, b, c, d, e, np.asarray(gather(ints, perm, target=tgt))]

    for g, w in zip(calls(target), calls("host"), strict=True):
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes()


def test_gather_with_a_longer_perm_names_both_arrays():
    """n=None reads perm.size values of both arrays: a perm longer than values is refused by the bounds rule,
    in words about the arrays the caller passed (not an n it never gave)."""
    with pytest.raises(ValueError, match="perm has 5 positions and values only 3"):
        gather(np.arange(3.0), np.zeros(5, np.int64))
    assert np.asarray(gather(np.arange(3.0), np.zeros(5, np.int64), n=3)).tolist() == [0.0, 0.0, 0.0]
