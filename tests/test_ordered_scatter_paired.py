"""Ordered scatters whose lanes run in groups (hawk/passes/lower/split_scatters.py paired_driver, issue #11's cost
target): a kernel whose only effects are ordered += of scalars into sinks kept in per-chunk pairs takes
PAIR_LANES lanes at a time, their two TwoSums side by side in one vector. A group whose slots coincide, whose
pairs would lose a bit, or that holds a key of -1 or outside the sink, falls back to lane-by-lane steps. Every
route must leave each slot the exact sum of its prior content and its terms rounded once, with the same bits at
every thread count and on spirv, and a bad key must be reported as one pass reports it (lane order).
"""

import numpy as np
import pytest
from conftest import bt_group_bad_keys, bt_host_lanes_ir, bt_ordered_scatter
from exact_families import f_kahan, f_span, f_subnormal, f_zeros, same_bits, split_runs

import eagle
import hawk
from hawk import Index, Mutable, Scalar
from hawk.passes.lower.split_scatters import PAIR_LANES

pytestmark = pytest.mark.usefixtures("scatter_route")  # (both routes into the pairs: conftest)

DTYPES = [np.float64, np.float32]


@hawk.kernel
def xq_one(key: Index, x: Scalar, acc: Mutable["slot":5]):
    hawk.scatter(acc, policy="ordered")[key] += x


@hawk.kernel
def xq_many(key: Index, x: Scalar, acc: Mutable["slot":5], tab: Mutable["r":3, "c":4]):
    hawk.scatter(acc, policy="ordered")[key] += x
    hawk.scatter(acc, policy="ordered")[4 - key] += x * 0.5  # a second scatter into the same sink
    hawk.scatter(tab, policy="ordered")[key % 3, key % 4] += x  # a 2-D sink


@hawk.kernel
def xq_err(key: Index, k2: Index, x: Scalar, a: Mutable["slot":5], b: Mutable["slot":5]):
    hawk.scatter(a, policy="ordered")[key - 1] += x  # (computed keys: checked as the lanes run)
    hawk.scatter(b, policy="ordered")[k2 - 1] += x


@hawk.kernel
def xq_err_plain(key: Index, k2: Index, x: Scalar, a: Mutable["slot":5], b: Mutable["slot":5]):
    hawk.scatter(a, policy="plain")[key - 1] += x  # (plain: lane by lane, split_scatters' two passes)
    hawk.scatter(b, policy="plain")[k2 - 1] += x


@hawk.kernel
def xq_mixed(key: Index, x: Scalar, acc: Mutable["slot":5], raw: Mutable["slot":5]):
    hawk.scatter(acc, policy="ordered")[key] += x
    hawk.scatter(raw, policy="plain")[key] += x


def _terms(n, dtype, rng):
    """Adversarial terms: Kahan cancellations, 1e-300..1e300 (float32: its range, subnormals too), subnormals,
    +-0, and a few infinities and NaNs of their own (in separate slots, see _keys)."""
    q = n // 4
    x = np.concatenate([f_kahan(q, dtype, rng), f_span(q, dtype, rng), f_subnormal(q, dtype, rng),
                        f_zeros(n - 3 * q, dtype, rng)]).astype(dtype)
    return rng.permutation(x).astype(dtype)


def _keys(n, rng, specials=None):
    """Few slots (groups of PAIR_LANES lanes often share one), runs of one key, and keys of -1."""
    key = rng.integers(0, 5, n)
    key[rng.random(n) < 0.05] = -1
    for s in rng.integers(0, n - 40, 6):
        key[s:s + rng.integers(2, 40)] = rng.integers(0, 5)
    return key.astype(np.int32)


def _with_specials(key, x, dtype, rng):
    """inf in slot 3, -inf and inf in slot 4 (NaN), a NaN behind key -1 (adds nothing)."""
    x = x.copy()
    at = rng.choice(np.flatnonzero(key == 3), 2, replace=False)
    x[at] = dtype(np.inf)
    at = rng.choice(np.flatnonzero(key == 4), 2, replace=False)
    x[at] = [dtype(np.inf), dtype(-np.inf)]
    x[np.flatnonzero(key == -1)[:3]] = dtype(np.nan)
    return x


@pytest.mark.parametrize("dtype", DTYPES)
def test_grouped_lanes_are_exact_per_slot_under_every_split(target, dtype):
    rng = np.random.default_rng([11_401, int(dtype == np.float32)])
    n = 6 * 1024 + 3  # (lanes left over after the groups, in every chunk)
    key = _keys(n, rng)
    x = _with_specials(key, _terms(n, dtype, rng), dtype, rng)
    prior = np.array([1e-3, -0.0, 3.0, 1.0, -2.0], dtype=dtype)
    want = bt_ordered_scatter(prior, key, x, dtype)
    assert np.isposinf(want[3]) and np.isnan(want[4])
    outs = []
    for threads, got in split_runs(xq_one, target, key=key, x=x, acc=prior):
        same_bits(got, want, dtype, f"{target} threads={threads}")
        outs.append(got)
    clean = np.where(key >= 3, -1, key).astype(np.int32)  # finite slots only: the same data, no specials
    want = bt_ordered_scatter(prior, clean, x, dtype)
    for threads, got in split_runs(xq_one, target, threads=(1, 4), key=clean, x=x, acc=prior):
        same_bits(got, want, dtype, f"{target} finite threads={threads}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_several_scatters_and_a_2d_sink_in_one_group(target, dtype):
    rng = np.random.default_rng([11_402, int(dtype == np.float32)])
    n = 5 * 1024 + 1
    key = rng.integers(0, 5, n).astype(np.int32)
    x = _terms(n, dtype, rng)
    half = (x * dtype(0.5)).astype(dtype)  # the kernel's own term, rounded as it rounds it
    prior = rng.standard_normal(5).astype(dtype)
    want_acc = bt_ordered_scatter(prior, np.concatenate([key, 4 - key]), np.concatenate([x, half]), dtype)
    want_tab = bt_ordered_scatter(np.zeros((3, 4), dtype), (key % 3, key % 4), x, dtype)
    for threads, got in split_runs(xq_many, target, key=key, x=x, acc=prior):
        same_bits(got["acc"], want_acc, dtype, f"{target} acc threads={threads}")
        same_bits(got["tab"], want_tab, dtype, f"{target} tab threads={threads}")


@pytest.mark.parametrize("first_bad", [1, PAIR_LANES + 2, 4 * PAIR_LANES - 1])
def test_bad_keys_in_a_group_are_reported_in_lane_order(first_bad):
    bt_group_bad_keys(xq_err, xq_err_plain, first_bad)


def test_only_bodies_of_ordered_scatters_take_the_grouped_form(tmp_path):
    assert "vector.shuffle" in bt_host_lanes_ir(xq_one, tmp_path)
    assert "vector.shuffle" in bt_host_lanes_ir(xq_many, tmp_path)
    assert "vector.shuffle" not in bt_host_lanes_ir(xq_mixed, tmp_path)  # a plain sink beside: one lane at a time
    rng = np.random.default_rng(11_403)
    key = rng.integers(-1, 5, 3001).astype(np.int32)
    x = rng.standard_normal(3001) * 10.0 ** rng.uniform(-30, 30, 3001)
    out = eagle.deploy(xq_mixed, threads=2, min_chunk=512).run(key=key, x=x)
    same_bits(np.asarray(out["acc"]), bt_ordered_scatter(np.zeros(5), key, x, np.float64), np.float64, "mixed")
