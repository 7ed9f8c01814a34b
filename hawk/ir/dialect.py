"""The hawk dialect, declared with IRDL so that every hawk op is verified.

Ops (generic form; all attributes are strings or arrays):
  hawk.lane    {axis}                 () -> i64             this lane's coordinate on a Grid axis
  hawk.load    {plane}                () -> T               this lane's value of a per-lane plane
  hawk.param   {plane}                () -> T               a run-wide number
  hawk.at      {plane, axes}          (i64...) -> T         an input plane read at other coordinates
  hawk.store   {plane}                (T) -> ()             this lane's value of a per-lane output
  hawk.reduce  {kind, over, policy}   (T, i1?) -> T         a reduction over lanes (optionally masked); kind
                                                            "fold" also names its combiner func {combine} and
                                                            may carry {identity} (hawk/frontend/reduce.py)
  hawk.cell    {name}                 (T) -> ()             hands a reduced value out as a cell/result
  hawk.scatter {sink, mode, policy}   (T, i64...) -> ()     adds (or stores) a value into a sink by key
  hawk.cut_read {name, axes}          () -> T               a total an earlier stage reduced (a staged kernel),
                                                            at this lane's coordinates on the kept `axes`
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import irdl

_IRDL = """
irdl.dialect @hawk {
  irdl.operation @lane {
    %s = irdl.base "#builtin.string"
    %i = irdl.is i64
    irdl.attributes {"axis" = %s}
    irdl.results(value: %i)
  }
  irdl.operation @load {
    %s = irdl.base "#builtin.string"
    %t = irdl.any
    irdl.attributes {"plane" = %s}
    irdl.results(value: %t)
  }
  irdl.operation @param {
    %s = irdl.base "#builtin.string"
    %t = irdl.any
    irdl.attributes {"plane" = %s}
    irdl.results(value: %t)
  }
  irdl.operation @at {
    %s = irdl.base "#builtin.string"
    %a = irdl.base "#builtin.array"
    %i = irdl.is i64
    %t = irdl.any
    irdl.attributes {"plane" = %s, "axes" = %a}
    irdl.operands(coords: variadic %i)
    irdl.results(value: %t)
  }
  irdl.operation @store {
    %s = irdl.base "#builtin.string"
    %t = irdl.any
    irdl.attributes {"plane" = %s}
    irdl.operands(value: %t)
  }
  irdl.operation @reduce {
    %k1 = irdl.is "sum"
    %k2 = irdl.is "mean"
    %k3 = irdl.is "max"
    %k4 = irdl.is "min"
    %k5 = irdl.is "fold"
    %k = irdl.any_of(%k1, %k2, %k3, %k4, %k5)
    %o = irdl.base "#builtin.array"
    %p1 = irdl.is "auto"
    %p2 = irdl.is "compensated"
    %p3 = irdl.is "plain"
    %p4 = irdl.is "ordered"
    %p = irdl.any_of(%p1, %p2, %p3, %p4)
    %t = irdl.any
    %b = irdl.is i1
    irdl.attributes {"kind" = %k, "over" = %o, "policy" = %p}
    irdl.operands(value: %t, mask: optional %b)
    irdl.results(total: %t)
  }
  irdl.operation @cell {
    %s = irdl.base "#builtin.string"
    %t = irdl.any
    irdl.attributes {"name" = %s}
    irdl.operands(value: %t)
  }
  irdl.operation @cut_read {
    %s = irdl.base "#builtin.string"
    %a = irdl.base "#builtin.array"
    %t = irdl.any
    irdl.attributes {"name" = %s, "axes" = %a}
    irdl.results(value: %t)
  }
  irdl.operation @scatter {
    %s = irdl.base "#builtin.string"
    %m1 = irdl.is "add"
    %m2 = irdl.is "set"
    %m = irdl.any_of(%m1, %m2)
    %p1 = irdl.is "auto"
    %p2 = irdl.is "compensated"
    %p3 = irdl.is "plain"
    %p4 = irdl.is "ordered"
    %p = irdl.any_of(%p1, %p2, %p3, %p4)
    %t = irdl.any
    %i = irdl.is i64
    irdl.attributes {"sink" = %s, "mode" = %m, "policy" = %p}
    irdl.operands(value: %t, keys: variadic %i)
  }
}
"""


def new_context() -> ir.Context:
    """A fresh MLIR context with the upstream dialects and the hawk dialect loaded."""
    ctx = ir.Context()
    with ctx, ir.Location.unknown():
        irdl.load_dialects(ir.Module.parse(_IRDL))
    return ctx


def is_hawk(op, name: str | None = None) -> bool:
    """True when `op` is a hawk op (of the given short name)."""
    n = op.operation.name
    return n.startswith("hawk.") and (name is None or n == f"hawk.{name}")


def attr_str(op, key: str) -> str:
    return ir.StringAttr(op.operation.attributes[key]).value


def attr_strs(op, key: str) -> list[str]:
    return [ir.StringAttr(a).value for a in ir.ArrayAttr(op.operation.attributes[key])]
