"""Plain and compensated scatters keyed by a Sorted[Index] plane whose runs are short (hawk/passes/lower/
sorted_streams.py): a chunk of at least STREAMS * MIN_LANES lanes and fewer than LONG_RUN lanes a key of its spread
runs its lanes in STREAMS interleaved streams, each lane's term added into its slot. The form must run (a sum
whose bits show the streams' order), keep each policy's bound at every thread count (runs that really split), add
nothing for key -1, land every lane in its slot when a bound launch's keys are
no longer sorted, and report bad keys in several streams as the lane-by-lane form does (their lanes' count and
the first bad lane's key).
"""

import numpy as np
import pytest
from conftest import bt_bound_bad_keys
from exact_families import split_runs
from test_sorted_groups import _check_bound

import eagle
import hawk
from hawk import Index, Mutable, Scalar, Sorted, Vector
from hawk.passes.lower.sorted_groups import LONG_RUN
from hawk.passes.lower.sorted_streams import MIN_LANES, STREAMS

POLICIES = ["plain", "compensated"]
DTYPES = [np.float64, np.float32]


@hawk.kernel
def ss_plain(key: Sorted[Index], x: Scalar, acc: Mutable["slot":64]):
    hawk.scatter(acc, policy="plain")[key] += x


@hawk.kernel
def ss_comp(key: Sorted[Index], x: Scalar, acc: Mutable["slot":64]):
    hawk.scatter(acc)[key] += x  # ("auto": the compensated form)


@hawk.kernel
def ss_vec(key: Sorted[Index], v: Vector[3], acc: Mutable["slot":64]):
    hawk.scatter(acc, policy="plain")[key] += v


@hawk.kernel
def ss_lane(key: Index, x: Scalar, acc: Mutable["slot":64]):
    hawk.scatter(acc)[key] += x  # (unsorted keys: lane by lane into the slots)


KERNELS = {"plain": ss_plain, "compensated": ss_comp}


def _short_keys(n: int, rng) -> np.ndarray:
    """Sorted keys over the 64 slots in runs of 1 to 40 lanes (a few -1 lanes first): fewer than LONG_RUN lanes
    a key over any chunk of these runs."""
    lengths = rng.integers(1, 40, 64)
    keys = np.repeat(np.arange(-1, 63), lengths)
    reps = -(-n // keys.size)
    return np.sort(np.tile(keys, reps)[:n]).astype(np.int64)


def test_the_streams_run_side_by_side():
    """One chunk of 1024 lanes with a spread of 41 keys: lane 0 holds 2**53, lane 1 holds 1 and lane q = 256
    (stream 1's first) -2**53, all in slot 3. Lane by lane (or a run in registers), 2**53 + 1 rounds back to
    2**53 and slot 3 ends 0; the streams add lane 0, then lane 256, then lane 1: slot 3 ends 1."""
    n = 1024
    assert n >= STREAMS * MIN_LANES
    key = np.full(n, 3, np.int64)
    key[-40:] = np.arange(4, 44)
    assert n < LONG_RUN * (key[-1] - key[0] + 1)
    x = np.zeros(n)
    x[0], x[1], x[n // STREAMS] = 2.0 ** 53, 1.0, -(2.0 ** 53)
    got = np.asarray(eagle.deploy(ss_plain, threads=1).run(key=key, x=x, acc=np.zeros(64)))
    assert got[3] == 1.0 and got.sum() == 1.0, got[:8]
    assert got[3] != (x[0] + x[1]) + x[n // STREAMS]  # (the lane order's sum)


@pytest.mark.parametrize("keys", [np.int64, np.int32])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("policy", POLICIES)
def test_short_runs_keep_their_bound_under_every_split(policy, dtype, keys):
    rng = np.random.default_rng([69_001, POLICIES.index(policy), int(dtype == np.float32)])
    n = 12 * 1024 + 5  # (chunks of at least 1024 lanes: every chunk's streams run, with lanes left over)
    key = _short_keys(n, rng).astype(keys)
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-6, 7, n)).astype(dtype)
    prior = rng.standard_normal(64).astype(dtype)
    for threads, got in split_runs(KERNELS[policy], "host", key=key, x=x, acc=prior):
        assert got.dtype == dtype
        _check_bound(got, prior, key, x, policy, dtype, f"{policy} threads={threads}")


def test_vector_payloads_add_each_component():
    rng = np.random.default_rng(69_002)
    n = 8 * 1024
    key = _short_keys(n, rng)
    v = rng.integers(-1000, 1000, (3, n)).astype(np.float64)  # (whole numbers: every order gives the same sum)
    want = np.zeros((3, 64))
    for c in range(3):
        np.add.at(want[c], key[key >= 0], v[c][key >= 0])
    for threads, got in split_runs(ss_vec, "host", key=key, v=v, acc=np.zeros((3, 64))):
        np.testing.assert_array_equal(got.reshape(3, 64), want, err_msg=f"threads={threads}")


@pytest.mark.parametrize("policy", POLICIES)
def test_keys_no_longer_sorted_land_in_their_slots(policy):
    """A bound launch reads its keys again: shuffled after binding, every lane must still reach its own slot."""
    rng = np.random.default_rng(69_003)
    n = 4096
    key = _short_keys(n, rng)
    x = np.ones(n)
    acc = np.zeros(64)
    bound = eagle.deploy(KERNELS[policy], threads=1).bind(key=key, x=x, acc=acc)
    bound.launch()
    np.testing.assert_array_equal(acc, np.bincount(key[key >= 0], minlength=64))
    key[:] = rng.permutation(key)
    acc[:] = 0.0
    bound.launch()
    np.testing.assert_array_equal(acc, np.bincount(key[key >= 0], minlength=64))


@pytest.mark.parametrize("policy", POLICIES)
def test_bad_keys_in_several_streams_are_reported_in_lane_order(policy):
    """Bad keys in streams 3 and 1 of the chunk (the later stream's first in the loop's order, the earlier one's
    lane first in lane order): the count is both runs' lanes and the first bad key the earlier lane's, as the
    unsorted form reports them."""
    n = 1024
    key = np.repeat(np.arange(64), n // 64).astype(np.int64)  # (16 lanes a key: short runs)
    q = n // STREAMS
    assert n >= STREAMS * MIN_LANES and n < LONG_RUN * 64

    def spoil(k):
        k[3 * q + 10:3 * q + 13] = 64 + 5  # (stream 3's tenth lane on)
        k[q + 200:q + 202] = 64 + 2  # (stream 1's two-hundredth)

    kernels = (KERNELS[policy], ss_lane)
    messages = bt_bound_bad_keys(kernels, key, np.ones(n), 64, spoil)
    assert messages[0] == messages[1] and " 5 lane(s)" in messages[0], messages
    assert "first bad key: 66" in messages[0], messages
