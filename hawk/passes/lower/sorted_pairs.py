"""An ordered scatter keyed by a Sorted[Index] plane, on the host: runs of equal keys summed exactly in vector
registers, RUN_LANES lanes side by side (issue 11's cost target for sorted keys).

Lane by lane, each term went into its slot's (high, low) pair in memory (scatters.exact_add): a dozen flops per
lane, one lane at a time, about twice a plain scatter's time. Here the lane loop runs groups of RUN_LANES lanes
and keeps the current run as RUN_LANES (high, low) pairs side by side in two vectors:

    for group:
        the body once per lane (keys and terms)
        every key the run's and inside the sink, every term below 2**(emax - 64) in magnitude:
            (s1, e1) = TwoSum(highs, terms); (s2, e2) = TwoSum(lows, e1); highs, lows = s1, s2
            a non-zero e2 (rare) into the slot's exact accumulator (scatters.spill)
        else, lane by lane (`lane_step`): a new key flushes the run, a bad key is reported (in lane order, as
            the one-pass loop reports it), a large term, an inf or a NaN goes into the accumulator as it is
    the lanes left over lane by lane; the chunk's last run flushed

A flush adds every high and low of the run into its slot by exact_add (the slot's pair, or its accumulator). Each
step keeps highs + lows + what was spilled equal to the run's terms exactly (TwoSum is exact while no sum
overflows, which the bound on the terms a pair takes rules out for runs under 2**64 lanes), so each slot ends with
the exact sum of its terms, rounded once: the very bits of the lane-by-lane form.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import scf, vector

from hawk.ir.access import scatter_keys, scatter_mode, sink_name, stored_value
from hawk.ir.build import create
from hawk.ir.dialect import is_hawk
from hawk.passes.analysis import key_source, payload_of
from hawk.passes.host_emit import _EQ, _SGE, _SLT
from hawk.passes.lower import planes, scatters, slot_ranges, split_scatters
from hawk.passes.lower.context import Lowering

RUN_LANES = 8  # lanes of a group: one 512-bit vector of float64 pairs' highs (two 256-bit ones on AVX2)
_OLT, _UNE, _NE = 4, 13, 1  # arith.cmpf "olt", "une"; arith.cmpi "ne"


def sorted_ordered(cx: Lowering, body: ir.Block):
    """The body's one scatter when this form applies (else None): the host, one lane axis, no reduction, no
    sorted run of another policy, not a slot-range stage, and the body's only effect one ordered += of a scalar
    into a sink no lane stores into, keyed straight from a Sorted[Index] plane."""
    if not cx.exact_pairs or cx.lay.reductions or len(cx.axes) != 1 or cx.runs or slot_ranges.active(cx):
        return None
    found = split_scatters.scatter_body(body)
    if found is None or len(found) != 1 or any(is_hawk(op, "cell") for op in body.operations):
        return None
    (op,) = found
    sink = sink_name(op)
    keys = scatter_keys(op)
    src = key_source(keys[0]) if len(keys) == 1 else None
    spec = cx.lay.sig.get(src) if src else None
    if spec is None or spec.kind != "index" or not spec.sorted or scatter_mode(op) != "add":
        return None
    if cx.lay.sink_policy.get(sink) != "ordered" or sink in cx.lay.stored or payload_of(stored_value(op).type):
        return None
    return op


def run_driver(cx: Lowering, body: ir.Block, chunk0: list[ir.Value], op) -> list[ir.Value]:
    """The lane loop in groups (see the module's docstring) for the body's scatter `op` (sorted_ordered's); the
    chunk state passes through unchanged."""
    e = cx.e
    W = RUN_LANES
    vec = ir.VectorType.get([W], e.f64)  # (float64 pairs for float32 kernels too, as scatters.exact_add keeps)
    sink = sink_name(op)
    extent = cx.lay.sig.get(sink).axes[0].extent
    n = len(chunk0)
    init = [*chunk0, e.c(-1, e.i64), e.splat(0.0, vec), e.splat(0.0, vec)]
    loop, anchor, stop = split_scatters.group_loop(cx, W, init)
    with ir.InsertionPoint(anchor), body.owner.location:  # (the group's input lines, planes.AHEAD lanes on)
        planes.prefetch_ahead(cx, body, loop.induction_variable, W)
    lanes = []  # (key, term, the scatter's copy) per lane of the group
    for j in range(W):
        with ir.InsertionPoint(anchor), body.owner.location:
            lane = e.add_i(loop.induction_variable, e.c(j)) if j else loop.induction_variable
        (scatter,) = split_scatters.lane_scatters(cx, body, anchor, lane)
        lanes.append((scatter_keys(scatter)[0], stored_value(scatter), scatter))
    with ir.InsertionPoint(anchor), body.owner.location:
        state = list(loop.inner_iter_args)
        key, highs, lows = state[n:]
        fast = None
        for k, _, _ in lanes:
            same = e.cmpi(_EQ, k, key)
            fast = same if fast is None else e.op("arith.andi", fast, same)
        inside = _inside(cx, key, extent)
        terms = create("vector.from_elements", [e.widen(x, e.f64) for _, x, _ in lanes], [vec]).result
        small = e.cmpf(_OLT, e.abs(terms), e.splat(scatters.pair_limit(cx), vec))
        fast = e.op("arith.andi", e.op("arith.andi", fast, inside), e.all_of(small))
        branch = scf.IfOp(fast, [e.i64, vec, vec], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            s1, e1 = e.two_sum(highs, terms)
            s2, e2 = e.two_sum(lows, e1)
            nonzero = e.cmpf(_UNE, e2, e.splat(0.0, vec))
            rare = scf.IfOp(e.any_of(nonzero), [], has_else=False)
            with ir.InsertionPoint(rare.then_block):  # each non-zero error into the accumulator
                scatters.spill_lanes(cx, sink, e.to_index(key), nonzero, e2)
                scf.YieldOp([])
            scf.YieldOp([key, s1, s2])
        with ir.InsertionPoint(branch.else_block):
            cur = [key, highs, lows]
            for j, (k, x, _) in enumerate(lanes):
                cur = lane_step(cx, sink, extent, cur, k, x, j)
            scf.YieldOp(cur)
        scf.YieldOp(state[:n] + list(branch.results))
    anchor.operation.erase()
    for _, _, scatter in lanes:
        scatter.operation.erase()
    tail = scf.ForOp(stop, cx.hi, e.c(1), list(loop.results))
    with ir.InsertionPoint(tail.body):
        anchor = scf.YieldOp(list(tail.inner_iter_args))
    (scatter,) = split_scatters.lane_scatters(cx, body, anchor, tail.induction_variable)
    with ir.InsertionPoint(anchor), body.owner.location:
        state = list(tail.inner_iter_args)
        cur = lane_step(cx, sink, extent, state[n:], scatter_keys(scatter)[0], stored_value(scatter), 0)
        scf.YieldOp(state[:n] + cur)
    anchor.operation.erase()
    scatter.operation.erase()
    final = list(tail.results)
    flush(cx, sink, extent, *final[n:])
    return final[:n]


def _inside(cx: Lowering, key: ir.Value, extent: int) -> ir.Value:
    """i1: 0 <= key < extent (an i64 key)."""
    e = cx.e
    return e.op("arith.andi", e.cmpi(_SGE, key, e.c(0, e.i64)), e.cmpi(_SLT, key, e.c(extent, e.i64)))


def lane_step(cx: Lowering, sink: str, extent: int, cur: list[ir.Value], k: ir.Value, x: ir.Value,
              j: int) -> list[ir.Value]:
    """One lane into the run (key, highs, lows), into pair j: a new key flushes the run first; a key outside the
    sink (not -1) is reported; a term the pair may not take, and a non-zero second error, spill."""
    e = cx.e
    key, highs, lows = cur
    vec = highs.type
    differs = e.cmpi(_NE, k, key)
    branch = scf.IfOp(differs, [vec, vec], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        flush(cx, sink, extent, key, highs, lows)
        scf.YieldOp([e.splat(0.0, vec), e.splat(0.0, vec)])
    with ir.InsertionPoint(branch.else_block):
        scf.YieldOp([highs, lows])
    highs, lows = branch.results
    inside = _inside(cx, k, extent)
    scatters.report_bad_key(cx, sink, k, e.op("arith.andi", e.op("arith.xori", inside, e.c(1, e.i1)),
                                           e.cmpi(_NE, k, e.c(-1, e.i64))))
    s1, s2, rare, late = scatters.pair_step(cx, vector.extract(highs, [], [j]), vector.extract(lows, [], [j]),
                                            e.widen(x, e.f64))
    spill = scf.IfOp(e.op("arith.andi", rare, inside), [], has_else=False)
    with ir.InsertionPoint(spill.then_block):
        scatters.spill(cx, sink, e.to_index(k), late)
        scf.YieldOp([])
    return [k, vector.insert(s1, highs, [], [j]), vector.insert(s2, lows, [], [j])]


def flush(cx: Lowering, sink: str, extent: int, key: ir.Value, highs: ir.Value, lows: ir.Value) -> None:
    """A finished run into its slot: every high and low by exact_add (nothing for a key of -1 or outside: those
    were reported lane by lane). The pairs are parked in a small buffer and added in a loop (one copy of
    exact_add's code)."""
    e = cx.e
    W = ir.VectorType(highs.type).shape[0]
    branch = scf.IfOp(_inside(cx, key, extent), [], has_else=False)
    with ir.InsertionPoint(branch.then_block):
        parked = cx.temp(2 * W, e.f64, tag="run-pairs")
        e.vstore(highs, parked, e.c(0))
        e.vstore(lows, parked, e.c(W))
        at = e.to_index(key)
        each = scf.ForOp(e.c(0), e.c(2 * W), e.c(1), [])
        with ir.InsertionPoint(each.body):
            scatters.exact_add(cx, sink, at, e.load(parked, each.induction_variable))
            scf.YieldOp([])
        scf.YieldOp([])
