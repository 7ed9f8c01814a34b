"""The slot-range form of a host stage (hawk.abi.layout.wants_slot_ranges): every chunk runs every lane, and a
scatter applies only where its slot falls in the chunk's own range of the sink.

A stage whose only effects are scatters into sinks (and per-lane outputs it never reads: chunk 0 alone writes
them), and which would otherwise run as one chunk (a sink too large for private copies), carries a `#parts`
buffer: P, the number of ranges the launch splits each sink into (1
unless the host launcher sets it). Chunk c of P applies slots [c * S / P, (c + 1) * S / P) of a sink of S slots
(hawk.abi.layout.slot_range; c taken mod P, so with P = 1 every chunk applies every slot, whatever lanes it
runs), so each slot gets its adds and stores from one chunk, in lane order: the bits of a single chunk under
every policy, whatever P. A bad key is reported by chunk 0 alone (every chunk sees it), so the count and the
first bad key are those of one chunk. The bounds are computed once per function, before its lane loop.

GPU targets run the form in their chunk form with a thread per range (eagle/targets/device.py `plan_grid`):
every thread runs every lane (hawk/passes/lower_gpu.py `read_thread_meta`) and applies its own slots, so a
sink too large for copies no longer runs on one thread, and the bits are the host's. With P = 1 (nvvm and
rocdl when float atomics cover every sink of the stage) threads take their own lanes, as without the form.
"""

from __future__ import annotations

from contextlib import contextmanager

from mlir import ir
from mlir.dialects import scf

from hawk.passes.host_emit import _EQ
from hawk.passes.lower.context import Lowering

_ULT, _UGE = 6, 9  # arith.cmpi "ult", "uge"


def active(cx: Lowering) -> bool:
    """Whether this lowering emits the slot-range guards: the lane function of a slot-range stage (the host's,
    or a GPU's chunk form, where a chunk is a thread)."""
    return ("#parts", "parts") in cx.bufs and cx.chunk is not None


def _part(cx: Lowering) -> tuple[ir.Value, ir.Value]:
    """(this chunk's range: chunk mod P, P) with P read from #parts. With P = 1 (a launcher that does not split
    by slots: every chunk its own lanes) every chunk applies and reports everything, as without the form."""
    def make():
        e = cx.e
        parts = e.to_index(e.load(cx.bufs[("#parts", "parts")], e.c(0)))
        return e.op("arith.remui", cx.chunk, parts), parts

    return cx.at_top("part", make)


def bounds(cx: Lowering, slots: int) -> tuple[ir.Value, ir.Value]:
    """Slots [lo, hi) of a sink of `slots` slots that this chunk applies (index values made once per function,
    before the loop that needs them)."""
    def make():
        e = cx.e
        part, parts = _part(cx)
        n = e.c(slots)
        return (e.op("arith.divui", e.mul_i(part, n), parts),
                e.op("arith.divui", e.mul_i(e.add_i(part, e.c(1)), n), parts))

    return cx.at_top(slots, make)


def mine(cx: Lowering, slots: int, idx: ir.Value) -> ir.Value:
    """i1: slot `idx` (an index; a key of -1 or outside reads as out of range) is this chunk's to apply."""
    e = cx.e
    lo, hi = bounds(cx, slots)
    return e.op("arith.andi", e.cmpi(_UGE, idx, lo), e.cmpi(_ULT, idx, hi))


@contextmanager
def own(cx: Lowering, slots: int, idx: ir.Value):
    """Run the body (which applies a scatter to slot `idx` of a sink of `slots` slots) only in the chunk whose
    range holds the slot; outside the slot-range form, always."""
    if not active(cx):
        yield
        return
    guard = scf.IfOp(mine(cx, slots, idx), [], has_else=False)
    with ir.InsertionPoint(guard.then_block):
        yield
        scf.YieldOp([])


@contextmanager
def first_chunk(cx: Lowering):
    """Run the body (a per-lane output's store) only in chunk 0 of a slot-range stage (every chunk runs every
    lane; the stage never reads its outputs, hawk.abi.layout.wants_slot_ranges); outside the form, always."""
    if not active(cx):
        yield
        return
    e = cx.e
    guard = scf.IfOp(e.cmpi(_EQ, _part(cx)[0], e.c(0)), [], has_else=False)
    with ir.InsertionPoint(guard.then_block):
        yield
        scf.YieldOp([])


def first_only(cx: Lowering, bad: ir.Value) -> ir.Value:
    """`bad` (report a key outside a sink), in the slot-range form only in chunk 0: every chunk runs every lane."""
    if not active(cx):
        return bad
    e = cx.e
    return e.op("arith.andi", bad, e.cmpi(_EQ, _part(cx)[0], e.c(0)))
