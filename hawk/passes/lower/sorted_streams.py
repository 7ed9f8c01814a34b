"""Plain and compensated scatter-adds keyed by a Sorted[Index] plane whose runs are short, on the host: the chunk's
lanes in STREAMS interleaved streams, each lane's term added straight into its slot.

Lane by lane (sorted_runs.sorted_step) each add waits on the last one, a new key is a branch the predictor misses,
and the step selects between "the run goes on" and "a new run" inside the adds' chain: at about ten lanes a run,
1e7 lanes into 1e6 slots took 2 ns a lane on one thread, where a naive compiled `out[k[i]] += x[i]` took 1.4.
Summing a run in registers pays only when runs are long (sorted_groups). Here the chunk's lanes split into STREAMS
equal ranges, walked side by side:

    for i in [0, q):                           q = the chunk's lanes // STREAMS
        for each stream s:                     lane = start + s * q + i
            the lane's term into its slot      the scatter's rule for keys in any order (scatters.lower_scatter:
                                               one add into the chunk's copy, or a Neumaier step into its pair)
    the chunk's last lanes one by one          (chunk_loops.flat_driver, from the run state the streams left alone)

No branch depends on the keys, and the streams' adds are four independent chains. The order of each slot's adds
is the streams' (a fixed function of the chunk's lanes, hence the same at every thread count); neither policy
fixes an order. Keys in any order land in their slots (a bound launch reads its keys again at every launch, so
they may no longer be sorted). Bad keys: the streams only note that one was met (Lowering.bad_keys); the chunk's
keys are then counted again lane by lane (_recount), so the count and the first bad key are the lanes' own.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import scf

from hawk.ir.access import scatter_keys
from hawk.passes.lower import scatters, split_scatters
from hawk.passes.lower.context import Lowering, rewrite_ops

STREAMS = 4  # lanes side by side: four chains of adds (an add into a slot waits on the last one into it)
MIN_LANES = 64  # a stream's lanes at least, else the chunk runs lane by lane
_UGE, _NE = 9, 1  # arith.cmpi "uge", "ne"


def streams(cx: Lowering, body: ir.Block, start: ir.Value, state: list[ir.Value], skip: ir.Value
            ) -> tuple[ir.Value, list[ir.Value]]:
    """(the first lane after the streams, the chunk state there) for the lanes [start, hi) of a chunk whose
    scatter sorted_groups.wanted took, `state` the chunk state at `start`. The streams run unless `skip` (an
    i1: the chunk ran its runs in groups) or the lanes are too few."""
    e = cx.e
    rem = e.op("arith.subi", cx.hi, start)
    enough = e.cmpi(_UGE, rem, e.c(STREAMS * MIN_LANES))
    q = e.select(e.op("arith.andi", enough, e.op("arith.xori", skip, e.c(1, e.i1))),
                 e.op("arith.divui", rem, e.c(STREAMS)), e.c(0))
    stop = e.add_i(start, e.mul_i(q, e.c(STREAMS)))
    bad = cx.local_buffer(1, e.i64)  # (the streams' bad keys: counted again, in lane order, after them)
    at0 = e.c(0)
    e.store(e.c(0, e.i64), bad, at0)
    firsts = [e.add_i(start, e.mul_i(q, e.c(s))) if s else start for s in range(STREAMS)]
    loop = scf.ForOp(e.c(0), q, e.c(1), [])
    with ir.InsertionPoint(loop.body):
        anchor = scf.YieldOp([])
    cx.bad_keys = (bad, at0)
    try:
        for s in range(STREAMS):
            with ir.InsertionPoint(anchor), body.owner.location:
                lane = e.add_i(firsts[s], loop.induction_variable)
            (op,) = split_scatters.lane_scatters(cx, body, anchor, lane)
            del op.attributes["hawk.run"]  # (lowered as a scatter by any keys: the lane's term into its slot)
            with ir.InsertionPoint(op), body.owner.location:
                rewrite_ops(cx, [op])
    finally:
        cx.bad_keys = None
    with body.owner.location:
        _recount(cx, body, bad, start, stop)
    return stop, state


def _recount(cx: Lowering, body: ir.Block, bad: ir.Value, start: ir.Value, stop: ir.Value) -> None:
    """When some stream met a bad key: the keys of lanes [start, stop) again, one by one, each bad one
    reported as the lane-by-lane form reports it (so the count and the first bad key are the lanes' own)."""
    e = cx.e
    sink = cx.runs[0].sink
    seen = scf.IfOp(e.cmpi(_NE, e.load(bad, e.c(0)), e.c(0, e.i64)), [], has_else=False)
    with ir.InsertionPoint(seen.then_block):
        loop = scf.ForOp(start, stop, e.c(1), [])
        with ir.InsertionPoint(loop.body):
            anchor = scf.YieldOp([])
        (op,) = split_scatters.lane_scatters(cx, body, anchor, loop.induction_variable)
        with ir.InsertionPoint(anchor):
            keys = scatter_keys(op)
            inside, minus, _, _ = scatters.key_index(cx, cx.lay.sig.get(sink), keys)  # (as lower_scatter: -1 adds
            bad = e.op("arith.xori", e.op("arith.ori", inside, minus), e.c(1, e.i1))  # nothing, unreported)
            scatters.report_bad_key(cx, sink, keys[0], bad)
        op.operation.erase()
        scf.YieldOp([])
