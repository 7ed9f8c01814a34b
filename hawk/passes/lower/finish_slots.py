"""The rounding of an ordered slot's pair, and the finish's fast path for ordered sinks and kept cells, eight slots
at a time (host finish).

finish.finish_exact rounds each slot of an ordered sink or kept cell from a few float64 values: the sink's prior
content, a parked pair, and each chunk's (high, low) pair, added by checked TwoSums (scatters.pair_add) into one
pair that round_pair rounds. Slot by slot, that is a chain of dependent TwoSums behind a branch: about 40
cycles a slot with one chunk, more with two (a 1000-column ordered sum's finish took 4 us of its 22 at 1e5 lanes,
11 us with two chunks). Here eight consecutive slots go side by side in float64 vectors through the same steps;
when every step of the eight was exact (and, for float32, every rounding sure) their values are stored at once,
else the eight take the slot-by-slot path, which keeps every other case (spills, ties, specials) as it was.
"""

from __future__ import annotations

from collections.abc import Callable

from mlir import ir
from mlir.dialects import scf

from hawk.passes.host_emit import like
from hawk.passes.lower import scatters
from hawk.passes.lower.context import Lowering

WIDTH = 8
_OEQ, _NE = 1, 1  # arith.cmpf "oeq", arith.cmpi "ne"


def round_pair(cx: Lowering, hi: ir.Value, lo: ir.Value, ok: ir.Value) -> tuple[ir.Value, ir.Value]:
    """The exact sum hi + lo (a float64 pair, or vectors of them side by side) rounded once to the kernel's type,
    and whether that rounding is sure (else the finish takes the exact path). float64: fl(hi + lo), always.
    float32: (H, L) = TwoSum(hi, lo) puts L within half a float64 ulp of H; the float32 nearest H is then the
    float32 nearest H + L unless H is exactly halfway between two float32 values (its 29 bits past float32's
    precision are 1 then zeros) and L is not zero, where L breaks the tie: those go to the exact path. (A value
    in float32's subnormal range is a sum of multiples of 2**-149, exact in float64, so its L is zero.)"""
    e = cx.e
    if isinstance(e.f, ir.F64Type):
        return e.add(hi, lo), ok
    h, low = e.two_sum(hi, lo)
    bits = like(h.type, e.i64)
    tail = e.op("arith.andi", e.op("arith.bitcast", h, t=bits), e.ci((1 << 29) - 1, bits))
    sure = e.op("arith.ori", e.cmpf(_OEQ, low, e.cf(0.0, low.type)), e.cmpi(_NE, tail, e.ci(1 << 28, bits)))
    return e.op("arith.truncf", h, t=like(h.type, e.f)), e.op("arith.andi", ok, sure)


def _halves(e, buf: ir.Value, at: ir.Value) -> tuple[ir.Value, ir.Value]:
    """WIDTH interleaved (high, low) pairs of `buf` from index `at`: the highs and the lows."""
    v = e.vload(buf, at, 2 * WIDTH, e.f64)
    return e.shuffle(v, v, list(range(0, 2 * WIDTH, 2))), e.shuffle(v, v, list(range(1, 2 * WIDTH, 2)))


def groups(cx: Lowering, out: ir.Value, first: ir.Value, last: ir.Value, sink: bool, parked, pairs, copies,
           slots: ir.Value, quiet: ir.Value, one_slot: Callable[[ir.Value], None]) -> ir.Value:
    """Slots [first, first + WIDTH * k) of `out` (its index j = slot - first) eight at a time; returns where
    they stop (the caller runs the rest slot by slot). `sink`: the slot's prior content is a term; `parked`:
    the buffer of parked pairs (a slot takes the fast path only with one) or None; `pairs`: the chunks' pairs
    (`copies` of `slots` interleaved pairs: a copy's stride) or None; `quiet`: no term went to the accumulators (without
    parked pairs). `one_slot(i)` emits the slot-by-slot path for slot i."""
    e = cx.e
    f64v = ir.VectorType.get([WIDTH], e.f64)
    count = e.op("arith.subi", last, first)
    end = e.add_i(first, e.mul_i(e.op("arith.divui", count, e.c(WIDTH)), e.c(WIDTH)))
    loop = scf.ForOp(first, end, e.c(WIDTH), [])
    with ir.InsertionPoint(loop.body):
        g = loop.induction_variable
        j = e.op("arith.subi", g, first)
        ok = e.bcast(e.c(1, e.i1), ir.VectorType.get([WIDTH], e.i1))
        hi, lo = e.splat(0.0, f64v), e.splat(0.0, f64v)
        if parked is not None:
            hi, lo = _halves(e, parked, e.mul_i(g, e.c(2)))
            bits = ir.VectorType.get([WIDTH], e.i64)
            some = e.op("arith.ori", e.op("arith.bitcast", hi, t=bits), e.op("arith.bitcast", lo, t=bits))
            ok = e.cmpi(_NE, some, e.ci(0, bits))
        if sink:
            x = e.vload(out, j, WIDTH, e.f)
            hi, lo, ok = scatters.pair_add(cx, hi, lo, ok, e.widen(x, e.f64))
        if pairs is not None:
            each = scf.ForOp(e.c(0), copies, e.c(1), [hi, lo, ok])
            with ir.InsertionPoint(each.body):
                h, low, fine = each.inner_iter_args
                ph, pl = _halves(e, pairs, e.mul_i(e.add_i(e.mul_i(each.induction_variable, slots), g), e.c(2)))
                h, low, fine = scatters.pair_add(cx, h, low, fine, ph)
                h, low, fine = scatters.pair_add(cx, h, low, fine, pl)
                scf.YieldOp([h, low, fine])
            hi, lo, ok = each.results
        value, ok = round_pair(cx, hi, lo, ok)
        every = e.all_of(ok)
        if parked is None:
            every = e.op("arith.andi", every, quiet)
        branch = scf.IfOp(every, [], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            e.vstore(value, out, j)
            if parked is not None:  # (zeroed again for the next launch)
                e.vstore(e.splat(0.0, ir.VectorType.get([2 * WIDTH], e.f64)), parked, e.mul_i(g, e.c(2)))
            scf.YieldOp([])
        with ir.InsertionPoint(branch.else_block):
            each = scf.ForOp(g, e.add_i(g, e.c(WIDTH)), e.c(1), [])
            with ir.InsertionPoint(each.body):
                one_slot(each.induction_variable)
                scf.YieldOp([])
            scf.YieldOp([])
        scf.YieldOp([])
    return end
