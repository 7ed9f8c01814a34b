"""Compensated sums over every lane on the host: a full block of 1024 lanes feeds 32 chains side by side
(reduce_full.compensated_chains_step), which run on over the chunk's full blocks (reduce_full.carried_chains; beside
an ordered or wide sum they start again every block), folded by halves with TwoSum to eight at the end, each of
which then goes into the chunk's Neumaier pair (reduce_full.merge_chains). What is checked, besides the k <= 1 bound
of tests/test_policies.py: the fold keeps its TwoSum errors (terms a larger chain absorbs come back), masked
lanes add nothing inside full blocks, every component of a vector payload keeps its own chains, and an ordered
sum sharing the blocks (its chains then 32 wide too) stays exact.
"""

import numpy as np
import pytest
from conftest import bt_ordered_sum, bt_sum_ulps

import eagle
import hawk
from hawk import Mutable, Scalar, Vector

DTYPES = [np.float64, np.float32]
BLOCK = 1024


@hawk.kernel
def cc_sum(x: Scalar) -> Scalar:
    return hawk.sum(x, policy="compensated")


@hawk.kernel
def cc_masked(x: Scalar, keep: Scalar, tot: Mutable[Scalar], avg: Mutable[Scalar]):
    tot = hawk.sum(x, where=keep > 0.5, policy="compensated")
    avg = hawk.mean(x, where=keep > 0.5, policy="compensated")


@hawk.kernel
def cc_vector(v: Vector[3]) -> Vector[3]:
    return hawk.sum(v, policy="compensated")


@hawk.kernel
def cc_beside_ordered(x: Scalar, comp: Mutable[Scalar], exact: Mutable[Scalar]):
    comp = hawk.sum(x, policy="compensated")
    exact = hawk.sum(x, policy="ordered")


def _k(got, terms, dtype) -> float:
    return bt_sum_ulps(float(got), np.asarray(terms, dtype=dtype), eps=float(np.finfo(dtype).eps))


def _split_run(kernel, threads, **planes):
    """A run in chunks of whole blocks (threads > 1 really splits: asserted)."""
    plan = eagle.deploy(kernel, threads=threads, min_chunk=4 * BLOCK)
    out = plan.run(**planes)
    if threads > 1:
        assert max(plan.last_chunks) > 1, plan.last_chunks
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("threads", [1, 3])
def test_terms_a_larger_chain_absorbs_come_back(dtype, threads):
    # lanes 0-7 of every 32 hold 2**60, lanes 8-15 -2**60, lanes 16-31 2**-60 (the chains run on over a chunk's
    # blocks): at the chunk's fold, chain j (2**60 terms, or -2**60 ones) meets chain j + 16 (2**-60 terms), far
    # under half its ulp, then chains j and j + 8 cancel exactly. Only the fold's TwoSum errors keep the small
    # terms; the exact sum is 2**16 * 2**-60.
    n = 128 * BLOCK
    lane = np.arange(n) % 32
    x = np.where(lane < 8, 2.0**60, np.where(lane < 16, -(2.0**60), 2.0**-60)).astype(dtype)
    got = np.asarray(_split_run(cc_sum, threads, x=x))
    assert got[0] == dtype(2.0**-44), got[0]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("threads", [1, 3])
def test_masked_lanes_add_nothing_in_full_blocks(dtype, threads):
    rng = np.random.default_rng(7_301)
    n = 40 * BLOCK + 77
    x = (rng.uniform(1.0, 2.0, n) * 10.0 ** rng.uniform(0.0, 6.0, n) * rng.choice([-1.0, 1.0], n)).astype(dtype)
    keep = (rng.random(n) < 0.5).astype(dtype)
    x[keep == 0] *= dtype(1e6)  # (the masked lanes would dominate any sum that let them in)
    out = _split_run(cc_masked, threads, x=x, keep=keep)
    chosen = x[keep > 0.5]
    assert _k(out["tot"][0], chosen, dtype) <= 1.0
    assert _k(float(out["avg"][0]) * chosen.size, chosen, dtype) <= 2.0


@pytest.mark.parametrize("dtype", DTYPES)
def test_each_vector_component_keeps_its_chains(dtype):
    rng = np.random.default_rng(7_302)
    n = 20 * BLOCK + 5
    v = np.empty((3, n), dtype=dtype)  # (payload first, lanes last)
    v[0] = rng.normal(size=n)
    v[1] = np.where(np.arange(n) % 32 < 16, 2.0**40, 2.0**-40)  # chains of large terms beside chains of small
    v[2] = -rng.uniform(0.0, 1e-8, n)
    got = np.asarray(_split_run(cc_vector, 3, v=v))
    for c in range(3):
        assert _k(got[c], v[c], dtype) <= 1.0, c


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("threads", [1, 3])
def test_an_ordered_sum_beside_stays_exact(dtype, threads):
    rng = np.random.default_rng(7_303)
    n = 30 * BLOCK + 11
    x = (rng.normal(size=n) * 10.0 ** rng.integers(-30, 30, n)).astype(dtype)
    out = _split_run(cc_beside_ordered, threads, x=x)
    assert out["exact"][0] == bt_ordered_sum(x), (out["exact"][0], bt_ordered_sum(x))
    assert _k(out["comp"][0], x, dtype) <= 1.0


@pytest.mark.parametrize("dtype,lines", [("float64", 4 + 4), ("float32", 2)])
def test_full_blocks_prefetch_the_lanes_one_block_on(dtype, lines):
    # a group of 32 lanes hints each 64-byte line of the same lanes one block (1024 lanes) on: without the hints
    # these loops left the hardware prefetcher behind once the data came from memory (docs/ordered.md). (float64
    # without AVX-512F, the IR's default spec: four more, one in each of chain_passes' passes.) Only
    # hints: the results above do not depend on them; this checks that they are there and read hints of data
    # (on raw addresses, which need no clamp: planes.prefetch_ahead).
    text = cc_sum.mlir(dtype, after="lower-host-lanes")
    hints = [line for line in text.splitlines() if "prefetch" in line]
    assert len(hints) == lines, hints
    assert all('"llvm.intr.prefetch"' in h and "<{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}>" in h
               for h in hints), hints


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_chains_run_on_over_the_blocks_unless_an_ordered_sum_shares_them(dtype):
    # the blocks' loop (the lanes function's first loop with state) carries the 32 chains' sums and corrections
    # when the sum is compensated alone, and only the chunk's Neumaier pair beside an ordered sum (its chains
    # restart every block: their range is checked per block)
    def blocks_loop(kernel) -> str:
        text = kernel.mlir(dtype, after="lower-host-lanes")
        return next(line for line in text.splitlines() if "scf.for" in line and "iter_args" in line)

    assert blocks_loop(cc_sum).count("vector<32xf64>") == 2
    assert "vector<" not in blocks_loop(cc_beside_ordered)
