"""Accessors: the one place that knows how a fact sits on a hawk op or a kernel func.

Passes, the analysis, the reverse and the lowerings read hawk IR only through these functions, never through
raw attribute names or operand positions, so the representation can change underneath. Today a plane, sink or
cell is an op's first operand: a typed block argument of the kernel func, named by its `hawk.name` argument
attribute (hawk/ir/types.py). Names resolve through that argument's own func, so an op moved or cloned into
another func still answers while the kernel func exists.

  plane_name(op)     load / param / at / store: the plane it reads or writes
  sink_name(op)      scatter: the sink it writes
  cell_name(op)      cell / cut_read: the cell it hands out or reads
  written_name(op)   store / scatter / cell: the output, sink or cell it writes
  lane_axis(op)      lane / extent: the Grid axis whose coordinate (extent) it gives
  coord_axes(op)     at: the axes its coordinates index ("#" for a flat index); cut_read: the kept axes
  plane_value(op)    the block argument naming it
  plane_type(op)     the PlaneType (kind, elem, shape, axes) of the plane, sink or cell it names
  reduced_kept_axes(v, lane_axes)  the axes a reduced value's reduction keeps
  scatter_mode(op)   scatter: "add" or "set"
  policy(op)         reduce / scatter: "auto", "compensated", "plain" or "ordered"; set_policy(op, p)
  reduce_kind(op)    reduce: "sum", "mean", "max", "min" or "fold"
  reduce_over(op)    reduce: the lane axes it reduces over
  stored_value(op)   store / cell / scatter: the value written; set_stored_value(op, v)
  scatter_keys(op)   scatter: its keys; at_coords(op): a hawk.at's coordinates; store_key(op): a keyed store's
                     flat position (None: this lane's)
  reduce_value(op)   reduce: the per-lane value; reduce_mask(op): its mask or None
  is_plane_value(v)  a value that stands for a plane, sink or cell (an operand lowerings leave alone)
  combiner_name(op)  fold, scan by a func: the symbol of its combiner func; fold_identity(op): its identity or None
  kernel_func(m)     the module's kernel func; kernel_axes(f): its lane axes in grid order; kernel_args(f): its
                     typed arguments by name
  scan_op(op)        scan / scan_totals / scan_apply: "add", "mul", "min", "max" or "func"; scan_mode(op):
                     "inclusive" or "exclusive" (scan, scan_apply); scan_value(op), scan_reset(op): the per-lane
                     value, the reset flag or None; scan_cell(op): scan_totals / scan_apply: the internal cell;
                     scan_reverse(op): whether it runs from the last lane down (reverse=True); scan_in_finish(op):
                     whether its stage's finish folds it lane by lane (reverse, or a func operator);
                     scan_keys(op), scan_key(op), scan_order(op): a keyed scan's key count, key and order
  is_combiner(f)     a fold's combiner func; combiners(m): them by name; func_name(f); enclosing_func(op)
  int_constant(v)    the integer an `arith.constant` gives (index or integer), else None
"""

from __future__ import annotations

from mlir import ir

from hawk.ir.types import arg_name, arg_names, is_named_arg, parts


def _str(op, key: str) -> str:
    return ir.StringAttr(op.operation.attributes[key]).value


def _strs(op, key: str) -> list[str]:
    return [ir.StringAttr(a).value for a in ir.ArrayAttr(op.operation.attributes[key])]


def _name(op) -> str:
    return op.operation.name


# ---- hawk ops ---------------------------------------------------------------------------------------------
def plane_name(op) -> str:
    """The plane a hawk.load, hawk.param, hawk.at or hawk.store reads or writes."""
    return arg_name(op.operands[0])


def sink_name(op) -> str:
    """The sink a hawk.scatter writes."""
    return arg_name(op.operands[0])


def cell_name(op) -> str:
    """The cell a hawk.cell hands out or a hawk.cut_read reads."""
    return arg_name(op.operands[0])


def written_name(op) -> str:
    """The output, sink or cell a hawk.store, hawk.scatter or hawk.cell writes."""
    n = _name(op)
    if n == "hawk.store":
        return plane_name(op)
    if n == "hawk.scatter":
        return sink_name(op)
    if n == "hawk.cell":
        return cell_name(op)
    raise ValueError(f"{n} writes nothing")


def lane_axis(op) -> str:
    """The Grid axis a hawk.lane gives this lane's coordinate on (a hawk.extent: whose extent it gives)."""
    return _str(op, "axis")


def lane_is_own(op) -> bool:
    """Whether a hawk.lane only keys a table of the run's own slots (unit attribute `own`): a sharded run may give
    it the shard's own coordinate."""
    return "own" in op.operation.attributes


def coord_axes(op) -> list[str]:
    """A hawk.at's indexed axes (["#"]: one flat index) or a hawk.cut_read's kept axes, in order."""
    if _name(op) == "hawk.cut_read":
        return list(parts(op.operands[0].type).axes)
    return _strs(op, "axes")


def scatter_mode(op) -> str:
    """A hawk.scatter's mode: "add" (+=) or "set" (=)."""
    return _str(op, "mode")


def policy(op) -> str:
    """A hawk.reduce's or hawk.scatter's summation policy."""
    return _str(op, "policy")


def set_policy(op, value: str) -> None:
    """Give a hawk.reduce or hawk.scatter another policy."""
    op.operation.attributes["policy"] = ir.StringAttr.get(value)


def reduce_kind(op) -> str:
    """A hawk.reduce's kind: sum, mean, max, min or fold."""
    return _str(op, "kind")


def reduce_over(op) -> list[str]:
    """The lane axes a hawk.reduce reduces over."""
    return _strs(op, "over")


def combiner_name(op) -> str:
    """The symbol of the combiner func of a fold (hawk.reduce of kind fold) or of a scan by a func."""
    return _str(op, "combine")


def stored_value(op) -> ir.Value:
    """The value a hawk.store, hawk.cell or hawk.scatter writes."""
    return op.operands[1]


def set_stored_value(op, value: ir.Value) -> None:
    """Make a hawk.store, hawk.cell or hawk.scatter write another value."""
    op.operands[1] = value


def scatter_keys(op) -> list[ir.Value]:
    """A hawk.scatter's keys, one per sink axis."""
    return list(op.operands)[2:]


def store_key(op) -> ir.Value | None:
    """The flat position a keyed hawk.store writes (`hawk.scatter(out)[k] = v` into an output plane); None for
    a per-lane store."""
    ops = list(op.operands)
    return ops[2] if len(ops) > 2 else None


def at_coords(op) -> list[ir.Value]:
    """A hawk.at's coordinates (one per entry of coord_axes(op))."""
    return list(op.operands)[1:]


def reduce_value(op) -> ir.Value:
    """The per-lane value a hawk.reduce combines."""
    return op.operands[0]


def reduce_mask(op) -> ir.Value | None:
    """A hawk.reduce's mask (where=), if it has one."""
    return op.operands[1] if len(op.operands) > 1 else None


def is_plane_value(v: ir.Value) -> bool:
    """True for a value that names a plane, sink or cell (no number: lowerings keep it as it is)."""
    return is_named_arg(v)


def plane_value(op) -> ir.Value:
    """The block argument that names the plane, sink or cell an op reads or writes."""
    return op.operands[0]


def plane_type(op):
    """The hawk type (hawk.ir.types.PlaneType) of the plane, sink or cell an op reads or writes."""
    return parts(op.operands[0].type)


def reduced_kept_axes(v: ir.Value, lane_axes) -> list[str]:
    """The lane axes (of `lane_axes`, in order) kept by the reduction a reduced value comes from, through any
    ops on reduced values; none when no reduction is found."""
    seen = set()
    stack = [v]
    while stack:
        x = stack.pop()
        owner = x.owner
        if isinstance(owner, ir.Block) or owner in seen:
            continue
        seen.add(owner)
        if _name(owner) == "hawk.reduce":
            over = set(reduce_over(owner))
            return [a for a in lane_axes if a not in over]
        stack.extend(owner.operands)
    return []


def _scan_operands(op) -> list[ir.Value]:
    """A scan's (value, reset?) operands, past the cell of a split stage's scan_totals or scan_apply."""
    ops = list(op.operands)
    return ops if _name(op) == "hawk.scan" else ops[1:]


def scan_op(op) -> str:
    """A hawk.scan's (or a split stage's scan_totals' or scan_apply's) operator: add, mul, min, max or func (a
    @hawk.func's combiner, `combiner_name`; its identity, if any, `fold_identity`)."""
    return _str(op, "op")


def scan_in_finish(op) -> bool:
    """Whether a scan's running values are folded by its stage's finish, one lane after another (reverse=True,
    or a @hawk.func operator: op "func"), rather than in the lanes' loop."""
    return scan_reverse(op) or scan_op(op) == "func"


def scan_mode(op) -> str:
    """A hawk.scan's or scan_apply's mode: inclusive or exclusive."""
    return _str(op, "mode")


def scan_value(op) -> ir.Value:
    """The per-lane value a scan runs over."""
    return _scan_operands(op)[0]


def scan_reset(op) -> ir.Value | None:
    """A scan's reset flag (reset=), if it has one."""
    ops = _scan_operands(op)
    return ops[1] if len(ops) > 1 and scan_keys(op) is None else None


def scan_keys(op) -> int | None:
    """A keyed scan's number of keys (hawk.scan(x, by=key, keys=n): the attribute `keys`), or None."""
    a = op.operation.attributes
    return ir.IntegerAttr(a["keys"]).value if "keys" in a else None


def scan_key(op) -> ir.Value | None:
    """A keyed scan's per-lane key (i64; its second operand), or None."""
    return _scan_operands(op)[1] if scan_keys(op) is not None else None


def scan_order(op) -> str:
    """A keyed scan's fold order: "lane" (per key, in lane order) or "key" (over (key, lane) pairs in order)."""
    return _str(op, "order") if "order" in op.operation.attributes else "lane"


def scan_reverse(op) -> bool:
    """Whether a scan (or its split stage's op) runs from the last lane down: the unit attribute `reverse`."""
    return "reverse" in op.operation.attributes


def scan_cell(op) -> str:
    """The internal cell a split stage's scan_totals writes or scan_apply reads."""
    return arg_name(op.operands[0])


def fold_identity(op) -> float | None:
    """A fold's identity, if it has one."""
    attrs = op.operation.attributes
    return ir.FloatAttr(attrs["identity"]).value if "identity" in attrs else None


# ---- funcs ------------------------------------------------------------------------------------------------
def is_kernel(func_op) -> bool:
    """True for a hawk kernel (or stage) func."""
    return "hawk.kernel" in func_op.operation.attributes


def kernel_func(module: ir.Module):
    """The module's hawk kernel func."""
    return next(op for op in module.body.operations if is_kernel(op))


def kernel_axes(func_op) -> list[str]:
    """A kernel func's lane axes in grid order (empty when it has none recorded)."""
    if "hawk.axes" not in func_op.operation.attributes:
        return []
    return _strs(func_op, "hawk.axes")


def kernel_args(func_op) -> dict[str, ir.Value]:
    """A kernel func's typed block arguments by their `hawk.name` (its planes, sinks and cells)."""
    return {n: a for a, n in zip(func_op.regions[0].blocks[0].arguments, arg_names(func_op), strict=True) if n}


def is_combiner(func_op) -> bool:
    """True for the private func that is a fold's combiner."""
    return "hawk.combiner" in func_op.operation.attributes


def func_name(func_op) -> str:
    return _str(func_op, "sym_name")


def combiners(module: ir.Module) -> dict:
    """The module's combiner funcs by symbol."""
    return {func_name(op): op for op in module.body.operations if is_combiner(op)}


def enclosing_func(op):
    """The func.func an op sits in (the op itself when it is one)."""
    p = op.operation
    while p is not None and p.name != "func.func":
        p = p.parent
    return p


def int_constant(v: ir.Value) -> int | None:
    """The integer `v` is when an `arith.constant` of an index or integer type gives it, else None."""
    owner = v.owner
    if isinstance(owner, ir.Block) or owner.name != "arith.constant":
        return None
    return ir.IntegerAttr(owner.attributes["value"]).value
