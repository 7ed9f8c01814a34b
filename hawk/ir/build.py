"""One door to create any op generically, used by the front end and the lowering passes."""

from __future__ import annotations

from collections.abc import Sequence

from mlir import ir

from hawk.ir.dialect import BUILDER_DIALECTS

_PRELOADED = frozenset(BUILDER_DIALECTS) | {"hawk"}


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
    """Create `name` at the current insertion point and location (loading its dialect first if the context has
    not: building an op of an unloaded dialect aborts the process)."""
    dialect = name.partition(".")[0]
    if dialect not in _PRELOADED:
        ir.Context.current.dialects[dialect]  # noqa: B018 (the lookup loads it)
    attributes = {k: _attr(v) for k, v in (attrs or {}).items()}
    return ir.Operation.create(name, results=list(results), operands=list(operands), attributes=attributes,
                               regions=regions)
