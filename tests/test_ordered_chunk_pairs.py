"""The host's chunk-level pairs of ordered sums over every lane (issue #11): each full block's exact chain
pairs are added into the chunk's own (high, low) vector pairs by checked TwoSums; a block whose pairs cannot be
added exactly is deposited into the exact accumulator instead. These data make both happen in one chunk
(blocks whose scales lie hundreds of binades apart, next to blocks of ordinary values), and the result must
still be the exact sum rounded once, under every split.
"""

import numpy as np
import pytest
from exact_families import assert_exact, split_runs

import hawk
from hawk import Scalar

BLOCK = 1024  # hawk.abi.layout.ORDERED_BLOCK


@hawk.kernel
def xp_sum(x: Scalar) -> Scalar:
    return hawk.sum(x, policy="ordered")


def _blocks_far_apart(blocks: int, dtype, rng) -> np.ndarray:
    """Full blocks of ordinary random values, each block scaled by its own power of two (float64: within
    2^-300..2^300, float32: 2^-60..2^60), with a few blocks at scale 1 and some cancelling their neighbours."""
    span = 300 if dtype == np.float64 else 60
    scale = np.exp2(rng.integers(-span, span, blocks).astype(np.float64))
    scale[rng.integers(0, blocks, blocks // 4)] = 1.0
    x = rng.standard_normal((blocks, BLOCK)) * scale[:, None]
    x[1::5] = -x[0:-1:5][: len(x[1::5])]  # blocks cancelling the block before them exactly
    return x.ravel().astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kind", ["far", "ordinary", "ragged", "growing"])
def test_chunk_pairs_keep_the_sum_exact(kind, dtype):
    rng = np.random.default_rng([1_107, len(kind), int(dtype == np.float32)])
    if kind == "ordinary":  # every merge succeeds: the chunk's pairs hold almost every block
        x = (rng.standard_normal(24 * BLOCK) * 3.0).astype(dtype)
    elif kind == "growing":  # whole numbers growing 4x per block and 2**12 within one: the biased chains'
        # highs leave their binade (M comes from an earlier, smaller block) while no low loses a bit
        grow = np.exp2(2 * np.arange(24)[:, None] + np.linspace(0, 12, BLOCK)[None, :]).round()
        x = (rng.integers(-2**10, 2**10, (24, BLOCK)) * grow).ravel().astype(dtype)
    else:
        x = _blocks_far_apart(24, dtype, rng)
    if kind == "ragged":  # lanes outside full blocks at both ends of the chunks
        x = x[333:-517]
    for threads, out in split_runs(xp_sum, "host", x=x):
        assert_exact(out, x, dtype, f"{kind} threads={threads}")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kind", ["chains_apart", "near_top", "ordinary"])
def test_chunk_end_fold(kind, dtype):
    """At a chunk's end its pairs are added into one pair by checked TwoSums and deposited as two values, or,
    when that pair would not hold them exactly, deposited one by one. Chains whose sums lie hundreds of binades
    apart (each chain's range is its own, so every block stays exact) make the fold lose bits; float32 sums near
    2**128 (each chain's sum finite in float64, their total past what float32 parts can hold) make it leave
    float32's range. Either way the sum must stay exact, as it must when the fold holds (ordinary data)."""
    rng = np.random.default_rng([1_108, len(kind), int(dtype == np.float32)])
    n = 12 * BLOCK
    if kind == "chains_apart":  # lanes 8k..8k+3 of each 16 large, the rest tiny (a chain's lanes share a scale)
        big = (np.arange(n) % 16) < 4
        span = 500 if dtype == np.float64 else 50
        x = rng.standard_normal(n) * np.where(big, 2.0 ** span, 2.0 ** -span)
    elif kind == "near_top":  # float32: a chunk's 4096 terms of 2**115..2**117 have chain sums near 2**124 and a
        # total near 2**128; the first half of the lanes positive, the second negative, so the sum stays finite
        x = np.exp2(rng.uniform(115, 117, n)) * np.where(np.arange(n) < n // 2, 1.0, -1.0)
        if dtype == np.float64:
            x *= 2.0 ** 890
    else:
        x = rng.standard_normal(n)
    x = x.astype(dtype)
    assert np.isfinite(x).all()
    for threads, out in split_runs(xp_sum, "host", x=x, min_chunk=4 * BLOCK):
        assert_exact(out, x, dtype, f"{kind} threads={threads}")
