"""How far a kernel reads across lanes along its leading lane axis: what a sharded run needs (eagle/distributed).

A run split into shards along the leading lane axis (rows of a Grid) needs, per per-lane plane read with `.at`,
how many rows away a read can reach: a leading coordinate that is the lane's own plus a constant reaches that
constant's size; anything else (a flat index, a coordinate computed from data) can reach any lane. It also needs
whether the kernel reads the leading coordinate itself (then a shard must see the whole grid's coordinates), not
counting a coordinate marked `own` (it keys a table that holds the run's own slots, as the cotangent of a cell
keeping the leading axis does in an adjoint: a shard's own coordinate is the right key there).
Read off the hawk IR through hawk.ir.access; plain data out, so eagle needs no MLIR (Kernel.lane_reach).
"""

from __future__ import annotations

from mlir import ir

from hawk.ir import access
from hawk.ir.dialect import is_hawk, new_context


def lane_offset(v: ir.Value, axis: str, last: int | None = None) -> int | None:
    """k when `v` is the lane's own coordinate on `axis` plus the constant k, else None. Also when that is clamped
    to the axis's coordinates (`m.clamp(g.r + k, 0, g.extent("r") - 1)`, or `m.min` / `m.max` with one of those
    bounds; `last`: the axis's last coordinate, when known, for a constant upper bound): a read past an edge is
    clamped to it anyway (per axis), so the clamped read is the same lane."""
    owner = v.owner
    if isinstance(owner, ir.Block):
        return None
    if owner.name in ("arith.maxsi", "arith.minsi"):
        a, b = owner.operands
        for x, bound in ((a, b), (b, a)):
            if _edge(bound, owner.name == "arith.maxsi", axis, last):
                return lane_offset(x, axis, last)
        return None
    if is_hawk(owner, "lane"):
        return 0 if access.lane_axis(owner) == axis else None
    if owner.name in ("arith.addi", "arith.subi"):
        base, k = owner.operands
        if isinstance(k.owner, ir.Block) or k.owner.name != "arith.constant":
            return None
        inner = lane_offset(base, axis)  # (nested: `g.r + i - 1` with i a constant, as an unrolled loop reads)
        if inner is None:
            return None
        value = ir.IntegerAttr(k.owner.attributes["value"]).value
        return inner + value if owner.name == "arith.addi" else inner - value
    return None


def _edge(bound: ir.Value, low: bool, axis: str, last: int | None) -> bool:
    """Whether `bound` is the first coordinate of `axis` (`low`: 0) or its last (`g.extent(axis) - 1`, or the
    constant `last`)."""
    if low:
        return access.int_constant(bound) == 0
    k = access.int_constant(bound)
    if k is not None:
        return last is not None and k == last
    owner = bound.owner
    if isinstance(owner, ir.Block) or owner.name != "arith.subi" or access.int_constant(owner.operands[1]) != 1:
        return False
    ext = owner.operands[0].owner
    return not isinstance(ext, ir.Block) and is_hawk(ext, "extent") and access.lane_axis(ext) == axis


def lane_reach(text: str, lead: str | None, per_lane: frozenset[str]) -> tuple[dict[str, int | None], bool]:
    """({plane: the most rows a `.at` read of it reaches along `lead`, None when it can reach any lane}, whether
    the kernel reads its `lead` coordinate or extent) for the hawk module `text`; `per_lane`: the per-lane
    planes."""
    reach: dict[str, int | None] = {}
    coords = [False]

    def visit(op):
        if is_hawk(op, "lane") and access.lane_is_own(op):
            pass  # (it keys a table of the shard's own slots: the shard's own numbering serves)
        elif (is_hawk(op, "lane") or is_hawk(op, "extent")) and access.lane_axis(op) == lead:
            coords[0] = True
        elif is_hawk(op, "at") and access.plane_name(op) in per_lane:
            plane, axes = access.plane_name(op), access.coord_axes(op)
            if axes == ["#"] or lead is None:
                reach[plane] = None
            elif lead in axes and reach.get(plane, 0) is not None:
                k = lane_offset(access.at_coords(op)[axes.index(lead)], lead)
                reach[plane] = None if k is None else max(reach.get(plane, 0), abs(k))
            else:
                reach.setdefault(plane, 0)
        return ir.WalkResult.ADVANCE

    with new_context(), ir.Location.unknown():
        ir.Module.parse(text).operation.walk(visit)
    return reach, coords[0]
