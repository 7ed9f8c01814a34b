"""Reductions that keep some lane axes: a total per kept slot, added into the reduced output (or this chunk's
copy of it) by kept index, or in registers per slot under the nested driver (chunk_loops.nested_driver)."""

from __future__ import annotations

from mlir import ir
from mlir.dialects import scf

from hawk.abi.layout import sum_policy
from hawk.ir.access import reduce_mask, reduce_value
from hawk.passes.host_emit import size
from hawk.passes.lower import planes, scatters
from hawk.passes.lower.context import Lowering


def reduce_nested(cx: Lowering, op, r) -> None:
    """A kept-axis total of this slot's lanes, in registers (fast sums may be reassociated)."""
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
            new = e.extremum(r.kind, s[k], x)
            s[k] = new if mask is None else e.select(mask, new, s[k])
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
    if r.cell in cx.lay.private:
        e = cx.e
        start = scatters.copy_start(cx, r.cell)
        return cx.bufs[(r.cell, "priv")], e.add_i(start, e.mul_i(e.c(size(r.payload)), n), idx)
    return cx.bufs[(r.cell, "count")], idx


def reduce_kept_branchless(cx: Lowering, op, r, idx, n) -> None:
    """out[slot] op= v with the mask folded in by selects: a straight-line update LLVM can vectorize."""
    e = cx.e
    out, base = kept_out(cx, r)
    mask = reduce_mask(op)
    for c, x in planes.components(cx, reduce_value(op), r.payload):
        at = e.add_i(e.mul_i(c, n), idx)
        at = at if base is None else e.add_i(at, base)
        old = e.load(out, at)
        if r.kind in ("max", "min"):
            new = e.extremum(r.kind, old, x)
            new = new if mask is None else e.select(mask, new, old)
        else:
            new = e.add(old, x if mask is None else e.select(mask, x, e.cf(0.0)))
        e.store(new, out, at)
    if r.kind == "mean":
        cnt, at = count_at(cx, r, idx, n)
        one = e.cf(1.0) if mask is None else e.select(mask, e.cf(1.0), e.cf(0.0))
        e.store(e.add(e.load(cnt, at), one), cnt, at)


def reduce_kept(cx: Lowering, op, r) -> None:
    e = cx.e
    idx, n = planes.kept_index(cx, r.kept)
    v = reduce_value(op)
    if cx.kept_slot is not None and (r.kind in ("max", "min") or r.policy == "auto"):
        reduce_kept_branchless(cx, op, r, idx, n)
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
            e.store(e.add(e.load(cnt, at), e.cf(1.0)), cnt, at)
        if where is not None:
            scf.YieldOp([])


class _Here:
    """A no-op context manager: stay at the current insertion point."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
