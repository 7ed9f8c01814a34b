"""The range rules of the host's ordered chains (hawk/passes/lower/ordered_chains.py, docs/ordered.md).

float64: a full block's chain takes a term by one Fast2Sum into its high (biased at M = 1.5 * 2**p) and a plain
add of the error into its low, trusted only while every term is zero or has a magnitude in
[2**(p - LOW_RANGE), 2**(p - HEADROOM)]. float32: a chain is one float64 sum of its terms, trusted while every
term is zero or has an exponent from E - F32_WINDOW to E. The floors are what keep those adds exact: these data
sit just at and just below them, so a floor one binade too low makes the compiled sum lose a bit, and numeric
models of the rules show the bounds are tight. The compiled cases run under both of a block's checks
(conftest's chain_check): the range, and the inexact flag, which must get these data right too.
"""

import math
from fractions import Fraction

import numpy as np
from exact_families import assert_exact

import eagle
import hawk
from hawk import Mutable, Scalar
from hawk.abi.layout import ORDERED_BLOCK, ORDERED_CHAINS
from hawk.passes.lower.ordered_chains import BIAS_STEP, F32_START, F32_WINDOW, HEADROOM, LOW_RANGE, P_START

P = P_START  # a chunk's first block runs with M = 1.5 * 2**P_START


@hawk.kernel
def xo_range_sum(x: Scalar) -> Scalar:
    return hawk.sum(x, policy="ordered")


def _max_errors(p: int) -> float:
    """A term whose Fast2Sum error against a high on M's grid (2**(p-52)) is just under half that grid:
    127 of them take a chain's low near 2**(p-46), where its ulp is 2**(p-99)."""
    return 2.0 ** (p - LOW_RANGE) + 2.0 ** (p - 53) - 2.0 ** (p - 99)


def _model_chain(terms: list[float], p: int, floor: int) -> tuple[bool, float, float]:
    """The rule and the step in float64, as the lowering emits them: (accepted, high - M, low)."""
    m = 1.5 * 2.0 ** p
    hi, lo = np.float64(m), np.float64(0.0)
    ok = all(t == 0 or 2.0 ** (p - floor) <= abs(t) <= 2.0 ** (p - HEADROOM) for t in terms)
    for t in terms:
        t = np.float64(t)
        s = hi + t
        lo = lo + (t - (s - hi))
        hi = s
    return ok, float(hi - np.float64(m)), float(lo)


def test_the_floor_is_what_keeps_the_low_exact():
    p = P
    per_chain = ORDERED_BLOCK // ORDERED_CHAINS
    below = 2.0 ** (p - LOW_RANGE - 1) + 2.0 ** (p - LOW_RANGE - 53)  # one binade under the floor, odd last bit
    at = 2.0 ** (p - LOW_RANGE) + 2.0 ** (p - LOW_RANGE - 52)  # at the floor, odd last bit
    for probe, floor in ((at, LOW_RANGE), (below, LOW_RANGE + 1)):
        terms = [_max_errors(p)] * (per_chain - 1) + [probe]
        ok, h, lo = _model_chain(terms, p, floor)
        assert ok
        exact = sum((Fraction(t) for t in terms), Fraction(0))
        kept = Fraction(h) + Fraction(lo)
        if floor == LOW_RANGE:
            assert kept == exact, "the rule accepted a chain it cannot hold exactly"
        else:  # a floor one binade lower would accept this chain and lose the probe's last bit
            assert kept != exact


def test_a_block_s_largest_term_passes_the_bias_it_sets():
    # after a retry the next blocks' p is the largest term's exponent + BIAS_STEP: that term, and every other of
    # its binade, must then pass the ceiling (with HEADROOM alone nearly every block of uniform data squared
    # retried: only a power of two passed)
    for ex in (-30, -1, 0, 3, 40):
        p = ex + BIAS_STEP
        largest = math.ldexp(2.0 - 2.0 ** -52, ex)
        assert largest <= 2.0 ** (p - HEADROOM)
        assert 2.0 ** ex >= 2.0 ** (p - LOW_RANGE)


def test_terms_just_under_the_floor_still_sum_exactly(chain_check):
    # block 0: every chain takes 127 maximal errors and then a probe just under the floor (rejected: the block
    # retries); block 1 takes the negations, so the exact sum is 8 probes' lowest bits: any lost bit shows.
    p, per_chain = P, ORDERED_BLOCK // ORDERED_CHAINS
    r = _max_errors(p)
    probe = 2.0 ** (p - LOW_RANGE - 1) + 2.0 ** (p - LOW_RANGE - 53)
    block0 = np.full(ORDERED_BLOCK, r)
    block0[(per_chain - 1) * ORDERED_CHAINS:] = probe
    block1 = -block0
    block1[(per_chain - 1) * ORDERED_CHAINS:] = -(2.0 ** (p - LOW_RANGE - 1))
    x = np.concatenate([block0, block1])
    exact = math.fsum(x.tolist())
    assert exact == ORDERED_CHAINS * 2.0 ** (p - LOW_RANGE - 53)
    out = eagle.deploy(xo_range_sum, threads=1).run(x=x)
    assert float(np.asarray(out)[0]) == exact
    assert_exact(out, x, np.float64, "probes under the floor")


def test_a_term_one_ulp_under_the_floor_is_caught(chain_check):
    # the range keeps its max and min on 32-bit halves (ordered_chains.range_step64): the float just under the
    # floor shares the floor's high half but one and has an all-ones low half, the edge of that scheme. Taken,
    # it would lose its last bit (2**(p-100), under the low's grid; the model shows it); it must be caught and
    # its block retried, so the sum keeps 8 such bits.
    p, per_chain = P, ORDERED_BLOCK // ORDERED_CHAINS
    r = _max_errors(p)
    probe = float(np.nextafter(2.0 ** (p - LOW_RANGE), 0.0))
    assert probe == 2.0 ** (p - LOW_RANGE) - 2.0 ** (p - LOW_RANGE - 53)
    _, h, lo = _model_chain([r] * (per_chain - 1) + [probe], p, LOW_RANGE)
    assert Fraction(h) + Fraction(lo) != Fraction(r) * (per_chain - 1) + Fraction(probe)
    block0 = np.full(ORDERED_BLOCK, r)
    block0[(per_chain - 1) * ORDERED_CHAINS:] = probe
    block1 = -block0
    block1[(per_chain - 1) * ORDERED_CHAINS:] = -(2.0 ** (p - LOW_RANGE) - 2.0 ** (p - LOW_RANGE - 52))
    x = np.concatenate([block0, block1])
    assert math.fsum(x.tolist()) == ORDERED_CHAINS * 2.0 ** (p - LOW_RANGE - 53)
    for threads in (1, 2):
        out = eagle.deploy(xo_range_sum, threads=threads).run(x=x)
        assert float(np.asarray(out)[0]) == ORDERED_CHAINS * 2.0 ** (p - LOW_RANGE - 53)


def test_terms_at_both_ends_of_the_range_sum_exactly(chain_check):
    # in range: 2**(p-HEADROOM) and the floor with odd last bits, zeros of both signs; the next float past the
    # top (rejected) in a later block; each block's terms cancel but for those last bits.
    p = P
    top, floor = 2.0 ** (p - HEADROOM), 2.0 ** (p - LOW_RANGE) * (1 + 2.0 ** -52)
    rng = np.random.default_rng(31)
    blocks = []
    for lead in (top, floor, float(np.nextafter(top, math.inf))):
        b = rng.choice([lead, -lead, 0.0, -0.0, r := _max_errors(p), -r], ORDERED_BLOCK)
        blocks.append(b)
    x = np.concatenate(blocks)
    assert_exact(eagle.deploy(xo_range_sum, threads=1).run(x=x), x, np.float64, "range ends")


def test_a_term_over_the_top_sends_its_block_to_the_retry(chain_check):
    # one chain takes a huge term and then its negation among small ones: the huge term swallows the high's bias
    # M and the small terms' bits, which no Fast2Sum error sees, and the two cancel, so only the ceiling test
    # (not the high's value at the block's end) can tell the block was not exact
    rng = np.random.default_rng(33)
    x = rng.random(4 * ORDERED_BLOCK)
    x[ORDERED_BLOCK + 4] = 1e30
    x[ORDERED_BLOCK + 4 + ORDERED_CHAINS] = -1e30
    for threads in (1, 2):
        assert_exact(eagle.deploy(xo_range_sum, threads=threads).run(x=x), x, np.float64, "a term over the top")


# ---- float32: windowed float64 sums ---------------------------------------------------------------------

@hawk.kernel
def xo_range_sum32(x: Scalar, tot: Mutable[Scalar], comp: Mutable[Scalar]):
    tot = hawk.sum(x, policy="ordered")
    comp = hawk.sum(x, policy="compensated")  # (beside a compensated sum the chains are 8: 128 terms each)


def _top32(e: int) -> float:
    """The largest float32 with exponent e."""
    return float(np.nextafter(np.float32(2.0 ** (e + 1)), np.float32(0)))


def test_the_float32_floor_is_what_keeps_a_chain_exact():
    e, per_chain = F32_START, ORDERED_BLOCK // ORDERED_CHAINS
    at = 2.0 ** (e - F32_WINDOW) * (1 + 2.0 ** -23)  # at the floor, odd last bit
    below = 2.0 ** (e - F32_WINDOW - 1) * (1 + 2.0 ** -23)  # a binade under it
    for probe, exact_expected in ((at, True), (below, False)):
        terms = np.array([_top32(e)] * (per_chain - 1) + [probe], dtype=np.float32)
        total = np.float64(0.0)
        for t in terms.astype(np.float64):
            total = total + t
        exact = sum((Fraction(float(t)) for t in terms), Fraction(0))
        assert (Fraction(float(total)) == exact) is exact_expected


def test_float32_terms_just_under_the_window_sum_exactly(chain_check):
    # block 0: every chain takes 127 of the window's largest terms and a probe just under its floor (rejected:
    # the block retries); block 1 cancels all but the probes' last bits
    e, per_chain = F32_START, ORDERED_BLOCK // ORDERED_CHAINS
    probe = 2.0 ** (e - F32_WINDOW - 1) * (1 + 2.0 ** -23)
    block0 = np.full(ORDERED_BLOCK, _top32(e))
    block0[(per_chain - 1) * ORDERED_CHAINS:] = probe
    block1 = -block0
    block1[(per_chain - 1) * ORDERED_CHAINS:] = -(2.0 ** (e - F32_WINDOW - 1))
    x = np.concatenate([block0, block1]).astype(np.float32)
    out = eagle.deploy(xo_range_sum32, threads=1).run(x=x)
    assert float(out["tot"][0]) == ORDERED_CHAINS * 2.0 ** (e - F32_WINDOW - 24)
    assert_exact(out["tot"], x, np.float32, "float32 probes under the floor")


def test_float32_window_ends_and_a_sum_past_float32(chain_check):
    e = F32_START
    rng = np.random.default_rng(32)
    blocks = []
    for lead in (_top32(e), 2.0 ** (e - F32_WINDOW), 2.0 ** (e + 1)):
        blocks.append(rng.choice([lead, -lead, 0.0, -0.0, 1.5, -1.0], ORDERED_BLOCK))
    # a block of terms near 2**126 sets the window's top to 2**127, so the next block's terms (float32's largest)
    # are inside it while its chains' float64 sums are beyond float32: those go to the retry; the block after
    # cancels them
    blocks.append(rng.choice([2.0 ** 126, -(2.0 ** 126)], ORDERED_BLOCK))
    big = float(np.finfo(np.float32).max)
    blocks += [np.full(ORDERED_BLOCK, big), np.full(ORDERED_BLOCK, -big)]
    x = np.concatenate(blocks).astype(np.float32)
    out = eagle.deploy(xo_range_sum32, threads=1).run(x=x)
    assert_exact(out["tot"], x, np.float32, "float32 window ends")


def test_a_float32_term_over_the_window_sends_its_block_to_the_retry(chain_check):
    # as for float64: 2**60 and its negation in one chain, between float32 terms in [0.5, 1) whose low bits a
    # float64 sum at 2**60 cannot hold
    rng = np.random.default_rng(34)
    x = (0.5 + 0.5 * rng.random(4 * ORDERED_BLOCK)).astype(np.float32)  # (none under the window's floor)
    x[ORDERED_BLOCK + 4 + 5 * ORDERED_CHAINS] = 2.0 ** 60  # (the chain's sixth term: it holds five before)
    x[ORDERED_BLOCK + 4 + 6 * ORDERED_CHAINS] = -(2.0 ** 60)
    out = eagle.deploy(xo_range_sum32, threads=1).run(x=x)
    assert_exact(out["tot"], x, np.float32, "a float32 term over the window")
