"""The loop shapes a chunk of lanes runs in (host chunks and GPU threads of the chunk form alike), the one
`hawk.chunk_form` names (chunk_form.py decides it; the chunk-form pass writes it):

  flat      for lane in [lo, hi): body (split_scatters.py: computed scatter keys in two passes per block;
            grid_scatters.py: ordered ones, exact by MXCSR's flags; read_groups.py: reads in prefetched groups;
            sorted_groups.py: a run's whole groups of lanes side by side, plain or compensated sorted scatters)
  blocked   for block: full blocks run cx.pair_w straight-line copies of the body per group of lanes (a chain
            each: compensated sums, ordered two-float chains), or (a body with stores or `.at` reads)
            one loop of the body writing the terms, then the chains over them; a partial block lane by lane
  nested    for kept slot: for its contiguous lanes: body, kept totals in registers (leading kept axes); short
            slots: the chunk's whole slots as straight-line copies of the body (_short_slots)
  (tiles)   block reductions: for tile of whole slots: the slots' totals, then one of these shapes (block.py)
  scan      for block of SCAN_BLOCK lanes: (start the scans) for its lanes: body (write the block totals): scan.py
  column    for row: for its lanes (trailing kept axes: each lane's slot is affine in the lane; ordered totals
            through the row's buffers, chains in front: columns.py, column_chains.py)
  rows      a grid's rows: coordinates from the loops; neighbour reads: the interior without clamps (grid.py)

`lanes_body` plans the chunk state (state.py), runs the shape and writes the chunk's partials to #scratch.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import scf

from hawk.abi.layout import ORDERED_BLOCK, ORDERED_CHAINS
from hawk.ir.access import scatter_mode, sink_name, stored_value
from hawk.ir.build import create
from hawk.ir.dialect import is_hawk
from hawk.passes import chunk_form
from hawk.passes.host_emit import _EQ, size
from hawk.passes.lower import (
    block,
    chain_passes,
    flag_chains,
    grid_scatters,
    nested_chains,
    ordered_chains,
    planes,
    read_groups,
    reduce_full,
    reduce_kept,
    rerun,
    scan,
    sorted_groups,
    sorted_pairs,
    sorted_runs,
    split_scatters,
    state,
    stream,
    wide,
)
from hawk.passes.lower.context import Lowering, clone_body, lower_copy, rewrite, rewrite_ops
from hawk.passes.speculate import NO_SPECULATE


def lanes_body(cx: Lowering, body: ir.Block) -> None:
    e = cx.e
    cx.count_sinks = count_sinks(cx, body)
    chunk0, chain0 = state.plan_state(cx, body)
    flag_chains.begin(cx, flag_chains.eligible(cx, body) and not block.has_blocks(body))
    cx.pair_w = ordered_chains.pair_width(cx)
    chain0 = ordered_chains.widen_chain0(cx, chain0)
    # (float32) a block whose chains lost a bit reruns the body rather than keep its terms (ordered_chains.py)
    cx.recompute = bool(cx.n_terms) and rerun.can_recompute(cx, body)
    cx.nested = None
    if cx.n_terms:  # the chunk's own pairs take every exact full block's chain pairs (ordered_chains.py)
        ordered_chains.start_chunk_pairs(cx)
    if block.has_blocks(body):  # block reductions: each tile's slot totals first (block.py), then the shape
        final = block.tiled(cx, body, chunk0, lambda state: drive(cx, body, state, chain0))
    else:
        final = drive(cx, body, chunk0, chain0)
    final = list(final)
    if cx.n_terms:
        ordered_chains.deposit_chunk_pairs(cx)
    wide.deposit_ordered_wide(cx)
    reduce_full.finish_extrema(cx, final)
    scratch = cx.bufs[("#scratch", "scratch")]
    base = e.mul_i(cx.chunk, e.c(max(cx.lay.width, 1)))
    for k, v in enumerate(final[:cx.nchunk_red]):
        v = e.op("arith.sitofp", v, t=e.f64) if v.type == e.i64 else e.widen(v, e.f64)
        e.store(v, scratch, e.add_i(base, e.c(cx.scratch_at[k])))
    wide.wide_chunk_partials(cx, scratch, base)
    for run in cx.runs:
        sorted_runs.flush_run(cx, run, final[run.slot:run.slot + run.width])


COUNT_LIMIT = 2.0 ** 20  # the largest whole-number increment count_sinks takes (analysis._exact_count's)


def count_sinks(cx: Lowering, body: ir.Block) -> frozenset[str]:
    """Compensated sinks whose every add in this stage is a whole-number float constant of at most COUNT_LIMIT (a
    histogram's `+= 1.0` in float32, whose "auto" is compensated; float64 counts are plain already): the
    companion's sum of a chunk then stays a whole number below 2**53, so every Neumaier step adds exactly and
    keeps a zero correction: scatters.comp_add adds plainly into the sum (the same bits), and the two-pass form
    of split_scatters takes such a sink as it takes a plain one (its keys in a vectorized loop)."""
    found: dict[str, bool] = {}

    def visit(op):
        if is_hawk(op, "scatter") and scatter_mode(op) == "add":
            v = stored_value(op)
            owner = None if isinstance(v.owner, ir.Block) else v.owner
            whole = owner is not None and owner.name == "arith.constant" and \
                isinstance(v.type, (ir.F32Type, ir.F64Type))
            if whole:
                x = ir.FloatAttr(owner.attributes["value"]).value
                whole = float(x).is_integer() and abs(x) <= COUNT_LIMIT
            found[sink_name(op)] = found.get(sink_name(op), True) and whole
        return ir.WalkResult.ADVANCE

    for op in body.operations:
        op.operation.walk(visit)
    return frozenset(n for n, ok in found.items() if ok and cx.lay.sink_policy.get(n) == "compensated")


def drive(cx: Lowering, body: ir.Block, chunk0: list[ir.Value], chain0: list[ir.Value]) -> list[ir.Value]:
    """The loop shape `cx.form` (chunk_form.py: written by the chunk-form pass) over lanes [cx.lo, cx.hi), from
    chunk state chunk0: its final chunk state."""
    from hawk.passes.lower import columns, grid  # (columns builds on this module's lower_body)

    if cx.form == "blocked":
        return blocked_driver(cx, body, chunk0, chain0)
    if cx.form == "nested":
        return nested_driver(cx, body, chunk0)
    if cx.form == "column":
        return columns.column_driver(cx, body, chunk0, chunk_form.column_span(cx.lay, cx.is_wide, cx.exact_pairs))
    if cx.form == "rows":
        return columns.column_driver(cx, body, chunk0, None)  # rows of a grid: coordinates without div/mod
    if cx.form == "scan":
        return scan.scan_driver(cx, body, chunk0)  # the flat loop in blocks of SCAN_BLOCK (scan.py)
    got = grid.interior_lanes(cx, body, chunk0)  # a 1-D grid reading its neighbours: the interior without clamps
    return flat_driver(cx, body, chunk0) if got is None else got


def lane_guard(cx: Lowering, lane: ir.Value, lo: ir.Value, hi: ir.Value,
               cur: list[ir.Value]) -> tuple[scf.IfOp, scf.YieldOp]:
    """An if that runs one lane's body only when lo <= lane < hi, never speculated (a lane past the end must
    not read): (the if, the placeholder yield of `cur` ending its then-block, for lower_body to fill); its
    else-block yields `cur` unchanged."""
    e = cx.e
    live = e.op("arith.andi", e.cmpi(6, lane, hi), e.cmpi(9, lane, lo))  # ult, uge
    guard = scf.IfOp(live, [v.type for v in cur], has_else=True)
    guard.operation.attributes[NO_SPECULATE] = ir.UnitAttr.get()
    with ir.InsertionPoint(guard.else_block):
        scf.YieldOp(cur)
    with ir.InsertionPoint(guard.then_block):
        anchor = scf.YieldOp(cur)
    return guard, anchor


def move_body(cx: Lowering, body: ir.Block, anchor) -> None:
    for op in [o for o in body.operations if o.operation.name != "func.return"]:
        op.move_before(anchor)


def lower_body(cx: Lowering, body: ir.Block, anchor, region_op, lane: ir.Value, accs, j=None) -> None:
    """Move the kernel body before `anchor` (a placeholder yield), lower it for `lane` with the accumulators
    `accs` (and chain `j`), and end the anchor's block with a yield of the updated accumulators."""
    block = anchor.operation.block
    move_body(cx, body, anchor)
    cx.lane, cx.accs, cx.j = lane, list(accs), j
    rewrite(cx, region_op)
    anchor.operation.erase()
    with ir.InsertionPoint(block):
        scf.YieldOp(cx.accs)


def flat_driver(cx: Lowering, body: ir.Block, chunk0: list[ir.Value]) -> list[ir.Value]:
    run = sorted_pairs.sorted_ordered(cx, body)
    if run is not None:  # an ordered scatter by sorted keys (sorted_pairs.py)
        return sorted_pairs.run_driver(cx, body, chunk0, run)
    if grid_scatters.wanted(cx, body, chunk0):  # ordered scatters proved exact by MXCSR (grid_scatters.py)
        return grid_scatters.grid_driver(cx, body)
    if split_scatters.split_scatters(cx, body):  # computed keys in a vectorized pass first (split_scatters.py)
        return split_scatters.split_driver(cx, body, chunk0)
    start, chunk0 = sorted_groups.first(cx, body, chunk0) or read_groups.first(cx, body, chunk0)  # (groups)
    loop = scf.ForOp(start, cx.hi, cx.e.c(1), chunk0)
    stream.mark(cx, loop)
    with ir.InsertionPoint(loop.body):
        anchor = scf.YieldOp(list(loop.inner_iter_args))
    if cx.runs:  # (scatters by sorted keys: from memory their run steps left the hardware prefetcher behind)
        with ir.InsertionPoint(anchor), body.owner.location:
            planes.prefetch_ahead(cx, body, loop.induction_variable, 1)
    lower_body(cx, body, anchor, loop, loop.induction_variable, loop.inner_iter_args)
    return list(loop.results)


SHORT_SPAN = 8  # kept slots of at most this many lanes run as straight-line copies of the body (_short_slots),
SHORT_BODY = 48  # when the body has at most this many ops (it is emitted span + 2 times)


def nested_driver(cx: Lowering, body: ir.Block, chunk0: list[ir.Value]) -> list[ir.Value]:
    """for each kept slot: for its contiguous lanes: body, the kept totals in registers; then into the slot."""
    e = cx.e
    span = chunk_form.nest_span(cx.lay, cx.is_wide, cx.exact_pairs)
    kept = [r for r in cx.lay.reductions if r.kept]
    cx.nest_wraps = chunk_form.nest_wraps(cx.lay, cx.is_wide, cx.exact_pairs)  # (a run's slot: its number mod n)
    if span <= SHORT_SPAN and not any(reduce_kept.nested_vectors(r) for r in kept) and _ops(body) <= SHORT_BODY:
        return _short_slots(cx, body, chunk0, span, kept)
    klo = e.op("arith.divui", cx.lo, e.c(span))
    khi = e.op("arith.divui", e.add_i(cx.hi, e.c(span - 1)), e.c(span))
    chained = nested_chains.comps(kept) if span >= nested_chains.MIN_LANES else []
    flag_chains.begin(cx, flag_chains.nested_eligible(cx, body, kept, chained))  # (the flag checks the chains)
    cx.nest_w = nested_chains.group_width(cx, kept, chained)
    outer = scf.ForOp(klo, khi, e.c(1), chunk0 + nested_chains.first_guesses(cx, chained))
    with ir.InsertionPoint(outer.body):
        slot = outer.induction_variable
        row0 = e.mul_i(slot, e.c(span))  # (before the inner loop, whose lanes read it: Lowering.lane_row)
        start = e.op("arith.maxui", row0, cx.lo)
        end = e.op("arith.minui", e.add_i(e.mul_i(slot, e.c(span)), e.c(span)), cx.hi)
        whole = e.op("arith.andi", e.cmpi(_EQ, start, row0), e.cmpi(_EQ, end, e.add_i(row0, e.c(span))))
        guesses = list(outer.inner_iter_args)[len(chunk0):]
        inits = _slot_inits(cx, kept, list(outer.inner_iter_args)[:len(chunk0)])
        n = _kept_slots(cx, kept)
        slot = _wrapped(cx, slot, n)
        cx.lane_row, cx.nested_slot = (span, row0), (slot, n)
        if any(reduce_kept.nested_pairs(r) for r in kept):
            e.store(e.c(0, e.i64), reduce_kept.spilled(cx), e.c(0))
        if any(reduce_kept.nested_vectors(r) for r in kept):
            start, inits, guesses = _nested_groups(cx, body, start, end, inits, chained, guesses, span)
        inner = scf.ForOp(start, end, e.c(1), inits)
        stream.mark(cx, inner)
        with ir.InsertionPoint(inner.body):
            anchor = scf.YieldOp(list(inner.inner_iter_args))
        lower_body(cx, body, anchor, inner, inner.induction_variable, inner.inner_iter_args)
        cx.lane_row, cx.nested_slot = None, None
        res = list(inner.results)
        for r in kept:
            at0 = cx.nested[r.cell]
            if reduce_kept.nested_pairs(r):
                reduce_kept.nested_pairs_out(cx, r, slot, n, res[at0:], whole, span)
                continue
            if reduce_kept.nested_neumaier(r):
                reduce_kept.nested_neumaier_out(cx, r, slot, n, res[at0:])
                continue
            _slot_out(cx, [r], slot, n, res)
        scf.YieldOp(res[:len(chunk0)] + guesses)
    cx.nested = None
    return list(outer.results)[:len(chunk0)]


def _slot_inits(cx: Lowering, kept: list, inits: list[ir.Value]) -> list[ir.Value]:
    """`inits` and a kept slot's totals in registers after them (where each starts: cx.nested): per component
    the identity, or (ordered, nested_pairs) NEST_CHAINS (high, low) pairs in two float64 vectors; a mean's
    count."""
    e = cx.e
    cx.nested = {}
    for r in kept:
        cx.nested[r.cell] = len(inits)
        if reduce_kept.nested_vectors(r):
            inits += [e.splat(0.0, ir.VectorType.get([reduce_kept.NEST_CHAINS], e.f64))] * (2 * size(r.payload))
        else:
            inits += [e.identity(r.kind)] * size(r.payload)
        inits += [e.c(0, e.i64)] if r.kind == "mean" else []
    return inits


def _kept_slots(cx: Lowering, kept: list) -> ir.Value:
    """Kept slots per component (the product of the kept axes' extents)."""
    n = cx.e.c(1)
    for a in kept[0].kept:
        n = cx.e.mul_i(n, cx.ext[cx.axes.index(a)])
    return n


def _ops(body: ir.Block) -> int:
    """How many ops the body holds, nested ones too."""
    seen = []
    for op in body.operations:
        op.operation.walk(lambda o: (seen.append(o), ir.WalkResult.ADVANCE)[1])
    return len(seen)


def _short_slots(cx: Lowering, body: ir.Block, chunk0: list[ir.Value], span: int, kept: list) -> list[ir.Value]:
    """The nested shape for short slots (a row of a few lanes): the chunk's whole slots run as `span`
    straight-line copies of the body each, a loop LLVM vectorizes across slots (a loop of a few lanes per slot
    ran at 3-4 ns a lane); a slot the chunk holds only part of (at most one at each end) takes a loop over its
    lanes. Every slot's lanes are combined in lane order, as before: the same bits."""
    e = cx.e
    klo = e.op("arith.divui", cx.lo, e.c(span))
    khi = e.op("arith.divui", e.add_i(cx.hi, e.c(span - 1)), e.c(span))
    whole_lo = e.op("arith.divui", e.add_i(cx.lo, e.c(span - 1)), e.c(span))
    whole_hi = e.op("arith.maxui", whole_lo, e.op("arith.divui", cx.hi, e.c(span)))
    n = _kept_slots(cx, kept)
    state = _slot_loop(cx, body, chunk0, klo, e.op("arith.minui", whole_lo, khi), span, kept, n, False)
    state = _slot_loop(cx, body, state, whole_lo, whole_hi, span, kept, n, True)
    state = _slot_loop(cx, body, state, whole_hi, khi, span, kept, n, None)
    cx.nested = None
    return state


def _slot_loop(cx: Lowering, body: ir.Block, state: list[ir.Value], first: ir.Value, stop: ir.Value, span: int,
               kept: list, n: ir.Value, whole: bool | None) -> list[ir.Value]:
    """Slots [first, stop) of _short_slots: whole (`span` copies of the body from the slot's first lane), or a
    loop over the slot's lanes within the chunk; None: that loop with the body itself (the last use), else with
    a copy."""
    e = cx.e
    outer = scf.ForOp(first, stop, e.c(1), state)
    with ir.InsertionPoint(outer.body):
        slot = outer.induction_variable
        row0 = e.mul_i(slot, e.c(span))
        inits = _slot_inits(cx, kept, list(outer.inner_iter_args))
        slot = _wrapped(cx, slot, n)
        cx.lane_row, cx.nested_slot = (span, row0), (slot, n)
        if whole:
            anchor = create("arith.constant", [], [e.i64], {"value": ir.IntegerAttr.get(e.i64, 0)})
            res = inits
            for k in range(span):
                with ir.InsertionPoint(anchor):
                    lane = e.add_i(row0, e.c(k)) if k else row0
                copies = clone_body(cx, body, anchor)
                cx.lane, cx.accs, cx.j = lane, res, None
                rewrite_ops(cx, copies)
                res = list(cx.accs)
            anchor.erase()
        else:
            start = e.op("arith.maxui", row0, cx.lo)
            end = e.op("arith.minui", e.add_i(row0, e.c(span)), cx.hi)
            inner = scf.ForOp(start, end, e.c(1), inits)
            with ir.InsertionPoint(inner.body):
                anchor = scf.YieldOp(list(inner.inner_iter_args))
            if whole is None:
                lower_body(cx, body, anchor, inner, inner.induction_variable, inner.inner_iter_args)
            else:
                lower_copy(cx, body, anchor, inner.induction_variable, inner.inner_iter_args)
            res = list(inner.results)
        cx.lane_row, cx.nested_slot = None, None
        _slot_out(cx, kept, slot, n, res)
        scf.YieldOp(res[:len(state)])
    return list(outer.results)


def _wrapped(cx: Lowering, run: ir.Value, n: ir.Value) -> ir.Value:
    """The kept slot of a run of the nested shape: the run itself, or (a middle block of kept axes,
    chunk_form.nest_wraps) its number modulo the n kept slots."""
    return cx.e.op("arith.remui", run, n) if cx.nest_wraps else run


def _slot_out(cx: Lowering, kept: list, slot: ir.Value, n: ir.Value, res: list[ir.Value]) -> None:
    """A slot's register totals (not pairs) into the slot (or this chunk's copy of it): combined with what it
    holds; a mean's count."""
    e = cx.e
    for r in kept:
        at0 = cx.nested[r.cell]
        out, base = reduce_kept.kept_out(cx, r)
        for c in range(size(r.payload)):
            at = e.add_i(e.mul_i(e.c(c), n), slot)
            at = at if base is None else e.add_i(at, base)
            e.store(e.combine_kind(r.kind, e.load(out, at), res[at0 + c]), out, at)
        if r.kind == "mean":
            reduce_kept.add_count(cx, r, slot, n, res[at0 + size(r.payload)])


def _nested_groups(cx: Lowering, body: ir.Block, start: ir.Value, end: ir.Value, inits: list[ir.Value],
                   chained: list, guesses: list[ir.Value], slot_lanes: int):
    """A kept slot's whole groups of NEST_CHAINS lanes, each lane a copy of the body, copy j feeding pair j of
    the ordered totals, which add the group's terms side by side after the copies (reduce_kept.nested_group_step:
    one TwoSum chain is bound by its adds' latency, NEST_CHAINS of them in a vector are not; the scalar form
    of this ran 20 cycles a lane); the other totals take every copy in lane order. The `chained` components
    (nested_chains.comps) take chains in blocks of groups first. Returns the first lane after the groups (the
    rest run one by one, into pair 0), the state after them and the next slot's chain guesses."""
    e = cx.e
    W = reduce_kept.NEST_CHAINS  # (wider groups end with a group of this many: _group_loop)
    span = e.op("arith.subi", end, start)
    stop = e.add_i(start, e.op("arith.subi", span, e.op("arith.remui", span, e.c(W))))
    if chained:
        state, guesses = nested_chains.chained_groups(cx, body, start, stop, inits, chained, guesses, _group_loop,
                                                      slot_lanes)
        return stop, state, guesses
    return stop, _group_loop(cx, body, start, stop, inits), guesses


def _group_loop(cx: Lowering, body: ir.Block, start: ir.Value, stop: ir.Value, inits: list[ir.Value]) -> list:
    """Groups [start, stop) of cx.nest_w lanes: the copies, then reduce_kept.nested_group_step. stop - start is a
    multiple of NEST_CHAINS: wider groups (nested_chains.WIDE_GROUP) end with one of NEST_CHAINS lanes when it
    is not theirs, its missing terms zeros (a row of 1000 lanes would leave 8 lanes to the one-by-one loop,
    which cost as much as the 62 groups' savings). Returns the state after them."""
    e = cx.e
    W, half = cx.nest_w, reduce_kept.NEST_CHAINS
    whole = stop
    if W > half:
        whole = e.op("arith.subi", stop, e.op("arith.remui", e.op("arith.subi", stop, start), e.c(W)))
    groups = scf.ForOp(start, whole, e.c(W), inits)
    with ir.InsertionPoint(groups.body):
        anchor = scf.YieldOp(list(groups.inner_iter_args))
    with ir.InsertionPoint(anchor), body.owner.location:  # (the group's lanes, planes.AHEAD on: as blocked_driver)
        planes.prefetch_ahead(cx, body, groups.induction_variable, W, raw=True)
    _group_copies(cx, body, anchor, groups.induction_variable, W, list(groups.inner_iter_args))
    if W == half:
        return list(groups.results)
    if W > 2 * half:  # (flag_chains' groups of 32: up to three groups of NEST_CHAINS lanes are left)
        rest = scf.ForOp(whole, stop, e.c(half), list(groups.results))
        with ir.InsertionPoint(rest.body):
            anchor = scf.YieldOp(list(rest.inner_iter_args))
        _group_copies(cx, body, anchor, rest.induction_variable, half, list(rest.inner_iter_args))
        return list(rest.results)
    tail = scf.IfOp(e.cmpi(1, whole, stop), [v.type for v in inits], has_else=True)  # ne: a last half group
    tail.operation.attributes[NO_SPECULATE] = ir.UnitAttr.get()  # (its lanes may lie past the chunk's end)
    with ir.InsertionPoint(tail.then_block):
        anchor = scf.YieldOp(list(groups.results))
    _group_copies(cx, body, anchor, whole, half, list(groups.results))
    with ir.InsertionPoint(tail.else_block):
        scf.YieldOp(list(groups.results))
    return list(tail.results)


def _group_copies(cx: Lowering, body: ir.Block, anchor, first: ir.Value, count: int, state: list) -> None:
    """`count` copies of the body for lanes first, first + 1, ... before `anchor` (a placeholder yield of the
    state, replaced by the yield of the state after them), then reduce_kept.nested_group_step."""
    e = cx.e
    cx.nested_group, cx.nested_group_at = {}, first
    for j in range(count):
        with ir.InsertionPoint(anchor):
            lane = e.add_i(first, e.c(j)) if j else first
        copies = clone_body(cx, body, anchor)
        cx.lane, cx.accs, cx.j = lane, state, j
        rewrite_ops(cx, copies)
        state = list(cx.accs)
    with ir.InsertionPoint(anchor), body.owner.location:
        cx.accs = state
        reduce_kept.nested_group_step(cx, [r for r in cx.lay.reductions if r.kept])
        scf.YieldOp(cx.accs)
    anchor.operation.erase()
    cx.j, cx.nested_group, cx.nested_group_at = None, None, None


def blocked_driver(cx: Lowering, body: ir.Block, chunk0: list[ir.Value], chain0: list[ir.Value]) -> list[ir.Value]:
    """for block: full blocks run groups of CHAINS lanes as CHAINS straight-line copies of the body (lane j
    of a group feeds chain j; LLVM's SLP vectorizer packs the copies); a partial block runs lane by lane
    under a guard. Without wide sums (`ragged`), every block that starts in the chunk runs its whole groups as
    chains and only its last < CHAINS lanes one by one (a compensated sum's short block too: at 1e4 lanes its
    lane-by-lane Neumaier steps took 58% of the launch); and when the body also writes or reads
    neighbours (`terms_first`, which keeps the copies scalar), the groups' lanes run first in one plain loop
    of the body that stores the terms into the term buffer, and the chains then add the buffer. Compensated
    chains beside no ordered or wide sum (`carry`, host) run on from block to block and go into the chunk's
    Neumaier pair once, at its end (reduce_full.carried_chains)."""
    e = cx.e
    B, W = ORDERED_BLOCK, cx.pair_w  # (pair_w: more chains for float32 ordered and for compensated sums)
    ragged = not any(a.wide for a in cx.full)  # (wide sums: their chains' grouping is fixed)
    carry = reduce_full.carried_chains(cx)
    terms_first = ragged and cx.n_terms > 0 and _breaks_copies(body)
    in_passes = chain_passes.cached(cx) if chain_passes.wanted(cx, carry) else None  # (run time: an i1)
    if terms_first:
        cx.recompute = False  # (the term loop keeps every term)
    blo = e.op("arith.divui", cx.lo, e.c(B))
    bhi = e.op("arith.divui", e.add_i(cx.hi, e.c(B - 1)), e.c(B))
    nchunk = len(chunk0)
    outer = scf.ForOp(blo, bhi, e.c(1), chunk0 + (chain0 if carry else []))
    with ir.InsertionPoint(outer.body):
        blk = outer.induction_variable
        wide.wide_block_start(cx)
        start = e.mul_i(blk, e.c(B))
        end = e.op("arith.minui", e.add_i(start, e.c(B)), cx.hi)
        inits = list(outer.inner_iter_args) + ([] if carry else list(chain0))  # (else each block's start afresh)
        cx.block_start = start
        starts_in = e.cmpi(9, start, cx.lo)  # uge
        if ragged:  # the groups of a block that starts in the chunk (all but its last < W lanes) run as chains
            full = starts_in
            cx.block_groups = e.select(full, e.op("arith.divui", e.op("arith.subi", end, start), e.c(W)), e.c(0))
        else:
            full = e.op("arith.andi", starts_in, e.cmpi(0, e.op("arith.subi", end, start), e.c(B)))
            cx.block_groups = e.c(B // W)
        split = scf.IfOp(full, [v.type for v in inits], has_else=True)
        one_pass = split.then_block if in_passes is None else \
            chain_passes.either(cx, in_passes, split.then_block, body, start, inits, nchunk)
        with ir.InsertionPoint(one_pass):
            chains0 = inits
            if terms_first:  # the groups' lanes in one loop, the chains after it (terms_first)
                terms, terms_anchor = _term_loop(cx, start, inits[:nchunk])
                chains0 = list(terms.results) + inits[nchunk:]
            fast = scf.ForOp(e.c(0), cx.block_groups, e.c(1), ordered_chains.chain_inits(cx, chains0, nchunk))
            with ir.InsertionPoint(fast.body):
                fast_anchor = scf.YieldOp(list(fast.inner_iter_args))
            ordered_chains.flush_pairs(cx, list(fast.results), nchunk, body)
            scf.YieldOp(list(fast.results))
        with ir.InsertionPoint(split.else_block):
            if ragged:  # the lanes after the groups, one by one (below)
                scf.YieldOp(inits)
            else:
                guard, anchor, lane, cur, j = partial_block(cx, start, end, inits)
        if ragged:
            first = e.op("arith.maxui", e.add_i(start, e.mul_i(cx.block_groups, e.c(W))), cx.lo)
            tail = scf.ForOp(first, end, e.c(1), list(split.results))
            with ir.InsertionPoint(tail.body):
                anchor = scf.YieldOp(list(tail.inner_iter_args))
            guard, lane, cur, j = tail, tail.induction_variable, tail.inner_iter_args, tail.induction_variable
        cx.pending = {}
        if terms_first:  # the term loop: the body once per lane; then the chains from the term buffer
            with body.owner.location:
                _lower_terms(cx, body, terms, terms_anchor, start)
            cx.accs = list(fast.inner_iter_args)
            with ir.InsertionPoint(fast_anchor), body.owner.location:
                cx.group_at = e.mul_i(fast.induction_variable, e.c(W))
                ordered_chains.buffered_chains_step(cx)
        else:  # full blocks: W copies, lane j feeding chain j
            cx.accs = list(fast.inner_iter_args)
            with ir.InsertionPoint(fast_anchor), body.owner.location:
                at = e.mul_i(fast.induction_variable, e.c(W))  # the group's first lane: its index in the block
                first = e.add_i(start, at)
                if cx.n_terms:
                    cx.group_at = at
                planes.prefetch_ahead(cx, body, first, W, raw=True)  # (the group's lanes, planes.AHEAD on)
            for jj in range(W):
                with ir.InsertionPoint(fast_anchor), body.owner.location:
                    cx.lane = e.add_i(first, e.c(jj))
                cx.j = jj
                rewrite_ops(cx, clone_body(cx, body, fast_anchor))
            with ir.InsertionPoint(fast_anchor), body.owner.location:
                ordered_chains.ordered_chains_step(cx)
                reduce_full.compensated_chains_step(cx)
        fast_anchor.operation.erase()
        with ir.InsertionPoint(fast.body):
            scf.YieldOp(cx.accs)
        # the partial block (ragged: the lanes after the groups): one lane at a time
        lower_body(cx, body, anchor, guard, lane, cur, j)
        res = list(tail.results) if ragged else list(split.results)
        for acc in cx.full:
            if acc.policy != "compensated" or carry:
                continue
            if acc.wide:
                wide.wide_merge_chains(cx, acc)
                continue
            reduce_full.merge_chains(cx, acc, res, nchunk)
        scf.YieldOp(res if carry else res[:nchunk])
    res = list(outer.results)
    for acc in cx.full if carry else ():
        if acc.policy == "compensated":
            reduce_full.merge_chains(cx, acc, res, nchunk)
    return res[:nchunk]


_BREAK_COPIES = ("hawk.store", "hawk.scatter", "hawk.at")


def _breaks_copies(body: ir.Block) -> bool:
    """Whether the body writes (a store or scatter between one copy's loads and the next's, which the SLP
    vectorizer may not move across) or reads a neighbour (`.at`: loads that are not side by side): then the
    straight-line copies of a group stay scalar, and a full block's lanes run in a term loop instead."""
    found = []

    def visit(op):
        if op.name in _BREAK_COPIES:
            found.append(op)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    for op in body.operations:
        op.operation.walk(visit)
    return bool(found)


def _term_loop(cx: Lowering, start: ir.Value, state: list[ir.Value]):
    """The term loop of a full block's groups (lanes start .. start + cx.block_groups * cx.pair_w), carrying the
    chunk state `state`: (the loop, the placeholder yield ending its body)."""
    e = cx.e
    n = e.mul_i(cx.block_groups, e.c(cx.pair_w))
    loop = scf.ForOp(start, e.add_i(start, n), e.c(1), state)
    stream.mark(cx, loop)
    with ir.InsertionPoint(loop.body):
        anchor = scf.YieldOp(list(loop.inner_iter_args))
    return loop, anchor


def _lower_terms(cx: Lowering, body: ir.Block, loop, anchor, start: ir.Value) -> None:
    """A copy of the body in the term loop, for its lane: the ordered sums' terms (kept by ordered_chain_step as
    copy 0) go to the term buffer at the lane's index in the block; the rest of the body runs as in the flat
    loop. One body per lane in a plain loop is what LLVM's loop vectorizer takes (8 straight-line copies of a
    body with expanded math were left scalar by the SLP vectorizer)."""
    e = cx.e
    cx.lane, cx.accs, cx.j, cx.pending = loop.induction_variable, list(loop.inner_iter_args), 0, {}
    rewrite_ops(cx, clone_body(cx, body, anchor))
    with ir.InsertionPoint(anchor):
        ordered_chains.store_lane_terms(cx, e.op("arith.subi", loop.induction_variable, start))
        scf.YieldOp(cx.accs)
    anchor.operation.erase()


def partial_block(cx: Lowering, start: ir.Value, end: ir.Value, inits: list[ir.Value]):
    """A block not run as chains, lane by lane under a guard (lo <= lane < end): (the guard, its placeholder
    yield, the lane, the state inside, the lane's index in its group); ends the current block with its yield."""
    e = cx.e
    W = ORDERED_CHAINS
    groups = scf.ForOp(e.c(0), e.c(ORDERED_BLOCK // W), e.c(1), inits)
    with ir.InsertionPoint(groups.body):
        inner = scf.ForOp(e.c(0), e.c(W), e.c(1), list(groups.inner_iter_args))
        with ir.InsertionPoint(inner.body):
            j = inner.induction_variable
            lane = e.add_i(start, e.mul_i(groups.induction_variable, e.c(W)), j)
            cur = list(inner.inner_iter_args)
            guard, anchor = lane_guard(cx, lane, cx.lo, end, cur)
            scf.YieldOp(list(guard.results))
        scf.YieldOp(list(inner.results))
    scf.YieldOp(list(groups.results))
    return guard, anchor, lane, cur, j
