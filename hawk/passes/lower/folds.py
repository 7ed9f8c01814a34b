"""Folds: `hawk.reduce` with an operator that is not a sum, max or min (a `@hawk.func`, m.mul, m.land, m.lor).

The combine order is fixed, whatever the threads, chunks or target (docs/semantics.md, "Custom reductions"):

  over every lane   lanes go in blocks of ORDERED_BLOCK (block k: lanes [k*B, k*B + B) of the whole run); each
                    block's unmasked lanes are folded left to right, in lane order, into the block's partial;
                    the finish folds the partials of the non-empty blocks left to right, in block order.
  keeping axes      each kept slot's unmasked lanes are folded left to right, in lane order (the runtime gives
                    a slot's lanes to one chunk: Layout.parallel_span).

State lives in the stage's "fold" buffer (one per fold, zeroed at every launch): entries of 1 + n floats, a
flag (1.0 once the entry holds a value) then the n components; one entry per block of lanes (over every lane)
or per kept slot. A chunk only writes the entries of its own blocks (chunks start on block boundaries) or
slots, so no two threads ever write one entry. The first lane of an entry is stored as it is, every later one
combined as op(entry, lane): an identity is never folded in; it is what an empty slice gives. A fold without
one refuses an empty slice at run time: the finish counts the empty slices in the #err buffer (count, first
empty slot, the fold buffer's index) and the runtime raises an InputError naming the kernel and the output.

The operator's code is a private func of the module (attribute `hawk.combiner`, made by hawk/frontend/
reduce.py); it is copied in wherever two values are combined, in the lane code (host chunks and GPU threads
alike) and in the finish, so both run the same ops on the same values.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import scf

from hawk.abi.layout import ORDERED_BLOCK
from hawk.ir.access import combiner_name, combiners, fold_identity, is_combiner, reduce_mask, reduce_value
from hawk.ir.dialect import is_hawk
from hawk.passes.host_emit import _EQ, size
from hawk.passes.lower import planes
from hawk.passes.lower.context import Lowering, clone_ops

_UNE = 13  # arith.cmpf "une"


def collect_folds(cx: Lowering, kfunc) -> None:
    """Each fold's combiner func and identity, by the cell it lands in (before the kernel body is lowered)."""
    cx.folds: dict[str, tuple[object, float | None]] = {}
    by_name = combiners(cx.module)
    ops = []

    def visit(op):
        if is_hawk(op, "reduce"):
            ops.append(op)
        return ir.WalkResult.ADVANCE

    kfunc.operation.walk(visit)
    for op, r in zip(ops, cx.lay.reductions, strict=True):
        if r.kind != "fold":
            continue
        cx.folds[r.cell] = (by_name[combiner_name(op)], fold_identity(op))


def drop_combiners(cx: Lowering) -> None:
    """The combiners' code has been copied where it is used: their funcs go."""
    for op in list(cx.module.body.operations):
        if is_combiner(op):
            op.operation.erase()


def fold_combine(cx: Lowering, cell: str, a: ir.Value, b: ir.Value) -> ir.Value:
    """op(a, b) for the fold into `cell`."""
    return call_combiner(cx.folds[cell][0], a, b)


def call_combiner(fn, a: ir.Value, b: ir.Value) -> ir.Value:
    """fn(a, b) for a combiner func: a copy of its ops here, its arguments replaced by a and b."""
    block = fn.regions[0].blocks[0]
    mapping = {block.arguments[0]: a, block.arguments[1]: b}
    ops = list(block.operations)
    ret = next(op for op in ops if op.operation.name == "func.return")
    clone_ops([op for op in ops if op.operation.name != "func.return"], ir.InsertionPoint.current, mapping)
    return mapping.get(ret.operands[0], ret.operands[0])


def fold_into(cx: Lowering, cell: str, seen: ir.Value, acc: ir.Value, x: ir.Value) -> ir.Value:
    """x when nothing was folded yet (`seen` false), else op(acc, x). The operator's code is pure (a func
    only computes on its arguments), so it runs either way and a select picks (spirv takes no scf.if on
    vector values)."""
    return cx.e.select(seen, fold_combine(cx, cell, acc, x), x)


def entry_value(cx: Lowering, buf: ir.Value, base: ir.Value, shape) -> tuple[ir.Value, ir.Value]:
    """(flag set, value) of the fold buffer's entry at `base`."""
    e = cx.e
    seen = e.cmpf(_UNE, e.load(buf, base), e.cf(0.0))
    vals = [e.load(buf, e.add_i(base, e.c(1 + c))) for c in range(size(shape))]
    return seen, e.pack(vals, shape)


def reduce_fold(cx: Lowering, op, r) -> None:
    """This lane's value into its entry: its block's (over every lane) or its kept slot's."""
    e = cx.e
    w = size(r.payload) + 1
    idx = planes.kept_index(cx, r.kept)[0] if r.kept else e.op("arith.divui", cx.lane, e.c(ORDERED_BLOCK))
    base = e.mul_i(idx, e.c(w))
    buf = cx.bufs[(r.cell, "fold")]
    where = scf.IfOp(reduce_mask(op), [], has_else=False) if reduce_mask(op) is not None else None
    ip = ir.InsertionPoint(where.then_block) if where is not None else ir.InsertionPoint(op)
    with ip:
        seen, old = entry_value(cx, buf, base, r.payload)
        new = fold_into(cx, r.cell, seen, old, reduce_value(op))
        for c, v in enumerate(e.elems(new, r.payload)):
            e.store(v, buf, e.add_i(base, e.c(1 + c)))
        e.store(e.cf(1.0), buf, base)
        if where is not None:
            scf.YieldOp([])


def finish_folds(cx: Lowering) -> None:
    for r in cx.lay.reductions:
        if r.kind == "fold":
            (finish_fold_kept if r.kept else finish_fold_whole)(cx, r)


def finish_fold_whole(cx: Lowering, r) -> None:
    """The blocks' partials folded left to right in block order (empty blocks skipped) into the cell."""
    e = cx.e
    w = size(r.payload) + 1
    buf = cx.bufs[(r.cell, "fold")]
    entries = e.op("arith.divui", e.dim(buf), e.c(w))
    zero = e.pack([e.cf(0.0)] * size(r.payload), r.payload)
    loop = scf.ForOp(e.c(0), entries, e.c(1), [zero, e.c(0, e.i1)])
    with ir.InsertionPoint(loop.body):
        acc, seen = loop.inner_iter_args
        has, val = entry_value(cx, buf, e.mul_i(loop.induction_variable, e.c(w)), r.payload)
        take = e.select(has, fold_into(cx, r.cell, seen, acc, val), acc)
        scf.YieldOp([take, e.op("arith.ori", seen, has)])
    acc, seen = loop.results
    out = empty_value(cx, r, seen, acc, e.c(0))
    cell = cx.bufs[(r.cell, "cell")]
    for c, v in enumerate(e.elems(out, r.payload)):
        e.store(v, cell, e.c(c))


def finish_fold_kept(cx: Lowering, r) -> None:
    """Each kept slot's value from its entry into the cell (component-major, as every kept cell)."""
    e = cx.e
    w = size(r.payload) + 1
    buf = cx.bufs[(r.cell, "fold")]
    slots = e.op("arith.divui", e.dim(buf), e.c(w))
    cell = cx.bufs[(r.cell, "cell")]
    loop = scf.ForOp(e.c(0), slots, e.c(1), [])
    with ir.InsertionPoint(loop.body):
        s = loop.induction_variable
        has, val = entry_value(cx, buf, e.mul_i(s, e.c(w)), r.payload)
        out = empty_value(cx, r, has, val, s)
        for c, v in enumerate(e.elems(out, r.payload)):
            e.store(v, cell, e.add_i(e.mul_i(e.c(c), slots), s))
        scf.YieldOp([])


def empty_value(cx: Lowering, r, seen: ir.Value, value: ir.Value, slot: ir.Value) -> ir.Value:
    """The value of a slice: its fold, or for an empty one the identity (or, without one, a refusal recorded
    in #err: the count of empty slices, the first one's slot and the fold buffer's index)."""
    e = cx.e
    ident = cx.folds[r.cell][1]
    if ident is not None:
        fill = e.pack([e.cf(ident)] * size(r.payload), r.payload)
        return e.select(seen, value, fill)
    report = scf.IfOp(e.op("arith.xori", seen, e.c(1, e.i1)), [], has_else=False)
    with ir.InsertionPoint(report.then_block):
        err = cx.bufs[("#err", "err")]
        first = e.cmpi(_EQ, e.load(err, e.c(0)), e.c(0, e.i64))
        e.store(e.op("arith.addi", e.load(err, e.c(0)), e.c(1, e.i64)), err, e.c(0))
        e.store(e.select(first, e.to_i64(slot), e.load(err, e.c(1))), err, e.c(1))
        at = e.c(cx.lay.buffer_index(r.cell, "fold"), e.i64)
        e.store(e.select(first, at, e.load(err, e.c(2))), err, e.c(2))
        scf.YieldOp([])
    return value
