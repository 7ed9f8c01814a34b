"""The column and rows loop shapes (chunk_loops.drive): for each row, for its lanes, the body. In the column
shape each lane updates the kept slot `lane - row start` (trailing kept axes); ordered kept totals go through
the row's buffers (reduce_kept.column_start): when the body writes nothing and they are the stage's only
reductions, a chunk of column_tiles.MIN_ROWS whole rows or more walks tiles of slots down blocks of rows with
their chains in registers (column_tiles; plain totals likewise with accumulators, column_plain); else, in
chunks of COLUMN_ROWS rows or more, through chains in front
of them (column_chains): such a stage has the row loop three times, one with chains, one for a chunk that
dropped its chains, one for a chunk that never takes them (all give the same bits). The rows shape runs a
grid's rows with their coordinates from the loops (neighbour reads: the interior without clamps,
grid.interior_rows)."""

from __future__ import annotations

from mlir import ir
from mlir.dialects import scf

from hawk.passes.lower import column_chains, column_plain, column_tiles, grid, reduce_kept, stream
from hawk.passes.lower.chunk_loops import lower_body
from hawk.passes.lower.context import Lowering, clone_body, rewrite_ops
from hawk.passes.lower.grid import own_offsets

COLUMN_ROWS = 64  # chunks of fewer rows keep the pairs alone: the chains' first rows and their buffers' setup and
# flush cost more than they win there (1000 columns, 17 rows a chunk: 0.070 ms with pairs alone, 0.090 with chains)
_SGE, _UGE = 5, 9  # arith.cmpi


def column_driver(cx: Lowering, body: ir.Block, chunk0: list[ir.Value], kept_span: int | None) -> list[ir.Value]:
    """for each row: for its `span` lanes: body. With kept_span, the rows are those of the reduced axes and
    each lane updates its own kept slot (lane - row start); else the rows are the grid's first axis, whose
    coordinate (and, on a 2-D grid, the second's) the loops give without a division."""
    e = cx.e
    span = kept_span
    if span is None:
        span = 1
        for a in cx.lay.sig.lane_axes()[1:]:
            span *= a.extent
    if kept_span is None:
        return _rows(cx, body, chunk0, span, None)
    reduce_kept.column_start(cx, span)
    tiles = column_tiles if column_tiles.wanted(cx, body, span, chunk0) else \
        column_plain if column_plain.wanted(cx, body, span, chunk0) else None
    if tiles is not None:
        first, last = column_tiles.whole_rows(cx, span)
        either = scf.IfOp(e.cmpi(_SGE, e.op("arith.subi", last, first), e.c(column_tiles.MIN_ROWS)), [],
                          has_else=True)
        with ir.InsertionPoint(either.then_block):
            tiles.rows(cx, body, span, first, last)
            scf.YieldOp([])
        with ir.InsertionPoint(either.else_block):
            _rows(cx, body, chunk0, span, kept_span)
            scf.YieldOp([])
        results = []  # (a stage with tiles has no loop state: `wanted`)
    elif column_chains.wanted(cx, span):
        rows = e.op("arith.divui", e.op("arith.subi", cx.hi, cx.lo), e.c(span))
        either = scf.IfOp(e.cmpi(_UGE, rows, e.c(COLUMN_ROWS)), [v.type for v in chunk0], has_else=True)
        with ir.InsertionPoint(either.then_block):
            scf.YieldOp(_chain_rows(cx, body, chunk0, span))
        with ir.InsertionPoint(either.else_block):
            scf.YieldOp(_rows(cx, body, chunk0, span, kept_span))
        results = list(either.results)
    else:
        results = _rows(cx, body, chunk0, span, kept_span)
    reduce_kept.column_end(cx, span)
    return results


def _chain_rows(cx: Lowering, body: ir.Block, chunk0: list[ir.Value], span: int) -> list[ir.Value]:
    """The chunk's rows with chains (column_chains), each row's loop a copy of the body; once a block's late
    terms made the chains cost more than they save (column_chains.row_end: the outer loop carries whether the
    chunk keeps them, and the block's late terms so far), the chunk's later rows run a second copy without them,
    as a short chunk does."""
    e = cx.e
    column_chains.start(cx, span)
    n = len(chunk0)
    rlo, rhi = _row_range(cx, span)
    outer = scf.ForOp(rlo, rhi, e.c(1), list(chunk0) + [e.c(1, e.i1), e.c(0, e.i64)])
    with ir.InsertionPoint(outer.body):
        state, chained, lates = list(outer.inner_iter_args)[:n], outer.inner_iter_args[n], outer.inner_iter_args[n + 1]
        row0, start, end, count = _row_bounds(cx, outer.induction_variable, span)
        mode = scf.IfOp(chained, [e.i1, e.i64] + [v.type for v in state], has_else=True)
        with ir.InsertionPoint(mode.then_block):
            res = _row_copy(cx, body, state + column_chains.row_begin(cx, n), row0, start, end, count, span)
            keep, counted = column_chains.row_end(cx, span, res[n], outer.induction_variable, rlo, lates)
            scf.YieldOp([keep, counted] + res[:n])
        with ir.InsertionPoint(mode.else_block):
            res = _row_copy(cx, body, state, row0, start, end, count, span)
            reduce_kept.column_flush(cx, span)
            scf.YieldOp([chained, lates] + res)
        cx.kept_slot, cx.lane_row = None, None
        scf.YieldOp(list(mode.results)[2:] + list(mode.results)[:2])
    column_chains.flush(cx, span)
    return list(outer.results)[:n]


def _row_copy(cx: Lowering, body: ir.Block, inits: list[ir.Value], row0: ir.Value, start: ir.Value, end: ir.Value,
              count: ir.Value, span: int) -> list[ir.Value]:
    """A row's lanes [start, end) in a loop over a copy of the body, from the accumulators `inits`."""
    e = cx.e
    inner = scf.ForOp(start, end, e.c(1), inits)
    with ir.InsertionPoint(inner.body):
        offset = e.op("arith.subi", inner.induction_variable, row0)
        anchor = scf.YieldOp(list(inner.inner_iter_args))
    cx.lane_row, cx.kept_slot, cx.kept_count = (span, row0), offset, count
    cx.lane, cx.accs, cx.j = inner.induction_variable, list(inner.inner_iter_args), None
    rewrite_ops(cx, clone_body(cx, body, anchor))
    anchor.operation.erase()
    with ir.InsertionPoint(inner.body):
        scf.YieldOp(cx.accs)
    return list(inner.results)


def _rows(cx: Lowering, body: ir.Block, chunk0: list[ir.Value], span: int, kept_span: int | None) -> list[ir.Value]:
    """The row loop over the chunk's rows, the body itself in it (no chains)."""
    e = cx.e
    outer = scf.ForOp(*_row_range(cx, span), e.c(1), chunk0)
    with ir.InsertionPoint(outer.body):
        row0, start, end, count = _row_bounds(cx, outer.induction_variable, span)
        inner = scf.ForOp(start, end, e.c(1), list(outer.inner_iter_args))
        with ir.InsertionPoint(inner.body):
            offset = e.op("arith.subi", inner.induction_variable, row0)
            anchor = scf.YieldOp(list(inner.inner_iter_args))
        cx.lane_row = (span, row0)
        if kept_span is not None:
            cx.kept_slot, cx.kept_count = offset, count
        else:
            cx.known_coords = {cx.axes[0]: outer.induction_variable}
            if len(cx.axes) == 2:
                cx.known_coords[cx.axes[1]] = offset
        margins = own_offsets(body, cx.axes, grid.fixed_last(cx)) if kept_span is None and len(cx.axes) == 2 else {}
        if any(margins.values()):  # neighbour reads: the interior of the grid runs without their clamps
            inner.operation.erase()
            results = grid.interior_rows(cx, body, outer, row0, start, end, span, margins)
        else:
            stream.mark(cx, inner)
            lower_body(cx, body, anchor, inner, inner.induction_variable, inner.inner_iter_args)
            results = list(inner.results)
        if kept_span is not None:
            reduce_kept.column_flush(cx, span)
        cx.kept_slot, cx.known_coords, cx.lane_row = None, {}, None
        scf.YieldOp(results)
    return list(outer.results)


def _row_range(cx: Lowering, span: int) -> tuple[ir.Value, ir.Value]:
    """The rows [first, last) the chunk's lanes [cx.lo, cx.hi) touch."""
    e = cx.e
    return e.op("arith.divui", cx.lo, e.c(span)), e.op("arith.divui", e.add_i(cx.hi, e.c(span - 1)), e.c(span))


def _row_bounds(cx: Lowering, row: ir.Value, span: int) -> tuple[ir.Value, ...]:
    """Row `row`'s first lane, the chunk's lanes [start, end) of it, and its slot count (a constant made here,
    before the loop that uses it)."""
    e = cx.e
    row0 = e.mul_i(row, e.c(span))
    return row0, e.op("arith.maxui", row0, cx.lo), e.op("arith.minui", e.add_i(row0, e.c(span)), cx.hi), e.c(span)
