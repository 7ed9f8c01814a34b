"""Ordered kept totals in the column shape take chains on the host (hawk/passes/lower/column_chains.py): each
column adds its terms into a chain of its own (float64: biased from M = 1.5 * 2**p by one Fast2Sum; float32:
windowed under 2**E by one add) while each term lies in the column's range; a term outside it waits in the row's
late buffer and goes to the column's (high, low) pair after the row. A chunk's first FIRST_ROWS rows send every
term late, and each column's guess then follows its largest term; a block of PROBE_ROWS rows and blocks of 128
rows follow, a column's guess moving when its late terms went over its range (or under it), and a chunk whose
block sent too many terms late dropping its chains. Every column must still be its exact sum rounded once,
whichever way its terms went.

The kernels' bodies also write a per-lane output, which keeps them on the chains (a body that writes nothing
takes the column tiles); the data tests run the same columns through the tiles too (the `_tiled` kernels).

The range tests set each column's guess in the first rows (a term and its negation), then put terms right at
both ends of the range that guess allows and just past them; the adversaries are columns whose exact sums keep
a bit that a range three binades wider at either end loses."""

import numpy as np
import pytest
from conftest import bt_ordered_sum
from exact_families import chain_adversary, same_bits, split_runs

import eagle
import hawk
from hawk import Grid, Mutable, Scalar, Vector
from hawk.passes.lower import column_chains, columns, nested_chains
from hawk.passes.lower.ordered_chains import F32_START, F32_WINDOW, HEADROOM, LOW_RANGE, P_START

# ruff: noqa: UP037 (axis labels in annotations are strings, not forward references)

BLOCK = nested_chains.NEST_BLOCK  # rows of a block after the chunk's first ones
WARM = column_chains.FIRST_ROWS + column_chains.PROBE_ROWS  # the chunk's first rows: every term late, then a
# short block (here of zeros: no guess moves)


# Each kernel's body also writes a per-lane output, which keeps it on the column chains: a body that writes nothing
# takes the column tiles (column_tiles.py; its own tests), and so do the `_tiled` twins the data tests also run.
@hawk.kernel
def cc_cols(g: Grid["r", "c":24], x: Scalar, total: Mutable[Scalar]) -> Scalar:
    total = hawk.sum(x, over="r", policy="ordered")
    return x


@hawk.kernel
def cc_odd(g: Grid["r", "c":27], x: Scalar, total: Mutable[Scalar]) -> Scalar:  # (three groups of eight and three)
    total = hawk.sum(x, over="r", policy="ordered")
    return x


@hawk.kernel
def cc_wide(g: Grid["r", "c":300], x: Scalar, total: Mutable[Scalar]) -> Scalar:
    total = hawk.sum(x, over="r", policy="ordered")
    return x


@hawk.kernel
def cc_narrow(g: Grid["r", "c":4], x: Scalar, total: Mutable[Scalar]) -> Scalar:  # (under MIN_SPAN: the pairs alone)
    total = hawk.sum(x, over="r", policy="ordered")
    return x


@hawk.kernel
def cc_cols_tiled(g: Grid["r", "c":24], x: Scalar) -> Scalar:
    return hawk.sum(x, over="r", policy="ordered")


@hawk.kernel
def cc_odd_tiled(g: Grid["r", "c":27], x: Scalar) -> Scalar:
    return hawk.sum(x, over="r", policy="ordered")


VIA = {"chains": (cc_cols, cc_odd), "tiles": (cc_cols_tiled, cc_odd_tiled)}


@hawk.kernel
def cc_mixed(g: Grid["r", "c":40], x: Scalar, v: Vector[2], avg: Mutable[Scalar], tot: Mutable[Vector[2]],
             quick: Mutable[Scalar]) -> Scalar:
    avg = hawk.mean(x, over="r", policy="ordered", where=x > -1.0)
    tot = hawk.sum(v, over="r", policy="ordered")
    quick = hawk.sum(x, over="r")  # (an "auto" total in the same row loop)
    return 2.0 * x


def _cols_want(x, dtype, mask=None):
    return np.array([bt_ordered_sum(x[:, j], dtype, None if mask is None else mask[:, j])
                     for j in range(x.shape[1])], dtype=dtype)


def _run(kernel, threads=1, **planes):
    return _total(eagle.deploy(kernel, threads=threads).run(**planes))


def _total(out) -> np.ndarray:
    """The column totals of a run: the `total` cell of a kernel with an output, else its one result."""
    return np.asarray(out["total"] if isinstance(out, dict) else out)


def test_narrow_rows_keep_the_pairs():
    assert cc_narrow.signature.lane_axes()[1].extent < column_chains.MIN_SPAN <= 24
    x = np.random.default_rng(70).standard_normal((300, 4)) * 10.0 ** np.arange(-2, 2)
    same_bits(_run(cc_narrow, x=x), _cols_want(x, np.float64), np.float64, "narrow rows")


def _warm(tops: np.ndarray) -> np.ndarray:
    """The first WARM rows: each column's largest term `tops` (0: the first guess stays), then its negation."""
    rows = np.zeros((WARM, tops.size))
    rows[0], rows[1] = tops, -tops
    return rows


def _range(dtype, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(floor, ceiling) of the range after a first block whose largest term had exponent e: float64 M = 1.5 *
    2**p with p = e + STEP[0] allows [2**(p-47), 2**(p-9)]; float32 2**E with E = e + STEP[1] allows
    exponents E - 22 .. E."""
    if dtype == np.float64:
        p = e + column_chains.STEP[0]
        return np.ldexp(1.0, p - LOW_RANGE), np.ldexp(1.0, p - HEADROOM)
    top = e + column_chains.STEP[1]
    return np.ldexp(1.0, top - F32_WINDOW), np.ldexp(2.0 - 2.0 ** -23, top)


def _edge_blocks(dtype, rng, past: str | None = None) -> np.ndarray:
    """First rows that give column j a largest term 2**e[j], then a block of 128 rows whose terms fill each
    column's range to both ends: full mantissas, both signs, terms right at the floor and at the ceiling, some
    columns every term at the ceiling (128 a chain); with `past`, some columns take terms just over the ceiling
    or just under the floor. A third block takes the second's terms negated."""
    cols = 24
    e = np.arange(cols) % 9 - 4
    floor, ceiling = _range(dtype, e)
    lo, hi = np.log2(floor).astype(int), np.log2(ceiling).astype(int)
    blk = np.ldexp(rng.uniform(1.0, 2.0, (BLOCK, cols)), rng.integers(lo, hi, (BLOCK, cols)))
    blk *= rng.choice([-1.0, 1.0], (BLOCK, cols))
    blk[::7] = floor * rng.choice([-1.0, 1.0], (blk[::7].shape[0], cols))  # right at the floor
    blk[3::11] = ceiling * rng.choice([-1.0, 1.0], (blk[3::11].shape[0], cols))  # right at the ceiling
    blk[:, 3::7] = ceiling[3::7]
    eps = 2.0 ** (-52 if dtype == np.float64 else -23)
    if past == "ceiling":
        blk[::3, 1::4] = ceiling[1::4] * (1 + eps)
    if past == "floor":
        blk[1::3, 2::4] = floor[2::4] * (1 - eps / 2)
    return np.concatenate([_warm(np.ldexp(1.0, e)), blk, -blk]).astype(dtype)


@pytest.mark.parametrize("via", VIA)
@pytest.mark.parametrize("past", [None, "ceiling", "floor"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_columns_at_the_ends_of_the_chains_range(dtype, past, via):
    x = _edge_blocks(dtype, np.random.default_rng(71), past)
    same_bits(_run(VIA[via][0], x=x), _cols_want(x, dtype), dtype, f"edges past={past}")


def _adversary(kind: str, dtype) -> np.ndarray:
    """Columns whose chains stay exact only because the range stops where it does (exact_families.
    chain_adversary, a chain's terms down a column): the first rows set the guess (a largest term 2**t0, so
    p = t0 + STEP[0], or E = t0 + STEP[1]); in the next block each column's last term has a low bit its chain
    must keep, which the big terms before it leave no room for when the range is wider; the block after takes
    those big terms negated, so the column's exact sum is the small term, bit and all."""
    t0 = P_START - column_chains.STEP[0] if dtype == np.float64 else F32_START - column_chains.STEP[1]
    each = chain_adversary(kind, dtype, P_START, F32_START)
    assert each.size == BLOCK
    col = np.concatenate([[0.0] * WARM, each, -each[:-1]])
    x = np.stack([col] * 24, axis=1)
    x[:WARM] = _warm(np.full(24, 2.0 ** t0))
    return x.astype(dtype)


@pytest.mark.parametrize("via", VIA)
@pytest.mark.parametrize("kind", ["floor", "ceiling"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_terms_just_outside_the_range_leave_the_chains(kind, dtype, via):
    x = _adversary(kind, dtype)
    want = _cols_want(x, dtype)
    assert (want == x[WARM + BLOCK - 1, 0]).all()  # (the small term: the big ones cancel)
    same_bits(_run(VIA[via][0], x=x), want, dtype, f"{kind} adversary")


@pytest.mark.parametrize("via", VIA)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_chain_takes_a_block_of_rows_at_most(dtype, via):
    """After first rows of zeros (the first guess stays), 255 terms that each leave a chain its largest error
    (float64: the low grows by almost 2**(p-53) a term; float32: the window's top, 2**(E+1) less an ulp), then
    one whose lowest bit (2**(p-99), or 2**(E-45)) a chain of more than 128 such terms cannot keep; the big
    terms come back negated after it. Chains flushed every NEST_BLOCK rows keep the bit."""
    if dtype == np.float64:
        p = P_START
        big, small = 2.0 ** (p - 10) + 2.0 ** (p - 53) - 2.0 ** (p - 62), 2.0 ** (p - 47) * (1 + 2.0 ** -52)
    else:
        t = F32_START
        big, small = (2.0 - 2.0 ** -23) * 2.0 ** t, 2.0 ** (t - 22) * (1 + 2.0 ** -23)
    col = np.concatenate([[0.0] * WARM, [big] * (2 * BLOCK - 1), [small], [-big] * (2 * BLOCK - 1)])
    x = np.stack([col] * 24, axis=1).astype(dtype)
    want = _cols_want(x, dtype)
    assert (want == dtype(small)).all()
    same_bits(_run(VIA[via][0], x=x), want, dtype, "a chain of two blocks' rows")


@pytest.mark.parametrize("via", VIA)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_few_late_terms_in_later_rows(dtype, via):
    """Rows where only a few slots' terms go late take them slot by slot: infinities, a NaN, terms too big for
    a pair (over 2**960, or 2**64 in a float32 kernel: spilled to the accumulator at once) that later cancel,
    a subnormal, in the eight-slot groups and in the slots after them."""
    rng = np.random.default_rng(74)
    x = rng.standard_normal((400, 27))
    big = 1e300 if dtype == np.float64 else 1e30
    tiny = 5e-324 if dtype == np.float64 else 1e-45
    for row, col, value in [(200, 25, np.inf), (210, 3, -np.inf), (300, 2, np.nan), (150, 26, big),
                            (350, 26, -big), (160, 9, big), (170, 9, -big), (220, 20, tiny), (230, 24, tiny),
                            (240, 12, -0.0)]:
        x[row, col] = value
    x = x.astype(dtype)
    same_bits(_run(VIA[via][1], x=x), _cols_want(x, dtype), dtype, "a few late terms")


def test_a_run_over_part_of_the_rows():
    """A run of lanes [base, base + count) starts and stops inside a row: the last row's loop stops short of
    slots whose late buffer held the row before's late terms (a huge one in slot 20, taken slot by slot),
    and that row's own late term (slot 3) must not bring them back."""
    rng = np.random.default_rng(76)
    x = rng.standard_normal((300, 24))
    x[251, 20], x[252, 3] = 1e300, 1e-300
    base, stop = 24 * 2 + 5, 24 * 252 + 11
    flat = x.reshape(-1)
    lanes = np.arange(flat.size)
    inside = (lanes >= base) & (lanes < stop)
    want = np.array([bt_ordered_sum(flat[(lanes % 24 == j) & inside], np.float64) for j in range(24)])
    out = _total(eagle.deploy(cc_cols, threads=1).run(base=base, count=stop - base, x=x))
    same_bits(out, want, np.float64, "part of the rows")


@pytest.mark.parametrize("via", VIA)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_long_columns_cut_between_chunks(dtype, via):
    """Columns of several blocks, cut between chunks (each chunk's first rows guess afresh), with magnitudes
    that jump from block to block (a guess far off sends rows to the pairs), and specials."""
    rng = np.random.default_rng(72)
    x = rng.standard_normal((700, 24)) * 10.0 ** np.repeat(rng.integers(-30, 30, 700 // 50), 50)[:, None]
    x[300:310] *= 10.0 ** rng.integers(-8, 8, (10, 24))  # many binades in a few rows
    tiny = 5e-324 if dtype == np.float64 else 1e-45  # subnormal terms: under every floor
    for rows, col, value in [(slice(100, 400), 1, 0.0), (slice(None), 2, -0.0), (450, 3, np.inf),
                             ([20, 600], 4, [np.inf, -np.inf]), (333, 5, np.nan), (slice(None, None, 2), 6, tiny),
                             (slice(200, 205), 7, -0.0)]:
        x[rows, col] = value
    x = x.astype(dtype)
    want = _cols_want(x, dtype)
    for threads, out in split_runs(VIA[via][0], "host", threads=[1, 2, 3], min_chunk=24 * 90, x=x):
        same_bits(_total(out), want, dtype, f"long columns, threads={threads}")


@pytest.mark.parametrize("via", VIA)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_columns_wider_than_a_range_drop_the_chains(dtype, via):
    """Lognormal columns (sigma 5) whose terms span more than any range: a block sends many late, the chunk
    drops its chains and its later rows take the loop without them (one chunk, and three)."""
    rng = np.random.default_rng(77)
    x = (rng.lognormal(0.0, 5.0, (400, 24)) * rng.choice([-1.0, 1.0], (400, 24))).astype(dtype)
    x[380, 5] = np.inf  # (in the rows after the drop: the loop without chains spills it)
    want = _cols_want(x, dtype)
    for threads, out in split_runs(VIA[via][0], "host", threads=[1, 3], min_chunk=24 * 100, x=x):
        same_bits(_total(out), want, dtype, f"wide columns, threads={threads}")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_short_chunks_keep_the_pairs(dtype):
    """A stage has its row loop with chains and without: chunks of fewer than COLUMN_ROWS rows take the one
    without, one chunk of all 150 rows the one with; the same bits."""
    rng = np.random.default_rng(75)
    x = (rng.standard_normal((150, 300)) * 10.0 ** rng.integers(-20, 20, (150, 1))).astype(dtype)
    x[70, 4] = np.inf
    want = _cols_want(x, dtype)
    for threads in (1, 3):
        plan = eagle.deploy(cc_wide, threads=threads, min_chunk=300 * 16)
        out = _total(plan.run(x=x))
        assert (150 / max(plan.last_chunks) < columns.COLUMN_ROWS) == (threads == 3), plan.last_chunks
        same_bits(out, want, dtype, f"threads={threads}")


def test_a_masked_mean_a_vector_sum_an_auto_sum_and_an_output_in_one_loop():
    rng = np.random.default_rng(73)
    x = rng.standard_normal((300, 40))
    x[40:60] *= 1e200
    x[77, 7] = np.nan
    v = rng.standard_normal((2, 300, 40)) * 10.0 ** rng.integers(-5, 5, (1, 300, 40))  # (payload first)
    mask = x > -1.0
    want_sum = np.array([bt_ordered_sum(x[:, j], np.float64, mask[:, j]) for j in range(40)])
    want_avg = want_sum / mask.sum(axis=0)
    want_tot = np.stack([_cols_want(v[c], np.float64) for c in range(2)])
    for threads, out in split_runs(cc_mixed, "host", threads=[1, 2], min_chunk=40 * 100, x=x, v=v):
        same_bits(out["avg"], want_avg, np.float64, f"masked mean, threads={threads}")
        same_bits(np.stack([out["tot_0"], out["tot_1"]]), want_tot, np.float64, f"vector sum, threads={threads}")
        ok = np.isfinite(x).all(axis=0)
        np.testing.assert_allclose(out["quick"][ok], x[:, ok].sum(axis=0), rtol=1e-12)
        same_bits(out["result"].reshape(x.shape), 2.0 * x, np.float64, f"output, threads={threads}")
