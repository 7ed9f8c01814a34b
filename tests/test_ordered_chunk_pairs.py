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
