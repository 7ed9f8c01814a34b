"""Running a full block's lanes again (host ordered chains): a block whose chains lost a bit is retried, or
deposited term by term, from its term buffer, or, when the body writes nothing, by running its lanes again
(ordered_chains.retry_block). What a rerun does to the loop state is dropped, so other reductions count each lane
once.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import scf

from hawk.passes.lower.context import Lowering, clone_body, rewrite_ops


def rerun_group(cx: Lowering, body: ir.Block, state: list[ir.Value], g: ir.Value, anchor) -> None:
    """Group `g` of the current block run again before `anchor`: pair_w copies of the body, lane j of the group
    in copy j, each from the loop state `state` (discarded after); the group's terms are left in cx.pending."""
    e = cx.e
    cx.pending = {}
    for jj in range(cx.pair_w):
        with ir.InsertionPoint(anchor), body.owner.location:
            cx.lane = e.add_i(cx.block_start, e.mul_i(g, e.c(cx.pair_w)), e.c(jj))
        cx.accs, cx.j = list(state), jj
        rewrite_ops(cx, clone_body(cx, body, anchor))


def can_recompute(cx: Lowering, body: ir.Block) -> bool:
    """Whether a full block's terms may be recomputed by running the body again rather than kept in a term
    buffer: the body writes nothing (no store, no scatter) and every other reduction keeps its state in the
    loop's values (which a rerun discards), none in memory (kept totals, folds, wide states, deposits)."""
    if any(r.kept or r.kind == "fold" for r in cx.lay.reductions) or cx.runs:
        return False
    if any(a.wide or (a.policy == "ordered" and not a.pairs) for a in cx.full):
        return False
    return writes_nothing(body)


def writes_nothing(body: ir.Block) -> bool:
    """Whether running the body's lanes again changes nothing: no store, no scatter, no scan (a scan's running
    value is loop state a rerun would start from the block's end)."""
    writes = []

    def visit(op):
        if op.name in ("hawk.store", "hawk.scatter", "hawk.scan_totals", "hawk.scan_apply"):
            writes.append(op)
        return ir.WalkResult.ADVANCE

    for op in body.operations:
        op.operation.walk(visit)
    return not writes


def redo_block(cx: Lowering, body: ir.Block, state: list[ir.Value]) -> None:
    """A block's lanes in groups one by one, each lane's ordered terms deposited into the chunk's accumulators
    (reduce_full with no chain); what the rerun does to the loop state is dropped, so other reductions count
    each lane once."""
    e = cx.e
    each = scf.ForOp(e.c(0), e.mul_i(cx.block_groups, e.c(cx.pair_w)), e.c(1), [])
    with ir.InsertionPoint(each.body):
        anchor = scf.YieldOp([])
    with ir.InsertionPoint(anchor), body.owner.location:
        cx.lane = e.add_i(cx.block_start, each.induction_variable)
    cx.accs, cx.j = list(state), each.induction_variable
    rewrite_ops(cx, clone_body(cx, body, anchor))
