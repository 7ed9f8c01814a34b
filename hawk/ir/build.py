"""One door to create any op generically, used by the front end and the lowering passes."""

from __future__ import annotations

from collections.abc import Sequence

from mlir import ir


def strs(values: Sequence[str]) -> ir.ArrayAttr:
    return ir.ArrayAttr.get([ir.StringAttr.get(v) for v in values])


def _attr(v):
    if isinstance(v, ir.Attribute):
        return v
    if isinstance(v, str):
        return ir.StringAttr.get(v)
    if isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v):
        return strs(v)
    raise TypeError(f"cannot make an attribute of {v!r}")


def create(name: str, operands: Sequence[ir.Value] = (), results: Sequence[ir.Type] = (),
           attrs: dict | None = None, regions: int = 0) -> ir.Operation:
    """Create `name` at the current insertion point and location."""
    attributes = {k: _attr(v) for k, v in (attrs or {}).items()}
    return ir.Operation.create(name, results=list(results), operands=list(operands), attributes=attributes,
                               regions=regions)
