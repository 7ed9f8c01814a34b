"""The spirv target against the host: the same kernels, the same expectations, and the same bits for "ordered".

Runs on any Vulkan 1.2 device; on a machine without a GPU, Mesa's lavapipe runs the very SPIR-V eagle emits. Every
binary a test here launches is validated with spirv-val (an autouse fixture). Without a Vulkan loader or device
every test skips and says why (pytest -ra prints it).
"""

import importlib
import math
import shutil
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from conftest import (
    bt_ordered_sum,
    bt_run,
    bt_run_on,
    bt_same_code,
    bt_spirv_missing,
    bt_sum_k,
    bt_sum_ulps,
    bt_target_missing,
    bt_ulps,
)

import eagle
import hawk
import hawk.math as m
from hawk import Grid, Index, Matrix, Mutable, Param, Scalar, Sorted, Vector
from hawk.errors import KernelError

DTYPES = [np.float64, np.float32]
ORDERED_LENGTHS = [1, 5, 1023, 1024, 1025, 4097, 70_001, 262_147]


# tests that need spirv-val but no Vulkan device: they run wherever the compiler does
COMPILE_ONLY = {"test_every_kernel_of_the_suite_compiles_and_passes_spirv_val", "test_check_reports_spirv_val_words",
                "test_float64_math_without_an_implementation_is_refused_naming_it"}


@pytest.fixture(scope="module")
def vulkan():
    why = bt_target_missing("spirv")
    if why:
        bt_spirv_missing(f"target 'spirv' cannot run here: {why}")
    from eagle.targets.vulkan_runtime import VulkanRuntime

    return VulkanRuntime.shared()


@pytest.fixture(autouse=True)
def validated(request, monkeypatch):
    """spirv-val (Vulkan 1.2) accepts every binary a test launches, once per binary; a test that launches skips
    (saying why) without a Vulkan device."""
    if shutil.which("spirv-val") is None:
        bt_spirv_missing("spirv-val is missing (apt-get install spirv-tools)")
    if request.node.originalname in COMPILE_ONLY:
        return
    vulkan = request.getfixturevalue("vulkan")
    from hawk.targets.spirv import SpirvTarget

    launch = type(vulkan).launch
    seen = _VALIDATED

    def checked(self, binary, entry, buffers, written, grid, **kw):
        if binary not in seen:
            SpirvTarget().check(binary)
            seen.add(binary)
        return launch(self, binary, entry, buffers, written, grid, **kw)

    monkeypatch.setattr(type(vulkan), "launch", checked)


_VALIDATED: set[bytes] = set()


def both(kernel, **planes):
    """(host result, spirv result), each planes dict copied so that sinks start equal."""
    copy = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in planes.items()}
    return bt_run(kernel, **planes), bt_run_on("spirv", kernel, **copy)


def same_bits(a, b, what=""):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, what
    nan = np.isnan(a) & np.isnan(b)
    a, b = np.where(nan, 0, a), np.where(nan, 0, b)
    assert a.tobytes() == b.tobytes(), f"{what}: host {a.ravel()[:4]} spirv {b.ravel()[:4]}"


# ============================================================================================ reductions


@hawk.kernel
def v_totals(x: Scalar, total: Mutable[Scalar], avg: Mutable[Scalar]):
    total = hawk.sum(x)
    avg = hawk.mean(x)


@hawk.kernel
def v_top(x: Scalar) -> Scalar:
    return hawk.max(x)


@hawk.kernel
def v_low(x: Scalar) -> Scalar:
    return hawk.min(x)


@hawk.kernel
def v_masked(x: Scalar, cut: Param, tot: Mutable[Scalar], avg: Mutable[Scalar]):
    tot = hawk.sum(x, where=x > cut)
    avg = hawk.mean(x * 2.0, where=x > cut)


@hawk.kernel
def v_masked_top(x: Scalar, cut: Param) -> Scalar:
    return hawk.max(-x, where=x > cut)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [0, 1, 7, 1000, 4097, 100_003])
def test_sum_mean_max_min(n, dtype):
    x = np.random.default_rng(100 + n).normal(0.5, 2.0, size=n).astype(dtype)
    host, dev = both(v_totals, x=x)
    top, low = both(v_top, x=x), both(v_low, x=x)
    for got in (dev["total"], dev["avg"], top[1], low[1]):
        assert got.shape == (1,) and got.dtype == dtype
    if n == 0:  # the identities, as on the host (a zero-trip loop on the device keeps its initial value)
        assert dev["total"][0] == 0.0 and np.isnan(dev["avg"][0])
        assert top[1][0] == -np.inf and low[1][0] == np.inf
        return
    k = bt_sum_k(n, dtype)
    assert bt_sum_ulps(dev["total"][0], x) <= k
    assert bt_sum_ulps(float(dev["avg"][0]) * n, x) <= k + 2.0
    assert top[1][0] == x.max() and low[1][0] == x.min()
    same_bits(*top), same_bits(*low)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cut", [-1.0, 0.3, 99.0])
def test_masked_reductions(cut, dtype):
    x = np.random.default_rng(7).normal(size=5003).astype(dtype)
    host, dev = both(v_masked, x=x, cut=cut)
    top = both(v_masked_top, x=x, cut=cut)
    kept = x[x > cut]
    assert bt_sum_ulps(dev["tot"][0], kept) <= bt_sum_k(kept.size, dtype)
    if kept.size:
        assert bt_sum_ulps(float(dev["avg"][0]) * kept.size, 2.0 * kept) <= bt_sum_k(kept.size, dtype) + 2.0
        assert top[1][0] == (-kept).max()
    else:
        assert dev["tot"][0] == 0.0 and np.isnan(dev["avg"][0]) and top[1][0] == -np.inf
    same_bits(*top)


# ============================================================================================ grids, over=

TICKS = 37


@hawk.kernel
def v_energy(lane: Grid["band", "tick":TICKS], x: Scalar) -> Scalar:
    return hawk.sum(x * x, over="tick")


@hawk.kernel
def v_cols(lane: Grid["row", "col":5], x: Scalar) -> Scalar:
    return hawk.sum(x, over="row", policy="compensated")


@hawk.kernel
def v_cols_top(lane: Grid["row", "col":5], x: Scalar) -> Scalar:
    return hawk.max(x + lane.col, over="row")


@hawk.kernel
def v_coords(lane: Grid["row", "col":6], x: Scalar, y: Mutable[Scalar]):
    y = x * lane.row + lane.col


@pytest.mark.parametrize("dtype", DTYPES)
def test_grid_reductions_keep_axes(dtype):
    rng = np.random.default_rng(11)
    x = rng.normal(size=(300, TICKS)).astype(dtype)
    host, dev = both(v_energy, x=x)
    assert dev.shape == (300,) and dev.dtype == dtype
    np.testing.assert_allclose(dev, (x.astype(np.float64) ** 2).sum(1), rtol=1e-5 if dtype == np.float32 else 1e-13)
    y = rng.normal(size=(2001, 5)).astype(dtype)
    host, dev = both(v_cols, x=y)
    for c in range(5):
        assert bt_sum_ulps(dev[c], y[:, c]) <= 1.0
    same_bits(host, dev, "compensated sum over rows")
    host, dev = both(v_cols_top, x=y)
    np.testing.assert_array_equal(dev, (y + np.arange(5, dtype=dtype)).max(0))


def test_grid_coordinates():
    x = np.random.default_rng(12).normal(size=(9, 6))
    host, dev = both(v_coords, x=x)
    same_bits(host, dev)
    np.testing.assert_array_equal(dev, x * np.arange(9)[:, None] + np.arange(6)[None, :])


# ============================================================================================ payloads

RM, CM = 2, 3


@hawk.kernel
def v_cells(mm: Matrix[RM, CM], v: Vector[3], whole: Mutable[Matrix[RM, CM]], first: Mutable[Vector[CM]],
            folded: Mutable[Scalar], vs: Mutable[Vector[3]]):
    whole = hawk.sum(mm)
    first = hawk.sum(mm.rows[0])
    folded = hawk.sum(v.sum() + mm.sum(axis="rows").components[1])
    vs = hawk.sum(v * 2.0, policy="ordered")


@pytest.mark.parametrize("dtype", DTYPES)
def test_vector_and_matrix_cells(dtype):
    rng = np.random.default_rng(13)
    n = 3001
    mm = rng.normal(size=(RM, CM, n)).astype(dtype)
    v = rng.normal(size=(3, n)).astype(dtype)
    host, dev = both(v_cells, mm=mm, v=v)

    def cell(out, name, size):  # a vector or matrix cell comes back one component per name, row-major
        return np.array([out[f"{name}_{k}"][0] for k in range(size)])

    rtol = 1e-4 if dtype == np.float32 else 1e-12
    wide = mm.astype(np.float64)
    np.testing.assert_allclose(cell(dev, "whole", RM * CM), wide.sum(-1).ravel(), rtol=rtol, atol=rtol)
    np.testing.assert_allclose(cell(dev, "first", CM), wide[0].sum(-1), rtol=rtol, atol=rtol)
    np.testing.assert_allclose(dev["folded"][0], v.astype(np.float64).sum() + wide[:, 1].sum(), rtol=rtol,
                               atol=rtol * 10)
    same_bits(cell(host, "vs", 3), cell(dev, "vs", 3), "ordered vector cell")


# ============================================================================================ scatters


@hawk.kernel
def v_hist(x: Scalar, counts: Mutable["bin":16]):
    hawk.scatter(counts)[m.index(x * 16.0, 16)] += 1.0


@hawk.kernel
def v_by_key(key: Index, x: Scalar, acc: Mutable["slot":7]):
    hawk.scatter(acc)[key] += x


@hawk.kernel
def v_by_sorted(key: Sorted[Index], x: Scalar, acc: Mutable["slot":7]):
    hawk.scatter(acc, policy="ordered")[key] += x


@hawk.kernel
def v_put(key: Index, x: Scalar, buf: Mutable["slot":9]):
    hawk.scatter(buf)[key] = x * 2.0


@hawk.kernel
def v_pairs(r: Index, c: Index, w: Scalar, tab: Mutable["ra":3, "ca":5]):
    hawk.scatter(tab)[r, c] += w


def test_histogram_with_m_index():
    x = np.random.default_rng(14).uniform(-0.1, 1.1, size=50_001)
    host, dev = both(v_hist, x=x)
    want = np.bincount(np.clip((x * 16.0).astype(np.int64), 0, 15), minlength=16).astype(float)
    np.testing.assert_array_equal(dev, want)
    same_bits(host, dev)


@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("n", [1, 7, 2500, 100_003])
def test_add_by_index_keys(n, itype):
    rng = np.random.default_rng(15 + n)
    key = rng.integers(0, 7, size=n).astype(itype)
    x = rng.normal(size=n)
    dev = bt_run_on("spirv", v_by_key, key=key, x=x)
    for s in range(7):
        assert bt_sum_ulps(dev[s], x[key == s]) <= 1.0  # "auto" scatters are compensated
    host = bt_run(v_by_key, key=key, x=x)
    np.testing.assert_allclose(dev, host, rtol=1e-15, atol=1e-13)


@hawk.kernel
def v_shifted(key: Index, x: Scalar, acc: Mutable["slot":7]):
    hawk.scatter(acc)[key + 1] += x  # a computed key: checked inside the kernel, on the device


@pytest.mark.parametrize("itype", [np.int32, np.int64])
def test_keys_outside_the_sink_are_refused_alike(itype):
    x = np.arange(1.0, 7.0)
    good = np.array([0, 5, 3, 2, 5, 1], dtype=itype)
    host, dev = both(v_shifted, key=good, x=x)
    same_bits(host, dev)
    np.testing.assert_array_equal(dev, np.bincount(good + 1, x, minlength=7))
    for bad, first in ((np.array([0, 6, 1, 6], dtype=itype), 7), (np.array([0, -3, 1, 3], dtype=itype), -2)):
        for t in ("host", "spirv"):
            with pytest.raises(eagle.InputError, match=rf"sink 'acc'.*first bad key: {first}\b"):
                bt_run_on(t, v_shifted, key=bad, x=x[:4])


def test_sorted_keys_ordered_and_store_and_pairs():
    rng = np.random.default_rng(16)
    key = np.sort(rng.integers(0, 7, size=20_011)).astype(np.int32)
    x = rng.normal(size=key.size) * 10.0 ** rng.integers(-8, 8, size=key.size)
    host, dev = both(v_by_sorted, key=key, x=x)
    same_bits(host, dev, "ordered scatter with sorted keys")
    perm = rng.permutation(9).astype(np.int64)
    xs = np.linspace(-4.0, 4.0, 9)
    prior = np.full(9, -9.0)
    host, dev = both(v_put, key=perm[:6], x=xs[:6], buf=prior)
    want = prior.copy()
    want[perm[:6]] = xs[:6] * 2.0
    np.testing.assert_array_equal(dev, want)
    r, c = rng.integers(0, 3, size=999).astype(np.int32), rng.integers(0, 5, size=999).astype(np.int32)
    w = rng.normal(size=999)
    host, dev = both(v_pairs, r=r, c=c, w=w)
    want = np.zeros((3, 5))
    np.add.at(want, (r, c), w)
    np.testing.assert_allclose(dev, want, rtol=1e-14, atol=1e-14)


# ============================================================================================ .at, stages

NC = 7


@hawk.kernel
def v_smooth(lane: Grid["row", "col":NC], u: Scalar, wgt: Param) -> Scalar:
    i, j = lane.row, lane.col
    if m.land(m.land(i > 0, i < 4), m.land(j > 0, j < NC - 1)):
        acc = (u.at(row=i - 1, col=j) + u.at(row=i + 1, col=j)
               + u.at(row=i, col=j - 1) + u.at(row=i, col=j + 1)) * wgt + u * (1.0 - 4.0 * wgt)
    else:
        acc = u
    return acc


@hawk.kernel
def v_gather(x: Scalar, src: Index, y: Mutable[Scalar]):
    y = x.at(src) * 3.0 - x


@hawk.kernel
def v_standardize(x: Scalar, z: Mutable[Scalar]):
    mu = hawk.mean(x, policy="ordered")
    d = x - mu
    var = hawk.mean(d * d, policy="ordered")
    z = d / m.sqrt(var)


@hawk.kernel
def v_mixed(key: Index, x: Scalar, y: Mutable[Scalar], total: Mutable[Scalar], counts: Mutable["k":5],
            z: Mutable[Scalar]):
    y = 2.0 * x
    hawk.scatter(counts)[key] += 1.0
    total = hawk.sum(x, policy="ordered")
    z = x / total


def test_stencil_and_gather():
    rng = np.random.default_rng(17)
    u = rng.normal(size=(5, NC))
    host, dev = both(v_smooth, u=u, wgt=0.125, row=5)
    same_bits(host, dev, "stencil")
    want = u.copy()
    want[1:-1, 1:-1] = (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]) * 0.125 + u[1:-1, 1:-1] * 0.5
    np.testing.assert_allclose(dev, want, rtol=1e-15)
    x = rng.normal(size=1000)
    src = rng.integers(0, 1000, size=1000).astype(np.int32)
    host, dev = both(v_gather, x=x, src=src)
    same_bits(host, dev, "gather")


@pytest.mark.parametrize("dtype", DTYPES)
def test_staged_kernels(dtype):
    rng = np.random.default_rng(18)
    x = rng.normal(3.0, 2.0, size=30_001).astype(dtype)
    assert v_standardize.stage_count > 1
    host, dev = both(v_standardize, x=x)
    same_bits(host, dev, "standardize (ordered means read in a later stage)")
    key = rng.integers(0, 5, size=x.size).astype(np.int64)
    host, dev = both(v_mixed, key=key, x=x)
    for name in ("y", "total", "counts", "z"):
        same_bits(host[name], dev[name], name)


# ============================================================================================ policies


@hawk.kernel
def v_comp(x: Scalar, tot: Mutable[Scalar], avg: Mutable[Scalar]):
    tot = hawk.sum(x, policy="compensated")
    avg = hawk.mean(x, policy="compensated")


@hawk.kernel
def v_sc_comp(key: Index, x: Scalar, acc: Mutable["slot":4]):
    hawk.scatter(acc, policy="compensated")[key] += x


@hawk.kernel
def v_sc_plain(key: Index, x: Scalar, acc: Mutable["slot":4]):
    hawk.scatter(acc, policy="plain")[key] += x


def _cancelling(n, dtype, rng):
    big = rng.normal(size=n // 2) * 1e8
    t = np.concatenate([big, -big, rng.normal(size=n - 2 * (n // 2))])
    rng.shuffle(t)
    return t.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_compensated_sums_and_scatters_within_one_eps(dtype):
    rng = np.random.default_rng(19)
    x = _cancelling(200_001, dtype, rng)
    dev = bt_run_on("spirv", v_comp, x=x)
    assert bt_sum_ulps(dev["tot"][0], x) <= 1.0
    key = rng.integers(0, 4, size=x.size).astype(np.int32)
    for kernel in (v_sc_comp, v_sc_plain):
        dev = bt_run_on("spirv", kernel, key=key, x=x)
        if kernel is v_sc_comp:
            for s in range(4):
                assert bt_sum_ulps(dev[s], x[key == s]) <= 1.0
        else:  # "plain" promises no bound, only a sum: check it is one
            np.testing.assert_allclose(dev.astype(np.float64), np.bincount(key, x.astype(np.float64), 4),
                                       atol=1e-6 * np.abs(x).astype(np.float64).sum())


# ============================================================================================ ordered: same bits


@hawk.kernel
def v_ord(x: Scalar) -> Scalar:
    return hawk.sum(x, policy="ordered")


@hawk.kernel
def v_ord_terms(x: Scalar, y: Scalar, z: Scalar, cut: Param, tot: Mutable[Scalar], avg: Mutable[Scalar],
                part: Mutable[Scalar]):
    tot = hawk.sum(x * y + z, policy="ordered")  # x*y + z: a contraction to fma would change the bits
    avg = hawk.mean(x * y - z, where=x > cut, policy="ordered")
    part = hawk.sum(x, where=x > cut, policy="ordered")


@hawk.kernel
def v_ord_scatter(key: Index, x: Scalar, y: Scalar, acc: Mutable["slot":8]):
    hawk.scatter(acc, policy="ordered")[key] += x * y


def _hard(n, dtype, rng):
    """Terms that expose reassociation, contraction and flushing: wide magnitudes, cancellation, subnormals."""
    info = np.finfo(dtype)
    x = rng.normal(size=n) * 10.0 ** rng.integers(-6, 7, size=n)
    x[::7] = -x[::7] * (1 + info.eps)
    x[3::11] = info.tiny * rng.uniform(0.001, 0.9, size=x[3::11].size)  # subnormals
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", ORDERED_LENGTHS)
def test_ordered_sum_same_bits_as_host(n, dtype):
    rng = np.random.default_rng(20 + n)
    x = _hard(n, dtype, rng)
    y = (1.0 + rng.uniform(-1, 1, size=n) * np.finfo(dtype).eps * 64).astype(dtype)
    z = -(x * y)  # rounded once here: x*y + z is 0 for those lanes unless fused
    z[::3] = rng.normal(size=z[::3].size).astype(dtype)
    host, dev = both(v_ord, x=x)
    same_bits(host, dev, f"ordered sum n={n}")
    same_bits(dev, [bt_ordered_sum(x)], f"the exact sum rounded once, n={n}")
    host, dev = both(v_ord_terms, x=x, y=y, z=z, cut=0.0)
    for name in ("tot", "avg", "part"):
        same_bits(host[name], dev[name], f"{name} n={n}")
    keep = x > 0.0
    same_bits(dev["tot"], [bt_ordered_sum(x * y + z)], f"exact tot n={n}")  # NumPy forms the terms unfused too
    same_bits(dev["part"], [bt_ordered_sum(x, mask=keep)], f"exact part n={n}")
    if keep.any():
        same_bits(dev["avg"], [bt_ordered_sum(x * y - z, mask=keep) / dtype(keep.sum())], f"exact avg n={n}")


def _adversarial(dtype, rng):
    """Sets whose naive sums go wrong: cancellation to a tiny rest, magnitudes across the whole range, subnormals
    only, partial sums past the largest finite value whose exact sum is finite, long runs of one value."""
    info = np.finfo(dtype)
    big, tiny = float(info.max), float(info.tiny)
    spread = rng.standard_normal(5000) * 10.0 ** rng.integers(info.minexp // 4, info.maxexp // 4, 5000)
    return {
        "cancellation": np.array([1.0, 1e100 if dtype == np.float64 else 1e30, 1.0, -1e100 if dtype == np.float64
                                  else -1e30] * 300 + [info.eps / 4]),
        "range": np.concatenate([spread, -spread[::2]]),
        "subnormals": rng.uniform(-1, 1, 4000) * tiny,
        "overflowing partials": np.array([big, big, 0.5 * big, -big, -big] * 50 + [1.0]),
        "runs": np.full(70_001, 0.1),
        "signed zeros": np.array([-0.0] * 1000 + [0.0] + [-0.0] * 99),
    }


@pytest.mark.parametrize("dtype", DTYPES)
def test_ordered_sum_of_adversarial_sets_is_exact(dtype):
    """math.fsum's answer (the exact sum rounded once; float32 rounded from the exact value), on the host and on
    spirv, for sets where any fixed order of float adds goes wrong."""
    rng = np.random.default_rng(23)
    for what, terms in _adversarial(dtype, rng).items():
        x = terms.astype(dtype)
        rng.shuffle(x)
        want = bt_ordered_sum(x)
        host, dev = both(v_ord, x=x)
        same_bits(dev, [want], f"{what}: spirv")
        same_bits(host, [want], f"{what}: host")
        if dtype == np.float64 and what != "overflowing partials":
            assert dev[0] == math.fsum(x.tolist()), what


@pytest.mark.parametrize("dtype", DTYPES)
def test_ordered_sum_special_values(dtype):
    rng = np.random.default_rng(21)
    for fill in (-0.0, np.inf, np.nan):
        x = rng.normal(size=3001).astype(dtype)
        if fill == -0.0:
            x[:] = -0.0
        else:
            x[1777] = fill
        host, dev = both(v_ord, x=x)
        same_bits(host, dev, f"fill {fill}")
        want = {-0.0: 0.0, np.inf: np.inf, np.nan: np.nan}[fill]  # a zero sum is +0.0
        same_bits(dev, np.array([want], dtype), f"fill {fill}: the IEEE answer")
    x = rng.normal(size=3001).astype(dtype)
    x[5], x[2900] = np.inf, -np.inf
    same_bits(both(v_ord, x=x)[1], np.array([np.nan], dtype), "+inf and -inf: NaN")


@pytest.mark.parametrize("dtype", DTYPES)
def test_ordered_scatter_same_bits_as_host(dtype):
    rng = np.random.default_rng(22)
    n = 100_003
    x = _hard(n, dtype, rng)
    y = rng.normal(size=n).astype(dtype)
    key = rng.integers(-1, 8, size=n).astype(np.int32)
    prior = rng.normal(size=8).astype(dtype)
    host, dev = both(v_ord_scatter, key=key, x=x, y=y, acc=prior.copy())
    same_bits(host, dev, "ordered scatter")
    terms = x * y  # the prior content is one more term of each slot; key -1 adds nothing
    want = [bt_ordered_sum(np.r_[prior[k:k + 1], terms[key == k]]) for k in range(8)]
    same_bits(dev, np.array(want, dtype), "each slot's exact sum, the prior content included")


# ============================================================================================ refusals, limits


@hawk.kernel
def v_math1(x: Scalar, e: Mutable[Scalar], lg: Mutable[Scalar], s: Mutable[Scalar], c: Mutable[Scalar],
            t: Mutable[Scalar], e2: Mutable[Scalar], l2: Mutable[Scalar], l10: Mutable[Scalar], at: Mutable[Scalar]):
    e = m.exp(x)
    lg = m.log(x)
    s = m.sin(x)
    c = m.cos(x)
    t = m.tan(x)
    e2 = m.exp2(x)
    l2 = m.log2(x)
    l10 = m.log10(x)
    at = m.atan(x)


@hawk.kernel
def v_math2(x: Scalar, y: Scalar, a2: Mutable[Scalar], asn: Mutable[Scalar], acs: Mutable[Scalar],
            q: Mutable[Scalar], r: Mutable[Scalar]):
    a2 = m.atan2(y, x)
    asn = m.asin(y)
    acs = m.acos(y)
    q = y / x
    r = m.sqrt(x)


@hawk.kernel
def v_math32(x: Scalar, y: Scalar, em1: Mutable[Scalar], l1p: Mutable[Scalar], sh: Mutable[Scalar],
             ch: Mutable[Scalar], th: Mutable[Scalar], pw: Mutable[Scalar]):
    em1 = m.expm1(x)
    l1p = m.log1p(x)
    sh = m.sinh(x)
    ch = m.cosh(x)
    th = m.tanh(x)
    pw = x ** y


@hawk.kernel
def v_sin(x: Scalar) -> Scalar:
    return m.sin(x)


@hawk.kernel
def v_pow(x: Scalar, y: Scalar, z: Mutable[Scalar]):
    z = x ** y + m.tanh(x)


def _ulps(got, want, dtype) -> float:
    """The largest error in ulps of `dtype` at `want` (conftest.bt_ulps: zeros, infinities and NaNs exactly)."""
    return float(bt_ulps(got, want, dtype).max())


SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 5e-324, 1e-310, 1e-300, -1e-300,
                     1e-40, 1e-7, 20.0, -20.0, 88.7, 89.5, -87.0, -104.0, 709.78, 709.79, -708.5, -740.0, -745.2,
                     np.pi, np.pi / 2, 355.0, 103993.0, 1647099.0, -1647099.0])


def _inputs(dtype, rng):
    x = np.concatenate([rng.uniform(-10, 10, 20_000), np.exp(rng.uniform(-80, 14, 20_000)),
                        rng.normal(size=2000) * 1e-6, 1 - np.exp(rng.uniform(-40, -1, 2000)), SPECIALS])
    with np.errstate(over="ignore"):
        return x.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_math_within_an_ulp_or_two(dtype):
    """float64: within 1 ulp of the correctly rounded value (2 for tan, log10, asin, acos, atan2); float32 (computed
    in float64, rounded once): within 1 ulp too (the float64 reference rounded to float32). Zeros, infinities and
    nans exactly."""
    rng = np.random.default_rng(30)
    x = _inputs(dtype, rng)
    ref = x.astype(np.float64)
    dev = bt_run_on("spirv", v_math1, x=x)
    two = {"t", "l10"}
    for name, f in dict(e=np.exp, lg=np.log, s=np.sin, c=np.cos, t=np.tan, e2=np.exp2, l2=np.log2, l10=np.log10,
                        at=np.arctan).items():
        with np.errstate(all="ignore"):
            want = f(ref).astype(dtype)
        assert _ulps(dev[name], want, dtype) <= (2.0 if name in two and dtype == np.float64 else 1.0), name
    y = rng.uniform(-1.2, 1.2, size=x.size).astype(dtype)
    y[-len(SPECIALS):] = SPECIALS[::-1].astype(dtype)
    dev = bt_run_on("spirv", v_math2, x=x, y=y)
    with np.errstate(all="ignore"):
        wants = dict(a2=np.arctan2(y.astype(np.float64), ref), asn=np.arcsin(y.astype(np.float64)),
                     acs=np.arccos(y.astype(np.float64)), q=y.astype(np.float64) / ref, r=np.sqrt(ref))
    for name, want in wants.items():
        tol = 0.0 if name in ("q", "r") else 2.0 if dtype == np.float64 else 1.0  # division and sqrt: exact
        with np.errstate(over="ignore"):
            want = want.astype(dtype)
        assert _ulps(dev[name], want, dtype) <= tol, name


def test_float32_only_math_within_an_ulp():
    rng = np.random.default_rng(31)
    x = _inputs(np.float32, rng)
    y = rng.uniform(-4, 4, size=x.size).astype(np.float32)
    y[:50] = np.round(y[:50])
    x[:25] = -np.abs(x[:25])  # negative bases with integer exponents
    dev = bt_run_on("spirv", v_math32, x=x, y=y)
    ref = x.astype(np.float64)
    with np.errstate(all="ignore"):
        wants = dict(em1=np.expm1(ref), l1p=np.log1p(ref), sh=np.sinh(ref), ch=np.cosh(ref), th=np.tanh(ref),
                     pw=ref ** y.astype(np.float64))
    for name, want in wants.items():
        with np.errstate(over="ignore"):
            want = want.astype(np.float32)
        assert _ulps(dev[name], want, np.float32) <= 1.0, name


@hawk.kernel
def v_trig(x: Scalar, s: Mutable[Scalar], c: Mutable[Scalar], t: Mutable[Scalar]):
    s = m.sin(x)
    c = m.cos(x)
    t = m.tan(x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_trig_of_huge_arguments_has_the_hosts_bits(vulkan, dtype):
    """Beyond 2^19 pi the three-part reduction is not exact: such lanes take the host's Payne-Hanek reduction
    (hawk/targets/host_math.py) in a branch, so every argument, up to the largest finite one, gives the host's
    bits (which tests/test_host_math.py holds within an ulp of the correctly rounded value); near ones too."""
    rng = np.random.default_rng(37)
    top = 38 if dtype == np.float32 else 308
    x = np.concatenate([rng.uniform(-10.0, 10.0, 64), 10.0 ** rng.uniform(6.0, top, 400) * rng.choice([-1, 1], 400),
                        [1647099.0, 1647100.0, 3e6, float(np.finfo(dtype).max), -float(np.finfo(dtype).max),
                         2.0 ** 30 * np.pi, np.inf, -np.inf, np.nan, 0.0, -0.0]]).astype(dtype)
    dev = bt_run_on("spirv", v_trig, x=x)
    host = eagle.deploy(v_trig).run(x=x)
    for name in "sct":
        assert np.asarray(dev[name]).tobytes() == np.asarray(host[name]).tobytes(), name


@hawk.kernel
def v_erf(x: Scalar) -> Scalar:
    return m.erf(x) + m.tanh(x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_erf_runs_at_both_widths(vulkan, dtype):
    # (erf after fdlibm on the target's exp; accuracy: tests/test_spirv_math64.py. Refusals of math a target
    # lacks, which the front end no longer reaches on spirv: tests/test_target_refusals.py)
    x = np.linspace(-3.0, 3.0, 101)
    dev = bt_run_on("spirv", v_erf, x=x.astype(dtype))
    want = np.array([math.erf(v) for v in x.astype(dtype).astype(np.float64).tolist()]) + np.tanh(x.astype(dtype))
    np.testing.assert_allclose(dev, want, rtol=3e-7 if dtype == np.float32 else 1e-15, atol=1e-15)


@pytest.mark.parametrize("dtype", DTYPES)
def test_pow_and_tanh_run(vulkan, dtype):
    x = np.linspace(0.1, 1.4, 101)
    dev = bt_run_on("spirv", v_pow, x=x.astype(dtype), y=x.astype(dtype))
    np.testing.assert_allclose(dev, x ** x + np.tanh(x), rtol=3e-7 if dtype == np.float32 else 1e-15)


@hawk.kernel
def v_store_then_add(key: Index, x: Scalar, acc: Mutable["slot":4]):
    hawk.scatter(acc)[key] = x
    hawk.scatter(acc, policy="plain")[key] += 1.0


@hawk.kernel
def v_long_loop(x: Scalar, y: Mutable[Scalar]):
    s = 0.0
    for _ in range(70_000):  # a recurrence no compiler can fold away
        s = m.sin(s * x + 1.0)
    y = s


def test_one_long_invocation_runs_or_is_refused_never_wrong(vulkan):
    # a sink both stored and added into runs as several chunks in lane order (per-chunk copies, the store rule
    # in the finish), so 800k lanes no longer make one invocation run every lane; one lane's own loop of 70k
    # trips does: lavapipe ends an invocation's loops after 65535 trips, and the run is refused, never wrong
    from eagle.targets.vulkan_runtime import LoopBudgetExceeded

    for n in (400_000, 800_000):
        key = np.arange(n, dtype=np.int32) % 4
        got = bt_run_on("spirv", v_store_then_add, key=key, x=np.arange(n, dtype=np.float64))
        np.testing.assert_array_equal(got, np.arange(n - 4, n, dtype=np.float64) + 1.0)
    if "llvmpipe" in vulkan.device_name:
        with pytest.raises(LoopBudgetExceeded, match="65535 loop iterations"):
            bt_run_on("spirv", v_long_loop, x=np.ones(8))


@hawk.kernel
def v_two_stages(x: Scalar, key: Index, acc: Mutable["slot":4], z: Mutable[Scalar], y: Mutable[Scalar]):  # noqa: F821
    z = x * 2.0  # (the first stage writes z)
    y = x - hawk.mean(x)  # (read back: a second stage, which also scatters)
    hawk.scatter(acc)[key] += y


def test_more_storage_buffers_than_the_device_allows_is_refused_untouched(vulkan, monkeypatch):
    """A stage that binds more storage buffers than the device gives a shader is refused before its dispatch,
    saying what to do instead; when the first stage fits and the second does not, the run still leaves every
    array the caller passed as it was (the first stage's output too)."""
    x, key = np.arange(64, dtype=np.float64), (np.arange(64) % 4).astype(np.int32)
    plan = eagle.deploy(v_two_stages, target="spirv")
    refused = {}
    for most in range(2, 64):  # from no stage fitting to both: each refusal leaves the passed arrays alone
        monkeypatch.setattr(vulkan, "max_buffers", most)
        acc, z = np.full(4, 7.0), np.full(64, 5.0)
        try:
            got = plan.run(x=x, key=key, acc=acc, z=z)
        except RuntimeError as exc:
            assert f"allows {most} per shader: run it on another target" in str(exc), str(exc)
            assert "split the kernel" in str(exc)
            assert acc.tobytes() == np.full(4, 7.0).tobytes() and z.tobytes() == np.full(64, 5.0).tobytes()
            refused[str(exc).split("'")[3]] = most
            continue
        np.testing.assert_allclose(got["z"], 2 * x)
        np.testing.assert_allclose(got["acc"], 7.0 + np.bincount(key, x - x.mean()))
        break
    assert set(refused) == {"v_two_stages_lanes", "v_two_stages_2_lanes"}, refused  # (the second after the first ran)


def _suite_kernels():
    """(module, name, kernel) of every @hawk.kernel defined at module level in the test suite's modules."""
    tests = Path(__file__).resolve().parent
    for p in (str(tests), str(tests.parent)):
        if p not in sys.path:
            sys.path.insert(0, p)
    from hawk.compiler import Kernel

    for path in sorted(tests.glob("test_*.py")):
        try:
            mod = importlib.import_module(path.stem)
        except Exception:  # a module that cannot import (a missing optional package) has its own failing test
            continue
        for name, value in vars(mod).items():
            if isinstance(value, Kernel) and value.fn.__module__ == mod.__name__:
                yield path.stem, name, value


@pytest.mark.slow
def test_every_kernel_of_the_suite_compiles_and_passes_spirv_val():
    """float64 builds of every stage of every kernel in tests/, and float32 builds of a fixed quarter of them (by a
    hash of the name, so the sample does not move when kernels are added; the float32 paths are the same code with
    narrower types, and runs on lavapipe test float32 kernels throughout): spirv-val (Vulkan 1.2) accepts each,
    or the target refuses it at compile time naming the math it lacks. Binaries come from the compile cache when
    they are there, as a run would take them; a stage whose module is another's but for the names (kernels of
    different tests are often the same code: a quarter of the stages) takes that one's verdict."""
    from eagle import cache
    from eagle.targets.device import device_binary
    from hawk.targets.spirv import SpirvTarget

    target = SpirvTarget()
    failed, built, refused, seen = [], 0, [], {}
    for module, name, kernel in _suite_kernels():
        for dtype in ("float64", "float32") if zlib.crc32(f"{module}.{name}".encode()) % 4 == 0 else ("float64",):
            spec = kernel.spec_for(dtype, {})
            for k, st in enumerate(kernel.stages(spec)):
                key, same = cache.key(st.key, repr(kernel), repr(spec), "spirv", target.options), None
                try:  # kernels of different tests are often the same code under other names: one build each
                    text = kernel.lowered_gpu(spec, k, target.subgroup, target.float_atomics,
                                              target.wide_loops).gpu_module
                    same = bt_same_code(text, st.name)
                    if same not in seen:
                        binary = device_binary(key, st.name, target.suffix,  # (what a run compiles: the same key)
                                               lambda kernel=kernel, spec=spec, k=k: kernel.device_binary(spec, k,
                                                                                                         target))
                        if binary not in _VALIDATED:
                            target.check(binary)
                            _VALIDATED.add(binary)
                        seen[same] = None
                    if seen[same] is not None:
                        raise seen[same]
                    built += 1
                except KernelError as exc:
                    if same is not None:
                        seen.setdefault(same, exc)
                    if "target 'spirv' cannot compute" not in str(exc):
                        failed.append(f"{module}.{name} {dtype} stage {k}: {exc}")
                    refused.append(f"{name} {dtype}")
                except Exception as exc:
                    if same is not None:
                        seen.setdefault(same, exc)
                    failed.append(f"{module}.{name} {dtype} stage {k}: {type(exc).__name__}: {str(exc)[:400]}")
    print(f"spirv: {built} stages built and validated ({len(seen)} distinct); refused at compile time: {refused}")
    assert built > 200 and not failed, "\n".join(failed)


def test_check_reports_spirv_val_words():
    from hawk.targets.spirv import SpirvTarget

    with pytest.raises(RuntimeError, match="spirv-val"):
        SpirvTarget().check(b"\x03\x02\x23\x07" + b"\0" * 16)


def test_a_missing_device_is_named(monkeypatch, vulkan):
    from eagle.targets.vulkan_runtime import VulkanRuntime

    monkeypatch.setenv("EAGLE_VULKAN_DEVICE", "no-such-device-anywhere")
    with pytest.raises(eagle.RuntimeMissing, match="no-such-device-anywhere"):
        VulkanRuntime()
