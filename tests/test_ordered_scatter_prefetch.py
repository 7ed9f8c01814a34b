"""Ordered scatters into large sinks prefetch the (high, low) pair a lane a few dozen lanes ahead will add into
(issue #11: with random keys over 2**16 slots or more the lanes wait on that cache miss). The hint reads the key
plane ahead of the lane, clamped to the last lane and into the sink, so it must never change a bit or an error:
keys of -1 and keys outside the sink in the last lanes (where the look-ahead is clamped), slots exact against the
per-slot exact sum rounded once, the same bits at every thread count."""

import numpy as np
import pytest
from conftest import bt_host_lanes_ir, bt_ordered_scatter
from exact_families import f_kahan, same_bits, split_runs

import eagle
import hawk
from hawk import Index, Mutable, Scalar, Sorted
from hawk.passes.lower.scatters import PREFETCH_KEYS, PREFETCH_SLOTS

pytestmark = pytest.mark.usefixtures("scatter_route")  # (both routes into the pairs: conftest)

BIG = PREFETCH_SLOTS + 3


@hawk.kernel
def xp_big(key: Index, x: Scalar, acc: Mutable["slot":BIG]):
    hawk.scatter(acc, policy="ordered")[key] += x


@hawk.kernel
def xp_small(key: Index, x: Scalar, acc: Mutable["slot":1024]):
    hawk.scatter(acc, policy="ordered")[key] += x


@hawk.kernel
def xp_computed(key: Index, x: Scalar, acc: Mutable["slot":BIG]):
    hawk.scatter(acc, policy="ordered")[key * 2 - key] += x


@hawk.kernel
def xp_sorted(key: Sorted[Index], x: Scalar, acc: Mutable["slot":1024]):
    hawk.scatter(acc, policy="ordered")[key] += x


@hawk.kernel
def xp_sorted_comp(key: Sorted[Index], x: Scalar, acc: Mutable["slot":1024]):
    hawk.scatter(acc, policy="compensated")[key] += x


@hawk.kernel
def xp_plain(key: Index, x: Scalar, acc: Mutable["slot":1024]):
    hawk.scatter(acc, policy="plain")[key] += x


def test_only_large_ordered_sinks_keyed_straight_from_a_plane_get_the_hint(tmp_path):
    # (write hints: a slot's pair; read hints: the input planes' lines planes.AHEAD lanes on, every paired group)
    def hints(kernel, kind):
        return [line for line in bt_host_lanes_ir(kernel, tmp_path).splitlines()
                if "memref.prefetch" in line and f", {kind}," in line]

    assert hints(xp_big, "write")  # (one per lane of a paired group, and the tail's)
    assert not hints(xp_small, "write")  # the pairs stay in cache
    assert not hints(xp_computed, "write")  # no key plane to read ahead
    assert hints(xp_big, "read") and hints(xp_small, "read")
    # scatters by sorted keys read ahead too; a plain scatter's light loop does not (hints measured slower there)
    assert hints(xp_sorted, "read") and hints(xp_sorted_comp, "read")
    assert "memref.prefetch" not in bt_host_lanes_ir(xp_plain, tmp_path)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_prefetched_slots_are_exact_with_minus_one_and_edge_keys_at_the_end(dtype):
    rng = np.random.default_rng([11_311, int(dtype == np.float32)])
    n = 300_000
    key = rng.integers(0, BIG, size=n).astype(np.int32)
    key[-3 * PREFETCH_KEYS:] = rng.choice([-1, 0, BIG - 1], size=3 * PREFETCH_KEYS)  # look-ahead clamped here
    key[: n // 20] = BIG - 1  # a crowded last slot
    x = f_kahan(n, dtype, rng)
    prior = rng.normal(size=BIG).astype(dtype)
    slots = np.unique(np.r_[0, 1, BIG - 2, BIG - 1, rng.integers(0, BIG, 300)])
    want = bt_ordered_scatter(prior, key, x, dtype, slots)
    outs = []
    for threads, got in split_runs(xp_big, "host", threads=(1, 3), min_chunk=4096, key=key, x=x, acc=prior):
        same_bits(got[slots], want[slots], dtype, f"threads={threads}")
        outs.append(got)
    same_bits(outs[1], outs[0], dtype, "threads 3 vs 1, every slot")
    plain = eagle.deploy(xp_computed, threads=2, min_chunk=4096).run(key=key, x=x, acc=prior.copy())
    same_bits(np.asarray(plain), outs[0], dtype, "computed key (no hint) vs the key plane")


def test_a_key_outside_the_sink_in_the_last_lanes_is_still_reported():
    n = 10_000
    key = np.arange(n, dtype=np.int32)
    key[-1] = BIG  # the look-ahead of the last PREFETCH_KEYS lanes is clamped onto this lane's key
    with pytest.raises(eagle.InputError) as info:
        eagle.deploy(xp_big, threads=1).run(key=key, x=np.ones(n))
    assert "acc" in str(info.value)
