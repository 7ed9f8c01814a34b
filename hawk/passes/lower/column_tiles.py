"""Tiles for ordered kept totals in the column shape (the host): the chunk's rows in blocks of ROWS, each block's
slots in tiles (`width`: WIDE slots, NARROW without AVX-512, fewer for more totals, then TILE), each tile's
slots with a float64 chain each in registers (vectors of chain values) while the tile walks down the block's
rows. The walk itself (walk_blocks, walk_rows, lanes_by_row) serves column_plain's accumulators too.

column_chains keeps a chain per slot in memory: each term loads and stores its slot's chain, range and late value
(seven memory accesses a term, bound by the core's loads and stores). Here a tile's chains, their range (the
largest and smallest non-zero |term| bits per slot, ordered_chains.range_step64; float32: on the terms' own bits,
nested_chains.range_step32) and their guesses stay in vector registers over the block's rows: a term costs its own
load, a Fast2Sum (float64; float32: one add of the widened term, the windowed chains) and the range's four integer
ops, as the full sums' chains do.

- A chain starts at (M, 0), M = 1.5 * 2**p per slot (biased; windowed float32: 0 under a window top 2**E), and is
  exact while each of its terms (ROWS, at most NEST_BLOCK) is zero or inside nested_chains.chain_range of its
  guess. At
  the block's end the tile's range is held against it: inside, each chain's `high - M` and `low` go into its
  slot's (high, low) pair by the pairs' step (what a pair cannot take is spilled into the slot's exact
  accumulator); outside (an inf, a NaN, a term beyond the guess), the chains are dropped and the tile's block of
  lanes runs again, each term by the pairs' step, as without chains. So the body must write nothing
  (rerun.can_recompute's rule) and every reduction of the stage must be such a total.
- Each slot's next guess follows its largest |term| in the block (nested_chains.guess_after); a chunk's first
  guess is ordered_chains.P_START (float32: F32_START). A guess that is off costs the block's rerun, never bits.
- The slots after the last whole tile, and the lanes of a row the chunk holds only in part (a chunk starts on
  an ordered block of 1024 lanes, not on a row), take the pairs' step lane by lane.

The pairs, their spills and the chains always hold the exact sum of the slot's terms: the bits are those of the
other column paths. columns.column_driver decides when a chunk takes tiles.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import scf

from hawk.ir.build import create
from hawk.passes import sae_emit
from hawk.passes.lower import flag_chains, nested_chains, ordered_chains, planes, reduce_kept, rerun, scatters
from hawk.passes.lower.context import Lowering, clone_body, rewrite_ops
from hawk.passes.lower.nested_chains import NEST_BLOCK

TILE = 8  # the fewest slots a tile's chains hold side by side: one 512-bit vector of float64 per chain value
WIDE = 32  # slots a tile of one total's chains holds: four vectors of chains, since one vector's Fast2Sum
# waits on its add's latency every row (1e5 lanes of 1000 float64 columns, two threads: 8 slots 27.7 us, 32
# slots 25.2); two totals (a mean and its count) take 16 slots, more take 8 (the chains stay in registers)
NARROW = {True: 16, False: 8}  # ... on a CPU without AVX-512F (16 vector registers of 256 bits), by whether the
# chains are windowed (float32 terms: a float64 sum and the range on 32-bit bits, half a register a slot-vector
# of the float64 form's four values): at WIDE slots the chains' state took 32 of the 16 registers and spilled
# every row (AMD EPYC, Zen 3, one thread, 1000 ordered columns: float64 1e5 lanes 51 -> 33 us at 8 slots, 16
# slots 44; float32 21.5 -> 19.8 us at 16 slots, 8 slots 21)
ROWS = 64  # rows of a block: a tile's chains take that many terms each (at most NEST_BLOCK keep them exact), and a
# block's rows stay in the core's cache while its tiles walk down them (ordered column sums of 1000 columns, two
# threads, float64 and float32 in us: 1e5 lanes, 32 rows 26 / 24, 64 rows 26 / 22; 1e7 lanes 1670 / 1030 and
# 1680 / 970; 128 rows without hints ran 1e7 in 10 ms: no prefetcher follows a walk down the rows)
assert ROWS <= NEST_BLOCK
AHEAD = 2  # tiles ahead in the row that a tile's read hints are for: 64 lanes at WIDE (one tile ahead, 32
# lanes: 1e7 float64 2010 us, float32 1330); at 8 slots on the EPYC, 16 lanes (1e5 lanes: 8 lanes ahead 39 us,
# 16 lanes 32, 64 lanes 36: a hint too far ahead is gone from its 32 KiB L1 before its tile comes)
MIN_ROWS = 1  # chunks with a whole row take tiles (a block of fewer rows than ROWS is a short block: 10 rows of 1000
# ordered float64 columns 8.2 -> 4.8 us where this was 16 and sent them lane by lane through the pairs)
_SGT = 4  # arith.cmpi
_UNE = 13  # arith.cmpf
_MAG = (1 << 63) - 1


def wanted(cx: Lowering, body: ir.Block, span: int, chunk0: list) -> bool:
    """Whether the column shape's chunks may take tiles: host pairs for every reduction of the stage (each an
    ordered kept total: column_start made their buffers), no other loop state, rows of at least TILE slots,
    and a body that writes nothing (a failed block runs its lanes again)."""
    if not cx.column_late or chunk0 or span < TILE:
        return False
    return all(r.kept and reduce_kept.column_pairs(cx, r) for r in cx.lay.reductions) and \
        rerun.writes_nothing(body)


def width(cx: Lowering, span: int) -> int:
    """Slots a tile holds (a multiple of TILE): WIDE for one total, fewer for more (a row of fewer slots: TILE);
    on a CPU without AVX-512F (cx.sae false) NARROW's (float64 chains: 8, float32's windowed ones: 16)."""
    most = WIDE if cx.sae else NARROW[nested_chains.windowed(cx)]
    w = max(TILE, most // len(keys(cx)) // TILE * TILE)
    return w if span >= w else TILE


def keys(cx: Lowering) -> list[tuple]:
    """The (cell, component) keys of the column shape's ordered totals, in a fixed order."""
    return sorted(cx.column_late)


def whole_rows(cx: Lowering, span: int) -> tuple[ir.Value, ir.Value]:
    """The rows [first, last) that lie wholly in the chunk's lanes [cx.lo, cx.hi) (a chunk of an ordered column
    sum may start and end inside a row: its pairs are its own copies)."""
    e = cx.e
    return (e.op("arith.divui", e.add_i(cx.lo, e.c(span - 1)), e.c(span)), e.op("arith.divui", cx.hi, e.c(span)))


def rows(cx: Lowering, body: ir.Block, span: int, first: ir.Value, last: ir.Value) -> None:
    """The chunk's lanes, its whole rows [first, last) in blocks of ROWS rows, each block's slots in tiles with
    chains in registers (of `width` slots, then of TILE for what is left), its last slots lane by lane; the lanes
    of a row the chunk holds only in part (before `first`, from `last`) lane by lane too."""
    e = cx.e
    ks = keys(cx)
    flag_chains.begin(cx, flag_chains.tiles_eligible(cx, body))  # (the inexact flag checks the chains)
    guesses = {k: cx.local_buffer(span, e.f64) for k in ks}
    for k, g in zip(ks, nested_chains.first_guesses(cx, ks), strict=True):
        fill = scf.ForOp(e.c(0), e.c(span), e.c(1), [])
        with ir.InsertionPoint(fill.body):
            e.store(g, guesses[k], fill.induction_variable)
            scf.YieldOp([])
    walk_blocks(cx, body, span, first, last, width(cx, span),
                lambda lo, hi, t: _tile(cx, body, span, lo, hi, t, guesses))


def walk_blocks(cx: Lowering, body: ir.Block, span: int, first: ir.Value, last: ir.Value, w: int, tile) -> None:
    """The lanes of a row the chunk holds in part (lanes_by_row), then its whole rows [first, last) in blocks of
    ROWS rows, each block's slots in tiles: `tile(lo, hi, t)` for rows [lo, hi) and slots [t, t + cx.tile_w),
    tiles of `w` slots, then of TILE, then the slots left lane by lane."""
    e = cx.e
    lanes_by_row(cx, body, span, e.op("arith.divui", cx.lo, e.c(span)), first,
                 e.op("arith.remui", cx.lo, e.c(span)), e.c(span))
    lanes_by_row(cx, body, span, last, e.op("arith.divui", e.add_i(cx.hi, e.c(span - 1)), e.c(span)), e.c(0),
                 e.op("arith.remui", cx.hi, e.c(span)))
    wide, narrow = span - span % w, span - span % TILE  # (tiles of w slots, then of TILE, then lane by lane)
    blocks = scf.ForOp(first, last, e.c(ROWS), [])
    with ir.InsertionPoint(blocks.body):
        lo = blocks.induction_variable
        hi = e.op("arith.minui", e.add_i(lo, e.c(ROWS)), last)
        for start, stop, cx.tile_w in ((0, wide, w), (wide, narrow, TILE)):
            if start < stop:
                tiles = scf.ForOp(e.c(start), e.c(stop), e.c(cx.tile_w), [])
                with ir.InsertionPoint(tiles.body):
                    tile(lo, hi, tiles.induction_variable)
                    scf.YieldOp([])
        if narrow < span:
            lanes_by_row(cx, body, span, lo, hi, e.c(narrow), e.c(span))
        scf.YieldOp([])


def walk_rows(cx: Lowering, body: ir.Block, span: int, lo: ir.Value, hi: ir.Value, t: ir.Value,
              inits: list[ir.Value], step) -> list[ir.Value]:
    """Rows [lo, hi) of the tile's slots [t, t + cx.tile_w): per row, a read hint AHEAD tiles on, a copy of the
    body per slot (their reductions' terms wait in cx.column_tile, a list per key, in slot order), then
    `step(state)` (the state after the row). Returns the state after the rows."""
    e = cx.e
    w = cx.tile_w
    loop = scf.ForOp(lo, hi, e.c(1), inits)
    with ir.InsertionPoint(loop.body):
        anchor = scf.YieldOp(list(loop.inner_iter_args))
    with ir.InsertionPoint(anchor), body.owner.location:
        row0 = e.mul_i(loop.induction_variable, e.c(span))
        count = e.c(span)
        planes.prefetch_ahead(cx, body, e.add_i(row0, t), w, AHEAD * w, raw=True)  # (down the rows: the
        # hardware's prefetcher, which follows lines in order, does not see it)
    cx.column_tile = {}
    for j in range(w):
        with ir.InsertionPoint(anchor):
            slot = e.add_i(t, e.c(j)) if j else t
            lane = e.add_i(row0, slot)
        copies = clone_body(cx, body, anchor)
        cx.lane, cx.accs, cx.j, cx.tile_j = lane, [], None, j
        cx.lane_row, cx.kept_slot, cx.kept_count = (span, row0), slot, count
        rewrite_ops(cx, copies)
    with ir.InsertionPoint(anchor):
        scf.YieldOp(step(list(loop.inner_iter_args)))
    anchor.operation.erase()
    cx.column_tile, cx.tile_j, cx.kept_slot, cx.lane_row = None, None, None, None
    return list(loop.results)


def _tile(cx: Lowering, body: ir.Block, span: int, lo: ir.Value, hi: ir.Value, t: ir.Value, guesses: dict) -> None:
    """Slots [t, t + cx.tile_w) over rows [lo, hi): chains in registers, then into the pairs, or the lanes again."""
    e = cx.e
    ks = keys(cx)
    w = cx.tile_w
    windowed = nested_chains.windowed(cx)
    vec, bits = ir.VectorType.get([w], e.f64), ir.VectorType.get([w], e.i64)
    terms, i32 = ir.VectorType.get([w], e.f), ir.VectorType.get([w], ir.IntegerType.get_signless(32))
    g = {k: e.vload(guesses[k], t, w, e.f64) for k in ks}
    inits = []
    for k in ks:
        if windowed:  # (float32: the range on the terms' own bits, half the integer ops of float64 bits)
            inits += [e.splat(0.0, vec), e.splat(0.0, vec), e.ci(0, i32), e.ci(-1, i32)]
        else:
            inits += [g[k], e.splat(0.0, vec)] + [_isplat(cx, v) for v in ordered_chains.RANGE_INIT]

    def step(state: list[ir.Value]) -> list[ir.Value]:
        for i, k in enumerate(ks):
            xv = create("vector.from_elements", cx.column_tile[k], [terms]).result
            hi_, lo_, top, bottom = state[4 * i:4 * i + 4]
            if cx.flagged:  # (exactness from the flag; only the largest |term|, for the next guess)
                s, lo_, top = _flagged_step(cx, hi_, lo_, top, xv)
            elif windowed:  # (one add of the widened terms: exact inside the window)
                s = e.add(hi_, e.widen(xv, e.f64))
                top, bottom = nested_chains.range_step32(cx, top, bottom, xv)
            else:  # (Fast2Sum: |high| >= |x| inside M's binade)
                s = e.add(hi_, xv)
                lo_ = e.add(lo_, e.op("arith.subf", xv, e.op("arith.subf", s, hi_)))
                top, bottom = ordered_chains.range_step64(e, top, bottom, e.op("arith.bitcast", xv, t=bits),
                                                          _isplat(cx, _MAG))
            state[4 * i:4 * i + 4] = [s, lo_, top, bottom]
        return state

    res = walk_rows(cx, body, span, lo, hi, t, inits, step)
    sums = {k: (res[4 * i],) if windowed else (e.op("arith.subf", res[4 * i], g[k]), res[4 * i + 1])
            for i, k in enumerate(ks)}
    bad = None
    for i, k in enumerate(ks):
        top, bottom = res[4 * i + 2:4 * i + 4]
        if cx.flagged:
            top = nested_chains.wide_bits(cx, top) if windowed else top
        elif windowed:
            flag = nested_chains.window_out(cx, g[k], top, bottom)
            top = nested_chains.wide_bits(cx, top)
        else:
            floor, ceiling = nested_chains.chain_range(cx, g[k])
            flag = e.op("arith.ori", e.cmpi(_SGT, top, ceiling), ordered_chains.bottom_below(e, bottom, floor))
        if not cx.flagged:
            bad = flag if bad is None else e.op("arith.ori", bad, flag)
        e.vstore(nested_chains.guess_after(cx, g[k], top), guesses[k], t)  # (each slot's guess for the next block)
    lost = flag_chains.lost(cx, [v for k in ks for v in sums[k]], None) if cx.flagged else e.any_of(bad)
    branch = scf.IfOp(lost, [], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        lanes_by_row(cx, body, span, lo, hi, t, e.add_i(t, e.c(w)))
        if cx.flagged:  # (the chains rounded)
            flag_chains.clear(cx)
        scf.YieldOp([])
    with ir.InsertionPoint(branch.else_block):
        for k in ks:
            for v in sums[k]:
                _into_pairs(cx, span, k, t, v)
        scf.YieldOp([])


def _flagged_step(cx: Lowering, hi: ir.Value, lo: ir.Value, top: ir.Value, xv: ir.Value) -> tuple[ir.Value, ...]:
    """A row's terms of a tile into its chains when the inexact flag checks them (flag_chains): the Fast2Sum with
    its rounding add silent (float64; float32: one add of the widened terms), and the largest |term| bits
    (float64 bits, signed max; float32 bits, unsigned), which set each slot's next guess. Two vector ops fewer
    than the range (no smallest |term|) and no window: the flag proves the steps exact."""
    e = cx.e
    if nested_chains.windowed(cx):
        bits = e.op("arith.bitcast", xv, t=top.type)
        return e.add(hi, e.widen(xv, e.f64)), lo, e.op("arith.maxui", top, e.op("arith.andi", bits, e.ci(
            (1 << 31) - 1, top.type)))
    s = sae_emit.add(e, hi, xv)
    lo = e.add(lo, e.op("arith.subf", xv, e.op("arith.subf", s, hi)))
    bits = e.op("arith.bitcast", xv, t=top.type)
    return s, lo, e.op("arith.maxsi", top, e.op("arith.andi", bits, _isplat(cx, _MAG)))


def _into_pairs(cx: Lowering, span: int, key: tuple, t: ir.Value, v: ir.Value) -> None:
    """A vector of a tile's values into its slots' [t, t + w) pairs by the pairs' step; what a pair cannot take
    is spilled into its slot's exact accumulator."""
    e = cx.e
    his, los, _ = cx.column_late[key]
    w = cx.tile_w
    h, lo, rare, left = scatters.pair_step(cx, e.vload(his, t, w, e.f64), e.vload(los, t, w, e.f64), v)
    e.vstore(h, his, t)
    e.vstore(lo, los, t)
    spills = scf.IfOp(e.any_of(rare), [], has_else=False)
    with ir.InsertionPoint(spills.then_block):
        parked = cx.temp(w, e.f64, tag="tile-spills")
        e.vstore(e.select(rare, left, e.splat(0.0, left.type)), parked, e.c(0))
        _spill(cx, span, key, parked, e.c(0), t, e.c(w))
        scf.YieldOp([])


def _spill(cx: Lowering, span: int, key: tuple, buf: ir.Value, at: ir.Value, slot: ir.Value, n: ir.Value,
           clear: bool = False) -> None:
    """Each non-zero value of buf[at + j] (j < n) into slot `slot + j`'s exact accumulator (zeroed after,
    with `clear`)."""
    e = cx.e
    each = scf.ForOp(e.c(0), n, e.c(1), [])
    with ir.InsertionPoint(each.body):
        j = each.induction_variable
        x = e.load(buf, e.add_i(at, j))
        one = scf.IfOp(e.cmpf(_UNE, x, e.cf(0.0, e.f64)), [], has_else=False)
        with ir.InsertionPoint(one.then_block):
            scatters.spill(cx, key[0], e.add_i(e.mul_i(e.c(key[1]), e.c(span)), slot, j), x)
            if clear:
                e.store(e.cf(0.0, e.f64), buf, e.add_i(at, j))
            scf.YieldOp([])
        scf.YieldOp([])


def lanes_by_row(cx: Lowering, body: ir.Block, span: int, lo: ir.Value, hi: ir.Value, s0: ir.Value,
                 s1: ir.Value) -> None:
    """Slots [s0, s1) over rows [lo, hi) lane by lane, the body lowered as in the row loop (ordered totals: each
    term by the pairs' step, reduce_kept's column pair step, each row's late values spilled after it)."""
    e = cx.e
    loop = scf.ForOp(lo, hi, e.c(1), [])
    with ir.InsertionPoint(loop.body):
        row0 = e.mul_i(loop.induction_variable, e.c(span))
        count = e.c(span)
        inner = scf.ForOp(s0, s1, e.c(1), [])
        with ir.InsertionPoint(inner.body):
            anchor = scf.YieldOp([])
        with ir.InsertionPoint(anchor):
            lane = e.add_i(row0, inner.induction_variable)
        cx.lane, cx.accs, cx.j = lane, [], None
        cx.lane_row, cx.kept_slot, cx.kept_count = (span, row0), inner.induction_variable, count
        rewrite_ops(cx, clone_body(cx, body, anchor))
        cx.kept_slot, cx.lane_row = None, None
        n = e.op("arith.subi", s1, s0)
        for k in keys(cx):
            _spill(cx, span, k, cx.column_late[k][2], s0, s0, n, clear=True)
        scf.YieldOp([])


def _isplat(cx: Lowering, v: int) -> ir.Value:
    return cx.e.ci(v, ir.VectorType.get([cx.tile_w], cx.e.i64))
