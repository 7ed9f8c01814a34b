"""policy="ordered" is exact: every ordered result is the exact sum of its terms rounded once (issue #11).

The reference is independent of hawk's accumulator: conftest.bt_ordered_sum adds the terms as a Fraction (no
rounding) and rounds once with hawk.exact.round_fraction (float32 straight from the exact value); float64 results
are also compared with math.fsum wherever it does not raise. Every comparison is bit for bit: a zero result must
be +0.0 and a NaN result the canonical quiet NaN.

What is checked:

* the reference itself, before any kernel runs: hand-made cases (ties to even, sticky bits below a tie, float32
  double-rounding traps, overflow-prone finite sets, infinities, NaN, zeros), agreement with math.fsum, with the
  Python model of the accumulator (hawk.exact.exact_sum) and with a neighbour check in float32;
* sums over every lane, on adversarial families (cancellation, 1e-300..1e300, subnormals, +-0, long runs of one
  value, finite sets whose naive partial sums overflow, sums past the largest finite value, exact ties, sticky
  bits / float32 double-rounding traps, chains whose TwoSum pairs stay exact so the host's shortcut is taken),
  float64 and float32, host threads 1..4 with small chunks (the run really splits: plan.last_chunks) and the
  spirv target; special values placed in different chunks; a million copies of one value;
* where= (specials in unselected lanes change nothing), mean (the rounded exact sum divided once by the count),
  vector and matrix payloads, sums keeping Grid axes (fast and slow axis);
* ordered scatters per slot: the prior content of a passed sink is one more term and every slot is rounded
  (-0.0 to +0.0, any NaN to the canonical one), ties whose parts sit in different chunks, key -1 adds nothing
  (even a NaN), several scatters per plane and a `for`, vector payloads, a 2-D sink, and a 100000-slot sink
  that runs split over several chunks;
* eagle.reduce(policy="ordered") and a hawk.run cell of a built artifact.
"""

import math
from fractions import Fraction

import numpy as np
import pytest
from conftest import bt_exact_fraction, bt_ordered_scatter, bt_ordered_sum
from exact_families import (
    FAMILIES,
    SMALL,
    assert_exact,
    f_kahan,
    f_negzeros,
    f_overflow,
    f_span,
    f_subnormal,
    f_tie_odd,
    f_trap,
    fsum_or_none,
    hand_cases,
    p_bits,
    pairs,
    same_bits,
    split_runs,
    tie,
    tiny,
)

import eagle
import hawk
import hawk.artifact
import hawk.exact
from hawk import Grid, Index, Matrix, Mutable, Param, Scalar, Vector

DTYPES = [np.float64, np.float32]
N = 12_000  # lanes of the adversarial runs: several chunks of SMALL lanes


# ====================================================================================== kernels


@hawk.kernel
def xo_sum(x: Scalar) -> Scalar:
    return hawk.sum(x, policy="ordered")


@hawk.kernel
def xo_masked(x: Scalar, w: Scalar, cut: Param, tot: Mutable[Scalar], avg: Mutable[Scalar]):
    tot = hawk.sum(x, where=w > cut, policy="ordered")
    avg = hawk.mean(x, where=w > cut, policy="ordered")


@hawk.kernel
def xo_payload(v: Vector[3], mm: Matrix[2, 2], tot: Mutable[Vector[3]], avg: Mutable[Vector[3]],
               whole: Mutable[Matrix[2, 2]]):
    tot = hawk.sum(v, policy="ordered")
    avg = hawk.mean(v, policy="ordered")
    whole = hawk.sum(mm, policy="ordered")


COLS = 3000


@hawk.kernel
def xo_keep_rows(lane: Grid["row", "col":COLS], x: Scalar) -> Scalar:
    return hawk.sum(x, over="col", policy="ordered")


@hawk.kernel
def xo_keep_cols(lane: Grid["row", "col":4], x: Scalar, s: Mutable[Scalar], mu: Mutable[Scalar]):
    s = hawk.sum(x, over="row", policy="ordered")
    mu = hawk.mean(x, over="row", policy="ordered")


@hawk.kernel
def xo_sc(key: Index, x: Scalar, acc: Mutable["slot":8]):
    hawk.scatter(acc, policy="ordered")[key] += x


@hawk.kernel
def xo_sc_for(key: Index, x: Scalar, y: Scalar, acc: Mutable["slot":8]):
    for j in range(3):
        hawk.scatter(acc, policy="ordered")[(key + j) % 8] += x * (j + 1.0)
    hawk.scatter(acc, policy="ordered")[key - 1] += y  # key 0 becomes -1: adds nothing


@hawk.kernel
def xo_sc_vec(key: Index, v: Vector[2], acc: Mutable["slot":8]):
    hawk.scatter(acc, policy="ordered")[key] += v


@hawk.kernel
def xo_sc_2d(r: Index, c: Index, x: Scalar, tab: Mutable["ra":3, "ca":4]):
    hawk.scatter(tab, policy="ordered")[r, c - 1] += x


BIG = 100_000


@hawk.kernel
def xo_sc_big(key: Index, x: Scalar, acc: Mutable["slot":BIG]):
    hawk.scatter(acc, policy="ordered")[key] += x


# ====================================================================================== the reference itself


@pytest.mark.parametrize("dtype", DTYPES)
def test_reference_on_hand_made_cases(dtype):
    for terms, want in hand_cases(dtype):
        t = np.asarray(terms, dtype=dtype)
        assert np.array_equal(t.astype(np.float64), np.asarray(terms, dtype=np.float64), equal_nan=True), terms
        for got in (bt_ordered_sum(t), hawk.exact.exact_sum(t.tolist(), np.dtype(dtype).name)):
            same_bits(np.asarray([got], dtype=dtype), [want], dtype, f"{terms}")


def test_reference_float32_double_rounding_traps_are_real():
    # rounding the exact value to float64 first, then to float32, gives the other neighbour in these cases
    for terms, want in hand_cases(np.float32)[-2:]:
        exact = sum((Fraction(v) for v in terms), Fraction(0))
        assert bt_ordered_sum(np.asarray(terms, dtype=np.float32)) == np.float32(want)
        assert np.float32(float(exact)) != np.float32(want), terms


def _nearest_float32(exact: Fraction, got: np.float32) -> None:
    """`got` is a correct nearest-even rounding of `exact` in float32 (checked through its two neighbours)."""
    below = np.nextafter(got, np.float32(-np.inf))
    above = np.nextafter(got, np.float32(np.inf))
    d = abs(Fraction(float(got)) - exact)
    for n in (below, above):
        if np.isfinite(n):
            dn = abs(Fraction(float(n)) - exact)
            assert d < dn or (d == dn and not int(got.view(np.uint32)) & 1), (float(got), float(exact))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_reference_agrees_with_fsum_and_the_accumulator(family, dtype):
    rng = np.random.default_rng([11_000, sorted(FAMILIES).index(family), int(dtype == np.float32)])
    for _ in range(3):
        t = FAMILIES[family](600, dtype, rng)
        assert t.size == 600 and t.dtype == dtype
        want = bt_ordered_sum(t)
        acc = hawk.exact.exact_sum(t.tolist(), np.dtype(dtype).name)
        same_bits(np.asarray([acc], dtype=dtype), [want], dtype, f"{family}: accumulator model")
        if np.isfinite(want) and want != 0:
            exact = bt_exact_fraction(t)
            if dtype == np.float64:
                assert want == fsum_or_none(t) or fsum_or_none(t) is None
            else:
                _nearest_float32(exact, want)
        if family == "trap" and dtype == np.float32:
            assert np.float32(float(bt_exact_fraction(t))) != want  # the double-rounding trap is in the data
        if family in ("tie_even", "tie_odd"):
            assert bt_exact_fraction(t) != Fraction(float(want))  # a real tie: the result is not exact


# ====================================================================================== sums over every lane


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_ordered_sum_is_the_exact_sum_under_every_split(target, family, dtype):
    rng = np.random.default_rng([12_000, sorted(FAMILIES).index(family), int(dtype == np.float32)])
    x = FAMILIES[family](N, dtype, rng)
    for threads, got in split_runs(xo_sum, target, x=x):
        assert got.shape == (1,)
        assert_exact(got, x, dtype, f"{family} threads={threads}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_ordered_special_values_in_different_chunks(target, dtype):
    # each case's terms land at the start, the middle and the end of the run, so different chunks hold them and
    # only the combine of the chunks' accumulators sees them together
    rng = np.random.default_rng(12_100)
    n = 6000
    for terms, want in hand_cases(dtype):
        if not terms:
            continue
        body = rng.permutation(pairs((n - len(terms)) // 2, dtype, rng))
        at = np.linspace(0, body.size, len(terms)).astype(int)  # spread from the first lane to the last
        x = np.insert(body, at, np.asarray(terms, dtype=dtype))
        assert x.size == n - (n - len(terms)) % 2
        for threads, got in split_runs(xo_sum, target, threads=(1, 4), x=x):
            assert_exact(got, x, dtype, f"{terms} threads={threads}")
            same_bits(got, [want], dtype, f"{terms} threads={threads} (worked by hand)")


@pytest.mark.parametrize("dtype", DTYPES)
def test_ordered_long_run_of_one_value(target, dtype):
    # a million copies of fl(0.1): the exact sum n * fl(0.1) rounded once, over every lane and into one key
    n = 1_000_003
    x = np.full(n, dtype(0.1), dtype=dtype)
    want = bt_ordered_sum(x)
    assert np.cumsum(x)[-1] != want  # a running sum drifts far from it
    for threads, got in split_runs(xo_sum, target, threads=(1, 4), min_chunk=65536, x=x):
        assert_exact(got, x, dtype, f"sum threads={threads}")
    key = np.zeros(n, dtype=np.int32)
    key[::3] = 5
    for threads, got in split_runs(xo_sc, target, threads=(1, 4), min_chunk=65536, key=key, x=x):
        same_bits(got, bt_ordered_scatter(np.zeros(8, dtype), key, x, dtype), dtype, f"scatter threads={threads}")


def test_ordered_sum_of_no_lanes_is_positive_zero(target):
    got = np.asarray(eagle.deploy(xo_sum, target=target).run(x=np.zeros(0)))
    same_bits(got, [0.0], np.float64, "no lanes")


# ====================================================================================== where=, mean, payloads


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("family", ["kahan", "span", "subnormal", "equal", "overflow", "tie_odd", "trap"])
def test_ordered_sum_and_mean_with_where(target, family, dtype):
    rng = np.random.default_rng([12_200, sorted(FAMILIES).index(family), int(dtype == np.float32)])
    x = FAMILIES[family](N, dtype, rng)
    w = rng.random(N).astype(dtype)
    cut = 0.3
    mask = w > dtype(cut)
    count = int(mask.sum())
    for threads, out in split_runs(xo_masked, target, x=x, w=w, cut=cut):
        tot = assert_exact(out["tot"], x, dtype, f"{family} sum where= threads={threads}", mask)
        same_bits(out["avg"], [dtype(tot) / dtype(count)], dtype, f"{family} mean where= threads={threads}")
    # every lane selected: the mean is the exact sum rounded once, then divided once by the lane count
    out = eagle.deploy(xo_masked, target=target).run(x=x, w=w, cut=-1.0)
    tot = assert_exact(np.asarray(out["tot"]), x, dtype, f"{family} every lane")
    same_bits(np.asarray(out["avg"]), [dtype(tot) / dtype(N)], dtype, f"{family} mean of every lane")


@pytest.mark.parametrize("dtype", DTYPES)
def test_ordered_where_ignores_specials_in_unselected_lanes(target, dtype):
    # NaN, infinities and the largest values in lanes the mask leaves out change nothing, in full blocks of lanes
    # and in a short last one
    rng = np.random.default_rng([12_250, int(dtype == np.float32)])
    n = 5000
    x = f_kahan(n, dtype, rng)
    w = rng.random(n).astype(dtype)
    out_lanes = np.flatnonzero(w <= dtype(0.3))
    top = np.finfo(dtype).max
    x[out_lanes] = rng.choice(np.array([np.nan, np.inf, -np.inf, top, -top], dtype=dtype), out_lanes.size)
    mask = w > dtype(0.3)
    for threads, out in split_runs(xo_masked, target, threads=(1, 3), x=x, w=w, cut=0.3):
        tot = assert_exact(out["tot"], x, dtype, f"threads={threads}", mask)
        same_bits(out["avg"], [dtype(tot) / dtype(int(mask.sum()))], dtype, f"mean threads={threads}")


def test_ordered_mean_of_no_selected_lane_is_nan(target):
    for dtype in DTYPES:  # (the canonical quiet NaN: 0 / 0 gives x86's default NaN, whose sign bit is set)
        for threads in (1, 2):
            plan = eagle.deploy(xo_masked, target=target, threads=threads, min_chunk=1024)
            out = plan.run(x=np.ones(5000, dtype), w=np.zeros(5000, dtype), cut=0.5)
            same_bits(np.asarray(out["tot"]), [0.0], dtype, "sum of nothing")
            same_bits(np.asarray(out["avg"]), [np.nan], dtype, f"mean of nothing, threads={threads}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_ordered_vector_and_matrix_payloads(target, dtype):
    rng = np.random.default_rng([12_300, int(dtype == np.float32)])
    v = np.stack([f_kahan(N, dtype, rng), f_trap(N, dtype, rng), f_overflow(N, dtype, rng)])
    mm = np.stack([f_span(N, dtype, rng), f_subnormal(N, dtype, rng), f_tie_odd(N, dtype, rng),
                   f_negzeros(N, dtype, rng)])
    for threads, out in split_runs(xo_payload, target, v=v, mm=mm):
        for c in range(3):
            tot = assert_exact(out[f"tot_{c}"], v[c], dtype, f"vector component {c} threads={threads}")
            same_bits(out[f"avg_{c}"], [dtype(tot) / dtype(N)], dtype, f"vector mean {c} threads={threads}")
        for e in range(4):
            assert_exact(out[f"whole_{e}"], mm[e], dtype, f"matrix entry {e} threads={threads}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_ordered_sums_keeping_an_axis(target, dtype):
    rng = np.random.default_rng([12_400, int(dtype == np.float32)])
    fams = ["kahan", "span", "subnormal", "negzeros", "overflow", "tie_even", "trap"]
    x = np.stack([FAMILIES[f](COLS, dtype, rng) for f in fams])  # one family per kept row
    for threads, got in split_runs(xo_keep_rows, target, x=x):
        assert got.shape == (len(fams),)
        for r, f in enumerate(fams):
            assert_exact(got[r:r + 1], x[r], dtype, f"row {r} ({f}) threads={threads}")
    # the slow axis summed, the fast one kept: each column holds one family, one lane in four
    rows = 4000
    y = np.stack([FAMILIES[f](rows, dtype, rng) for f in ("kahan", "equal", "tie_odd", "span")], axis=1)
    for threads, out in split_runs(xo_keep_cols, target, x=y):
        for c in range(4):
            tot = assert_exact(out["s"][c:c + 1], y[:, c], dtype, f"column {c} threads={threads}")
            same_bits(out["mu"][c:c + 1], [dtype(tot) / dtype(rows)], dtype, f"column mean {c} threads={threads}")


# ====================================================================================== ordered scatters


SLOT_FAMILIES = ["kahan", "span", "subnormal", "negzeros", "equal", "overflow", "tie_odd", "trap"]


def _slot_data(dtype, rng, per_slot=1500):
    """Keys and terms: slot s gets a run of SLOT_FAMILIES[s], lanes shuffled; plus lanes with key -1 holding NaN and
    inf (they add nothing)."""
    xs = [FAMILIES[f](per_slot, dtype, rng) for f in SLOT_FAMILIES]
    x = np.concatenate([*xs, np.array([np.nan, np.inf, -np.inf] * 10, dtype=dtype)])
    key = np.concatenate([np.repeat(np.arange(len(xs)), per_slot), np.full(30, -1)]).astype(np.int32)
    perm = rng.permutation(x.size)
    return key[perm], x[perm]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.usefixtures("scatter_route")
def test_ordered_scatter_is_exact_per_slot_with_the_prior_as_a_term(target, dtype):
    rng = np.random.default_rng([12_500, int(dtype == np.float32)])
    key, x = _slot_data(dtype, rng)
    big = dtype(1e308 if dtype == np.float64 else 3e38)
    prior = np.array([1e-3, -2.5e-7, 3 * tiny(dtype), -0.0, 7.0, -float(big), 1.0, -1.0], dtype=dtype)
    # slot 5 (the overflow family: 4 M - 3 M + 1.125 ulp(M)) starts at -M: exactly 1.125 ulp(M), although naive
    # partial sums overflow; slot 3 holds -0.0 and gets only -0.0 terms: +0.0
    want = bt_ordered_scatter(prior, key, x, dtype)
    assert want[3] == 0.0 and not np.signbit(want[3])
    assert want[5] == dtype(np.spacing(big)) * dtype(1.125)
    for threads, got in split_runs(xo_sc, target, key=key, x=x, acc=prior):
        same_bits(got, want, dtype, f"with prior threads={threads}")
    for threads, got in split_runs(xo_sc, target, threads=(1, 3), key=key, x=x):  # omitted sink: starts at zero
        same_bits(got, bt_ordered_scatter(np.zeros(8, dtype), key, x, dtype), dtype, f"no prior threads={threads}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.usefixtures("scatter_route")
def test_ordered_scatter_prior_cancels_the_lanes(target, dtype):
    # the prior is one more term: a slot whose lanes add up to exactly -prior comes out +0.0, and a tie formed by
    # prior plus lanes rounds to even
    rng = np.random.default_rng([12_550, int(dtype == np.float32)])
    a, pieces, _ = tie(dtype, rng, 1)
    lanes = np.concatenate([pairs(2500, dtype, rng), np.asarray(pieces, dtype=dtype), [dtype(2.5), dtype(-1.0)]])
    key = np.zeros(lanes.size, dtype=np.int32)
    key[-2:] = 1
    prior = np.zeros(8, dtype=dtype)
    prior[0], prior[1] = a, -1.5
    perm = rng.permutation(lanes.size)
    for threads, got in split_runs(xo_sc, target, threads=(1, 3), key=key[perm], x=lanes[perm],
                                    acc=prior):
        want = np.zeros(8, dtype=dtype)
        want[0] = bt_ordered_sum(np.append(pieces, a), dtype)
        assert want[0] != a  # the odd tie rounds away from the prior
        same_bits(got, want, dtype, f"threads={threads}")
        assert not np.signbit(got[1])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.usefixtures("scatter_route")
def test_ordered_scatter_ties_spread_over_chunks(target, dtype):
    # each slot's few terms sit in different chunks, with nothing else to add: each chunk's share is exact on its
    # own (one or two floats), so only the finish sees the tie (a + half an ulp) or the term far below it that
    # decides it; the prior content is the tie's `a` for half of the slots
    rng = np.random.default_rng([12_450, int(dtype == np.float32)])
    n = 8192
    key = np.full(n, -1, dtype=np.int32)
    x = rng.normal(size=n).astype(dtype)  # under key -1: adds nothing
    prior = np.zeros(8, dtype=dtype)
    terms = {}
    for s in range(8):
        a, pieces, e = tie(dtype, rng, s % 2)
        d = [math.copysign(math.ldexp(1.0, e - p_bits(dtype) - 40), a) * (1.0 if s % 4 < 2 else -1.0)] if s < 6 else []
        core = [*pieces, *d] if s % 2 else [a, *pieces, *d]
        if s % 2:
            prior[s] = a
        terms[s] = core
        at = s + 8 * np.linspace(0, n // 8 - 1, len(core)).astype(int)  # spread over the run: other chunks
        key[at], x[at] = s, np.asarray(core, dtype=dtype)
    want = bt_ordered_scatter(prior, key, x, dtype)
    for s in range(8):  # the per-slot reference agrees with the exact sum of the slot's own terms
        same_bits(want[s:s + 1], [bt_ordered_sum(np.append(terms[s], prior[s]), dtype)], dtype, f"reference slot {s}")
    for threads, got in split_runs(xo_sc, target, key=key, x=x, acc=prior):
        same_bits(got, want, dtype, f"threads={threads}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.usefixtures("scatter_route")
def test_ordered_scatter_rounds_every_slot_of_a_passed_sink(target, dtype):
    # slots no lane touches are rounded too: -0.0 becomes +0.0, a NaN of any payload the canonical quiet NaN,
    # an infinity and a finite value stay
    nan_bits = {np.float64: (np.uint64, 0xFFF8000000000123), np.float32: (np.uint32, 0xFFC00123)}[dtype]
    prior = np.array([-0.0, 0.0, 1.5, -np.inf, 2.0, -7.25, 3.0, 0.0], dtype=dtype)
    prior[1:2].view(nan_bits[0])[0] = nan_bits[1]  # a negative NaN with a payload
    assert np.isnan(prior[1])
    for threads, got in split_runs(xo_sc, target, threads=(1,), key=np.array([6], np.int32),
                                    x=np.array([0.5], dtype=dtype), acc=prior):
        same_bits(got, [0.0, np.nan, 1.5, -np.inf, 2.0, -7.25, 3.5, 0.0], dtype, f"threads={threads}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.usefixtures("scatter_route")
def test_ordered_scatter_index_key_minus_one_adds_nothing(target, dtype):
    rng = np.random.default_rng([12_600, int(dtype == np.float32)])
    x = f_span(N, dtype, rng)
    key = rng.integers(-1, 8, size=N).astype(np.int64)
    x[key == -1] = np.nan  # must not leak into any slot
    prior = f_kahan(8, dtype, rng)
    for threads, got in split_runs(xo_sc, target, key=key, x=x, acc=prior):
        same_bits(got, bt_ordered_scatter(prior, key, x, dtype), dtype, f"threads={threads}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.usefixtures("scatter_route")
def test_ordered_scatter_in_a_for_and_several_per_plane(target, dtype):
    rng = np.random.default_rng([12_700, int(dtype == np.float32)])
    key = rng.integers(0, 8, size=N).astype(np.int32)
    x = np.concatenate([f_kahan(N // 2, dtype, rng), f_tie_odd(N - N // 2, dtype, rng)])
    y = f_span(N, dtype, rng)
    prior = f_span(8, dtype, rng)
    keys = np.concatenate([(key + j) % 8 for j in range(3)] + [key - 1])
    terms = np.concatenate([(x * dtype(j + 1.0)).astype(dtype) for j in range(3)] + [y])
    assert np.isfinite(terms).all()
    want = bt_ordered_scatter(prior, keys, terms, dtype)
    for threads, got in split_runs(xo_sc_for, target, key=key, x=x, y=y, acc=prior):
        same_bits(got, want, dtype, f"threads={threads}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.usefixtures("scatter_route")
def test_ordered_scatter_vector_payload_and_2d_sink(target, dtype):
    rng = np.random.default_rng([12_800, int(dtype == np.float32)])
    key, x0 = _slot_data(dtype, rng, per_slot=800)
    x1 = f_trap(x0.size, dtype, rng)
    v = np.stack([x0, x1])
    prior = f_span(16, dtype, rng).reshape(2, 8)
    for threads, got in split_runs(xo_sc_vec, target, key=key, v=v, acc=prior):
        assert got.shape == (2, 8)
        same_bits(got, bt_ordered_scatter(prior, key, v, dtype), dtype, f"vector payload threads={threads}")
    r = rng.integers(0, 3, size=N).astype(np.int32)
    c = rng.integers(0, 5, size=N).astype(np.int32)  # the kernel adds at c - 1: c == 0 adds nothing
    x = f_kahan(N, dtype, rng)
    for threads, got in split_runs(xo_sc_2d, target, r=r, c=c, x=x):
        assert got.shape == (3, 4)
        want = bt_ordered_scatter(np.zeros((3, 4), dtype), (r, c - 1), x, dtype)
        same_bits(got, want, dtype, f"2-D threads={threads}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.usefixtures("scatter_route")
def test_ordered_scatter_into_a_large_sink_runs_split(target, dtype):
    # 100000 slots: still split over several chunks (threads=4, small chunks; a chunk may have to take at least
    # as many lanes as its per-slot pairs hold values, so a million lanes), each slot exact
    rng = np.random.default_rng([12_900, int(dtype == np.float32)])
    n = 1_000_000
    key = rng.integers(0, BIG, size=n).astype(np.int32)
    key[: n // 10] = 77  # one crowded slot among many sparse ones
    x = f_kahan(n, dtype, rng)
    prior = f_span(BIG, dtype, rng)
    slots = None if dtype == np.float64 else np.unique(np.r_[77, rng.integers(0, BIG, 2000)])
    want = bt_ordered_scatter(prior, key, x, dtype, slots)
    outs = []
    for threads, got in split_runs(xo_sc_big, target, threads=(1, 4), min_chunk=4096, key=key, x=x, acc=prior):
        assert got.shape == (BIG,)
        check = slice(None) if slots is None else slots
        same_bits(got[check], want[check], dtype, f"threads={threads}")
        outs.append(got)
    same_bits(outs[1], outs[0], dtype, "threads 4 vs 1, every slot")


# ====================================================================================== eagle.reduce, hawk.run


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("family", ["kahan", "span", "subnormal", "negzeros", "overflow", "beyond", "tie_odd",
                                    "trap"])
def test_reduce_ordered_is_the_exact_sum(family, dtype):
    rng = np.random.default_rng([13_000, sorted(FAMILIES).index(family), int(dtype == np.float32)])
    x = FAMILIES[family](5000, dtype, rng)
    out = np.zeros(1, dtype)
    eagle.reduce(x, out, policy="ordered").launch()
    assert_exact(out, x, dtype, f"eagle.reduce {family}")
    rows = np.stack([FAMILIES[f](3000, dtype, rng) for f in ("trap", family, "equal")])
    out3 = np.zeros(3, dtype)
    eagle.reduce(rows, out3, policy="ordered").launch()
    for k in range(3):
        assert_exact(out3[k:k + 1], rows[k], dtype, f"eagle.reduce row {k}")


@hawk.kernel
def xo_cells(x: Scalar, v: Vector[2], total: Mutable[Scalar], tot: Mutable[Vector[2]]):
    total = hawk.sum(x, policy="ordered")
    tot = hawk.sum(v, policy="ordered")


def test_hawk_run_cells_are_exact(tmp_path):
    hawk.artifact.build(xo_cells, tmp_path, dtypes=("float64", "float32"))
    for dtype in DTYPES:
        rng = np.random.default_rng([13_100, int(dtype == np.float32)])
        x, v0, v1 = f_trap(N, dtype, rng), f_overflow(N, dtype, rng), f_subnormal(N, dtype, rng)
        for threads in (1, 3):
            art = hawk.load(tmp_path, "xo_cells", threads=threads, min_chunk=SMALL)
            out = hawk.run(art, x=x, v=np.stack([v0, v1]))
            assert threads == 1 or max(art.last_chunks) > 1, art.last_chunks
            assert_exact(np.asarray(out["total"]), x, dtype, f"cell threads={threads}")
            assert_exact(np.asarray(out["tot_0"]), v0, dtype, f"vector cell 0 threads={threads}")
            assert_exact(np.asarray(out["tot_1"]), v1, dtype, f"vector cell 1 threads={threads}")
