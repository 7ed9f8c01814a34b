"""The typed block arguments of a kernel func: which hawk type each plane of a signature gets."""

from __future__ import annotations

from mlir import ir

from hawk.abi.signature import PlaneSpec
from hawk.ir.types import hawk_type


def plane_type(p: PlaneSpec, ftype: ir.Type, itypes: dict[str, ir.Type], lane: list[str]) -> ir.Type | None:
    """The hawk type of a plane's argument (None for a Grid: it is the lane axes themselves). An output starts
    as a per-lane output; the builder retypes it to a total when it gets a reduced value, and a sink's payload
    is fixed by its first scatter."""
    shape = p.payload.shape
    if p.kind == "lane":
        return hawk_type("plane", ftype, shape, lane)
    if p.kind == "index":
        return hawk_type("plane", itypes[p.name], (), lane)
    if p.kind == "param":
        return hawk_type("scalar", ftype, shape)
    if p.kind == "table":
        return hawk_type("table", ftype, shape, [a.label for a in p.axes])
    if p.kind == "output":
        return hawk_type("output", itypes.get(p.name, ftype), shape, lane)  # (its own int or float type)
    if p.kind == "sink":
        return hawk_type("sink", ftype, (), [a.label for a in p.axes])
    return None
