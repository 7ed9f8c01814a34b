"""The hawk dialect, declared with IRDL so that every hawk op is verified (types: hawk/ir/types.py).

A kernel is a `func.func` with `hawk.kernel` and `hawk.axes` (its lane axes); each plane, sink and cell it
uses is a typed block argument named by its `hawk.name` argument attribute. Ops (generic form):

  hawk.lane     {axis}               () -> i64                    this lane's coordinate on a Grid axis (unit
                                                                  attribute `own`: it keys only a table of the
                                                                  run's own slots, so a shard's own serves)
  hawk.extent   {axis}               () -> i64                    the run's extent of a Grid axis (the same on
                                                                  every lane; a sharded run: the whole grid's)
  hawk.load                          (plane|output|total) -> T    this lane's value of a per-lane plane (an
                                                                  output or cell: before the launch writes it)
  hawk.param                         (scalar) -> T                a run-wide number
  hawk.at       {axes}               (plane|table, i64...) -> T   a plane read at other coordinates ("#": flat)
  hawk.store                         (output, T, i64?) -> ()      this lane's value of a per-lane output; with a
                                                                  key: the value at that flat position
  hawk.reduce   {kind, over, policy} (T, i1?) -> T                a reduction over lanes (optionally masked);
                                                                  kind "fold" also names its combiner func
                                                                  {combine}, may carry {identity}
  hawk.block_reduce {kind, over, policy} (T, i1?) -> T           split-stages: a reduction over trailing axes
                                                                  read in its own stage (a block reduction:
                                                                  hawk/passes/lower/block.py)
  hawk.cell                          (total, T) -> ()             hands a reduced value out as a cell/result
  hawk.scatter  {mode, policy}       (sink, T, i64...) -> ()      adds (or stores) a value into a sink by key
  hawk.cut_read                      (total) -> T                 a total an earlier stage reduced, at this
                                                                  lane's coordinates on the type's kept axes
  hawk.scan     {op, mode}           (T, i1?) -> T                running total over lanes in lane order (op
                                                                  add/mul/min/max, or func: a @hawk.func's
                                                                  combiner named by `combine`, `identity`
                                                                  for exclusive; mode inclusive/exclusive,
                                                                  optional reset flag): the front end's form
                                                                  (unit attribute `reverse` on the three
                                                                  scan ops: from the last lane down)
                                                                  keyed (attributes keys, order; the i1?
                                                                  slot holds the i64 key): per-key totals
  hawk.scan_totals {op}              (total, T, i1?) -> ()        split-stages: each SCAN_BLOCK's total (and
                                                                  flag) into the internal cell
  hawk.scan_apply {op, mode}         (total, T, i1?) -> T         split-stages: the scan, each block started
                                                                  from the offset the cell holds

IRDL checks operand kinds and attribute values; hawk/passes/verify.py checks what IRDL cannot say (a value's
type against its plane's element and payload, key and coordinate counts).
"""

from __future__ import annotations

from mlir import ir
from mlir._mlir_libs._mlir import globals as _mlir_globals
from mlir.dialects import irdl

if "hawk.ir.pydialects" not in _mlir_globals.dialect_search_modules:  # hawk/ir/pydialects/hawk.py says why
    _mlir_globals.append_dialect_search_prefix("hawk.ir.pydialects")


def _type(name: str, axes: bool = True) -> str:
    extra = ', axes: %a' if axes else ''
    a = '\n    %a = irdl.base "#builtin.array"' if axes else ''
    return f"""
  irdl.type @{name} {{
    %e = irdl.any
    %s = irdl.base "#builtin.dense_array"{a}
    irdl.parameters(elem: %e, shape: %s{extra})
  }}"""


def _plane(var: str, *kinds: str) -> str:
    """IRDL lines binding %{var} to any type of the given kinds (each with its own parameter variables)."""
    lines = []
    for k in kinds:
        v = f"{var}_{k}"
        lines += [f"    %{v}_e = irdl.any", f'    %{v}_s = irdl.base "#builtin.dense_array"']
        if k == "scalar":
            lines.append(f"    %{v} = irdl.parametric @hawk::@{k}<%{v}_e, %{v}_s>")
        else:
            lines += [f'    %{v}_a = irdl.base "#builtin.array"',
                      f"    %{v} = irdl.parametric @hawk::@{k}<%{v}_e, %{v}_s, %{v}_a>"]
    lines.append(f"    %{var} = irdl.any_of({', '.join(f'%{var}_{k}' for k in kinds)})")
    return "\n".join(lines)


_POLICY = """    %p1 = irdl.is "auto"
    %p2 = irdl.is "compensated"
    %p3 = irdl.is "plain"
    %p4 = irdl.is "ordered"
    %p = irdl.any_of(%p1, %p2, %p3, %p4)"""

_SCAN_ATTRS = """    %o1 = irdl.is "add"
    %o2 = irdl.is "min"
    %o3 = irdl.is "max"
    %o4 = irdl.is "mul"
    %o5 = irdl.is "func"
    %o = irdl.any_of(%o1, %o2, %o3, %o4, %o5)
    %m1 = irdl.is "inclusive"
    %m2 = irdl.is "exclusive"
    %m = irdl.any_of(%m1, %m2)
    %t = irdl.any
    %b1 = irdl.is i1
    %b2 = irdl.is i64
    %b = irdl.any_of(%b1, %b2)"""  # a scan's operator and mode; its value, and its reset flag (i1) or key (i64)


def _reduction(name: str, *kinds: str) -> str:
    """A reduction op over lanes (hawk.reduce; hawk.block_reduce, a read that stays in its launch): kind, axes,
    policy, the value and an optional mask."""
    choices = "\n".join(f'    %k{n} = irdl.is "{k}"' for n, k in enumerate(kinds, 1))
    return f"""  irdl.operation @{name} {{
{choices}
    %k = irdl.any_of({', '.join(f'%k{n}' for n in range(1, len(kinds) + 1))})
    %o = irdl.base "#builtin.array"
{_POLICY}
    %t = irdl.any
    %b = irdl.is i1
    irdl.attributes {{"kind" = %k, "over" = %o, "policy" = %p}}
    irdl.operands(value: %t, mask: optional %b)
    irdl.results(total: %t)
  }}"""


_IRDL = "irdl.dialect @hawk {" + "".join(_type(k, k != "scalar") for k in
                                          ("plane", "scalar", "table", "output", "sink", "total")) + f"""
  irdl.operation @lane {{
    %s = irdl.base "#builtin.string"
    %i = irdl.is i64
    irdl.attributes {{"axis" = %s}}
    irdl.results(value: %i)
  }}
  irdl.operation @extent {{
    %s = irdl.base "#builtin.string"
    %i = irdl.is i64
    irdl.attributes {{"axis" = %s}}
    irdl.results(value: %i)
  }}
  irdl.operation @load {{
{_plane("x", "plane", "output", "total")}
    %t = irdl.any
    irdl.operands(plane: %x)
    irdl.results(value: %t)
  }}
  irdl.operation @param {{
{_plane("x", "scalar")}
    %t = irdl.any
    irdl.operands(plane: %x)
    irdl.results(value: %t)
  }}
  irdl.operation @at {{
{_plane("x", "plane", "table")}
    %a = irdl.base "#builtin.array"
    %i = irdl.is i64
    %t = irdl.any
    irdl.attributes {{"axes" = %a}}
    irdl.operands(plane: %x, coords: variadic %i)
    irdl.results(value: %t)
  }}
  irdl.operation @store {{
{_plane("x", "output")}
    %t = irdl.any
    %i = irdl.is i64
    irdl.operands(plane: %x, value: %t, key: optional %i)
  }}
{_reduction("reduce", "sum", "mean", "max", "min", "fold")}
{_reduction("block_reduce", "sum", "mean", "max", "min")}
  irdl.operation @cell {{
{_plane("x", "total")}
    %t = irdl.any
    irdl.operands(cell: %x, value: %t)
  }}
  irdl.operation @cut_read {{
{_plane("x", "total")}
    %t = irdl.any
    irdl.operands(cell: %x)
    irdl.results(value: %t)
  }}
  irdl.operation @scan {{
{_SCAN_ATTRS}
    irdl.attributes {{"op" = %o, "mode" = %m}}
    irdl.operands(value: %t, reset: optional %b)
    irdl.results(running: %t)
  }}
  irdl.operation @scan_totals {{
{_plane("x", "total")}
{_SCAN_ATTRS}
    irdl.attributes {{"op" = %o}}
    irdl.operands(cell: %x, value: %t, reset: optional %b)
  }}
  irdl.operation @scan_apply {{
{_plane("x", "total")}
{_SCAN_ATTRS}
    irdl.attributes {{"op" = %o, "mode" = %m}}
    irdl.operands(cell: %x, value: %t, reset: optional %b)
    irdl.results(running: %t)
  }}
  irdl.operation @scatter {{
{_plane("x", "sink")}
    %m1 = irdl.is "add"
    %m2 = irdl.is "set"
    %m = irdl.any_of(%m1, %m2)
{_POLICY}
    %t = irdl.any
    %i = irdl.is i64
    irdl.attributes {{"mode" = %m, "policy" = %p}}
    irdl.operands(sink: %x, value: %t, keys: variadic %i)
  }}
}}
"""


# The dialects every context loads when it is made. Loading all registered dialects (the bindings' default) cost
# about 10 ms a context, and hawk makes several per kernel. Parsed text and upstream passes load what they meet,
# but an op built from Python of a dialect that is not loaded aborts the process (LLVM ERROR), so this lists every
# dialect whose Python op builders hawk imports (tests/ir/test_contexts.py checks the imports against it), and
# hawk.ir.build.create loads any other dialect an op names before building it.
BUILDER_DIALECTS = ("builtin", "func", "arith", "scf", "memref", "vector", "gpu", "llvm", "irdl", "math", "cf",
                    "index")


def new_context() -> ir.Context:
    """A fresh MLIR context with the dialects hawk builds ops of (BUILDER_DIALECTS) and the hawk dialect loaded,
    single-threaded: a context holds one stage's module, a few functions, and MLIR's thread pool for it (made
    per context) cost more than it saved; lowering a test suite's stages took 10-20% less CPU without it."""
    ctx = ir.Context(load_on_create_dialects=list(BUILDER_DIALECTS))
    ctx.enable_multithreading(False)
    with ctx, ir.Location.unknown():
        irdl.load_dialects(ir.Module.parse(_IRDL))
    return ctx


def is_hawk(op, name: str | None = None) -> bool:
    """True when `op` is a hawk op (of the given short name)."""
    n = op.operation.name
    return n.startswith("hawk.") and (name is None or n == f"hawk.{name}")

