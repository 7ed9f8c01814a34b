"""A scan block's lanes in three loops: the lanes near either end of the run with the general body, and the
interior, where reads at the lane's own index plus a constant cannot leave the run.

The runs kernels (eagle/algorithms/_kernels_scan.py) compare each key with its neighbour's,
`k.at(m.max(i - 1, 0))`, and test `i == 0`: per lane a clamp the user wrote, the clamp into [0, lanes - 1]
every `.at` gets (hawk/passes/lower/planes.py), and a compare, none of which can change anything at least
`margin` lanes from both ends. In the interior copy of the body (lanes [margin, lanes - margin)):
  - `lane == c` and the other signed tests of the lane against a constant are decided where the range decides
    them (grid.fold_coordinate_tests);
  - `m.max(i - c, 0)` with c <= margin is `i - c`;
  - a flat `.at` whose index is the lane plus a constant within the margin reads without the clamp, and one
    whose index is `m.min(i + c, n)` (0 <= c <= margin) without its upper half;
  - against the lane count (`last = lane.extent("i") - 1`, hawk.extent): `m.min(i + c, last)` with c <= margin
    is `i + c`, and `i == last` (and the other signed tests of the lane plus a constant against the extent
    plus a constant) are decided where the interior's range decides them (its lanes are below lanes - margin).
Every lane computes the same values as with the general body, so nothing about bits changes; the loops only
lose work. One-axis kernels only (the flat index is then the lane).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import scf

from hawk.ir.access import at_coords, coord_axes, plane_name
from hawk.ir.dialect import is_hawk
from hawk.passes.lower import stream
from hawk.passes.lower.context import Lowering, clone_body, rewrite_ops
from hawk.passes.lower.grid import decided, fold_coordinate_tests
from hawk.passes.lower.planes import plane_read

_MAXSI = "arith.maxsi"


def _const(v: ir.Value) -> int | None:
    owner = v.owner
    if isinstance(owner, ir.Block) or owner.name != "arith.constant" or not isinstance(v.type, ir.IntegerType):
        return None
    return ir.IntegerAttr(owner.attributes["value"]).value


def _offset(v: ir.Value, op: str) -> int | None:
    """c when v is the result of a hawk op named `op` plus (or minus) constants, else None."""
    owner = v.owner
    if isinstance(owner, ir.Block):
        return None
    if is_hawk(owner, op):
        return 0
    if owner.name in ("arith.addi", "arith.subi"):
        base, k = owner.operands
        c, b = _const(k), _offset(base, op)
        if c is None or b is None:
            return None
        return b + c if owner.name == "arith.addi" else b - c
    return None


def lane_offset(v: ir.Value) -> int | None:
    """c when v is the lane plus (or minus) constants, else None."""
    return _offset(v, "lane")


def extent_offset(v: ir.Value) -> int | None:
    """c when v is the run's extent of the (only) lane axis plus (or minus) constants, else None."""
    return _offset(v, "extent")


def _clamped_below(v: ir.Value) -> int | None:
    """c <= 0 when v is `max(lane + c, 0)` (either operand order), else None."""
    owner = v.owner
    if isinstance(owner, ir.Block) or owner.name != _MAXSI:
        return None
    a, b = owner.operands
    for x, z in ((a, b), (b, a)):
        off = lane_offset(x)
        if off is not None and off <= 0 and _const(z) == 0:
            return off
    return None


def _gap(a: ir.Value, b: ir.Value, m: int) -> int | None:
    """The largest `a - b` on interior lanes when `a` is the lane plus c and `b` the extent plus d (lanes equals
    the extent: one lane axis): a lane is at most lanes - m - 1 there, so c - d - m - 1; None otherwise."""
    c, d = lane_offset(a), extent_offset(b)
    return None if c is None or d is None else c - d - m - 1


# signed tests (arith.cmpi predicates slt sle sgt sge eq ne) of a against b: the answer when a < b, when a <= b
_WHEN_BELOW = {2: True, 3: True, 4: False, 5: False, 0: False, 1: True}
_WHEN_AT_MOST = {3: True, 4: False}
_SWAP_SIGNED = {2: 4, 3: 5, 4: 2, 5: 3, 0: 0, 1: 1}


def _fold_the_end(copies: list, m: int) -> None:
    """On interior lanes: `min(lane + c, extent + d)` is the lane side wherever it is at most the end, and a
    signed test between the two is decided wherever the gap (`_gap`) decides it."""
    found = []

    def visit(op):
        if op.name in ("arith.minsi", "arith.cmpi"):
            found.append(op)
        return ir.WalkResult.ADVANCE

    for root in copies:
        root.operation.walk(visit)
    for op in found:
        a, b = op.operands
        if op.name == "arith.minsi":
            for x, z in ((a, b), (b, a)):
                gap = _gap(x, z, m)
                if gap is not None and gap <= 0:
                    op.results[0].replace_all_uses_with(x)
                    break
            continue
        pred = ir.IntegerAttr(op.attributes["predicate"]).value
        if pred not in _WHEN_BELOW:
            continue
        gap = _gap(a, b, m)
        if gap is None:
            gap, pred = _gap(b, a, m), _SWAP_SIGNED[pred]
        if gap is None or gap > 0:
            continue
        known = _WHEN_BELOW[pred] if gap < 0 else _WHEN_AT_MOST.get(pred)
        if known is not None:
            decided(op, known)


def _index_offset(op) -> int | None:
    """The constant offset from the lane of a flat `.at` index (`i + c`, `max(i - c, 0)`, `min(i + c, n)`), else
    None."""
    if coord_axes(op) != ["#"]:
        return None
    v = at_coords(op)[0]
    off = lane_offset(v)
    if off is None and not isinstance(v.owner, ir.Block) and v.owner.name == "arith.minsi":
        off = max((c for x in v.owner.operands if (c := lane_offset(x)) is not None and c >= 0), default=None)
    return off if off is not None else _clamped_below(v)


def margin(cx: Lowering, body: ir.Block) -> int:
    """How far from both ends of the run the interior starts: the largest |offset| of the body's flat reads
    at the lane plus a constant (0: none, or a kernel of several axes, where nothing is split)."""
    if len(cx.axes) != 1:
        return 0
    found = [abs(off) for op in body.operations if is_hawk(op, "at")
             for off in [_index_offset(op)] if off is not None]
    return max(found, default=0)


def three_loops(cx: Lowering, body: ir.Block, start: ir.Value, end: ir.Value, accs: list[ir.Value],
                m: int) -> list[ir.Value]:
    """Lanes [start, end) of one block as [start, a) general, [a, b) interior, [b, end) general, carrying
    `accs` (the lane loop's state, which the rules update) through them: the final state."""
    e = cx.e
    a = e.op("arith.minui", e.op("arith.maxui", start, e.c(m)), end)
    top = e.op("arith.subi", e.op("arith.maxui", cx.L, e.c(m)), e.c(m))
    b = e.op("arith.maxui", a, e.op("arith.minui", end, top))
    axis = cx.axes[0]
    for lo, hi, interior in ((start, a, False), (a, b, True), (b, end, False)):
        loop = scf.ForOp(lo, hi, e.c(1), accs)
        if interior:
            stream.mark(cx, loop)
        with ir.InsertionPoint(loop.body):
            anchor = scf.YieldOp(list(loop.inner_iter_args))
        cx.lane, cx.accs, cx.j = loop.induction_variable, list(loop.inner_iter_args), None
        copies = clone_body(cx, body, anchor)
        direct = []  # (a flat read, whether its index may still be below 0)
        if interior:
            fold_coordinate_tests(copies, {axis: (m, None)})
            _drop_low_clamps(copies, m)
            _fold_the_end(copies, m)
            direct = [(op, low) for op in copies if is_hawk(op, "at")
                      for low in [_unclamped(op, m)] if low is not None]
        skip = {d.operation for d, _ in direct}
        rewrite_ops(cx, [op for op in copies if op.operation not in skip])
        for op, low in direct:  # the index is inside the run (or at most the lane plus c): no clamp above
            with ir.InsertionPoint(op), op.location:
                i = e.to_index(at_coords(op)[0])
                i = e.op("arith.maxsi", i, e.c(0)) if low else i
                v = plane_read(cx, plane_name(op), i, op.results[0].type)
            op.results[0].replace_all_uses_with(v)
            op.operation.erase()
        anchor.operation.erase()
        with ir.InsertionPoint(loop.body):
            scf.YieldOp(cx.accs)
        accs = list(loop.results)
    return accs


def _unclamped(op, m: int) -> bool | None:
    """For a flat read on an interior lane: False when its index is the lane plus c (|c| <= m: inside the
    run), True when it is `min(lane + c, anything)` with 0 <= c <= m (never past the run's end, but maybe
    below 0), None when the read keeps its clamps."""
    if coord_axes(op) != ["#"]:
        return None
    v = at_coords(op)[0]
    off = lane_offset(v)
    if off is not None:
        return False if abs(off) <= m else None
    owner = v.owner
    if isinstance(owner, ir.Block) or owner.name != "arith.minsi":
        return None
    offs = [lane_offset(x) for x in owner.operands]
    return True if any(c is not None and 0 <= c <= m for c in offs) else None


def _drop_low_clamps(copies: list, m: int) -> None:
    """`max(lane + c, 0)` with -m <= c <= 0 is `lane + c` on interior lanes."""
    found = []

    def visit(op):
        if op.name == _MAXSI:
            found.append(op)
        return ir.WalkResult.ADVANCE

    for root in copies:
        root.operation.walk(visit)
    for op in found:
        off = _clamped_below(op.results[0])
        if off is not None and -off <= m:
            a, b = op.operands
            op.results[0].replace_all_uses_with(a if _const(a) is None else b)
