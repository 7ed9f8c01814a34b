"""Tiles for the column shape's plain and compensated kept totals (the host): "auto" and "compensated" sums and
means, max and min that keep the trailing axes (a column sum, say), when they are the stage's only reductions and
the body writes nothing.

The row loop (columns._rows) loads, updates and stores each lane's slot in this chunk's copy: two loads and a
store a term. Here a chunk's whole rows go in blocks of column_tiles.ROWS, each block's slots in tiles whose
accumulators (one per slot and component, and a mean's count) stay in vector registers while the tile walks
down the block's rows (column_tiles.walk_blocks, walk_rows): a term costs its load and one add (or max, min).
At the block's end each accumulator goes into its slot as one more term. An "auto" sum may be reassociated:
its slots add each block's partial sums, in block order, so its bits are those of a fixed order for a given
chunking, as before (they differ from the row loop's, within the same bound); max and min are exact either way.
A compensated sum keeps a (sum, error) pair of float64 vectors per component: float64 terms by Knuth's TwoSum
(the exact error of each add, as a Neumaier step keeps it, without its comparisons), float32 terms by plain
float64 adds (a block's ROWS terms err by at most ROWS * 2**-53 of their sum of |terms|, far inside float32's
bound); at the block's end the pair goes into the slot's (sum, correction) by one more TwoSum, the errors into
the correction. The lanes of a row the chunk holds in part, and the slots after the last tile, take the row
loop's step."""

from __future__ import annotations

from mlir import ir

from hawk.abi.layout import compensated
from hawk.ir.access import reduce_mask, reduce_value
from hawk.ir.build import create
from hawk.passes.host_emit import size
from hawk.passes.lower import column_tiles, reduce_kept, rerun, scatters
from hawk.passes.lower.column_tiles import TILE
from hawk.passes.lower.context import Lowering

WIDE = 32  # slots a tile holds when the accumulators fit in registers (four vectors of float64 a component)
_KINDS = ("sum", "mean", "max", "min")
_OLT = 4  # arith.cmpf


def wanted(cx: Lowering, body: ir.Block, span: int, chunk0: list) -> bool:
    """Whether the column shape's chunks may take these tiles: the host, every reduction of the stage a kept
    max, min, or "auto" or compensated (private copies) sum or mean of a narrow payload, no other loop state,
    rows of at least TILE slots, and a body that writes nothing (its lanes run in the tiles' order)."""
    if cx.target != "host" or cx.column_late or chunk0 or span < TILE or not cx.lay.reductions:
        return False
    return all(r.kept and r.kind in _KINDS and not cx.is_wide(r.payload) and
               (r.kind in ("max", "min") or r.policy == "auto" or (compensated(r) and r.cell in cx.lay.private))
               for r in cx.lay.reductions) and rerun.writes_nothing(body)


def _keys(cx: Lowering) -> list[tuple]:
    """(reduction, component, kind) of every accumulator: each component's (kind "comp" for a compensated sum's:
    two vectors), then a mean's count (component None, kind "count")."""
    out = []
    for r in cx.lay.reductions:
        out += [(r, c, "comp" if compensated(r) else r.kind) for c in range(size(r.payload))]
        if r.kind == "mean":
            out.append((r, None, "count"))
    return out


def rows(cx: Lowering, body: ir.Block, span: int, first: ir.Value, last: ir.Value) -> None:
    """The chunk's lanes (column_tiles.walk_blocks), each tile's accumulators into its slots at a block's end."""
    n = sum(2 if kind == "comp" else 1 for _, _, kind in _keys(cx))
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
        if compensated(r):
            x = e.widen(x, e.f64)
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
    types = [_count_type(cx, r) if kind == "count" else e.f64 if kind == "comp" else e.f for r, _, kind in ks]
    vecs = [ir.VectorType.get([w], t_) for t_ in types]
    inits = []
    for (_, _, kind), v in zip(ks, vecs, strict=True):
        start = float("-inf") if kind == "max" else float("inf") if kind == "min" else 0.0
        inits += [e.splat(start, v)] * (2 if kind == "comp" else 1)

    def step(state: list[ir.Value]) -> list[ir.Value]:
        i = 0
        for (r, c, kind), v in zip(ks, vecs, strict=True):
            xv = create("vector.from_elements", cx.column_tile[(r.cell, c)], [v]).result
            if kind != "comp":
                state[i] = _combine(cx, kind, state[i], xv)
                i += 1
                continue
            if e.f == e.f64:  # (TwoSum: the add's exact error into the pair's second vector)
                state[i], err = e.two_sum(state[i], xv)
                state[i + 1] = e.add(state[i + 1], err)
            else:  # (float32 terms: plain float64 adds, exact to far inside the bound)
                state[i] = e.add(state[i], xv)
            i += 2
        return state

    res = column_tiles.walk_rows(cx, body, span, lo, hi, t, inits, step)
    n = e.c(span)
    i = 0
    for r, c, kind in ks:
        if kind == "count":
            buf, at = reduce_kept.count_at(cx, r, t, n)
        elif kind == "comp":
            buf, _ = reduce_kept.kept_out(cx, r)
            at = e.add_i(e.mul_i(e.c(c), n), t, scatters.copy_start(cx, r.cell, 2))
            half = e.add_i(at, e.c(cx.lay.stride(r.cell)))
            s1, err = e.two_sum(e.vload(buf, at, w, e.f64), res[i])
            c0 = e.vload(buf, half, w, e.f64)
            # (an infinite or NaN sum has no error to keep, and the TwoSums made NaNs of its errors: the correction
            # stays as it was, as a Neumaier step leaves it, so that the finish's sum + correction is the sum)
            finite = e.cmpf(_OLT, e.abs(s1), e.splat(float("inf"), s1.type))
            e.vstore(s1, buf, at)
            e.vstore(e.select(finite, e.add(c0, e.add(err, res[i + 1])), c0), buf, half)
            i += 2
            continue
        else:
            buf, base = reduce_kept.kept_out(cx, r)
            at = e.add_i(e.mul_i(e.c(c), n), t)
            at = at if base is None else e.add_i(at, base)
        elem = ir.MemRefType(buf.type).element_type
        e.vstore(_combine(cx, kind, e.vload(buf, at, w, elem), e.widen(res[i], elem)), buf, at)
        i += 1
