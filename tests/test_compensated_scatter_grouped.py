"""Compensated scatters whose lanes run in groups (hawk/passes/lower/split_scatters.py comp_adds): a kernel whose
only effects are compensated += of scalars into sinks kept in per-chunk copies (the "auto" policy of a scatter)
takes PAIR_LANES lanes at a time, their Neumaier steps side by side in one vector. A group whose slots coincide,
or that holds a key of -1 or outside the sink, falls back to lane-by-lane steps. Every route must leave each slot
with the bits the lane-by-lane form gives (the twin kernels below, which a plain sink beside keeps in that form),
at every split, within the compensated bound of the exact sum, and a bad key reported as one pass reports it.
"""

import math

import numpy as np
import pytest
from conftest import bt_group_bad_keys, bt_host_lanes_ir
from exact_families import split_runs

import hawk
from hawk import Index, Mutable, Scalar
from hawk import math as m
from hawk.passes.lower.split_scatters import PAIR_LANES

DTYPES = [np.float64, np.float32]


@hawk.kernel
def cq_one(key: Index, x: Scalar, acc: Mutable["slot":5]):
    hawk.scatter(acc)[key] += x


@hawk.kernel
def cq_one_twin(key: Index, x: Scalar, acc: Mutable["slot":5], raw: Mutable["slot":5]):
    hawk.scatter(acc)[key] += x
    hawk.scatter(raw, policy="plain")[key] += x  # (a plain sink beside: the lanes go one at a time)


@hawk.kernel
def cq_many(key: Index, x: Scalar, acc: Mutable["slot":5], tab: Mutable["r":3, "c":4]):
    hawk.scatter(acc, policy="compensated")[key] += x
    hawk.scatter(acc, policy="compensated")[4 - key] += x * 0.5  # a second scatter into the same sink
    hawk.scatter(tab, policy="compensated")[key % 3, key % 4] += x  # a 2-D sink


@hawk.kernel
def cq_many_twin(key: Index, x: Scalar, acc: Mutable["slot":5], tab: Mutable["r":3, "c":4],
                 raw: Mutable["slot":5]):
    hawk.scatter(acc, policy="compensated")[key] += x
    hawk.scatter(acc, policy="compensated")[4 - key] += x * 0.5
    hawk.scatter(tab, policy="compensated")[key % 3, key % 4] += x
    hawk.scatter(raw, policy="plain")[key] += x


@hawk.kernel
def cq_err(key: Index, k2: Index, x: Scalar, a: Mutable["slot":5], b: Mutable["slot":5]):
    hawk.scatter(a)[key - 1] += x  # (computed keys: checked as the lanes run)
    hawk.scatter(b)[k2 - 1] += x


@hawk.kernel
def cq_err_plain(key: Index, k2: Index, x: Scalar, a: Mutable["slot":5], b: Mutable["slot":5]):
    hawk.scatter(a, policy="plain")[key - 1] += x
    hawk.scatter(b, policy="plain")[k2 - 1] += x


@hawk.kernel
def cq_count(t: Scalar, n: Mutable["slot":5]):
    hawk.scatter(n)[m.index(t * 5.0, 5)] += 1.0  # whole-number counts: plain adds, the two-pass form


def _keys(n, rng):
    """Few slots (groups of PAIR_LANES lanes often share one), runs of one key, and keys of -1."""
    key = rng.integers(0, 5, n)
    key[rng.random(n) < 0.05] = -1
    for s in rng.integers(0, n - 40, 6):
        key[s:s + rng.integers(2, 40)] = rng.integers(0, 5)
    return key.astype(np.int32)


def _terms(n, dtype, rng):
    """Cancelling terms of many magnitudes (what compensation is for), and some zeros."""
    big = rng.choice([1e8, 1.0, 1e-8], n) * rng.standard_normal(n)
    big[rng.random(n) < 0.05] = 0.0
    return big.astype(dtype)


def _bits(a):
    return np.asarray(a).view(np.uint64 if np.asarray(a).dtype == np.float64 else np.uint32)


def _same(got, want, what):
    assert np.array_equal(_bits(got), _bits(want)), f"{what}: {got} != {want}"


def _near_exact(got, prior, key, x, dtype):
    """Each slot within a few ulps of the correctly rounded sum of its prior content and its terms."""
    for s in range(len(prior)):
        exact = math.fsum([float(prior[s])] + [float(v) for v in x[key == s]])
        tol = 4 * np.finfo(dtype).eps * max(abs(exact), float(np.abs(x[key == s]).max(initial=0.0)) * 1e-8)
        assert abs(float(got[s]) - exact) <= tol, (s, float(got[s]), exact)


@pytest.mark.parametrize("dtype", DTYPES)
def test_grouped_lanes_have_the_lane_by_lane_bits_under_every_split(dtype):
    rng = np.random.default_rng([12_501, int(dtype == np.float32)])
    n = 6 * 1024 + 3  # (lanes left over after the groups, in every chunk)
    key = _keys(n, rng)
    x = _terms(n, dtype, rng)
    prior = np.array([1e-3, -0.0, 3.0, 1.0, -2.0], dtype=dtype)
    twins = dict(split_runs(cq_one_twin, "host", threads=(1, 2, 4), key=key, x=x, acc=prior,
                            raw=np.zeros(5, dtype)))
    for threads, got in split_runs(cq_one, "host", threads=(1, 2, 4), key=key, x=x, acc=prior):
        _same(got, twins[threads]["acc"], f"threads={threads}")
        _near_exact(got, prior, key, x, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_specials_in_a_group(dtype):
    rng = np.random.default_rng([12_502, int(dtype == np.float32)])
    n = 2048 + 1
    key = rng.integers(0, 5, n).astype(np.int32)
    x = rng.standard_normal(n).astype(dtype)
    x[np.flatnonzero(key == 3)[:2]] = dtype(np.inf)  # slot 3: inf
    x[np.flatnonzero(key == 4)[:2]] = [dtype(np.inf), dtype(-np.inf)]  # slot 4: NaN
    x[np.flatnonzero(key == 2)[5]] = dtype(np.nan)  # slot 2: NaN
    prior = np.zeros(5, dtype)
    twins = dict(split_runs(cq_one_twin, "host", threads=(1, 2), key=key, x=x, acc=prior, raw=prior))
    for threads, got in split_runs(cq_one, "host", threads=(1, 2), key=key, x=x, acc=prior):
        _same(got, twins[threads]["acc"], f"threads={threads}")
        assert np.isposinf(got[3]) and np.isnan(got[4]) and np.isnan(got[2])
        assert np.isfinite(got[:2]).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_several_scatters_and_a_2d_sink_in_one_group(dtype):
    rng = np.random.default_rng([12_503, int(dtype == np.float32)])
    n = 5 * 1024 + 1
    key = rng.integers(0, 5, n).astype(np.int32)
    x = _terms(n, dtype, rng)
    prior = rng.standard_normal(5).astype(dtype)
    planes = dict(key=key, x=x, acc=prior, tab=np.zeros((3, 4), dtype))
    twins = dict(split_runs(cq_many_twin, "host", threads=(1, 4), raw=np.zeros(5, dtype), **planes))
    for threads, got in split_runs(cq_many, "host", threads=(1, 4), **planes):
        for name in ("acc", "tab"):
            _same(got[name], twins[threads][name], f"{name} threads={threads}")


@pytest.mark.parametrize("first_bad", [1, PAIR_LANES + 2, 4 * PAIR_LANES - 1])
def test_bad_keys_in_a_group_are_reported_in_lane_order(first_bad):
    a, b = np.arange(5.0), np.arange(5.0)
    bt_group_bad_keys(cq_err, cq_err_plain, first_bad, x=0.1, a=a, b=b)
    assert np.array_equal(a, np.arange(5.0)) and np.array_equal(b, np.arange(5.0))  # a refused run: untouched


def test_only_bodies_of_compensated_scatters_take_the_grouped_form(tmp_path):
    def grouped(kernel):  # the Neumaier step on a vector of PAIR_LANES float64 lanes
        return f"vector<{PAIR_LANES}xf64>" in bt_host_lanes_ir(kernel, tmp_path)

    assert grouped(cq_one) and grouped(cq_many)
    assert not grouped(cq_one_twin)  # a plain sink beside: one lane at a time
    assert not grouped(cq_count)  # whole-number counts: plain adds in the two-pass form
