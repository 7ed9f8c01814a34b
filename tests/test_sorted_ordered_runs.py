"""Ordered scatters keyed by a Sorted[Index] plane on the host (hawk/passes/lower/sorted_pairs.py, issue 11's
cost target for sorted keys): runs of equal keys summed exactly in vector registers, RUN_LANES lanes side by side,
a group at a run's edge, with a bad key, a key of -1 or a term too large for the pairs lane by lane. Every route
must leave each slot with the exact sum of its prior content and its terms, rounded once (conftest's exact
reference), at every thread count (runs that really split) and on spirv; bad keys are reported as the
lane-by-lane form reports them.
"""

import numpy as np
import pytest
from conftest import bt_bound_bad_keys, bt_lanes_func, bt_ordered_scatter
from exact_families import f_kahan, f_span, f_subnormal, f_zeros, same_bits, split_runs

import eagle
import hawk
from hawk import Index, Mutable, Scalar, Sorted
from hawk.abi.layout import COPY_SLOTS_ENV
from hawk.passes.lower.sorted_pairs import RUN_LANES

DTYPES = [np.float64, np.float32]
SLOTS = 7


@hawk.kernel
def so_run(key: Sorted[Index], x: Scalar, acc: Mutable["slot":7]):
    hawk.scatter(acc, policy="ordered")[key] += x


@hawk.kernel
def so_lane(key: Index, x: Scalar, acc: Mutable["slot":7]):
    hawk.scatter(acc, policy="ordered")[key] += x  # (unsorted keys: lane by lane into the slots' pairs)


def _terms(n, dtype, rng):
    q = n // 4
    x = np.concatenate([f_kahan(q, dtype, rng), f_span(q, dtype, rng), f_subnormal(q, dtype, rng),
                        f_zeros(n - 3 * q, dtype, rng)]).astype(dtype)
    return rng.permutation(x).astype(dtype)


def _sorted_keys(n, rng):
    """Runs of every length from 1 to a few thousand (groups inside runs and across their edges), -1 first."""
    lengths = np.concatenate([rng.integers(1, 2 * RUN_LANES, 40), rng.integers(100, 3000, SLOTS)])
    keys = np.sort(rng.integers(-1, SLOTS, lengths.size))
    out = np.repeat(keys, lengths)[:n]
    return np.concatenate([out, np.full(n - out.size, SLOTS - 1)]).astype(np.int32)


@pytest.mark.parametrize("dtype", DTYPES)
def test_runs_are_exact_per_slot_under_every_split(target, dtype):
    rng = np.random.default_rng([13_101, int(dtype == np.float32)])
    n = 9 * 1024 + 5  # (lanes left over after the groups, in every chunk)
    key = _sorted_keys(n, rng)
    x = _terms(n, dtype, rng)
    prior = rng.standard_normal(SLOTS).astype(dtype)
    want = bt_ordered_scatter(prior, key, x, dtype)
    for threads, got in split_runs(so_run, target, key=key, x=x, acc=prior):
        same_bits(got, want, dtype, f"{target} threads={threads}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_large_terms_and_specials(dtype):
    # terms the pairs may not take (2**(emax - 64) and up, inf, NaN) go to the accumulator as they are: a huge
    # cancelling pair leaves the small terms exact; inf in slot 4, inf and -inf in slot 5 (NaN), NaN in slot 6
    rng = np.random.default_rng([13_102, int(dtype == np.float32)])
    top = float(np.finfo(dtype).max) / 4
    key = np.repeat(np.arange(SLOTS), 300).astype(np.int32)
    x = (rng.standard_normal(key.size) * 1e-3).astype(dtype)
    for s, big in ((1, top), (2, 2.0 ** (64 if dtype == np.float32 else 960))):
        at = np.flatnonzero(key == s)
        x[at[[3, 150]]] = [big, -big]
    x[np.flatnonzero(key == 3)[::7]] = dtype(3.0e30 if dtype == np.float32 else 1e300)  # (sums overflow: inf)
    x[np.flatnonzero(key == 4)[10]] = np.inf
    x[np.flatnonzero(key == 5)[[20, 21]]] = [np.inf, -np.inf]
    x[np.flatnonzero(key == 6)[33]] = np.nan
    prior = np.zeros(SLOTS, dtype)
    want = bt_ordered_scatter(prior, key, x, dtype)
    assert np.isposinf(want[4]) and np.isnan(want[5]) and np.isnan(want[6])
    for threads, got in split_runs(so_run, "host", key=key, x=x, acc=prior):
        same_bits(got, want, dtype, f"threads={threads}")


@pytest.mark.parametrize("first_bad", [1, RUN_LANES + 3, 5 * RUN_LANES])
def test_a_bound_launch_reports_bad_keys_as_lane_by_lane(first_bad):
    # a bound launch reads its Index plane again at every launch (the caller may change it): the kernel checks
    # its keys as it runs, and the message (count of lanes, first bad key) is the unsorted form's
    n = 1000
    key = np.sort(np.random.default_rng(13_103).integers(0, SLOTS, n)).astype(np.int32)

    def spoil(k):
        k[first_bad:first_bad + 3] = SLOTS + 2  # (still sorted up to the next run)
        k[700:705] = -1  # (adds nothing)

    messages = bt_bound_bad_keys((so_run, so_lane), key, np.ones(n), SLOTS, spoil)
    assert messages[0] == messages[1] and "3 lane(s)" in messages[0] and f"first bad key: {SLOTS + 2}" in messages[0]


def test_only_an_ordered_scatter_by_sorted_keys_takes_the_form():
    # (the group's test: every key the run's, every term small enough, one `and` over a vector of flags)
    runs = bt_lanes_func(so_run)
    assert "vector.reduction <and>" in runs and f": vector<{RUN_LANES}xf64>" in runs
    assert "vector.reduction <and>" not in bt_lanes_func(so_lane)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_second_error_inside_a_group_is_kept(dtype):
    # one run, every term small enough for the pairs, so every group of RUN_LANES lanes takes the vector path;
    # chain 0 (lanes 0, 8, 16, ...) gets big, then a term below big's ulp (it goes to low), then 1.0: low + 1.0
    # rounds, and that second error must reach the accumulator, or the cancelling terms after leave 0 for 1
    big, mid = (1e200, 3.3e183) if dtype == np.float64 else (1e18, 3.3e10)
    n = 8 * RUN_LANES
    x = np.zeros(n, dtype)
    x[[0, RUN_LANES, 2 * RUN_LANES, 3 * RUN_LANES, 4 * RUN_LANES]] = [big, mid, 1.0, -big, -mid]
    key = np.zeros(n, np.int32)
    got = np.asarray(eagle.deploy(so_run, threads=1).run(key=key, x=x, acc=np.zeros(SLOTS, dtype)))
    assert got[0] == 1.0 and got.dtype == dtype


def test_a_sink_too_large_for_pairs(monkeypatch):
    # past the copy limit an ordered sink keeps no pairs, only the shared exact accumulators: the runs' flushes
    # and spills go there (atomically), with the same exact bits
    monkeypatch.setenv(COPY_SLOTS_ENV, "4")
    assert so_run.layout(so_run.spec_for("float64", {})).private == {}
    rng = np.random.default_rng(13_105)
    n = 9 * 1024 + 5
    key = _sorted_keys(n, rng)
    x = _terms(n, np.float64, rng)
    prior = rng.standard_normal(SLOTS)
    want = bt_ordered_scatter(prior, key, x, np.float64)
    for threads, got in split_runs(so_run, "host", key=key, x=x, acc=prior):
        same_bits(got, want, np.float64, f"threads={threads}")


@pytest.mark.parametrize("j", range(RUN_LANES))
def test_a_second_error_in_any_lane_of_a_group_reaches_the_slot(j):
    """A run's lane j of three full groups (after a first group that starts the run) takes 2**60, then 128 (a
    tie: the pair's high stays 2**60, its low holds 128), then 2**-60, whose second TwoSum errs by 2**-60 in
    the groups' vector step: that error must reach the slot's accumulator, and it decides the rounding
    (2**60 + 256 with it, the tie's 2**60 without)."""
    W = RUN_LANES
    x = np.zeros(5 * W)
    x[[W + j, 2 * W + j, 3 * W + j]] = [2.0 ** 60, 128.0, 2.0 ** -60]
    key = np.full(x.size, 2, np.int32)
    for _, got in split_runs(so_run, "host", threads=[1], min_chunk=1024, key=key, x=x, acc=np.zeros(SLOTS)):
        same_bits(got, np.where(np.arange(SLOTS) == 2, 2.0 ** 60 + 256.0, 0.0), np.float64, f"lane {j}")
