"""Chains for ordered kept totals in the column shape (the host): each slot (column) adds its terms into a float64
chain of its own, by one Fast2Sum (float64) or one add (float32), in front of its (high, low) pair, which takes
two TwoSums a term (reduce_kept.reduce_column_pair). The chains are those of the nested driver's rows
(nested_chains): biased from M = 1.5 * 2**p for float64, windowed under 2**E for float32, exact while each takes at
most NEST_BLOCK terms inside its range.

- Each slot has a guess of its own (p, or E), so columns of different scales each get their range. A term is
  held against its slot's range as it comes (there is no buffer to replay): one inside it goes into the chain,
  one outside it (an inf, a NaN, a huge or tiny value, a zero) into the row's late buffer, with no branch in the
  row's loop. A row that left any non-zero value there hands it to the pairs' step after it: the whole row in
  one vectorized pass when many slots did (then reduce_kept.column_flush spills what the pairs could not take),
  else slot by slot; either way each slot's largest late |term| is noted.
- A chunk's first FIRST_ROWS rows send every term late (a range needs a guess), then blocks of NEST_BLOCK rows
  follow: every slot's chain takes at most one term a row. At a block's end each chain goes into its slot's
  pair by the pairs' step (float64: `high - M`, then the low), the slot's guess moves (up to a late term over
  its range; down when terms went under it) and the chains start again.

The pairs, their spills and the chains always hold the exact sum of the slot's terms, so which way a term went
never shows in the result; a guess that is off costs its rows the pairs' step, never bits. columns.py decides
when a chunk takes chains.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import scf

from hawk.ir.build import create
from hawk.passes.lower import nested_chains, reduce_kept, scatters
from hawk.passes.lower.context import Lowering
from hawk.passes.lower.nested_chains import NEST_BLOCK
from hawk.passes.lower.ordered_chains import F32_WINDOW, HEADROOM, LOW_RANGE

MIN_SPAN = 8  # rows of fewer slots keep the pairs alone: a row's end costs more than chains win back there
# (1000000 float64 lanes, one thread: 4 slots 1.4 ms with pairs, 2.0 with chains; 8 slots 1.3 and 1.0; 1000 slots
# 0.64 and 0.46; float32 8 slots 1.2 and 0.8, 1000 slots 0.62 and 0.28)
DROP_MIN = 6  # binades a guess must fall by to move down (closer, the largest terms would soon move it back up)
STEP = (20, 5)  # a guess from the largest term seen, exponent t: float64 p = t + 20, a ceiling 2**(t+11) and a
# floor 2**(t-27); float32 E = t + 5, a window from 2**(t-17) to 2**(t+6): more headroom than the rows' chains
# take, since a slot's first guess comes from FIRST_ROWS terms (heavy-tailed columns soon pass 8x their largest)
LOWEST_E = -126 + F32_WINDOW  # float32 windows stay above float32's smallest normal (a floor of one width)
FIRST_ROWS = 8  # the chunk's first block: every term goes late (to the pairs), and each slot's guess then
# follows its largest term (the chains' range, fixed for a block, needs a guess first); NEST_BLOCK rows a block after
_NOTHING = -(1 << 63)  # a floor no |term| bits lie above within a range's width: the first block's
_EQ, _NE, _SLE, _SGT, _SGE, _ULE = 0, 1, 3, 4, 5, 7  # arith.cmpi
PROBE_ROWS = 16  # the chunk's second block: short, so that even a short chunk soon knows whether chains pay
BAD_SHARE = 64  # a block after the first whose terms went late more than 1 in BAD_SHARE times ends the chunk's
# chains (its columns' terms spread wider than a range: a late term costs about as much as 50-100 chained ones, so
# past that the pairs alone cost less)
_GROUP = 8  # late slots looked at together (one OR of their bits)
DENSE = 16  # a row with more than 1/DENSE of its slots late takes the vectorized pass (the first rows: all)
_MAG = (1 << 63) - 1


def comps(cx: Lowering) -> list[tuple]:
    """The (cell, component) keys that take chains: every ordered kept total's values in the column shape."""
    return sorted(cx.column_late)


def wanted(cx: Lowering, span: int) -> bool:
    """Whether the stage's ordered kept totals can take chains (column_start made their buffers; rows of
    MIN_SPAN slots or more)."""
    return bool(cx.column_late) and span >= MIN_SPAN


def start(cx: Lowering, span: int) -> None:
    """The chunk's chains, per component, span values each: the chains' highs (and, biased, lows), each slot's
    guess, its range's floor (bits; the first block's takes nothing) and its largest late |term| in the block."""
    e = cx.e
    keys = comps(cx)
    cx.column_chains = {}
    for key, g in zip(keys, nested_chains.first_guesses(cx, keys), strict=True):
        n = 1 if nested_chains.windowed(cx) else 2
        bufs = [cx.local_buffer(span, e.f64) for _ in range(n + 1)] + [cx.local_buffer(span, e.i64) for _ in "ft"]
        cx.column_chains[key] = tuple(bufs)
        loop = scf.ForOp(e.c(0), e.c(span), e.c(1), [])
        with ir.InsertionPoint(loop.body):
            _renew(cx, bufs, loop.induction_variable, g)
            e.store(e.c(_NOTHING, e.i64), bufs[-2], loop.induction_variable)  # (the first block: every term late)
            scf.YieldOp([])


def _width(cx: Lowering) -> int:
    """Bits from nested_chains.chain_range's floor to its ceiling (both allowed), a constant for every guess
    a slot takes: biased 2**(p-LOW_RANGE) .. 2**(p-HEADROOM), windowed float32 exponents E - F32_WINDOW .. E
    (up to 2**(E+1), excluded; LOWEST_E keeps the floor off its clamp)."""
    if nested_chains.windowed(cx):
        return (F32_WINDOW + 1 << 52) - 1
    return LOW_RANGE - HEADROOM << 52


def _renew(cx: Lowering, bufs, j: ir.Value, g: ir.Value) -> None:
    """Slot j's chain afresh at guess g: its high at M (biased) or 0 (windowed), its low 0, the guess, the
    floor of its range and its largest late term (none)."""
    e = cx.e
    *chain, guess, floor, top = bufs
    e.store(e.cf(0.0, e.f64) if len(chain) == 1 else g, chain[0], j)
    for b in chain[1:]:
        e.store(e.cf(0.0, e.f64), b, j)
    e.store(g, guess, j)
    e.store(nested_chains.chain_range(cx, g)[0], floor, j)
    e.store(e.c(0, e.i64), top, j)


def step(cx: Lowering, key: tuple, slot: ir.Value, x: ir.Value) -> None:
    """One term (float64) of component `key` at its slot: into the slot's chain when inside its range, else
    into the row's late buffer (zero there otherwise); the late value's bits join the row's OR. No branch."""
    e = cx.e
    *chain, _, floor, _ = cx.column_chains[key]
    late = cx.column_late[key][2]
    ax = _magnitude(cx, x)
    inside = e.cmpi(_ULE, e.op("arith.subi", ax, e.load(floor, slot)), e.c(_width(cx), e.i64))
    zero = e.cf(0.0, e.f64)
    xc = e.select(inside, x, zero)
    hi = e.load(chain[0], slot)
    t = e.add(hi, xc)
    e.store(t, chain[0], slot)
    if len(chain) == 2:  # biased: Fast2Sum's error (|hi| >= |xc|: M's binade) into the low
        e.store(e.add(e.load(chain[1], slot), e.op("arith.subf", xc, e.op("arith.subf", t, hi))), chain[1], slot)
    left = e.select(inside, zero, x)  # (a zero is outside: +0.0 leaves no bits late)
    e.store(left, late, slot)
    # (the late values' bits ORed in vector registers: an i1 flag took mask registers and spilled them, and a
    # count of non-zero values became a dozen compares a vector)
    cx.accs[cx.column_any] = e.op("arith.ori", cx.accs[cx.column_any], e.op("arith.bitcast", left, t=e.i64))


def row_begin(cx: Lowering, at: int) -> list[ir.Value]:
    """Before a row's loop with chains: the late values' OR is accumulator `at` (zero to start with)."""
    cx.column_step, cx.column_any = True, at
    return [cx.e.c(0, cx.e.i64)]


def row_end(cx: Lowering, span: int, any_late: ir.Value, row: ir.Value, first: ir.Value,
            late_terms: ir.Value) -> tuple[ir.Value, ir.Value]:
    """After row `row` (the chunk's first: `first`) when it left late terms: through the pairs' step, each
    slot's largest noted (one vectorized pass over the row when many slots are late, then column_flush; else
    only the late slots, found eight at a time); and at a block's end the chains into the pairs, afresh.
    `late_terms` counts the block's late terms so far; returns (whether the chunk keeps its chains, the count
    after this row): a block after the first whose terms went late more than 1 in BAD_SHARE times ends the
    chains for the rest of the chunk."""
    e = cx.e
    cx.column_step = None
    r = e.op("arith.subi", row, first)
    late = scf.IfOp(e.cmpi(_NE, any_late, e.c(0, e.i64)), [e.i64], has_else=True)
    with ir.InsertionPoint(late.then_block):
        lates = _count(cx, span)
        dense = scf.IfOp(e.cmpi(_SGT, lates, e.c(span // DENSE, e.i64)), [], has_else=True)
        with ir.InsertionPoint(dense.then_block):
            for key in comps(cx):
                buf, top = cx.column_late[key][2], cx.column_chains[key][-1]

                def value(j, buf=buf, top=top):
                    v = e.load(buf, j)
                    e.store(e.op("arith.maxsi", e.load(top, j), _magnitude(cx, v)), top, j)
                    return v

                _into_pairs(cx, span, key, value)
            reduce_kept.column_flush(cx, span)
            scf.YieldOp([])
        with ir.InsertionPoint(dense.else_block):
            for key in comps(cx):
                _sparse_late(cx, span, key)
            scf.YieldOp([])
        scf.YieldOp([lates])
    with ir.InsertionPoint(late.else_block):
        scf.YieldOp([e.c(0, e.i64)])
    counted = e.op("arith.addi", late_terms, late.results[0])
    # blocks: FIRST_ROWS rows, PROBE_ROWS rows (soon a verdict on the chains), then NEST_BLOCK rows each
    later = e.op("arith.subi", r, e.c(FIRST_ROWS - 1))
    after = e.op("arith.subi", later, e.c(PROBE_ROWS))
    probe = e.cmpi(_EQ, later, e.c(PROBE_ROWS))
    end = e.op("arith.ori", e.op("arith.ori", e.cmpi(_EQ, later, e.c(0)), probe), e.op(
        "arith.andi", e.cmpi(_SGT, after, e.c(0)), e.cmpi(_EQ, e.op("arith.remsi", after, e.c(NEST_BLOCK)), e.c(0))))
    ends = scf.IfOp(end, [e.i1, e.i64], has_else=True)
    with ir.InsertionPoint(ends.then_block):
        flush(cx, span, renew=True)
        rows = e.select(probe, e.c(PROBE_ROWS, e.i64), e.c(NEST_BLOCK, e.i64))
        terms = e.op("arith.muli", rows, e.c(span * len(comps(cx)), e.i64))
        fine = e.cmpi(_SLE, e.op("arith.muli", counted, e.c(BAD_SHARE, e.i64)), terms)
        keep = e.op("arith.ori", e.cmpi(_EQ, later, e.c(0)), fine)
        scf.YieldOp([keep, e.c(0, e.i64)])
    with ir.InsertionPoint(ends.else_block):
        scf.YieldOp([e.c(1, e.i1), counted])
    return ends.results[0], ends.results[1]


def _count(cx: Lowering, span: int) -> ir.Value:
    """The row's non-zero late values, every component's (a vectorized pass)."""
    e = cx.e
    n = e.c(0, e.i64)
    for key in comps(cx):
        buf = cx.column_late[key][2]
        loop = scf.ForOp(e.c(0), e.c(span), e.c(1), [n])
        with ir.InsertionPoint(loop.body):
            held = e.cmpi(_NE, e.op("arith.bitcast", e.load(buf, loop.induction_variable), t=e.i64), e.c(0, e.i64))
            scf.YieldOp([e.op("arith.addi", loop.inner_iter_args[0], e.op("arith.extui", held, t=e.i64))])
        n = loop.results[0]
    return n


def _sparse_late(cx: Lowering, span: int, key: tuple) -> None:
    """The row's late values of one component, slot by slot where there is one: eight slots' bits ORed at a
    time, and each non-zero value by the pairs' step (its slot's largest noted, what the pair cannot take
    spilled at once, the late value cleared)."""
    e = cx.e
    buf = cx.column_late[key][2]
    whole = span - span % _GROUP
    groups = scf.ForOp(e.c(0), e.c(whole), e.c(_GROUP), [])
    with ir.InsertionPoint(groups.body):
        g = groups.induction_variable
        bits = e.op("arith.bitcast", e.vload(buf, g, _GROUP, e.f64), t=ir.VectorType.get([_GROUP], e.i64))
        some = create("vector.reduction", [bits], [e.i64], {"kind": ir.Attribute.parse("#vector.kind<or>")}).result
        held = scf.IfOp(e.cmpi(_NE, some, e.c(0, e.i64)), [], has_else=False)
        with ir.InsertionPoint(held.then_block):
            each = scf.ForOp(g, e.add_i(g, e.c(_GROUP)), e.c(1), [])
            with ir.InsertionPoint(each.body):
                _late_one(cx, span, key, each.induction_variable)
                scf.YieldOp([])
            scf.YieldOp([])
        scf.YieldOp([])
    if whole < span:
        tail = scf.ForOp(e.c(whole), e.c(span), e.c(1), [])
        with ir.InsertionPoint(tail.body):
            _late_one(cx, span, key, tail.induction_variable)
            scf.YieldOp([])


def _late_one(cx: Lowering, span: int, key: tuple, j: ir.Value) -> None:
    """Slot j's late value, if any, into its pair (_sparse_late)."""
    e = cx.e
    his, los, buf = cx.column_late[key]
    top = cx.column_chains[key][-1]
    x = e.load(buf, j)
    ax = _magnitude(cx, x)
    one = scf.IfOp(e.cmpi(_NE, e.op("arith.bitcast", x, t=e.i64), e.c(0, e.i64)), [], has_else=False)
    with ir.InsertionPoint(one.then_block):
        e.store(e.op("arith.maxsi", e.load(top, j), ax), top, j)
        s1, s2, rare, left = scatters.pair_step(cx, e.load(his, j), e.load(los, j), x)
        e.store(s1, his, j)
        e.store(s2, los, j)
        e.store(e.cf(0.0, e.f64), buf, j)  # (a row that stops short of slot j would find it again)
        spill = scf.IfOp(rare, [], has_else=False)
        with ir.InsertionPoint(spill.then_block):
            scatters.spill(cx, key[0], e.add_i(e.mul_i(e.c(key[1]), e.c(span)), j), left)
            scf.YieldOp([])
        scf.YieldOp([])


def flush(cx: Lowering, span: int, renew: bool = False) -> None:
    """Each chain into its slot's pair (biased: high - M, then the low; each value's spills after its pass);
    with `renew`, each slot's next guess, and its chain afresh."""
    e = cx.e
    for key in comps(cx):
        bufs = cx.column_chains[key]
        if nested_chains.windowed(cx):
            _into_pairs(cx, span, key, lambda j, b=bufs: e.load(b[0], j))
        else:  # (high - M, from the slot's guess, then the low)
            _into_pairs(cx, span, key, lambda j, b=bufs: e.op("arith.subf", e.load(b[0], j), e.load(b[2], j)))
            reduce_kept.column_flush(cx, span)
            _into_pairs(cx, span, key, lambda j, b=bufs: e.load(b[1], j))
        reduce_kept.column_flush(cx, span)
        if renew:
            loop = scf.ForOp(e.c(0), e.c(span), e.c(1), [])
            with ir.InsertionPoint(loop.body):
                _renew(cx, cx.column_chains[key], loop.induction_variable, _next(cx, key, loop.induction_variable))
                scf.YieldOp([])


def _next(cx: Lowering, key: tuple, j: ir.Value) -> ir.Value:
    """Slot j's next guess (no branch), from its largest late |term| t (nested_chains.guess_after: 0, an inf or
    a NaN keeps the guess): when t went over the range, from t; when late terms went under its floor (a non-zero
    t inside the range's ceiling), from the larger of t and the chain's |sum| (a cheap stand-in for its largest
    term: one over the new range moves it back up), if that is DROP_MIN binades lower; else the same."""
    e = cx.e
    *chain, guess, floor, top = cx.column_chains[key]
    g, t = e.load(guess, j), e.load(top, j)
    lowest, step = (LOWEST_E, STEP[1]) if len(chain) == 1 else (None, STEP[0])
    over = e.cmpi(_SGT, t, e.op("arith.addi", e.load(floor, j), e.c(_width(cx), e.i64)))
    total = e.load(chain[0], j) if len(chain) == 1 else e.op("arith.subf", e.load(chain[0], j), g)
    lower = nested_chains.guess_after(cx, g, e.op("arith.maxsi", t, _magnitude(cx, total)), lowest, step)
    far = e.op("arith.mulf", g, e.cf(2.0 ** -DROP_MIN, e.f64))
    under = e.op("arith.andi", e.cmpi(_NE, t, e.c(0, e.i64)), e.cmpf(4, lower, far))  # olt
    return e.select(over, nested_chains.guess_after(cx, g, t, lowest, step), e.select(under, lower, g))


def _magnitude(cx: Lowering, v: ir.Value) -> ir.Value:
    """|v|'s bits (i64; ordered as the magnitudes are, an inf or NaN above every finite value)."""
    e = cx.e
    return e.op("arith.andi", e.op("arith.bitcast", v, t=e.i64), e.c(_MAG, e.i64))


def _into_pairs(cx: Lowering, span: int, key: tuple, value) -> None:
    """value(j) into slot j's pair by the pairs' step, for every slot of the row (a vectorized loop); what the
    pair cannot take waits in the late buffer (zero otherwise) for column_flush."""
    e = cx.e
    loop = scf.ForOp(e.c(0), e.c(span), e.c(1), [])
    with ir.InsertionPoint(loop.body):
        j = loop.induction_variable
        reduce_kept.column_pair_step(cx, key, j, value(j))
        scf.YieldOp([])
