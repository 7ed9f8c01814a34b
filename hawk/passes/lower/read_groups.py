"""Host flat loops that only read planes into sums and means: whole groups of lanes, each with prefetch hints for
the lanes planes.AHEAD on, then the chunk's last lanes one by one (chunk_loops.flat_driver runs those).

Such a loop is a stream of loads and adds; LLVM vectorizes it, and once its planes no longer fit the caches the
hardware prefetcher alone left it waiting on memory, behind the ordered sum (which hints its blocks:
docs/ordered.md, "Prefetch"). The group's body is an inner loop with a constant trip count, a copy of the
kernel body, so that LLVM vectorizes it with no remainder or runtime checks.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import scf

from hawk.ir.access import reduce_kind
from hawk.ir.dialect import is_hawk
from hawk.passes.lower import planes
from hawk.passes.lower.context import Lowering, lower_copy
from hawk.passes.scalarize import LANES

READ_GROUP = 2048  # bytes of the narrowest plane per group of a reading loop (`_groups`): 256 float64 lanes


def _wanted(cx: Lowering, body: ir.Block) -> bool:
    """Whether the flat loop only reads planes at its own lane into sums and means over every lane (masked ones
    too): a stream of loads and adds, which LLVM vectorizes and the hardware prefetcher alone left waiting on
    memory (host). Maxima and minima keep the plain loop: in the grouped one LLVM unrolled their vector body
    twice and turned its NaN count's masked adds into blends and adds (test_vectorise), 10% slower at 1e5 lanes;
    folds keep their order's plain loop."""
    if cx.target != "host" or cx.runs or not planes.own_lane_planes(cx, body):
        return False
    if any(r.kept for r in cx.lay.reductions):
        return False
    other = []

    def visit(op):
        o = op.operation
        if is_hawk(o) and not (is_hawk(o, "load") or is_hawk(o, "cell") or is_hawk(o, "param")
                               or (is_hawk(o, "reduce") and reduce_kind(o) in ("sum", "mean"))):
            other.append(o)
        return ir.WalkResult.ADVANCE

    for op in body.operations:
        op.operation.walk(visit)
    return not other


def _groups(cx: Lowering, body: ir.Block, chunk0: list[ir.Value]) -> tuple[ir.Value, list[ir.Value]]:
    """The chunk's whole groups of lanes (READ_GROUP bytes of its narrowest plane), each group the prefetch hints
    for the lanes planes.AHEAD past it (one a line of each plane), then an inner loop of a copy of the body with a
    trip count LLVM sees as a constant, so that it vectorizes with no remainder or runtime checks (bounded by
    `g + G`, a 1e5-lane float64 max took 13 us in those against the plain loop's 7). Returns (the first lane
    after the groups, the accumulators after them). Measured against the plain loop (interleaved processes,
    float64): 1e7 lanes 0.73 to 0.86 of its time (sum, mean, masked sum), float32 0.86 to 0.89; 1e6 0.93 to 0.95;
    1e5 0.78 to 0.98 (docs/ordered.md, "Prefetch")."""
    e = cx.e
    G = READ_GROUP // 64 * min(per_line for _, per_line in planes.own_lane_planes(cx, body))
    span = e.op("arith.subi", cx.hi, cx.lo)
    stop = e.op("arith.subi", cx.hi, e.op("arith.remui", span, e.c(G)))
    groups = scf.ForOp(cx.lo, stop, e.c(G), chunk0)
    with ir.InsertionPoint(groups.body):
        g = groups.induction_variable
        with body.owner.location:
            planes.prefetch_ahead(cx, body, g, G, raw=True)
        inner = scf.ForOp(e.c(0), e.c(G), e.c(1), list(groups.inner_iter_args))
        inner.operation.attributes[LANES] = ir.UnitAttr.get()  # (scalarize-payloads splits its payload ops)
        with ir.InsertionPoint(inner.body):
            anchor = scf.YieldOp(list(inner.inner_iter_args))
        with ir.InsertionPoint(anchor):
            lane = e.add_i(g, inner.induction_variable)
        lower_copy(cx, body, anchor, lane, inner.inner_iter_args)
        scf.YieldOp(list(inner.results))
    return stop, list(groups.results)


def first(cx: Lowering, body: ir.Block, chunk0: list[ir.Value]) -> tuple[ir.Value, list[ir.Value]]:
    """(the first lane the flat loop runs, its accumulators at that lane): after the whole groups where the loop
    only reads into sums and means, else the chunk's first lane and `chunk0`."""
    return _groups(cx, body, chunk0) if _wanted(cx, body) else (cx.lo, chunk0)
