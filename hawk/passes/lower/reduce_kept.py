"""Reductions that keep some lane axes: a total per kept slot, added into the reduced output (or this chunk's
copy of it) by kept index, or in registers per slot under the nested driver (chunk_loops.nested_driver)."""

from __future__ import annotations

from mlir import ir
from mlir.dialects import scf, vector

from hawk.abi.layout import compensated, sum_policy
from hawk.ir.access import reduce_mask, reduce_value
from hawk.ir.build import create
from hawk.passes import chunk_form
from hawk.passes.host_emit import size
from hawk.passes.lower import planes, scatters
from hawk.passes.lower.context import Lowering

_EQ, _NE, _SLT = 0, 1, 2  # arith.cmpi's "eq", "ne", "slt"
NEST_CHAINS = 8  # TwoSum pairs per component of an ordered kept total under the nested driver, side by side in a
# vector (lane j of a group of 8 feeds pair j: chunk_loops._nested_groups)


def nested_pairs(r) -> bool:
    """Whether a kept total of the nested driver keeps (high, low) pairs in registers: an ordered sum or mean
    (chunk_form picks the nested shape for those on the host only)."""
    return r.kind in ("sum", "mean") and r.policy == "ordered"


def nested_neumaier(r) -> bool:
    """Whether a kept total of the nested driver keeps NEST_CHAINS Neumaier (sum, correction) chains in registers:
    a compensated sum or mean (chunk_form picks the nested shape for those on the host only)."""
    return compensated(r)


def nested_vectors(r) -> bool:
    """Whether a nested kept total keeps two float64 vectors of NEST_CHAINS per component (pairs or chains), fed a
    group's lanes side by side (chunk_loops._nested_groups)."""
    return nested_pairs(r) or nested_neumaier(r)


def spilled(cx: Lowering) -> ir.Value:
    """A one-word stack buffer, nonzero once some term of the current kept slot went to its exact accumulator (the
    nested driver zeroes it per slot; the rare branches set it, so the common path carries nothing)."""
    return cx.temp(1, cx.e.i64, tag="nested-spilled")


def _slot_at(cx: Lowering, r, c: int, slot: ir.Value, n: ir.Value) -> ir.Value:
    """Where component c of kept slot `slot` lies among the cell's n slots per component (a mean's count at
    c = the payload's size), as reduce_kept numbers them."""
    return cx.e.add_i(cx.e.mul_i(cx.e.c(c), n), slot)


def reduce_nested_pair(cx: Lowering, op, r) -> None:
    """An ordered kept total of this slot's lanes (the nested driver): each component keeps NEST_CHAINS
    float64 (high, low) pairs in registers, side by side in two vectors. In a group of copies
    (chunk_loops._nested_groups) the lane's term waits in cx.nested_group until every copy has run, and
    nested_group_step then adds the group's terms, one per pair, by two vector TwoSums; a lane outside a group
    adds its term into pair 0 alone (here). Either way a term at or above scatters.pair_limit (an inf, a NaN) goes to
    the slot's exact accumulator as it is, and so does a non-zero second error (scatters.spill: the pairs
    plus what they spilled stay the exact sum of the terms). The driver adds the pairs into the slot at its
    end (nested_pairs_out): the exact sum, rounded once, as the lane-by-lane form gives."""
    e = cx.e
    s, at0 = cx.accs, cx.nested[r.cell]
    mask = reduce_mask(op)
    for c, x in enumerate(e.elems(reduce_value(op), r.payload)):
        if mask is not None:
            x = e.select(mask, x, e.cf(0.0))
        if cx.nested_group is not None:  # (in the kernel's type: nested_group_step widens the group's vector)
            cx.nested_group.setdefault((r.cell, c), [None] * cx.nest_w)[cx.j] = x
            continue
        x = e.widen(x, e.f64)
        k = at0 + 2 * c
        hi, lo, rare, late = scatters.pair_step(cx, vector.extract(s[k], [], [0]), vector.extract(s[k + 1], [], [0]), x)
        s[k], s[k + 1] = vector.insert(hi, s[k], [], [0]), vector.insert(lo, s[k + 1], [], [0])
        slot, n = cx.nested_slot
        branch = scf.IfOp(rare, [], has_else=False)
        with ir.InsertionPoint(branch.then_block):
            e.store(e.c(1, e.i64), spilled(cx), e.c(0))
            scatters.spill(cx, r.cell, _slot_at(cx, r, c, slot, n), late)
            scf.YieldOp([])
    if r.kind == "mean":
        k = at0 + 2 * size(r.payload)
        one = e.c(1, e.i64) if mask is None else e.op("arith.extui", mask, t=e.i64)
        s[k] = e.op("arith.addi", s[k], one)


def nested_group_step(cx: Lowering, kept: list) -> None:
    """After a group's copies: each ordered kept total's waiting terms (one per pair; in the kernel's type) into
    its pairs (pairs_take), or, inside a block of chains (cx.nested_chain), into its chains
    (nested_chains.chain_step: a float32 group may be cx.nest_w = 16 terms wide)."""
    e = cx.e
    s = cx.accs
    vec = ir.VectorType.get([NEST_CHAINS], e.f64)
    for r in kept:
        for c in range(size(r.payload)) if nested_neumaier(r) else ():
            xv = create("vector.from_elements", cx.nested_group[(r.cell, c)], [vec]).result
            k = cx.nested[r.cell] + 2 * c
            s[k], s[k + 1] = e.neumaier(s[k], s[k + 1], xv)
        for c in range(size(r.payload)) if nested_pairs(r) else ():
            xs = cx.nested_group[(r.cell, c)]  # (a last half group of wider ones: zeros after its terms)
            t = next(x for x in xs if x is not None).type
            xs = [e.cf(0.0, t) if x is None else x for x in xs]
            xv = create("vector.from_elements", xs, [ir.VectorType.get([len(xs)], t)]).result
            if cx.nested_chain is not None:
                from hawk.passes.lower import nested_chains  # (it builds on this module)
                nested_chains.chain_step(cx, r, c, xv)
            else:
                pairs_take(cx, r, c, e.widen(xv, e.f64))
    cx.nested_group = {}


def pairs_take(cx: Lowering, r, c: int, xv: ir.Value) -> None:
    """A float64 vector of terms, one per pair, into component c's (high, low) pairs of `r` by two vector TwoSums,
    and one branch for the rare lanes (a large term, a non-zero second error), which spill into the slot."""
    e = cx.e
    s = cx.accs
    slot, n = cx.nested_slot
    k = cx.nested[r.cell] + 2 * c
    s[k], s[k + 1], rare, late = scatters.pair_step(cx, s[k], s[k + 1], xv)
    branch = scf.IfOp(e.any_of(rare), [], has_else=False)
    with ir.InsertionPoint(branch.then_block):
        e.store(e.c(1, e.i64), spilled(cx), e.c(0))
        scatters.spill_lanes(cx, r.cell, _slot_at(cx, r, c, slot, n), rare, late)
        scf.YieldOp([])


def nested_pairs_out(cx: Lowering, r, slot: ir.Value, n: ir.Value, res: list[ir.Value], whole: ir.Value,
                     span: int) -> None:
    """A slot's register pairs (reduce_nested_pair) at its end into the slot, and a mean's count (exact: below
    2**53) into its count slot. The 2 x NEST_CHAINS values of a component are first added into one pair
    (host_emit.Emit.merge_pairs); when that pair holds them exactly (the common case) and this chunk holds every
    lane of the slot (`whole`) and none of its terms spilled, the pair is parked for the finish to round alone
    (park: the slot's 576-byte accumulator is never touched); when it holds them exactly otherwise, its two
    values go to the slot (scatters.exact_add: other chunks' terms meet them there); else all of them do.
    A cell with a copy per chunk keeps the finish's own fast path (scatters.exact_add into its pairs). Slots of
    fewer than NEST_CHAINS lanes (`span`) run no groups: their terms are all in pair 0, which is the sum."""
    e = cx.e
    alone = e.c(0, e.i1)
    if (r.cell, "parked") in cx.bufs:
        alone = e.op("arith.andi", whole, e.cmpi(_EQ, e.load(spilled(cx), e.c(0)), e.c(0, e.i64)))

    def add(at: ir.Value, hi: ir.Value, lo: ir.Value) -> None:
        scatters.exact_add(cx, r.cell, at, hi)
        scatters.exact_add(cx, r.cell, at, lo)

    def into(at: ir.Value, hi: ir.Value, lo: ir.Value) -> None:
        if (r.cell, "parked") not in cx.bufs:  # (a copy per chunk: its pairs)
            add(at, hi, lo)
            return
        branch = scf.IfOp(alone, [], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            park(cx, r.cell, at, hi, lo)
            scf.YieldOp([])
        with ir.InsertionPoint(branch.else_block):
            add(at, hi, lo)
            scf.YieldOp([])

    for c in range(size(r.payload)):
        at = _slot_at(cx, r, c, slot, n)
        if span < NEST_CHAINS:
            hi, lo = (vector.extract(v, [], [0]) for v in res[2 * c:2 * c + 2])
            into(at, hi, lo)
            continue
        if cx.flagged:  # (a row of one block whose chains held: the row's sums are in pair 0 alone)
            lone = scf.IfOp(lone_pair(cx, res[2 * c:2 * c + 2]), [], has_else=True)
            with ir.InsertionPoint(lone.then_block):
                into(at, *(vector.extract(v, [], [0]) for v in res[2 * c:2 * c + 2]))
                scf.YieldOp([])
            with ir.InsertionPoint(lone.else_block):
                _merged_out(cx, r, at, res[2 * c:2 * c + 2], into)
                scf.YieldOp([])
            continue
        _merged_out(cx, r, at, res[2 * c:2 * c + 2], into)
    if r.kind == "mean":
        count = e.op("arith.uitofp", res[2 * size(r.payload)], t=e.f64)
        into(_slot_at(cx, r, size(r.payload), slot, n), count, e.cf(0.0, e.f64))


def lone_pair(cx: Lowering, pair: list[ir.Value]) -> ir.Value:
    """Whether every pair but pair 0 of these (high, low) vectors holds +0.0 (a flagged row of one block puts its
    sums in pair 0 alone, nested_chains._flagged_end: then no merge is needed)."""
    e = cx.e
    t = ir.VectorType.get([NEST_CHAINS], e.i64)
    bits = e.op("arith.ori", *(e.op("arith.bitcast", v, t=t) for v in pair))
    zero = e.ci(0, t)
    rest = e.shuffle(bits, zero, [NEST_CHAINS] + list(range(1, NEST_CHAINS)))  # (pair 0's bits left out)
    return e.op("arith.xori", e.any_of(e.cmpi(1, rest, zero)), e.c(1, e.i1))  # (ne: none set)


def _merged_out(cx: Lowering, r, at: ir.Value, pair: list[ir.Value], into) -> None:
    """A slot's pairs added into one (Emit.merge_pairs) for `into`; when that loses a bit, every value goes to the
    slot's accumulator instead."""
    hi, lo, ok = cx.e.merge_pairs(pair[0], pair[1])
    branch = scf.IfOp(ok, [], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        into(at, hi, lo)
        scf.YieldOp([])
    with ir.InsertionPoint(branch.else_block):
        vals = [vector.extract(v, [], [j]) for v in pair for j in range(NEST_CHAINS)]
        scatters.add_each(cx, r.cell, at, vals)
        scf.YieldOp([])


def park(cx: Lowering, name: str, at: ir.Value, hi: ir.Value, lo: ir.Value) -> None:
    """Leave the float64 pair (hi, lo), whose sum is exactly every term of slot `at` of kept cell `name` (none of
    them in the slot's exact accumulator), in the cell's "parked" buffer for the finish to round alone
    (finish.finish_exact). A pair of two +0.0 is parked as (+0.0, -0.0): all-zero bits mean nothing was."""
    e = cx.e
    buf, p = cx.bufs[(name, "parked")], e.mul_i(at, e.c(2))
    none = e.cmpi(_EQ, e.op("arith.ori", e.op("arith.bitcast", hi, t=e.i64), e.op("arith.bitcast", lo, t=e.i64)),
                  e.c(0, e.i64))
    e.store(hi, buf, p)
    e.store(e.select(none, e.cf(-0.0, e.f64), lo), buf, e.add_i(p, e.c(1)))


def reduce_nested_neumaier(cx: Lowering, op, r) -> None:
    """A compensated kept total of this slot's lanes (the nested driver): NEST_CHAINS Neumaier chains per
    component in two float64 vectors (sums, corrections); a group's lanes wait in cx.nested_group and take one
    vector step (nested_group_step), a lane outside a group steps chain 0 alone; a masked-out lane adds 0.0."""
    e = cx.e
    s, at0 = cx.accs, cx.nested[r.cell]
    mask = reduce_mask(op)
    for c, x in enumerate(e.elems(reduce_value(op), r.payload)):
        x = e.widen(x if mask is None else e.select(mask, x, e.cf(0.0)), e.f64)
        if cx.nested_group is not None:
            cx.nested_group.setdefault((r.cell, c), [None] * NEST_CHAINS)[cx.j] = x
            continue
        k = at0 + 2 * c
        t, u = e.neumaier(vector.extract(s[k], [], [0]), vector.extract(s[k + 1], [], [0]), x)
        s[k], s[k + 1] = vector.insert(t, s[k], [], [0]), vector.insert(u, s[k + 1], [], [0])
    if r.kind == "mean":
        k = at0 + 2 * size(r.payload)
        one = e.c(1, e.i64) if mask is None else e.op("arith.extui", mask, t=e.i64)
        s[k] = e.op("arith.addi", s[k], one)


def nested_neumaier_out(cx: Lowering, r, slot: ir.Value, n: ir.Value, res: list[ir.Value]) -> None:
    """A slot's Neumaier chains at its end: their sums added in chain order by Neumaier steps, their corrections
    with the steps' own, into the slot's companion pair (scatters.comp_add: this chunk holds every lane of the
    slot, so it is the only writer); a mean's count into its count plane."""
    e = cx.e
    for c in range(size(r.payload)):
        t, u = e.cf(0.0, e.f64), e.cf(0.0, e.f64)
        for j in range(NEST_CHAINS):
            t, u = e.neumaier(t, u, vector.extract(res[2 * c], [], [j]))
        for j in range(NEST_CHAINS):
            u = e.add(u, vector.extract(res[2 * c + 1], [], [j]))
        scatters.comp_add(cx, r.cell, _slot_at(cx, r, c, slot, n), t, u)
    if r.kind == "mean":
        add_count(cx, r, slot, n, res[2 * size(r.payload)])


def add_count(cx: Lowering, r, slot: ir.Value, n: ir.Value, count: ir.Value) -> None:
    """A kept mean's lanes counted in registers (i64) into its count slot: the count plane, or this chunk's
    copy (count_at; a compensated copy is float64)."""
    e = cx.e
    cnt, at = count_at(cx, r, slot, n)
    got = e.op("arith.uitofp", count, t=ir.MemRefType(cnt.type).element_type)
    e.store(e.add(e.load(cnt, at), got), cnt, at)


def masked_extremum(cx: Lowering, kind: str, old: ir.Value, x: ir.Value, mask: ir.Value | None) -> ir.Value:
    """max/min of a kept slot's `old` and a lane's `x` where `mask` holds, else `old`. On the host a masked-out
    lane offers the identity (-inf for max, +inf for min: maximum(old, -inf) is old, NaN and zero signs
    included) instead of selecting the state, and the identity is one LLVM cannot see as a constant: with a
    constant, LLVM folds the step back into a select of the state (scalar code; a masked store for a slot in
    memory), 3-5x slower than the unmasked loop, which it vectorizes."""
    e = cx.e
    if mask is None:
        return e.extremum(kind, old, x)
    if cx.target != "host":
        return e.select(mask, e.extremum(kind, old, x), old)

    def make():  # (lanes L < 0 never holds, and LLVM cannot know it)
        return e.select(e.cmpi(_SLT, cx.L, e.c(0)), e.cf(0.0, x.type), e.identity(kind, x.type))

    return e.extremum(kind, old, e.select(mask, x, cx.at_top(("identity", kind, str(x.type)), make)))


def reduce_nested(cx: Lowering, op, r) -> None:
    """A kept-axis total of this slot's lanes, in registers (fast sums may be reassociated)."""
    if nested_pairs(r):
        reduce_nested_pair(cx, op, r)
        return
    if nested_neumaier(r):
        reduce_nested_neumaier(cx, op, r)
        return
    e = cx.e
    s, at0 = cx.accs, cx.nested[r.cell]
    mask = reduce_mask(op)
    for c, x in enumerate(e.elems(reduce_value(op), r.payload)):
        k = at0 + c
        if r.kind in ("sum", "mean"):
            if mask is not None:
                x = e.select(mask, x, e.cf(0.0))
            s[k] = e.fast_add(s[k], x)
        else:
            s[k] = masked_extremum(cx, r.kind, s[k], x, mask)
    if r.kind == "mean":
        k = at0 + size(r.payload)
        one = e.c(1, e.i64) if mask is None else e.op("arith.extui", mask, t=e.i64)
        s[k] = e.op("arith.addi", s[k], one)


def kept_out(cx: Lowering, r) -> tuple[ir.Value, ir.Value | None]:
    """Where a kept-axis reduction accumulates: its cell, or this chunk's copy of it (and the copy's start)."""
    if r.cell in cx.lay.private:
        return cx.bufs[(r.cell, "priv")], scatters.copy_start(cx, r.cell)
    return cx.bufs[(r.cell, "cell")], None


def count_at(cx: Lowering, r, idx: ir.Value, n: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Where a kept mean counts this lane: its count plane, or the counts after the values in this chunk's
    copy of the cell."""
    if r.cell in cx.lay.private:  # (a compensated copy holds its sums, then its corrections: counts among the sums)
        e = cx.e
        start = scatters.copy_start(cx, r.cell, 2 if compensated(r) else 1)
        return cx.bufs[(r.cell, "priv")], e.add_i(start, e.mul_i(e.c(size(r.payload)), n), idx)
    return cx.bufs[(r.cell, "count")], idx


def reduce_kept_branchless(cx: Lowering, op, r, idx, n) -> None:
    """out[slot] op= v with the mask folded in by selects: a straight-line update LLVM can vectorize. A
    compensated sum takes a Neumaier step on this chunk's (sum, correction) pair of the slot (a masked-out lane
    adds 0.0). In a tile's copy of the body, the terms wait for the tile instead (column_plain)."""
    if cx.column_tile is not None:
        from hawk.passes.lower import column_plain  # (it builds on this module)

        column_plain.record(cx, op, r)
        return
    e = cx.e
    out, base = kept_out(cx, r)
    mask = reduce_mask(op)
    pairs = compensated(r)
    if pairs:
        base, half = scatters.copy_start(cx, r.cell, 2), e.c(cx.lay.stride(r.cell))
    for c, x in planes.components(cx, reduce_value(op), r.payload):
        at = e.add_i(e.mul_i(c, n), idx)
        at = at if base is None else e.add_i(at, base)
        if pairs:
            x = e.widen(x if mask is None else e.select(mask, x, e.cf(0.0)), e.f64)
            s1, c1 = e.neumaier(e.load(out, at), e.load(out, e.add_i(at, half)), x)
            e.store(s1, out, at)
            e.store(c1, out, e.add_i(at, half))
            continue
        old = e.load(out, at)
        if r.kind in ("max", "min"):
            new = masked_extremum(cx, r.kind, old, x, mask)
        else:
            new = e.add(old, x if mask is None else e.select(mask, x, e.cf(0.0)))
        e.store(new, out, at)
    if r.kind == "mean":
        cnt, at = count_at(cx, r, idx, n)
        t = ir.MemRefType(cnt.type).element_type
        one = e.cf(1.0, t) if mask is None else e.select(mask, e.cf(1.0, t), e.cf(0.0, t))
        e.store(e.add(e.load(cnt, at), one), cnt, at)


def column_pairs(cx: Lowering, r) -> bool:
    """Whether a kept total takes the column shape's branch-free pair step (reduce_column_pair): an ordered sum or
    mean into this chunk's (high, low) pairs (the host)."""
    return r.kind in ("sum", "mean") and r.policy == "ordered" and cx.exact_pairs and r.cell in cx.lay.private


def column_start(cx: Lowering, span: int) -> None:
    """Before the column shape's rows, per component of each ordered kept total: this chunk's (high, low) pairs
    of the `span` slots copied into two buffers of their own (highs, lows: the row loop then reads and writes
    them contiguously, without the shuffles interleaved pairs take), and a late buffer (zeroed), where what a
    row's pairs could not take waits (reduce_column_pair). All three on the stack, span float64 values each."""
    e = cx.e
    cx.column_late = {}
    for r in cx.lay.reductions:
        if r.kept and column_pairs(cx, r):
            pairs, base = cx.bufs[(r.cell, "pairs")], scatters.copy_start(cx, r.cell)
            for c in range(chunk_form.column_terms(r)):
                bufs = tuple(cx.local_buffer(span, e.f64) for _ in range(3))
                loop = scf.ForOp(e.c(0), e.c(span), e.c(1), [])
                with ir.InsertionPoint(loop.body):
                    j = loop.induction_variable
                    p = e.mul_i(e.add_i(e.c(c * span), j, base), e.c(2))
                    e.store(e.load(pairs, p), bufs[0], j)
                    e.store(e.load(pairs, e.add_i(p, e.c(1))), bufs[1], j)
                    e.store(e.cf(0.0, e.f64), bufs[2], j)
                    scf.YieldOp([])
                cx.column_late[(r.cell, c)] = bufs


def column_end(cx: Lowering, span: int) -> None:
    """After the column shape's rows: the highs and lows back into this chunk's pairs."""
    e = cx.e
    for (cell, c), (his, los, _) in cx.column_late.items():
        pairs, base = cx.bufs[(cell, "pairs")], scatters.copy_start(cx, cell)
        loop = scf.ForOp(e.c(0), e.c(span), e.c(1), [])
        with ir.InsertionPoint(loop.body):
            j = loop.induction_variable
            p = e.mul_i(e.add_i(e.c(c * span), j, base), e.c(2))
            e.store(e.load(his, j), pairs, p)
            e.store(e.load(los, j), pairs, e.add_i(p, e.c(1)))
            scf.YieldOp([])
    cx.column_late = {}


def reduce_column_pair(cx: Lowering, op, r, slot: ir.Value, n: ir.Value) -> None:
    """An ordered kept total in the column shape: each term into this chunk's (high, low) pair of its slot (held
    in the highs and lows column_start made) by the pairs' step (scatters.pair_step: two TwoSums; a term at or
    above pair_limit skips the pair), without a branch, so that the loop over a row's lanes vectorizes. Every
    store is unconditional (a store of a select between the new value and the one loaded there becomes a masked
    store on x86, slow on AMD's cores): what the pair could not take (the large term, or the second TwoSum's
    error: never zero bits) waits in the row's late buffer, zero otherwise, and column_flush spills it into the
    slot's exact accumulator after the row: the pair plus its spills stay the exact sum of the slot's terms.
    (Until 2026-12-04 the pair kept its old values aside and got them back, and the term was spilled: five
    stores a lane, three now.) Chunks of columns.COLUMN_ROWS rows of column_chains.MIN_SPAN slots or more put
    chains in front of the pairs (column_chains.step: the pairs then take late terms and the chains' sums)."""
    e = cx.e
    mask = reduce_mask(op)
    xs = list(e.elems(reduce_value(op), r.payload)) + ([e.cf(1.0)] if r.kind == "mean" else [])
    for c, x in enumerate(xs):
        if mask is not None:
            x = e.select(mask, x, e.cf(0.0))
        if cx.column_tile is not None:  # a tile's copy: the term waits for the tile's chains (column_tiles)
            cx.column_tile.setdefault((r.cell, c), [None] * cx.tile_w)[cx.tile_j] = x  # (in the kernel's type)
            continue
        if cx.column_step is not None:  # chains in front of the pairs (column_chains)
            from hawk.passes.lower import column_chains  # (it builds on this module)

            column_chains.step(cx, (r.cell, c), slot, e.widen(x, e.f64))
            continue
        column_pair_step(cx, (r.cell, c), slot, e.widen(x, e.f64))


def column_pair_step(cx: Lowering, key: tuple, slot: ir.Value, x: ir.Value) -> None:
    """x (float64) into slot's pair in the column shape's buffers of component `key` by the pairs' step, every
    store unconditional: what the pair cannot take goes to the slot's late value (zero otherwise), for
    column_flush."""
    e = cx.e
    his, los, late = cx.column_late[key]
    s1, s2, rare, left = scatters.pair_step(cx, e.load(his, slot), e.load(los, slot), x)
    for v, buf in ((s1, his), (s2, los), (e.select(rare, left, e.cf(0.0, e.f64)), late)):
        e.store(v, buf, slot)


def column_flush(cx: Lowering, span: int) -> None:
    """After a row of the column shape: when a late buffer holds a value (any non-zero bits: one vectorized
    pass), each such value goes to its slot's exact accumulator, and the buffer is zeroed again."""
    e = cx.e
    for (cell, c), (_, _, buf) in cx.column_late.items():
        scan = scf.ForOp(e.c(0), e.c(span), e.c(1), [e.c(0, e.i64)])
        with ir.InsertionPoint(scan.body):
            b = e.op("arith.bitcast", e.load(buf, scan.induction_variable), t=e.i64)
            scf.YieldOp([e.op("arith.ori", scan.inner_iter_args[0], b)])
        late = scf.IfOp(e.cmpi(_NE, scan.results[0], e.c(0, e.i64)), [], has_else=False)
        with ir.InsertionPoint(late.then_block):
            each = scf.ForOp(e.c(0), e.c(span), e.c(1), [])
            with ir.InsertionPoint(each.body):
                j = each.induction_variable
                x = e.load(buf, j)
                held = scf.IfOp(e.cmpi(_NE, e.op("arith.bitcast", x, t=e.i64), e.c(0, e.i64)), [], has_else=False)
                with ir.InsertionPoint(held.then_block):
                    scatters.spill(cx, cell, e.add_i(e.mul_i(e.c(c), e.c(span)), j), x)
                    e.store(e.cf(0.0, e.f64), buf, j)
                    scf.YieldOp([])
                scf.YieldOp([])
            scf.YieldOp([])


def reduce_kept(cx: Lowering, op, r) -> None:
    e = cx.e
    idx, n = planes.kept_index(cx, r.kept)
    v = reduce_value(op)
    if cx.kept_slot is not None and (r.kind in ("max", "min") or r.policy == "auto" or
                                     (compensated(r) and r.cell in cx.lay.private)):
        reduce_kept_branchless(cx, op, r, idx, n)
        return
    if cx.kept_slot is not None and cx.form == "column" and column_pairs(cx, r):
        reduce_column_pair(cx, op, r, idx, n)
        return
    if r.kind in ("sum", "mean") and r.policy == "ordered":  # exact accumulators; a mean counts in one more
        mask = reduce_mask(op)
        for c, x in planes.components(cx, v, r.payload):
            scatters.exact_add(cx, r.cell, e.add_i(e.mul_i(c, n), idx), x, mask)
        if r.kind == "mean":
            scatters.exact_add(cx, r.cell, e.add_i(e.mul_i(e.c(size(r.payload)), n), idx), e.cf(1.0), mask)
        return
    where = scf.IfOp(reduce_mask(op), [], has_else=False) if reduce_mask(op) is not None else None
    with ir.InsertionPoint(where.then_block) if where is not None else _Here():
        out, base = kept_out(cx, r)
        policy = "fast" if r.policy == "auto" else sum_policy(r.policy, True)
        for c, x in planes.components(cx, v, r.payload):
            at = e.add_i(e.mul_i(c, n), idx)
            if r.kind in ("max", "min"):
                at = at if base is None else e.add_i(at, base)
                e.store(e.extremum(r.kind, e.load(out, at), x), out, at)
            else:  # (a private cell's copy through add_into, like a private sink's)
                cx.apply("add-into", "plain" if policy == "fast" else policy, r.cell, at, x, "cell")
        if r.kind == "mean":
            cnt, at = count_at(cx, r, idx, n)
            one = e.cf(1.0, ir.MemRefType(cnt.type).element_type)  # (a compensated copy is float64)
            e.store(e.add(e.load(cnt, at), one), cnt, at)
        if where is not None:
            scf.YieldOp([])


class _Here:
    """A no-op context manager: stay at the current insertion point."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
