"""Tiles for the column shape's plain kept totals (the host): "auto" sums and means, max and min that keep the
trailing axes (a column sum, say), when they are the stage's only reductions and the body writes nothing.

The row loop (columns._rows) loads, updates and stores each lane's slot in this chunk's copy: two loads and a
store a term. Here a chunk's whole rows go in blocks of column_tiles.ROWS, each block's slots in tiles whose
accumulators (one per slot and component, and a mean's count) stay in vector registers while the tile walks
down the block's rows (column_tiles.walk_blocks, walk_rows): a term costs its load and one add (or max, min).
At the block's end each accumulator goes into its slot as one more term. An "auto" sum may be reassociated:
its slots add each block's partial sums, in block order, so its bits are those of a fixed order for a given
chunking, as before (they differ from the row loop's, within the same bound); max and min are exact either way.
The lanes of a row the chunk holds in part, and the slots after the last tile, take the row loop's step."""

from __future__ import annotations

from mlir import ir

from hawk.ir.access import reduce_mask, reduce_value
from hawk.ir.build import create
from hawk.passes.host_emit import size
from hawk.passes.lower import column_tiles, ordered_chains, reduce_kept
from hawk.passes.lower.column_tiles import TILE
from hawk.passes.lower.context import Lowering

WIDE = 32  # slots a tile holds when the accumulators fit in registers (four vectors of float64 a component)
_KINDS = ("sum", "mean", "max", "min")


def wanted(cx: Lowering, body: ir.Block, span: int, chunk0: list) -> bool:
    """Whether the column shape's chunks may take plain tiles: the host, every reduction of the stage a kept
    max, min or "auto" sum or mean of a narrow payload, no other loop state, rows of at least TILE slots, and a
    body that writes nothing (its lanes run in the tiles' order)."""
    if cx.target != "host" or cx.column_late or chunk0 or span < TILE or not cx.lay.reductions:
        return False
    return all(r.kept and r.kind in _KINDS and (r.kind in ("max", "min") or r.policy == "auto") and
               not cx.is_wide(r.payload) for r in cx.lay.reductions) and ordered_chains.writes_nothing(body)


def _keys(cx: Lowering) -> list[tuple]:
    """(reduction, component, kind) of every accumulator: each component's, then a mean's count (component
    None, kind "count")."""
    out = []
    for r in cx.lay.reductions:
        out += [(r, c, r.kind) for c in range(size(r.payload))]
        if r.kind == "mean":
            out.append((r, None, "count"))
    return out


def rows(cx: Lowering, body: ir.Block, span: int, first: ir.Value, last: ir.Value) -> None:
    """The chunk's lanes (column_tiles.walk_blocks), each tile's accumulators into its slots at a block's end."""
    n = len(_keys(cx))
    w = max(TILE, WIDE // n // TILE * TILE)
    column_tiles.walk_blocks(cx, body, span, first, last, w if span >= w else TILE,
                             lambda lo, hi, t: _tile(cx, body, span, lo, hi, t))


def record(cx: Lowering, op, r) -> None:
    """A tile's copy of the body reaches reduction `r`: its lane's term per component (a masked-out lane's the
    identity), and a mean's count (1 or 0), wait for the tile's step (cx.column_tile, at copy cx.tile_j)."""
    e = cx.e
    mask = reduce_mask(op)
    for c, x in enumerate(e.elems(reduce_value(op), r.payload)):
        if mask is not None:
            x = e.select(mask, x, e.identity(r.kind, x.type))
        cx.column_tile.setdefault((r.cell, c), [None] * cx.tile_w)[cx.tile_j] = x
    if r.kind == "mean":
        t = _count_type(cx, r)
        one = e.cf(1.0, t) if mask is None else e.select(mask, e.cf(1.0, t), e.cf(0.0, t))
        cx.column_tile.setdefault((r.cell, None), [None] * cx.tile_w)[cx.tile_j] = one


def _count_type(cx: Lowering, r) -> ir.Type:
    cnt, _ = reduce_kept.count_at(cx, r, cx.e.c(0), cx.e.c(1))
    return ir.MemRefType(cnt.type).element_type


def _combine(cx: Lowering, kind: str, a: ir.Value, b: ir.Value) -> ir.Value:
    return cx.e.extremum(kind, a, b) if kind in ("max", "min") else cx.e.add(a, b)


def _tile(cx: Lowering, body: ir.Block, span: int, lo: ir.Value, hi: ir.Value, t: ir.Value) -> None:
    """Slots [t, t + cx.tile_w) over rows [lo, hi): accumulators in registers, then into the slots."""
    e = cx.e
    w = cx.tile_w
    ks = _keys(cx)
    types = [_count_type(cx, r) if kind == "count" else e.f for r, _, kind in ks]
    vecs = [ir.VectorType.get([w], t_) for t_ in types]
    inits = [e.splat(0.0 if kind in ("sum", "mean", "count") else (float("-inf") if kind == "max" else float("inf")),
                     v) for (_, _, kind), v in zip(ks, vecs, strict=True)]

    def step(state: list[ir.Value]) -> list[ir.Value]:
        for i, ((r, c, kind), v) in enumerate(zip(ks, vecs, strict=True)):
            xv = create("vector.from_elements", cx.column_tile[(r.cell, c)], [v]).result
            state[i] = _combine(cx, kind, state[i], xv)
        return state

    res = column_tiles.walk_rows(cx, body, span, lo, hi, t, inits, step)
    n = e.c(span)
    for (r, c, kind), acc in zip(ks, res, strict=True):
        if kind == "count":
            buf, at = reduce_kept.count_at(cx, r, t, n)
        else:
            buf, base = reduce_kept.kept_out(cx, r)
            at = e.add_i(e.mul_i(e.c(c), n), t)
            at = at if base is None else e.add_i(at, base)
        elem = ir.MemRefType(buf.type).element_type
        acc = e.widen(acc, elem)
        e.vstore(_combine(cx, kind, e.vload(buf, at, w, elem), acc), buf, at)
