"""Scatter-adds with computed keys (`hawk.scatter(counts)[m.index(t * 256.0, 256)] += 1.0`) in two passes per
block of lanes: the first computes every lane's keys and values into small buffers with no store into a sink,
so LLVM vectorizes it; the second adds them into the sink lane by lane, in lane order (the same adds, in the
same order, as one pass). Fused, the sink's loads and stores sit between the key computations and the loop
stays scalar. Host only (a chunk-loop form of chunk_loops.flat_driver), for kernels whose only effects are
plain adds of scalars into sinks."""

from __future__ import annotations

from mlir import ir
from mlir.dialects import scf

from hawk.ir.access import is_plane_value, scatter_keys, scatter_mode, sink_name, stored_value
from hawk.passes.analysis import key_source, payload_of
from hawk.passes.lower.context import Lowering, clone_body, rewrite_ops

SPLIT_BLOCK = 256  # lanes per block: the key and value buffers stay in L1


def split_scatters(cx: Lowering, body: ir.Block) -> list | None:
    """The body's scatters when the two-pass form applies (else None): every effect a top-level plain add of
    a scalar into a sink no lane stores into, at least one with a key computed in the kernel (a key read
    straight from an Index plane gains nothing), and no reduction."""
    from hawk.ir.dialect import is_hawk

    if not cx.exact_pairs or cx.lay.reductions or len(cx.axes) != 1:
        return None
    scatters, ok = [], [True]

    def visit(op):
        if is_hawk(op, "reduce") or is_hawk(op, "store") or op.name.startswith("scf.") or \
                (is_hawk(op) and op.name[5:] not in ("load", "param", "lane", "at", "scatter", "cell")):
            ok[0] = False
        return ir.WalkResult.ADVANCE

    for op in body.operations:
        op.operation.walk(visit)
        if op.operation.name == "hawk.scatter":
            scatters.append(op)
    if not ok[0] or not scatters:
        return None
    computed = False
    for op in scatters:
        sink = sink_name(op)
        if scatter_mode(op) != "add" or cx.lay.sink_policy.get(sink) != "plain" or \
                sink in cx.lay.stored or payload_of(stored_value(op).type):
            return None
        computed = computed or any(key_source(k) is None for k in scatter_keys(op))
    return scatters if computed else None


def split_driver(cx: Lowering, body: ir.Block, chunk0: list[ir.Value]) -> list[ir.Value]:
    """for block: for lane: keys and values into buffers; for lane: the scatter-adds from the buffers."""
    e = cx.e
    B = SPLIT_BLOCK
    outer = scf.ForOp(cx.lo, cx.hi, e.c(B), chunk0)
    with ir.InsertionPoint(outer.body):
        start = outer.induction_variable
        end = e.op("arith.minui", e.add_i(start, e.c(B)), cx.hi)
        first = scf.ForOp(start, end, e.c(1), [])
        with ir.InsertionPoint(first.body):
            anchor = scf.YieldOp([])
        copies = clone_body(cx, body, anchor)
        # each scatter's operands: constants are made again in the second pass, the rest go through buffers
        parked = []
        with ir.InsertionPoint(anchor), body.owner.location:
            at = e.op("arith.subi", first.induction_variable, start)
            for n, op in enumerate(c for c in copies if c.operation.name == "hawk.scatter"):
                slots = []
                for k, v in enumerate(op.operands):
                    if is_plane_value(v):  # the sink itself: kept as it is
                        slots.append(("keep", v))
                    elif not isinstance(v.owner, ir.Block) and v.owner.name == "arith.constant":
                        slots.append(("const", v.owner))
                    else:
                        buf = cx.temp(B, v.type, tag=f"split{n}.{k}")
                        e.store(v, buf, at)
                        slots.append(("buf", buf))
                parked.append((op, slots))
        cx.lane, cx.accs, cx.j = first.induction_variable, [], None
        rewrite_ops(cx, [c for c in copies if c.operation.name != "hawk.scatter"])
        second = scf.ForOp(start, end, e.c(1), [])
        with ir.InsertionPoint(second.body), body.owner.location:
            at = e.op("arith.subi", second.induction_variable, start)
            again = []
            for op, slots in parked:
                vals = [slot if how == "keep" else slot.operation.clone().results[0] if how == "const"
                        else e.load(slot, at) for how, slot in slots]
                new = op.operation.clone()
                for k, v in enumerate(vals):
                    new.operands[k] = v
                again.append(new)
                op.operation.erase()
            cx.lane = second.induction_variable
            rewrite_ops(cx, again)
            scf.YieldOp([])
        anchor.operation.erase()
        with ir.InsertionPoint(first.body):
            scf.YieldOp([])
        scf.YieldOp(list(outer.inner_iter_args))
    return list(outer.results)
