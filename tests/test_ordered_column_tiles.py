"""Ordered kept totals in the column shape take tiles on the host when the body writes nothing
(hawk/passes/lower/column_tiles.py): a chunk's whole rows go in blocks of ROWS, each block's slots in tiles whose
chains (one per slot; float64 biased from M = 1.5 * 2**p by one Fast2Sum, float32 windowed under 2**E by one
add) stay in registers while the tile walks down the block's rows; at the block's end the tile's range of
|term| is held against each slot's guess: inside, the chains go into the slots' pairs; outside, the tile's
lanes of the block run again through the pairs. The slots after the last whole tile, and the lanes of a row a
chunk holds in part, take the pairs lane by lane. Every column must be its exact sum rounded once, whichever
way its terms went: the data below put terms at the ends of a range and just past them, with a low bit that a
wider range loses, a huge term and its negation in one chain, every special value, and scales that jump from
block to block. The runs take both of a block's checks (conftest's kept_check): the range, and the inexact flag
(x86-64 with AVX-512F: hawk/passes/lower/flag_chains.py)."""

import dataclasses
import re

import numpy as np
import pytest
from conftest import bt_ordered_sum
from exact_families import same_bits, split_runs

import eagle
import hawk
from hawk import Grid, Scalar, Vector
from hawk.passes.lower import column_tiles
from hawk.passes.lower.column_tiles import AHEAD, NARROW, ROWS, TILE, WIDE
from hawk.passes.lower.ordered_chains import F32_START, F32_WINDOW, HEADROOM, LOW_RANGE, P_START

# ruff: noqa: UP037 (axis labels in annotations are strings, not forward references)


@hawk.kernel
def ct_sum43(g: Grid["r", "c":43], x: Scalar) -> Scalar:  # (a tile of WIDE slots, one of TILE, three alone)
    return hawk.sum(x, over="r", policy="ordered")


@hawk.kernel
def ct_sum24(g: Grid["r", "c":24], x: Scalar) -> Scalar:  # (fewer slots than WIDE: three tiles of TILE)
    return hawk.sum(x, over="r", policy="ordered")


@hawk.kernel
def ct_mean(g: Grid["r", "c":37], x: Scalar) -> Scalar:  # (a sum and a count: WIDE // 2 slots, 2 x TILE, 5)
    return hawk.mean(x * 0.5, over="r", policy="ordered", where=x > -1.0)


@hawk.kernel
def ct_vec(g: Grid["r", "c":20], v: Vector[3]) -> Vector[3]:  # (three totals: tiles of TILE, four after)
    return hawk.sum(v, over="r", policy="ordered")


@hawk.kernel
def ct_narrow(g: Grid["r", "c":5], x: Scalar) -> Scalar:  # (fewer slots than TILE: the pairs alone)
    return hawk.sum(x, over="r", policy="ordered")


def _want(x, dtype, mask=None):
    return np.array([bt_ordered_sum(x[:, j], dtype, None if mask is None else mask[:, j])
                     for j in range(x.shape[1])], dtype=dtype)


def _check(kernel, want, dtype, what, threads=(1, 2, 3), min_chunk=None, **planes):
    """One chunk, then chunks cut inside rows (their boundaries fall on ordered blocks of 1024 lanes, not on
    rows), every run the same bits."""
    for t, out in split_runs(kernel, "host", threads=list(threads), min_chunk=min_chunk or 1024, **planes):
        same_bits(out, want, dtype, f"{what}, threads={t}")


def test_the_widths():
    """The kernels' rows hold the tiles their comments say (WIDE slots for one total, half for two, TILE for
    more, and TILE where a row holds fewer than WIDE)."""
    assert WIDE % TILE == 0 and 43 - WIDE >= TILE and WIDE > 24 and 37 >= WIDE // 2 and 20 >= TILE > 5


@pytest.mark.parametrize("sae", [True, False], ids=["avx512", "avx2"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_tiles_fit_the_registers_of_the_cpu(sae, dtype):
    """With AVX-512F (32 registers of 512 bits) a tile holds WIDE slots; without it NARROW's (float64 chains: 8,
    float32's windowed ones: 16), whose chains' state fits AVX2's 16 registers: the row loop's chains are
    vectors of that many slots. Each read hint is AHEAD tiles on in the row."""
    spec = dataclasses.replace(ct_sum43.spec_for(dtype, {}), sae=sae)
    text = ct_sum43.mlir(after="lower-host-lanes", spec=spec)
    w = WIDE if sae else NARROW[dtype == "float32"]
    loops = [ln for ln in text.splitlines() if "scf.for" in ln and "iter_args" in ln and "vector<" in ln]
    widths = {int(m) for ln in loops for m in re.findall(r"vector<(\d+)xf64>", ln)}
    assert max(widths) == w, (w, widths)
    hints = re.findall(r"arith.constant (\d+) : index", text)
    assert str(AHEAD * w) in hints, (AHEAD * w, sorted(set(hints), key=int))


@pytest.mark.parametrize("kernel", [ct_sum43, ct_sum24, ct_narrow], ids=lambda k: k.name)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_columns_of_many_scales(kernel, dtype, kept_check):
    cols = kernel.signature.lane_axes()[1].extent
    rng = np.random.default_rng(81)
    x = (rng.standard_normal((4096 // cols + 1, cols)) * 10.0 ** rng.integers(-20, 20, cols)).astype(dtype)
    _check(kernel, _want(x, dtype), dtype, "scales", x=x)


def _first_block_range(dtype) -> tuple[float, float]:
    """(floor, ceiling) a chunk's first block of chains allows: float64 [2**(P_START-47), 2**(P_START-9)],
    float32 exponents F32_START - 22 .. F32_START (below 2**(F32_START+1))."""
    if dtype == np.float64:
        return 2.0 ** (P_START - LOW_RANGE), 2.0 ** (P_START - HEADROOM)
    return 2.0 ** (F32_START - F32_WINDOW), (2.0 - 2.0 ** -23) * 2.0 ** F32_START


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_terms_at_the_ends_of_the_first_range(dtype, kept_check):
    """The chunk's first block, its guess the first one: columns whose terms fill the range to both ends (full
    mantissas, both signs, right at the floor and at the ceiling), and columns with one term just past either
    end (those tiles run their lanes again)."""
    floor, ceiling = _first_block_range(dtype)
    rng = np.random.default_rng(82)
    lo, hi = int(np.log2(floor)), int(np.log2(ceiling))
    x = np.ldexp(rng.uniform(1.0, 2.0, (ROWS, 43)), rng.integers(lo, hi, (ROWS, 43)))
    x *= rng.choice([-1.0, 1.0], x.shape)
    x[::5] = floor
    x[1::7] = -ceiling
    eps = 2.0 ** (-52 if dtype == np.float64 else -23)
    x[3, 41] = ceiling * (1 + eps)  # (a slot after the tiles: lane by lane anyway)
    x[4, 9] = ceiling * (1 + eps)
    x[5, 36] = -ceiling * (1 + eps)  # (the tile of TILE slots)
    x[6, 17] = floor * (1 - eps / 2)
    x = x.astype(dtype)
    _check(ct_sum43, _want(x, dtype), dtype, "ends", threads=(1,), x=x)


def _floor_adversary(dtype) -> np.ndarray:
    """A block of one column whose chain would lose its last term's low bit: float64, ROWS - 1 terms that each
    leave the low almost half an ulp of M (the low grows past 2**(p-48), an ulp of at least 2**(p-100)), then a
    term three binades under the floor whose lowest bit is 2**(p-102); float32, ROWS - 1 terms at the window's
    top and one three binades under the window, whose lowest bit (2**(E-48)) the chain's float64 sum (past
    2**(E+5)) cannot hold. Then the big terms negated: the exact sum is the small term. (A block of ROWS terms
    leaves a chain room for a binade or two more at either end of the range than NEST_BLOCK terms do: a range
    that much wider still adds exactly, so the tests go three binades out.)"""
    if dtype == np.float64:
        p = P_START
        big, small = 2.0 ** (p - 10) + 2.0 ** (p - 53) - 2.0 ** (p - 62), 2.0 ** (p - LOW_RANGE - 3) * (1 + 2.0 ** -52)
    else:
        t = F32_START
        big, small = (2.0 - 2.0 ** -23) * 2.0 ** t, 2.0 ** (t - F32_WINDOW - 3) * (1 + 2.0 ** -23)
    col = np.concatenate([[big] * (ROWS - 1), [small], [-big] * (ROWS - 1), [0.0]])
    return np.stack([col] * 43, axis=1).astype(dtype), small


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_term_under_the_floor(dtype, kept_check):
    x, small = _floor_adversary(dtype)
    want = _want(x, dtype)
    assert (want == dtype(small)).all()
    _check(ct_sum43, want, dtype, "under the floor", x=x)


def test_float32_terms_over_the_ceiling(kept_check):
    """float32 (the range on the terms' own bits): a block of one column whose chain would lose its last term's low
    bit if the window reached three binades higher: ROWS - 1 terms of 1.5 * 2**(E+3) take the float64 sum past
    2**(E+9), then a term at the window's floor whose lowest bit (2**(E-45)) is under half its ulp; then the big
    terms negated, so the exact sum is that term. (float64's biased chains lose no bit there in ROWS terms: a
    Fast2Sum past 2**(p+1) stays exact, so its ceiling is left to the huge-term test below.)"""
    assert f"vector<{NARROW[True]}xi32>" in ct_sum43.mlir("float32", after="lower-host-lanes")  # (a tile's range:
    # the terms' own bits, NARROW[True] slots in the default spec's tiles, a CPU without AVX-512's)
    t = F32_START
    head, last = [1.5 * 2.0 ** (t + 3)] * (ROWS - 1), 2.0 ** (t - F32_WINDOW) * (1 + 2.0 ** -23)
    col = np.concatenate([head, [last], [-h for h in head], [0.0]])
    x = np.stack([col] * 43, axis=1).astype(np.float32)
    want = _want(x, np.float32)
    assert (want == np.float32(last)).all()
    _check(ct_sum43, want, np.float32, "over the ceiling", x=x)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_huge_term_and_its_negation_in_one_chain(dtype, kept_check):
    """A term far over the ceiling swallows the chain's bias (float64) or its sum (float32), and its negation
    later in the same block hands back a chain that looks sane: only the ceiling's test catches it."""
    rng = np.random.default_rng(83)
    x = rng.standard_normal((3 * ROWS, 43))
    huge = 2.0 ** 70 if dtype == np.float64 else 2.0 ** 40
    for col, row in [(0, 3), (13, ROWS + 5), (31, 2 * ROWS + 1), (38, 9)]:
        x[row, col], x[row + 7, col] = huge, -huge
    x = x.astype(dtype)
    _check(ct_sum43, _want(x, dtype), dtype, "huge and its negation", x=x)


@pytest.mark.parametrize("kernel", [ct_sum43, ct_sum24], ids=lambda k: k.name)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_special_values(kernel, dtype, kept_check):
    """Infinities, a NaN, terms too big for a pair (later cancelled), subnormals (under every floor), -0.0 and
    zeros, in tiles and in the slots after them, in several blocks."""
    cols = kernel.signature.lane_axes()[1].extent
    rng = np.random.default_rng(84)
    x = rng.standard_normal((200, cols))
    big = 1e300 if dtype == np.float64 else 1e30
    tiny = 5e-324 if dtype == np.float64 else 1e-45
    for row, col, value in [(40, 1, np.inf), (41, 2, -np.inf), (90, 2, np.inf), (100, 3, np.nan), (10, 4, big),
                            (150, 4, -big), (70, cols - 1, np.inf), (5, cols - 2, big), (180, cols - 2, -big),
                            (slice(None, None, 3), 6, tiny), (slice(None), 7, -0.0), (slice(50, 90), 8, 0.0)]:
        x[row, col] = value
    x = x.astype(dtype)
    _check(kernel, _want(x, dtype), dtype, "specials", x=x)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_scales_that_jump_from_block_to_block(dtype, kept_check):
    """Each block of ROWS rows at a scale of its own (guesses that are off send tiles to their reruns, and
    follow), blocks cut between chunks, and a few rows that spread over many binades."""
    rng = np.random.default_rng(85)
    rows = 9 * ROWS
    scale = 10.0 ** np.repeat(rng.integers(-25, 25, rows // ROWS + 1), ROWS)[:rows]
    x = rng.standard_normal((rows, 43)) * scale[:, None]
    x[100:104] *= 10.0 ** rng.integers(-12, 12, (4, 43))
    x = x.astype(dtype)
    _check(ct_sum43, _want(x, dtype), dtype, "jumps", x=x)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_masked_mean(dtype):
    rng = np.random.default_rng(86)
    x = (rng.standard_normal((170, 37)) * 10.0 ** rng.integers(-5, 5, 37)).astype(dtype)
    x[77, 3] = np.nan
    mask = x > -1.0
    terms = (x * dtype(0.5)).astype(dtype)
    want = (_want(terms, dtype, mask) / mask.sum(axis=0)).astype(dtype)
    _check(ct_mean, want, dtype, "masked mean", x=x)


def test_a_vector_total():
    rng = np.random.default_rng(87)
    v = rng.standard_normal((3, 130, 20)) * 10.0 ** rng.integers(-8, 8, (3, 1, 20))  # (payload first)
    v[1, 60, 5] = np.inf
    want = np.stack([_want(v[c], np.float64) for c in range(3)])
    for t, out in split_runs(ct_vec, "host", threads=[1, 3], min_chunk=1024, v=v):
        same_bits(out, want, np.float64, f"vector, threads={t}")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("rows", [3, 24, 60])
def test_chunks_of_few_rows(dtype, rows):
    """A chunk that holds no whole row (3 rows in 12 chunks; MIN_ROWS is 1) runs its lanes through the pairs; one
    of two or five whole rows (24 or 60 rows) takes tiles over a short block: the same bits as one chunk."""
    assert column_tiles.MIN_ROWS == 1
    rng = np.random.default_rng(88)
    x = (rng.standard_normal((rows, 43)) * 10.0 ** rng.integers(-9, 9, 43)).astype(dtype)
    want = _want(x, dtype)
    for threads, min_chunk in ((1, None), (3, 10)):
        plan = eagle.deploy(ct_sum43, threads=threads, min_chunk=min_chunk)
        out = np.asarray(plan.run(x=x))
        assert plan.last_chunks == ((12,) if threads > 1 else (1,)), plan.last_chunks
        same_bits(out, want, dtype, f"threads={threads}")
