"""eagle.algorithms: var, std, norm, absmax, count_nonzero, dot, histogram, copy, copy_with_offset, fill_value
and gather, against NumPy and math.fsum, with the reference's n= rules, errors, dtypes and NaN/empty rules; the
same bits for every host thread count and on spirv (lavapipe, small sizes)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from algorithms_plans import assert_split, small_chunks  # noqa: F401 (small_chunks: an autouse fixture)

import eagle
from eagle.algorithms import (
    absmax,
    copy,
    copy_with_offset,
    count_nonzero,
    dot,
    fill_value,
    gather,
    histogram,
    norm,
    std,
    var,
)

THREADS = (1, 2, 3)


def _normal(n: int, dtype=np.float64, seed: int = 0, loc: float = 0.0) -> np.ndarray:
    return (loc + np.random.default_rng(seed).standard_normal(n)).astype(dtype)


# --- the reference's own example ---------------------------------------------------------------------------
def test_reference_precision_example():
    integers = eagle.asarray(np.array([100000], dtype=np.int32))
    assert dot(integers, integers) == 10_000_000_000.0
    precise = eagle.asarray(np.array([1.0, 1e-4, 1e-4, 1e-4], dtype=np.float64))
    assert abs(dot(precise, precise) - 1.00000003) <= 1e-15
    assert math.isnan(absmax(eagle.asarray(np.array([1.0, np.nan], dtype=np.float32))))


# --- values against NumPy / fsum, every thread count giving the same bits ----------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_statistics_against_numpy(dtype):
    x = _normal(5000, dtype, loc=3.0)
    w = x.astype(np.float64)
    tol = 50 * np.finfo(dtype).eps
    results = {t: (var(x, threads=t), norm(x, 1, threads=t), norm(x, threads=t), absmax(x, threads=t),
                   dot(x, x[::-1].copy(), threads=t)) for t in THREADS}
    assert len({tuple(v.hex() for v in r) for r in results.values()}) == 1, results  # ordered sums
    assert_split()
    v, l1, l2, amax, d = results[1]
    assert abs(v - np.var(w)) <= tol * np.var(w)
    assert std(x) == math.sqrt(v)
    assert abs(l1 - math.fsum(np.abs(w))) <= tol * math.fsum(np.abs(w))
    assert abs(l2 - math.sqrt(math.fsum(w * w))) <= tol * l2
    assert l2 == math.sqrt(dot(x, x))  # one exact sum of the same rounded squares, however it is read
    if dtype == np.float64:
        assert l2 == math.sqrt(math.fsum(w * w))  # (float64 squares: the terms fsum adds)
    assert amax == np.abs(w).max()
    assert abs(d - math.fsum(w * w[::-1])) <= tol * math.fsum(np.abs(w * w[::-1]))
    assert count_nonzero(x) == np.count_nonzero(x)
    if dtype == np.float32:
        assert all(val == float(np.float32(val)) for val in (l1, d))  # float32 accumulation


def test_variance_is_two_pass_not_cancelling():
    x = 1e8 + _normal(4000, seed=2)  # E[x^2] - E[x]^2 would lose every digit
    assert abs(var(x) - np.var(x)) <= 1e-9 * np.var(x)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64, np.uint64])
def test_integers_convert_to_float32_before_arithmetic(dtype):
    info = np.iinfo(dtype)
    x = np.random.default_rng(4).integers(max(info.min, -1000), min(info.max, 1000), 3000, endpoint=True)
    x = x.astype(dtype)
    f = x.astype(np.float64)
    assert abs(var(x) - np.var(f)) <= 1e-5 * np.var(f)
    assert abs(norm(x, 1) - np.abs(f).sum()) <= 1e-6 * np.abs(f).sum()
    assert abs(dot(x, x) - (f * f).sum()) <= 1e-6 * (f * f).sum()
    assert absmax(x) == np.abs(f).max() and count_nonzero(x) == np.count_nonzero(x)
    for val in (norm(x, 1), dot(x, x)):
        assert val == float(np.float32(val))  # integers alone: float32 terms and sums


def test_unsigned_64_bit_values_keep_their_magnitude():
    u = np.array([2**64 - 2**40, 3], np.uint64)
    assert absmax(u) == float(np.float32(2.0**64 - 2**40))
    assert norm(u, 1) == float(np.float32(np.float32(2.0**64 - 2**40) + np.float32(3.0)))


def test_dot_precision_follows_the_inputs():
    f32 = np.float32
    a32, a64, i32 = np.full(3, 0.1, f32), np.full(3, 0.1), np.array([1, 2, 3], np.int32)
    p = f32(0.1) * f32(0.1)
    assert dot(a32, a32) == float((p + p) + p)  # float32 terms and sums (three lanes: (t0 + t1) + t2)
    q = float(f32(0.1)) * 0.1
    assert dot(a32, a64) == (q + q) + q  # float64 when either is float64
    assert dot(a64, i32) == (0.1 * 1 + 0.1 * 2) + 0.1 * 3  # integers converted first
    assert dot(i32, a32) == float((f32(0.1) * f32(1) + f32(0.1) * f32(2)) + f32(0.1) * f32(3))


# --- n=, flat order, errors ----------------------------------------------------------------------------------
def test_n_reads_a_flat_prefix():
    x = _normal(600, seed=6).reshape(20, 30)
    flat = x.reshape(-1)
    assert var(x, n=77) == var(flat[:77].copy()) and norm(x, 1, n=77) == norm(flat[:77].copy(), 1)
    assert count_nonzero(np.array([[1.0, 0.0], [3.0, 4.0]]), n=3) == 2
    assert dot(x, x, n=5) == dot(flat[:5].copy(), flat[:5].copy())
    assert dot(np.ones(3), np.ones(10)) == 3.0  # n=None is a.size


@pytest.mark.parametrize("call", [
    lambda x: var(x, n=-1), lambda x: std(x, n=11), lambda x: norm(x, 2, n=11), lambda x: absmax(x, n=-2),
    lambda x: count_nonzero(x, n=100), lambda x: dot(x, x[:5]), lambda x: dot(x, x, n=11),
    lambda x: histogram(x, n=11), lambda x: copy(x, np.zeros(3), n=5), lambda x: fill_value(np.zeros(3), 1.0, 4),
    lambda x: gather(x, np.arange(4), n=12),
])
def test_n_past_an_array_is_a_value_error(call):
    with pytest.raises(ValueError, match="n=|has 5 elements|has 3 elements"):
        call(np.ones(10))


@pytest.mark.parametrize("order", [3, 0, -1, "fro", None, float("-inf"), 2.5])
def test_unsupported_norm_order_before_anything(order):
    with pytest.raises(ValueError, match="Unsupported norm order"):
        norm(np.ones(4), ord=order, n=-7)


def test_norm_orders_accepted():
    x = np.array([3.0, -4.0])
    assert (norm(x, 1), norm(x, 2), norm(x), norm(x, float("inf")), norm(x, 1.0)) == (7.0, 5.0, 5.0, 4.0, 7.0)


def test_text_is_refused_with_the_function_named():
    with pytest.raises(TypeError, match="var: data must hold numbers"):
        var(np.array(["a", "b"]))


# --- NaN, infinities, zeros, empty ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nan_infinity_and_empty_rules(dtype):
    nan = np.array([1.0, np.nan, 2.0], dtype)
    assert all(math.isnan(f(nan)) for f in (var, std, lambda a: norm(a, 1), norm, absmax, lambda a: dot(a, a)))
    assert count_nonzero(nan) == 3
    inf = np.array([1.0, np.inf, 2.0], dtype)
    assert math.isnan(var(inf)) and norm(inf, 1) == norm(inf) == absmax(inf) == dot(inf, inf) == math.inf
    assert norm(np.array([np.inf, -np.inf], dtype), 1) == math.inf
    assert math.isnan(dot(np.array([np.inf, 1.0], dtype), np.array([1.0, -np.inf], dtype)))  # inf + -inf
    assert math.isnan(dot(np.array([np.inf], dtype), np.array([0.0], dtype)))  # an infinity meets a zero
    zeros = np.array([0.0, -0.0, -0.0, 5.0, 0.0], dtype)
    assert count_nonzero(zeros) == 1
    empty = np.zeros((0, 4), dtype)
    assert math.isnan(var(empty)) and math.isnan(std(empty))
    assert norm(empty, 1) == norm(empty) == norm(empty, math.inf) == absmax(empty) == dot(empty, empty) == 0.0
    assert count_nonzero(empty) == 0 and type(count_nonzero(zeros)) is int
    assert math.isnan(var(np.ones(8, dtype), n=0)) and dot(np.ones(3), np.ones(3), n=0) == 0.0


def test_count_nonzero_float32_exact_past_2_24():
    ones = np.ones((1 << 24) + 5, np.float32)
    ones[7] = -0.0
    assert count_nonzero(ones) == (1 << 24) + 4


# --- histogram -----------------------------------------------------------------------------------------------
def _reference_bins(x: np.ndarray, bins: int, lo: float, hi: float) -> np.ndarray:
    """The reference's rule in NumPy: int((x - lo) * (1 / width)) in the data's precision, clamped."""
    t = np.float64 if x.dtype == np.float64 else np.float32
    xs = x.astype(t)
    scale = t(1) / ((t(hi) - t(lo)) / t(bins))
    j = np.trunc((xs - t(lo)) * scale)
    return np.bincount(np.clip(j, 0, bins - 1).astype(np.int64), minlength=bins)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint16])
def test_histogram_against_the_binning_rule(dtype):
    x = (np.random.default_rng(7).uniform(-2, 10, 5000) * (1 if dtype in (np.float32, np.float64) else 10))
    x = x.astype(dtype)
    counts, edges = histogram(x, bins=8, range=(0.0, 8.0) if x.dtype.kind == "f" else (0.0, 80.0))
    assert isinstance(counts, eagle.Array) and counts.dtype == np.int32 and counts.shape == (8,)
    assert isinstance(edges, np.ndarray) and edges.dtype == np.float64 and edges.shape == (9,)
    hi = 8.0 if x.dtype.kind == "f" else 80.0
    np.testing.assert_array_equal(np.asarray(counts), _reference_bins(x, 8, 0.0, hi))
    np.testing.assert_array_equal(edges, np.linspace(0.0, hi, 9))
    assert int(np.asarray(counts).sum()) == x.size  # out-of-range values are clamped in, not dropped
    for t in THREADS:
        np.testing.assert_array_equal(np.asarray(histogram(x, 8, (0.0, hi), threads=t)[0]), np.asarray(counts))
    assert_split()


def test_histogram_clamps_and_counts_hi_in_the_last_bin():
    counts, _ = histogram(np.array([-5.0, 0.0, 0.99, 1.0, 3.5, 4.0, 100.0]), bins=4, range=(0.0, 4.0))
    assert np.asarray(counts).tolist() == [3, 1, 0, 3]


def test_histogram_detected_range_and_widening():
    x = np.array([2.0, 6.0, 4.0, 3.0, 99.0])
    counts, edges = histogram(x, bins=4, n=4)  # range from the first four: (2, 6)
    assert np.asarray(counts).tolist() == [1, 1, 1, 1] and edges.tolist() == [2.0, 3.0, 4.0, 5.0, 6.0]
    counts, edges = histogram(np.full(5, 3.0, np.float32), bins=2)
    assert np.asarray(counts).tolist() == [5, 0] and edges.tolist() == [3.0, 3.5, 4.0]
    counts, edges = histogram(np.array([1.0, 2.0]), bins=2, range=(7.0, 7.0))  # equal ends: hi = lo + 1
    assert np.asarray(counts).tolist() == [2, 0] and edges.tolist() == [7.0, 7.5, 8.0]


def test_histogram_detects_its_range_by_the_min_and_max_rules():
    """The detected range comes from one launch (reductions.float_extent, the max as -min(-x)); its ends are
    Array.min()'s and Array.max()'s, signs of zero included (the last edge is the max itself)."""
    for x in (np.array([0.0, -0.0, 1.0]), np.array([-3.0, -0.0]), np.array([-3.0, -0.0, 0.0]),
              np.array([-0.0, 2.5], np.float32), np.random.default_rng(5).standard_normal(5000) * 1e3):
        lo, hi = eagle.asarray(x).min(), eagle.asarray(x).max()
        _, edges = histogram(x, bins=3)
        assert edges.tobytes() == np.linspace(lo, hi, 4).tobytes(), (x[:3], lo, hi, edges)
        assert math.copysign(1.0, edges[-1]) == math.copysign(1.0, hi)


def test_histogram_errors_and_empty():
    x = np.ones(4)
    for bad in ({"bins": 0}, {"bins": -3}, {"range": (0.0, math.inf)}, {"range": (2.0, 1.0)},
                {"range": (math.nan, 1.0)}):
        with pytest.raises(ValueError):
            histogram(x, **bad)
    with pytest.raises(TypeError, match="bins="):
        histogram(x, bins=2.5)
    with pytest.raises(ValueError, match="not finite"):
        histogram(np.array([1.0, np.nan]))
    with pytest.raises(ValueError, match="range"):
        histogram(x, n=0)
    counts, edges = histogram(x, bins=3, range=(0.0, 1.0), n=0)
    assert np.asarray(counts).tolist() == [0, 0, 0] and edges.size == 4


def test_histogram_float32_counts_add_over_launches(monkeypatch):
    import sys

    module = sys.modules["eagle.algorithms.histogram"]  # the package's attribute is the function
    x = np.random.default_rng(8).uniform(0, 4, 5000).astype(np.float32)
    want = np.asarray(histogram(x, bins=4, range=(0.0, 4.0))[0])
    monkeypatch.setattr(module, "_F32_EXACT", 1000)  # five launches of 1000 lanes, counts added as integers
    np.testing.assert_array_equal(np.asarray(histogram(x, bins=4, range=(0.0, 4.0))[0]), want)


# --- copy, copy_with_offset, fill_value, gather ----------------------------------------------------------
def test_copy_and_fill_write_a_prefix_in_place():
    dst = np.full(6, -1.0)
    copy(np.arange(10, dtype=np.float64), dst, 4)
    assert dst.tolist() == [0.0, 1.0, 2.0, 3.0, -1.0, -1.0]
    copy(np.array([2**64 - 1, 7], np.uint64), dst, 2)  # integers convert on store
    assert dst.tolist()[:2] == [2.0**64, 7.0]
    f32 = np.zeros(4, np.float32)
    fill_value(f32, 0.1, 3)
    assert f32.tolist() == [np.float32(0.1)] * 3 + [0.0]
    fill_value(eagle.asarray(f32), 2.5)
    assert f32.tolist() == [2.5] * 4
    copy_with_offset(np.array([8.0, 9.0]), dst, 4)
    assert dst.tolist()[4:] == [8.0, 9.0]
    with pytest.raises(ValueError, match="reaches element 6"):
        copy_with_offset(np.array([8.0, 9.0]), dst, 5)
    copy(np.ones(3), dst, 0)  # n == 0 writes nothing


def test_copy_refusals_say_what_is_missing():
    with pytest.raises(TypeError, match="float32, float64 or integer arrays"):  # integer dsts: test_algorithms_copies
        copy(np.ones(3), np.zeros(3, bool))
    widened = np.zeros(3)  # float32 -> float64 is a conversion now (test_algorithms_copies.py), not a refusal
    copy(np.full(3, 0.1, np.float32), widened)
    assert widened.tolist() == [float(np.float32(0.1))] * 3
    with pytest.raises(ValueError, match="C-contiguous"):
        fill_value(np.zeros((4, 4))[:, 1], 1.0)


def test_gather_against_numpy_take():
    values = _normal(3000, seed=9)
    perm = np.random.default_rng(10).permutation(3000)
    got = gather(values, perm)
    assert isinstance(got, eagle.Array)
    np.testing.assert_array_equal(np.asarray(got), values[perm])
    np.testing.assert_array_equal(np.asarray(gather(values, perm[:50], n=20)), values[perm[:20]])
    assert np.asarray(gather(values, perm, n=0)).size == 0
    with pytest.raises(IndexError, match="position 3000"):
        gather(values, np.array([0, 3000]))
    with pytest.raises(TypeError, match="integer positions"):
        gather(values, np.array([0.0]))


# --- every target: the same bits as the host ------------------------------------------------------------------
def _into(f, dst, src, *args, **kw) -> np.ndarray:
    f(src, dst, *args, **kw)
    return dst


def _calls(target: str) -> list:
    """One call per kernel of eagle.algorithms (both float widths where a kernel is per width), small sizes."""
    x = _normal(2100, np.float32, seed=11, loc=1.0)
    y = _normal(2100, np.float64, seed=12)
    i64 = np.random.default_rng(13).integers(-2**62, 2**62, 2100)
    u64 = i64.astype(np.uint64)
    kw = {"target": target}
    return [
        lambda: eagle.asarray(x).sum(**kw), lambda: eagle.asarray(y).sum(**kw), lambda: eagle.asarray(i64).sum(**kw),
        lambda: eagle.asarray(x).min(**kw), lambda: eagle.asarray(y).max(**kw),
        lambda: eagle.asarray(np.array([0.0, 1.0, -0.0])).min(**kw), lambda: eagle.asarray(i64).min(**kw),
        lambda: eagle.asarray(u64).max(**kw), lambda: var(x, **kw), lambda: var(y, **kw), lambda: var(i64, **kw),
        lambda: norm(x, 1, **kw), lambda: norm(u64, 1, **kw), lambda: norm(y, **kw), lambda: absmax(y, **kw),
        lambda: absmax(i64, **kw), lambda: dot(x, x[::-1].copy(), **kw), lambda: dot(y, i64, **kw),
        lambda: dot(np.arange(50), np.arange(50), **kw), lambda: count_nonzero(y, **kw),
        lambda: count_nonzero(np.array([0.0, -0.0, np.nan, 2.0], np.float32), **kw),
        lambda: count_nonzero(i64, **kw), lambda: histogram(y, bins=5, **kw)[0],
        lambda: histogram(i64 % 100, bins=7, range=(0, 100), **kw)[0],
        lambda: histogram(x, bins=3, range=(0.0, 2.0), **kw)[0],
        lambda: _into(copy, np.zeros(10), np.arange(10), 7, **kw),
        lambda: _into(copy, np.zeros(2100, np.float32), x, **kw),
        lambda: _fill(kw),
        lambda: gather(y, np.arange(2100)[::-1].copy(), **kw),
    ]


def _fill(kw) -> np.ndarray:
    dst = np.zeros(10)
    fill_value(dst, 0.1, 3, **kw)
    return dst


def _same(got, want) -> bool:
    g, w = np.asarray(got), np.asarray(want)
    return g.dtype == w.dtype and g.tobytes() == w.tobytes()


def test_every_target_gives_the_host_bits(target):
    host = [c() for c in _calls("host")]
    got = [c() for c in _calls(target)]
    bad = [k for k, (g, w) in enumerate(zip(got, host, strict=True)) if not _same(g, w)]
    assert not bad, [(k, got[k], host[k]) for k in bad]
    assert math.copysign(1.0, host[5]) == -1.0 and host[18] == float(sum(i * i for i in range(50)))


@pytest.mark.slow
@pytest.mark.parametrize("gpu", ["nvvm", "rocdl"])
def test_every_kernel_builds_for_the_other_gpu_targets(gpu):
    """Without the GPU's runtime each call compiles every stage of its kernel (PTX / AMD code objects) and then
    raises RuntimeMissing; with one, the results are the host's bits."""
    host = [c() for c in _calls("host")]
    for k, call in enumerate(_calls(gpu)):
        try:
            got = call()
        except eagle.RuntimeMissing as exc:
            assert "compiled" in str(exc), (k, str(exc))
            continue
        assert _same(got, host[k]), (k, got, host[k])
