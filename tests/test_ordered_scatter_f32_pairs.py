"""float32 ordered scatters keep float64 (high, low) pairs per slot (hawk/passes/lower/scatters.exact_add): terms
spread over many binades stay in the pairs instead of spilling into the exact accumulators (float32 pairs held 48
bits and spilled most such terms), and the finish rounds a float64 pair to float32 once (finish._round_pair): the
float32 nearest the pair's high, unless that high is exactly halfway between two float32 values and the low
breaks the tie, which the exact path then settles. Every slot must still be its exact sum rounded once.
"""

import numpy as np
import pytest
from conftest import bt_ordered_scatter
from exact_families import same_bits, split_runs

import eagle
import hawk
from hawk import Index, Mutable, Scalar, Sorted

pytestmark = pytest.mark.usefixtures("scatter_route")  # (both routes into the pairs: conftest)

F32 = np.float32


@hawk.kernel
def xf_one(key: Index, x: Scalar, acc: Mutable["slot":4]):
    hawk.scatter(acc, policy="ordered")[key] += x


@hawk.kernel
def xf_big(key: Index, x: Scalar, acc: Mutable["slot":20000]):
    hawk.scatter(acc, policy="ordered")[key] += x  # (past 16,384 slots: the executor's parallel finish)


@hawk.kernel
def xf_sorted(key: Sorted[Index], x: Scalar, acc: Mutable["slot":64]):
    hawk.scatter(acc, policy="ordered")[key] += x  # (runs of equal keys in float64 registers: sorted_pairs.py)


@hawk.kernel
def xf_kept(key: Index, x: Scalar, tot: Mutable["slot":4]):
    hawk.scatter(tot, policy="ordered")[key] += x * 1.0
    hawk.scatter(tot, policy="ordered")[key] += -x  # (two scatters per lane: the lane-by-lane exact_add)


def _want(prior, keys, x):
    return bt_ordered_scatter(prior, keys, x, F32)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_tie_broken_by_the_low(sign):
    # slot 0: 1 + 2**-24 is halfway between 1 and 1 + 2**-23, and the tiny third term decides (the pair's low);
    # slot 1: the same without the tiny term (a true tie: to even); slot 2: a tie below 2**127 + ...
    keys = np.array([0, 0, 0, 1, 1, 2, 2, 2], np.int64)
    x = np.array([1.0, 2.0 ** -24, sign * 2.0 ** -60, 1.0, 2.0 ** -24,
                  2.0 ** 100, 2.0 ** 76, sign * 2.0 ** 30], F32)
    prior = np.zeros(4, F32)
    for threads in (1, 3):
        out = eagle.deploy(xf_one, threads=threads, min_chunk=2).run(key=keys, x=x, acc=prior.copy())
        same_bits(out, _want(prior, keys, x), F32, f"ties, threads={threads}")
    assert float(_want(prior, keys, x)[0]) == (1.0 + 2.0 ** -23 if sign > 0 else 1.0)


def test_a_pair_past_2_127_spills():
    # every slot's pair would reach 2**128 (two float32 terms at 2**127) while the prior content cancels one: a
    # pair value that large could not be handed to the float32 accumulator as float32 parts, so such terms
    # spill; the total lands halfway between two float32 values with a low that breaks the tie (exact path).
    # Keys 0..3 in each group of four lanes: the groups' vector steps (split_scatters.pair_adds) take them.
    keys = np.tile(np.arange(4, dtype=np.int64), 4)
    x = np.repeat(np.array([2.0 ** 127, 2.0 ** 127, 2.0 ** 103, 2.0 ** 60], F32), 4)
    prior = np.full(4, -(2.0 ** 127), F32)
    out = eagle.deploy(xf_one, threads=1).run(key=keys, x=x, acc=prior.copy())
    same_bits(out, _want(prior, keys, x), F32, "a pair past 2**127")
    assert np.all(np.asarray(out) == 2.0 ** 127 + 2.0 ** 104)


def _spread(n, rng):
    """float32 terms over many binades: normal values scaled by 1e4 or 1e-4 at random, some squared."""
    g = rng.standard_normal(n)
    x = g * np.where(rng.random(n) < 0.5, 1e4, 1e-4)
    x[::3] = g[::3] ** 2
    return x.astype(F32)


@pytest.mark.parametrize("kernel, slots", [(xf_one, 4), (xf_big, 20000)])
def test_spread_terms_on_several_chunks(kernel, slots):
    rng = np.random.default_rng(41)
    n = 60000
    keys = rng.integers(0, slots, n).astype(np.int64)
    keys[::7] = 0  # one crowded slot
    x = _spread(n, rng)
    prior = _spread(slots, rng)
    want = _want(prior, keys, x)
    for threads, out in split_runs(kernel, "host", threads=[1, 3], min_chunk=4096, key=keys, x=x, acc=prior):
        same_bits(out, want, F32, f"{kernel.name}, threads={threads}")


def test_sorted_keys_spread_terms_and_specials():
    rng = np.random.default_rng(43)
    n = 40000
    keys = np.sort(rng.integers(0, 64, n)).astype(np.int64)
    x = _spread(n, rng)
    at = np.flatnonzero(keys == 7)
    x[at[[3, 9]]] = [3e38, -3e38]  # past the runs' 2**64: straight to the accumulator
    x[np.flatnonzero(keys == 8)[5]] = np.inf
    x[np.flatnonzero(keys == 9)[[2, 4]]] = [np.inf, -np.inf]
    prior = _spread(64, rng)
    want = _want(prior, keys, x)
    assert np.isposinf(want[8]) and np.isnan(want[9])
    for threads, out in split_runs(xf_sorted, "host", threads=[1, 3], min_chunk=4096, key=keys, x=x, acc=prior):
        same_bits(out, want, F32, f"sorted, threads={threads}")


def test_sorted_keys_into_a_sink_without_pairs(monkeypatch):
    # a sink too large for per-chunk pairs (HAWK_COPY_SLOTS below its size): the runs' float64 pairs (float32
    # kernel) go straight to the exact accumulators, as float32 parts (exact_emit.deposit_as); depositing a
    # float64 value as such wrote past the slot's float32 accumulator
    from hawk.abi.layout import COPY_SLOTS_ENV

    monkeypatch.setenv(COPY_SLOTS_ENV, "16")
    rng = np.random.default_rng(44)
    keys = np.sort(rng.integers(0, 64, 20000)).astype(np.int64)
    x = _spread(20000, rng)
    prior = _spread(64, rng)
    want = _want(prior, keys, x)
    for threads in (1, 3):
        out = eagle.deploy(xf_sorted, threads=threads, min_chunk=4096).run(key=keys, x=x, acc=prior.copy())
        same_bits(out, want, F32, f"sorted, no pairs, threads={threads}")


def test_two_scatters_a_lane_into_spread_slots():
    rng = np.random.default_rng(42)
    keys = rng.integers(0, 4, 5000).astype(np.int64)
    x = _spread(5000, rng)
    out = eagle.deploy(xf_kept, threads=1).run(key=keys, x=x)
    same_bits(out, np.zeros(4, F32), F32, "x and -x into each slot")
