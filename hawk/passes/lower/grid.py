"""The interior of a grid: where a kernel reads its neighbours (`u.at(col=c - 1)`, `u.at(row=r + 2)`...), the
lanes farther from every edge than the largest offset cannot read past an edge, so their reads need no clamp.

`own_offsets` marks each `.at` coordinate that is the lane's own coordinate plus a constant and returns the
largest offset per axis; `interior_rows` (used by columns.column_driver) runs each row of a 2-D grid as three
loops, and `interior_lanes` (chunk_loops.flat_driver) a 1-D grid's chunk likewise, the middle one with a copy of
the body whose marked reads skip their clamps, so its loads are contiguous and LLVM vectorizes the loop. The
edge loops keep the clamps: results are the same bits."""

from __future__ import annotations

from mlir import ir
from mlir.dialects import scf

from hawk.ir.access import at_coords, coord_axes, lane_axis
from hawk.ir.build import create
from hawk.ir.dialect import is_hawk
from hawk.ir.reach import lane_offset
from hawk.passes.lower import stream
from hawk.passes.lower.context import Lowering, clone_body, rewrite_ops


def own_offsets(body: ir.Block, axes: list[str], last: dict[str, int] | None = None) -> dict[str, int]:
    """Mark each `.at` coordinate that is the lane's own coordinate plus constants (`hawk.own_offsets`, one
    entry per coordinate, -1 << 62 where not; hawk.ir.reach.lane_offset reads them, nested ones too, as an
    unrolled loop's `g.r + i - 1` is, and clamped to the grid: `last`, each fixed axis's last coordinate) and
    return the largest such |offset| per axis."""
    none = -(1 << 62)
    margins: dict[str, int] = {}
    last = last or {}

    def visit(op):
        if is_hawk(op, "at") and coord_axes(op) != ["#"]:
            offsets = [lane_offset(v, a, last.get(a)) for v, a in zip(at_coords(op), coord_axes(op), strict=True)]
            found = [none if k is None else k for k in offsets]
            op.attributes["hawk.own_offsets"] = ir.DenseI64ArrayAttr.get(found)
            for a, k in zip(coord_axes(op), found, strict=True):
                if k != none:
                    margins[a] = max(margins.get(a, 0), abs(k))
        return ir.WalkResult.ADVANCE

    for op in body.operations:
        op.operation.walk(visit)
    return {a: m for a, m in margins.items() if a in axes}


def fixed_last(cx: Lowering) -> dict[str, int]:
    """The last coordinate of each lane axis whose extent the signature fixes (`"c":1000`: 999)."""
    return {a.label: a.extent - 1 for a in cx.lay.sig.lane_axes() if a.extent is not None}


_SWAP = {0: 0, 1: 1, 2: 4, 3: 5, 4: 2, 5: 3}  # arith.cmpi eq ne slt sle sgt sge: operands swapped


def _decide(pred: int, lo: float, hi: float, k: int) -> bool | None:
    """The value of `x pred k` for every x in [lo, hi], or None when it depends on x."""
    if pred in (0, 1):
        same = True if lo == hi == k else False if k < lo or k > hi else None
        return same if same is None or pred == 0 else not same
    if pred in (2, 3):  # slt, sle
        k2 = k if pred == 2 else k + 1
        return True if hi < k2 else False if lo >= k2 else None
    if pred in (4, 5):  # sgt, sge
        k2 = k if pred == 5 else k + 1
        return True if lo >= k2 else False if hi < k2 else None
    return None


def fold_coordinate_tests(roots: list, ranges: dict[str, tuple[int, int | None]]) -> None:
    """Replace each signed comparison of a lane coordinate (`g.col`) with a constant by its value when every
    coordinate in `ranges[axis]` (lowest, highest or None for no known top) gives the same answer."""
    tests = []

    def visit(op):
        if op.name == "arith.cmpi":
            tests.append(op)
        return ir.WalkResult.ADVANCE

    for root in roots:
        root.operation.walk(visit)
    for op in tests:
        pred = ir.IntegerAttr(op.attributes["predicate"]).value
        found = _coordinate_vs_constant(op.operands[0], op.operands[1], ranges)
        if found is None:
            found = _coordinate_vs_constant(op.operands[1], op.operands[0], ranges)
            pred = _SWAP.get(pred, -1)
        if found is None:
            continue
        (lo, hi), k = found
        known = _decide(pred, lo, float("inf") if hi is None else hi, k)
        if known is None:
            continue
        decided(op, known)


def decided(test, known: bool) -> None:
    """Every use of a comparison's result becomes the constant `known` (the comparison itself, now unused, goes
    with the canonicalizer)."""
    with ir.InsertionPoint(test), test.location:
        t = ir.IntegerType.get_signless(1)
        const = create("arith.constant", [], [t], {"value": ir.IntegerAttr.get(t, int(known))})
    test.results[0].replace_all_uses_with(const.results[0])


def _coordinate_vs_constant(a, b, ranges):
    """((lowest, highest), constant) when `a` is a hawk.lane coordinate with a known range and `b` a constant."""
    if isinstance(a.owner, ir.Block) or isinstance(b.owner, ir.Block) or not is_hawk(a.owner, "lane") or \
            b.owner.name != "arith.constant" or lane_axis(a.owner) not in ranges:
        return None
    return ranges[lane_axis(a.owner)], ir.IntegerAttr(b.owner.attributes["value"]).value


def interior_rows(cx: Lowering, body, outer, row0, start, end, span, margins) -> list[ir.Value]:
    """A row of a 2-D grid as three loops: its first and last columns with the general body, the columns in
    between, on rows in between, with a body whose neighbour reads (`u.at(col=c - 1)`...) skip the clamps,
    which cannot bind there: the loads become contiguous and the loop vectorizes."""
    e = cx.e
    row = outer.induction_variable
    kr, kc = margins.get(cx.axes[0], 0), margins.get(cx.axes[1], 0)
    inside = e.op("arith.andi", e.cmpi(9, row, e.c(kr)), e.cmpi(6, e.add_i(row, e.c(kr)), cx.ext[0]))
    a = e.op("arith.minui", e.op("arith.maxui", start, e.add_i(row0, e.c(kc))), end)
    b = e.op("arith.maxui", a, e.op("arith.minui", end, e.add_i(row0, e.c(span - kc))))
    a, b = e.select(inside, a, end), e.select(inside, b, end)
    # c > 0, c < cols - 1... hold on every interior lane: the loop needs no guard per lane
    return _three_loops(cx, body, (start, a, b, end), list(outer.inner_iter_args),
                        lambda iv: {cx.axes[0]: row, cx.axes[1]: e.op("arith.subi", iv, row0)}, margins,
                        {cx.axes[0]: (kr, None), cx.axes[1]: (kc, span - 1 - kc)})


def _three_loops(cx: Lowering, body, cuts: tuple, accs: list, coords, margins: dict, ranges: dict) -> list:
    """The body over lanes [cuts[0], cuts[1]), then [cuts[1], cuts[2]), then [cuts[2], cuts[3]), threading the
    accumulators `accs`; the middle loop's copy reads with `margins` (its marked reads skip their clamps) and has
    the coordinate tests `ranges` decides folded. `coords(lane)`: the lane's coordinates the loops know."""
    e = cx.e
    for k, interior in ((0, False), (1, True), (2, False)):
        loop = scf.ForOp(cuts[k], cuts[k + 1], e.c(1), accs)
        if interior:
            stream.mark(cx, loop)
        with ir.InsertionPoint(loop.body):
            cx.known_coords = coords(loop.induction_variable)
            anchor = scf.YieldOp(list(loop.inner_iter_args))
        cx.lane, cx.accs, cx.j = loop.induction_variable, list(loop.inner_iter_args), None
        cx.interior = margins if interior else {}
        copies = clone_body(cx, body, anchor)
        if interior:
            fold_coordinate_tests(copies, ranges)
        rewrite_ops(cx, copies)
        cx.interior = {}
        anchor.operation.erase()
        with ir.InsertionPoint(loop.body):
            scf.YieldOp(cx.accs)
        accs = list(loop.results)
    return accs


def interior_lanes(cx: Lowering, body, chunk0: list) -> list[ir.Value] | None:
    """A 1-D grid's chunk [cx.lo, cx.hi) of a flat loop whose body reads neighbours at constant offsets, as three
    loops: the lanes within the largest offset of an end with the general body, the lanes in between with a body
    whose marked reads skip their clamps (a 1-D stencil's loads, and a gather's, were vector gathers of clamped
    indices). None for any other chunk (the flat driver's own loop)."""
    from hawk.passes.lower import grid_scatters, sorted_pairs, split_scatters

    if len(cx.axes) != 1 or not cx.lay.sig.lane_axes() or cx.runs or sorted_pairs.sorted_ordered(cx, body) is not None \
            or grid_scatters.wanted(cx, body, chunk0) or split_scatters.split_scatters(cx, body):
        return None
    margin = own_offsets(body, cx.axes, fixed_last(cx)).get(cx.axes[0], 0)
    if not margin:
        return None
    e = cx.e
    axis, n = cx.axes[0], cx.ext[0]
    top = e.select(e.cmpi(4, n, e.c(margin)), e.op("arith.subi", n, e.c(margin)), e.c(0))  # sgt: n - margin
    a = e.op("arith.minui", e.op("arith.maxui", cx.lo, e.c(margin)), cx.hi)
    b = e.op("arith.maxui", a, e.op("arith.minui", cx.hi, top))
    extent = cx.lay.sig.lane_axes()[0].extent
    accs = _three_loops(cx, body, (cx.lo, a, b, cx.hi), list(chunk0), lambda iv: {axis: iv}, {axis: margin},
                        {axis: (margin, None if extent is None else extent - 1 - margin)})  # (i > 0... folded)
    cx.known_coords = {}
    return accs
