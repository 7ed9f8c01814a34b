"""Plain and compensated scatters keyed by a Sorted[Index] plane on the host (hawk/passes/lower/sorted_groups.py):
a chunk whose keys spread over few slots runs whole groups of GROUP lanes of one run side by side, the other
groups lane by lane. Every route must keep the policy's bound per slot (against math.fsum of the prior content
and the terms) at every thread count (runs that really split), give IEEE's infinities and NaNs, compare every key
of a group (a bound launch's keys may no longer be sorted), and report bad keys as the unsorted form does.
"""

import math

import numpy as np
import pytest
from conftest import bt_bound_bad_keys, bt_lanes_func
from exact_families import split_runs

import eagle
import hawk
from hawk import Index, Mutable, Scalar, Sorted, Vector
from hawk.passes.lower.sorted_groups import GROUP, LONG_RUN

SLOTS = 7
POLICIES = ["plain", "compensated"]
DTYPES = [np.float64, np.float32]


@hawk.kernel
def sg_plain(key: Sorted[Index], x: Scalar, acc: Mutable["slot":7]):
    hawk.scatter(acc, policy="plain")[key] += x


@hawk.kernel
def sg_comp(key: Sorted[Index], x: Scalar, acc: Mutable["slot":7]):
    hawk.scatter(acc)[key] += x  # ("auto": the compensated form)


@hawk.kernel
def sg_lane(key: Index, x: Scalar, acc: Mutable["slot":7]):
    hawk.scatter(acc)[key] += x  # (unsorted keys: lane by lane into the slots)


KERNELS = {"plain": sg_plain, "compensated": sg_comp}


def _keys(n, rng):
    """Runs of a few lanes and of hundreds to thousands (groups inside runs and across their edges), -1 first."""
    lengths = np.concatenate([rng.integers(1, 2 * GROUP, 30), rng.integers(100, 3000, SLOTS)])
    keys = np.sort(rng.integers(-1, SLOTS, lengths.size))
    out = np.repeat(keys, rng.permutation(lengths))[:n]
    return np.concatenate([out, np.full(n - out.size, SLOTS - 1)]).astype(np.int64)


def _check_bound(got, prior, key, x, policy, dtype, what):
    """Every slot of `got` within the policy's bound of math.fsum of its prior content and its terms."""
    eps = float(np.finfo(dtype).eps)
    for s in range(len(got)):
        terms = [float(prior[s])] + [float(v) for v in x[key == s]]
        exact = math.fsum(terms)
        scale = math.fsum(abs(t) for t in terms)
        k = 1.0 if policy == "compensated" else float(len(terms))
        err = abs(float(got[s]) - exact)
        assert err <= k * eps * scale, f"{what}: slot {s} off by {err / (eps * scale):.2f} x eps x sum|terms|"


@pytest.mark.parametrize("keys", [np.int64, np.int32])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("policy", POLICIES)
def test_runs_keep_their_bound_under_every_split(policy, dtype, keys):
    rng = np.random.default_rng([67_101, POLICIES.index(policy), int(dtype == np.float32)])
    n = 9 * 1024 + 5  # (lanes left over after the groups, in every chunk)
    key = _keys(n, rng).astype(keys)
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-6, 7, n)).astype(dtype)
    prior = rng.standard_normal(SLOTS).astype(dtype)
    for threads, got in split_runs(KERNELS[policy], "host", key=key, x=x, acc=prior):
        assert got.dtype == dtype
        _check_bound(got, prior, key, x, policy, dtype, f"{policy} threads={threads}")


def _swallowed():
    """0 and 31 ones, then 2**53 and 31 ones, then -2**53 and 31 zeros, all in one run: the exact sum is 62; one
    add after another gives 32 (2**53 + 31 rounds to 2**53 + 32, and each one after it is a tie that rounds back)."""
    x = np.concatenate([[0.0], np.ones(GROUP - 1), [2.0 ** 53], np.ones(GROUP - 1), [-(2.0 ** 53)],
                        np.zeros(GROUP - 1)])
    seq = 0.0
    for v in x:
        seq += v
    assert seq == 32.0
    return x, seq


def test_a_long_runs_groups_add_side_by_side():
    """The form runs: lane j of each group goes into partial sum j, so 2**53 meets -2**53 in partial 0 and the
    ones survive."""
    x, _ = _swallowed()
    key = np.full(x.size, 3, np.int64)
    got = np.asarray(eagle.deploy(sg_plain, threads=1).run(key=key, x=x, acc=np.zeros(SLOTS)))
    assert got[3] == 62.0 and got.sum() == 62.0


def test_a_group_of_two_keys_adds_side_by_side():
    """A group holding the end of one run and the start of the next: the new run's lanes start its partial sums
    (lane 16 of the second group takes 2**53, lane 16 of the third -2**53: they meet in partial 16, and the ones
    in partials 17 to 31 survive); lane by lane, 2**53 would swallow the ones after it (slot 4 would hold 0)."""
    x = np.zeros(4 * GROUP)
    x[GROUP + GROUP // 2] = 2.0 ** 53
    x[GROUP + GROUP // 2 + 1:2 * GROUP] = 1.0
    x[2 * GROUP + GROUP // 2] = -(2.0 ** 53)
    key = np.where(np.arange(x.size) < GROUP + GROUP // 2, 3, 4).astype(np.int64)
    for policy in POLICIES:
        got = np.asarray(eagle.deploy(KERNELS[policy], threads=1).run(key=key, x=x, acc=np.zeros(SLOTS)))
        assert got[4] == GROUP // 2 - 1 and got.sum() == GROUP // 2 - 1, (policy, got)


def test_short_runs_stay_lane_by_lane():
    """A chunk with fewer than LONG_RUN lanes a key of its spread runs lane by lane: the same terms, with one
    more key at the end (a spread of four keys over 96 lanes), keep one add after another in slot 3."""
    x, seq = _swallowed()
    x = np.append(x, 0.0)
    key = np.full(x.size, 3, np.int64)
    key[-1] = 3 + x.size // LONG_RUN
    assert x.size < LONG_RUN * (key[-1] - key[0] + 1)

    @hawk.kernel
    def spread_plain(key: Sorted[Index], x: Scalar, acc: Mutable["slot":16]):
        hawk.scatter(acc, policy="plain")[key] += x

    got = np.asarray(eagle.deploy(spread_plain, threads=1).run(key=key, x=x, acc=np.zeros(16)))
    assert got[3] == seq


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("policy", POLICIES)
def test_infinities_nans_and_overflow(policy, dtype):
    length = 3000
    key = np.repeat(np.arange(SLOTS), length).astype(np.int64)
    x = np.ones(key.size, dtype)
    x[np.flatnonzero(key == 1)[length // 2]] = np.inf
    x[np.flatnonzero(key == 2)[[1, length - 2]]] = [np.inf, -np.inf]
    x[np.flatnonzero(key == 3)[length // 3]] = np.nan
    x[key == 4] = np.finfo(dtype).max / 4  # (the run's sum overflows)
    x[np.flatnonzero(key == 5)[[7, 700]]] = [-np.inf, -np.inf]
    for threads, got in split_runs(KERNELS[policy], "host", key=key, x=x, acc=np.zeros(SLOTS, dtype)):
        what = f"{policy} threads={threads}: {got}"
        assert np.isposinf(got[1]) and np.isnan(got[2]) and np.isnan(got[3]), what
        assert np.isposinf(got[4]) and np.isneginf(got[5]) and got[0] == length and got[6] == length, what


MOVED = {"one inside": [3 * GROUP + 5], "one last": [4 * GROUP - 1],  # (a lane in the group's middle; its last)
         "every other": list(range(3 * GROUP + 1, 4 * GROUP, 2)),  # (the run's lanes and the other key's alternate)
         "a group and a lane": list(range(3 * GROUP, 4 * GROUP)) + [5 * GROUP + 7]}


@pytest.mark.parametrize("moved", MOVED)
@pytest.mark.parametrize("policy", POLICIES)
def test_every_key_of_a_group_is_compared(policy, moved):
    """A bound launch reads its keys again: here lanes inside a long run move to another slot (the keys are no
    longer sorted), in the middle of a group, at its end, every other lane of one, a whole group and a lane;
    each must land in its new slot."""
    n = 4096
    key = np.full(n, 2, np.int64)
    x = np.ones(n)
    acc = np.zeros(SLOTS)
    bound = eagle.deploy(KERNELS[policy], threads=1).bind(key=key, x=x, acc=acc)
    bound.launch()
    assert acc[2] == n and acc.sum() == n
    key[MOVED[moved]] = 5
    acc[:] = 0.0
    bound.launch()
    m = len(MOVED[moved])
    assert acc[2] == n - m and acc[5] == m and acc.sum() == n


@pytest.mark.parametrize("first, count", [(5 * GROUP + 3, 3), (6 * GROUP - 3, 3), (2 * GROUP, 3 * GROUP)])
@pytest.mark.parametrize("policy", POLICIES)
def test_a_bad_key_in_a_long_run_is_reported_as_lane_by_lane(policy, first, count):
    # a run counts its lanes, whole groups of them too (the sorted forms said one lane a run of bad keys before)
    n = 4000
    key = np.sort(np.random.default_rng(67_103).integers(0, 2, n)).astype(np.int64)

    def spoil(k):
        k[first:first + count] = SLOTS + 2

    messages = bt_bound_bad_keys((KERNELS[policy], sg_lane), key, np.ones(n), SLOTS, spoil)
    assert messages[0] == messages[1] and f" {count} lane(s)" in messages[0], messages
    assert f"first bad key: {SLOTS + 2}" in messages[0]


@hawk.kernel
def sg_vec_plain(key: Sorted[Index], v: Vector[3], acc: Mutable["slot":7]):
    hawk.scatter(acc, policy="plain")[key] += v


@hawk.kernel
def sg_vec_comp(key: Sorted[Index], v: Vector[3], acc: Mutable["slot":7]):
    hawk.scatter(acc)[key] += v


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("policy", POLICIES)
def test_vector_payloads_keep_their_bound_per_component(policy, dtype):
    """A Vector[3] payload: each component has its own partial sums (and corrections), the run's groups alike."""
    rng = np.random.default_rng([67_104, POLICIES.index(policy), int(dtype == np.float32)])
    n = 9 * 1024 + 5
    key = _keys(n, rng)
    v = (rng.standard_normal((3, n)) * 10.0 ** rng.integers(-6, 7, (3, n))).astype(dtype)
    prior = rng.standard_normal((3, SLOTS)).astype(dtype)
    kernel = sg_vec_plain if policy == "plain" else sg_vec_comp
    for threads, got in split_runs(kernel, "host", key=key, v=v, acc=prior):
        got = got.reshape(3, SLOTS)
        for c in range(3):
            _check_bound(got[c], prior[c], key, v[c], policy, dtype, f"{policy} threads={threads} component {c}")


def test_only_plain_and_compensated_scatters_by_sorted_keys_take_the_form():
    assert f"vector<{GROUP}xf64>" in bt_lanes_func(sg_comp)
    assert f"vector<{GROUP}xf64>" in bt_lanes_func(sg_plain)
    assert f"vector<{GROUP}x" not in bt_lanes_func(sg_lane)
    assert bt_lanes_func(sg_vec_comp).count(f"vector<{GROUP}xf64>") >= 6  # (three components' sums and corrections)
