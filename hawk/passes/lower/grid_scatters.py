"""Ordered scatters whose exactness MXCSR's flags prove (host, x86-64 with AVX and FMA: Spec.mxcsr, or AVX-512F).

An ordered scatter keeps each chunk's slots in (high, low) float64 pairs (scatters.exact_add). The grouped form
(split_scatters.paired_driver) adds each term by two TwoSums, a dozen dependent flops a lane: about twice a plain
scatter's time. Here no step means to round, so the CPU's sticky flags prove the chunk exact after the fact:

- Blocks of BLOCK lanes in two passes. The first runs the body and writes, for each scatter, a code and the
  term widened to float64 into small buffers: the index of the lane's pair in this chunk's copy, or SKIP (a key
  of -1) or OUTSIDE (a key outside the sink) with a zero term, or LATE_CODE less the pair index for a tiny term
  (below). It also keeps the chunk's largest term so far that lands in a slot (an integer max of the bits: the
  loop vectorizes). A term may round there: the body's arithmetic is the kernel's own.
- The second pass starts by writing MXCSR back as the chunk's start left it (flags clear). Each term x is cut
  on the scatter's grid 2**g, CUT terms side by side: r = roundeven(x * 2**-g) (x86 rounds it with its inexact
  exception suppressed), then the slot's high adds r * 2**g and its low adds x - r * 2**g (one FMA). Every
  other step raises the inexact flag if it rounds (an inf term raises the invalid one: its low is inf - inf),
  so while neither flag is raised each slot's high + low is exactly its terms. The pass ends by reading MXCSR.
- g: the chunk's largest term so far (its block's included) is below 2**e; g = e + c - 53, where c is log2 of
  the chunk's lanes per slot plus HEADROOM, at most log2 of its lanes. A slot's high then holds 2**c such terms
  on the grid. Its low holds the terms' remainders only while every bit of them fits beside its sum: a term
  far below the grid would not. So a term below 2**(g + TINY) (by the grid of the chunk's blocks before: the
  first block puts none off) is put off onto a list of LATE per scatter, and once the chunk's blocks are done
  each goes into its pair by exact_add's TwoSums (a pair on the grid is a pair like any other), or into the
  slot's accumulator when the pair cannot take it. Squares of normal values keep a few hundred terms a chunk
  there; data spread so widely that a list fills up take the redo.
- The redo: a raised flag, a key outside its sink, or a full list ends the chunk's blocks; its pairs are zeroed
  (the runtime zeroed them before the chunk ran, no other chunk adds into this copy, and nothing went to an
  accumulator yet) and the chunk runs again in the grouped form, which spills what a pair cannot hold exactly and
  reports bad keys in lane order. Data that grow along the chunk past the high's room, and infinities, take it
  too. A NaN term leaves its slot's pair NaN, which the finish deposits: the slot comes out NaN as a spilled NaN
  would make it.

float32 kernels take the same route on their widened terms; a chunk whose largest term times its lanes could
pass 2**126 redoes, since a float32 kernel's pairs must stay below 2**127 (exact_emit.f32_parts). The finish
rounds each slot's exact sum, so which route a chunk took never shows in the result.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import scf

from hawk.ir.access import scatter_keys, sink_name, stored_value
from hawk.passes.host_emit import size
from hawk.passes.lower import flag_chains, planes, scatters, split_scatters
from hawk.passes.lower.context import Lowering

BLOCK = 256  # lanes per block: the slot and term buffers (4 KB a scatter) stay in L1
CUT = 4  # terms cut on the grid side by side (one 256-bit vector)
GROUP = 8  # lanes of the second pass per step (a 64-byte line of float64 terms: one prefetch hint a plane)
TINY = 8  # a term below 2**(g + TINY) is put off: the lows hold its bits only while they stay that small
LATE = 2048  # terms a chunk may put off per scatter (more: it runs again in pairs)
HEADROOM = 8  # the grid leaves a slot's high room for 2**HEADROOM times the chunk's lanes per slot of the max
_EQ, _SLT, _SGE = 0, 2, 5  # arith.cmpi "eq", "slt", "sge"
SKIP, OUTSIDE, LATE_CODE = -1, -2, -3  # a lane's code in the first pass's slot buffer when not its pair index
_FIELD = 52  # a float64's exponent field starts at this bit


def wanted(cx: Lowering, body: ir.Block, chunk0: list[ir.Value]) -> bool:
    """Whether the chunk takes this route: the host on x86-64 with AVX and FMA (or AVX-512F), a body of ordered
    += of scalars into sinks kept in per-chunk pairs (split_scatters.paired; no compensated one beside) of fewer
    than scatters.PREFETCH_SLOTS slots, and no loop state (a redo must not count a lane twice). (Into a million
    slots, where each lane waits on its pair's cache miss, the grouped form with its pairs prefetched 64 lanes
    ahead ran 10-15% faster than this route.)"""
    if cx.target != "host" or not (cx.mxcsr or cx.sae) or chunk0:
        return False
    ops = split_scatters.split_scatters(cx, body)
    return bool(ops) and all(split_scatters.paired(cx, op) and cx.lay.sink_policy.get(sink_name(op)) == "ordered"
                             and _slots(cx, sink_name(op)) < scatters.PREFETCH_SLOTS for op in ops)


def grid_driver(cx: Lowering, body: ir.Block) -> list[ir.Value]:
    """The chunk's lanes in blocks of two passes on each scatter's grid (no block runs after one that failed),
    then either the terms put off into their pairs, or the redo when MXCSR, a key or a full list says so (module
    docstring). The chunk keeps no loop state: returns []."""
    e = cx.e
    flag_chains.save_clean(cx, flag_chains.PE | flag_chains.IE)
    ops = [op for op in body.operations if op.operation.name == "hawk.scatter"]
    n = len(ops)
    lanes_log = _log2(cx, e.op("arith.subi", cx.hi, cx.lo))
    sinks = [sink_name(op) for op in ops]
    room = [_headroom(cx, lanes_log, _slots(cx, sink).bit_length() - 1) for sink in sinks]
    bufs = [(cx.temp(BLOCK, e.i64, tag=f"grid-slot{j}"), cx.temp(BLOCK, e.f64, tag=f"grid-term{j}"))
            for j in range(n)]
    late = [(cx.temp(LATE, e.i64, tag=f"grid-late-slot{j}"), cx.temp(LATE, e.f64, tag=f"grid-late-term{j}"))
            for j in range(n)]
    counts = cx.temp(n + 1, e.i64, tag="grid-late-counts")  # (each list's length, then: a list was full)
    for j in range(n + 1):
        e.store(e.c(0, e.i64), counts, e.c(j))
    state = [e.c(0, e.i1)] + [e.c(0, e.i64)] * n
    outer = scf.ForOp(cx.lo, cx.hi, e.c(BLOCK), state)
    with ir.InsertionPoint(outer.body), body.owner.location:
        bad, *most = outer.inner_iter_args
        block = scf.IfOp(bad, [v.type for v in state], has_else=True)
        with ir.InsertionPoint(block.then_block):  # (the chunk runs again: its blocks left are skipped)
            scf.YieldOp(list(outer.inner_iter_args))
        with ir.InsertionPoint(block.else_block):
            start = outer.induction_variable
            end = e.op("arith.minui", e.add_i(start, e.c(BLOCK)), cx.hi)
            tiny = [_tiny(cx, _field(cx, m, c)) for m, c in zip(most, room, strict=True)]
            most = _first_pass(cx, body, start, end, bufs, tiny, most)
            grids = [flag_chains.powers(cx, _field(cx, m, c)) for m, c in zip(most, room, strict=True)]
            flag_chains.restore(cx)
            _second_pass(cx, body, start, e.op("arith.subi", end, start), bufs, sinks, grids, late, counts)
            raised = flag_chains.raised(cx, flag_chains.PE | flag_chains.IE)
            full = e.cmpi(1, e.load(counts, e.c(n)), e.c(0, e.i64))
            scf.YieldOp([e.op("arith.ori", raised, full), *most])
        scf.YieldOp(list(block.results))
    bad, *most = outer.results
    if not isinstance(e.f, ir.F64Type):  # (the chunk's highs could pass 2**127: exact_emit.f32_parts)
        for m in most:
            field = e.op("arith.shrui", m, e.c(_FIELD, e.i64))
            bad = e.op("arith.ori", bad, e.cmpi(_SGE, e.add_i(field, lanes_log), e.c(1022 + 126, e.i64)))
    again = scf.IfOp(bad, [], has_else=True)
    with ir.InsertionPoint(again.then_block):
        redo(cx, body, sinks)
        scf.YieldOp([])
    with ir.InsertionPoint(again.else_block):
        for j, sink in enumerate(sinks):
            _late_adds(cx, sink, late[j], e.load(counts, e.c(j)))
        scf.YieldOp([])
    return []


def _first_pass(cx: Lowering, body: ir.Block, start: ir.Value, end: ir.Value, bufs: list, tiny: list[ir.Value],
                state: list[ir.Value]) -> list[ir.Value]:
    """The body over lanes [start, end), each scatter j's code and term (float64) into bufs[j]: the code is the
    lane's pair index, or SKIP (a key of -1) or OUTSIDE (a key outside the sink) with a zero term, or LATE_CODE
    less the pair index where the term is below tiny[j] but not zero (put off: _late_adds). The loop carries each
    scatter's largest term that lands in a slot (its bits, an i64 in `state`): returns them."""
    e = cx.e
    first = scf.ForOp(start, end, e.c(1), state)
    with ir.InsertionPoint(first.body):
        anchor = scf.YieldOp(list(first.inner_iter_args))
    ops = split_scatters.lane_scatters(cx, body, anchor, first.induction_variable)
    with ir.InsertionPoint(anchor), body.owner.location:
        at = e.op("arith.subi", first.induction_variable, start)
        most = list(first.inner_iter_args)
        for j, op in enumerate(ops):
            sink = sink_name(op)
            ok, skip, idx, _ = scatters.key_index(cx, cx.lay.sig.get(sink), scatter_keys(op))
            x = e.widen(stored_value(op), e.f64)
            size = e.op("arith.bitcast", e.abs(x), t=e.i64)
            small = e.op("arith.andi", e.cmpi(_SLT, size, tiny[j]), e.cmpi(1, size, e.c(0, e.i64)))
            pair = e.to_i64(e.mul_i(e.add_i(idx, scatters.copy_start(cx, sink)), e.c(2)))
            pair = e.select(small, e.op("arith.subi", e.c(LATE_CODE, e.i64), pair), pair)
            e.store(e.select(ok, pair, e.select(skip, e.c(SKIP, e.i64), e.c(OUTSIDE, e.i64))), bufs[j][0], at)
            e.store(e.select(ok, x, e.cf(0.0, e.f64)), bufs[j][1], at)  # (what adds nowhere raises no flag)
            most[j] = e.op("arith.maxsi", most[j], e.select(ok, size, e.c(0, e.i64)))
        scf.YieldOp(most)
    anchor.operation.erase()
    for op in ops:
        op.operation.erase()
    return list(first.results)


def _second_pass(cx: Lowering, body: ir.Block, start: ir.Value, count: ir.Value, bufs: list, sinks: list[str],
                 grids: list, late: list, counts: ir.Value) -> None:
    """The block's `count` terms cut on their grids into their pairs: GROUP lanes a step (CUT terms cut side
    by side, then added lane by lane; a prefetch hint for each input plane's line 2 * BLOCK lanes ahead, which
    kept the loads of the next blocks' first passes from stalling on memory), then the lanes left one by one. A
    term put off goes to its scatter's list in `late` (_put_off)."""
    e = cx.e
    whole = e.op("arith.subi", count, e.op("arith.remui", count, e.c(GROUP)))
    steps = scf.ForOp(e.c(0), whole, e.c(GROUP), [])
    with ir.InsertionPoint(steps.body):
        at = steps.induction_variable
        planes.prefetch_ahead(cx, body, e.add_i(start, at), GROUP, ahead=2 * BLOCK, raw=True)
        for q in range(0, GROUP, CUT):
            _add_lanes(cx, e.add_i(at, e.c(q)) if q else at, CUT, bufs, sinks, grids, late, counts)
        scf.YieldOp([])
    rest = scf.ForOp(whole, count, e.c(1), [])
    with ir.InsertionPoint(rest.body):
        _add_lanes(cx, rest.induction_variable, 1, bufs, sinks, grids, late, counts)
        scf.YieldOp([])


def _add_lanes(cx: Lowering, lane: ir.Value, width: int, bufs: list, sinks: list[str], grids: list, late: list,
               counts: ir.Value) -> None:
    """Lanes [lane, lane + width) of the block: each scatter's `width` terms cut side by side, then added into
    their pairs lane by lane (a code that is not a pair index: _put_off)."""
    e = cx.e
    for j, ((slots, terms), sink, grid) in enumerate(zip(bufs, sinks, grids, strict=True)):
        high, low = _cut(cx, e.vload(terms, lane, width, e.f64), grid)
        for k in range(width):
            each = e.add_i(lane, e.c(k)) if k else lane
            _pair_add(cx, sink, e.load(slots, each), e.shuffle(high, low, [k, width + k]),
                      lambda code, each=each, j=j, terms=terms: _put_off(cx, late, counts, j, code,
                                                                         e.load(terms, each)))


def _put_off(cx: Lowering, late: list, counts: ir.Value, j: int, code: ir.Value, x: ir.Value) -> None:
    """A lane whose code is not a pair index: its term x put off onto scatter j's list (LATE_CODE - the code is
    its pair index); a key outside its sink, or a full list, makes the chunk run again (the word after the
    lists' lengths in `counts`); SKIP, nothing."""
    e = cx.e
    stop = e.c(ir.MemRefType(counts.type).shape[0] - 1)
    put = scf.IfOp(e.cmpi(_SLT, code, e.c(OUTSIDE, e.i64)), [], has_else=True)
    with ir.InsertionPoint(put.then_block):
        n = e.load(counts, e.c(j))
        room = scf.IfOp(e.cmpi(_SLT, n, e.c(LATE, e.i64)), [], has_else=True)
        with ir.InsertionPoint(room.then_block):
            at = e.to_index(n)
            e.store(e.op("arith.subi", e.c(LATE_CODE, e.i64), code), late[j][0], at)
            e.store(x, late[j][1], at)
            e.store(e.op("arith.addi", n, e.c(1, e.i64)), counts, e.c(j))
            scf.YieldOp([])
        with ir.InsertionPoint(room.else_block):
            e.store(e.c(1, e.i64), counts, stop)
            scf.YieldOp([])
        scf.YieldOp([])
    with ir.InsertionPoint(put.else_block):
        outside = scf.IfOp(e.cmpi(_EQ, code, e.c(OUTSIDE, e.i64)), [], has_else=False)
        with ir.InsertionPoint(outside.then_block):
            e.store(e.c(1, e.i64), counts, stop)
            scf.YieldOp([])
        scf.YieldOp([])


def _late_adds(cx: Lowering, sink: str, late: tuple, n: ir.Value) -> None:
    """The terms a chunk put off, into their pairs by exact_add's TwoSums (a pair on the grid is a pair like any
    other: high + low is its terms), each spilled into the slot's accumulator when its pair cannot take it."""
    e = cx.e
    each = scf.ForOp(e.c(0), e.to_index(n), e.c(1), [])
    with ir.InsertionPoint(each.body):
        pair = e.to_index(e.load(late[0], each.induction_variable))
        slot = e.op("arith.subi", e.op("arith.divui", pair, e.c(2)), scatters.copy_start(cx, sink))
        scatters.exact_add(cx, sink, slot, e.load(late[1], each.induction_variable))
        scf.YieldOp([])


def redo(cx: Lowering, body: ir.Block, sinks: list[str]) -> None:
    """The chunk again in the grouped form (split_scatters.paired_driver), from zeroed pairs."""
    for sink in dict.fromkeys(sinks):
        _zero_pairs(cx, sink)
    split_scatters.paired_driver(cx, body, [])


def _cut(cx: Lowering, x: ir.Value, grid: tuple) -> tuple[ir.Value, ir.Value]:
    """A vector of terms cut on the grid (2**-g, 2**g, -2**g): (r * 2**g, x - r * 2**g) (flag_chains.cut)."""
    e = cx.e
    inv, pos, neg = (e.bcast(v, x.type) for v in grid)
    r, rest = flag_chains.cut(cx, x, inv, neg)
    return e.op("arith.mulf", r, pos), rest


def _pair_add(cx: Lowering, sink: str, at: ir.Value, part: ir.Value, otherwise) -> None:
    """A cut term (a vector [high part, low part]) into this chunk's (high, low) pair of `sink` at index `at`
    (an i64); `otherwise(at)` emits what a lane with a negative code does."""
    e = cx.e
    live = scf.IfOp(e.cmpi(_SGE, at, e.c(0, e.i64)), [], has_else=True)
    with ir.InsertionPoint(live.then_block):
        pairs = cx.bufs[(sink, "pairs")]
        p = e.to_index(at)
        e.vstore(e.add(e.vload(pairs, p, 2, e.f64), part), pairs, p)
        scf.YieldOp([])
    with ir.InsertionPoint(live.else_block):
        otherwise(at)
        scf.YieldOp([])


def _log2(cx: Lowering, n: ir.Value) -> ir.Value:
    """floor(log2(n)) + 1 of an index n >= 1 (its bits), as an i64: from the exponent of n as a float64."""
    e = cx.e
    f = e.op("arith.uitofp", e.to_i64(n), t=e.f64)
    field = e.op("arith.shrui", e.op("arith.bitcast", f, t=e.i64), e.c(_FIELD, e.i64))
    return e.op("arith.subi", field, e.c(1022, e.i64))


def _headroom(cx: Lowering, lanes_log: ir.Value, slots_log: int) -> ir.Value:
    """c (i64): log2 of the chunk's lanes per slot plus HEADROOM, at most log2 of its lanes (module docstring)."""
    e = cx.e
    per_slot = e.op("arith.maxsi", e.op("arith.subi", lanes_log, e.c(slots_log, e.i64)), e.c(0, e.i64))
    return e.op("arith.minsi", e.add_i(per_slot, e.c(HEADROOM, e.i64)), lanes_log)


def _slots(cx: Lowering, sink: str) -> int:
    """A sink's slots (the product of its axes' extents)."""
    return size(tuple(a.extent for a in cx.lay.sig.get(sink).axes))


def _field(cx: Lowering, most: ir.Value, c: ir.Value) -> ir.Value:
    """The biased exponent of the grid 2**g (g + 1023, an i64) for terms below 2**e (`most`: the bits of the
    largest; e = its exponent field less 1022): g = e + c - 53, kept in [1, 2045] so that 2**g and 2**-g are
    normal float64s (flag_chains.powers)."""
    e = cx.e
    field = e.op("arith.shrui", most, e.c(_FIELD, e.i64))
    g = e.op("arith.subi", e.add_i(field, c), e.c(52, e.i64))
    return e.op("arith.minsi", e.op("arith.maxsi", g, e.c(1, e.i64)), e.c(2045, e.i64))


def _tiny(cx: Lowering, g: ir.Value) -> ir.Value:
    """The bits of 2**(g + TINY) (an i64) for the biased exponent g (_field): terms below it are put off."""
    e = cx.e
    return e.op("arith.shli", e.op("arith.minsi", e.add_i(g, e.c(TINY, e.i64)), e.c(2046, e.i64)),
                e.c(_FIELD, e.i64))


def _zero_pairs(cx: Lowering, sink: str) -> None:
    """This chunk's (high, low) pairs of `sink` back to zero, as the runtime left them before the chunk ran."""
    e = cx.e
    pairs = cx.bufs[(sink, "pairs")]
    first = e.mul_i(scatters.copy_start(cx, sink), e.c(2))
    each = scf.ForOp(first, e.add_i(first, e.c(2 * cx.lay.stride(sink))), e.c(1), [])
    with ir.InsertionPoint(each.body):
        e.store(e.cf(0.0, e.f64), pairs, each.induction_variable)
        scf.YieldOp([])
