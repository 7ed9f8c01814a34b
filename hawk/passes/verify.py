"""verify-hawk: the rules a kernel must keep that are about where cross-lane ops sit.

- a reduction is a collective every lane reaches: not under an `if`, not in a `for`;
- a scan (hawk.scan) likewise sits at the top level of the body;
- a scatter may sit in a `for` over range (each pass is its own scatter) but not under an `if`;
- one kernel reduces with one operation: sum and mean together, or max, or min (block reductions, read in their
  own stage and never stored, do not count: hawk/passes/stages.py `block_span`);
- a lane coordinate or extent names one of the kernel's lane axes (`check_axis`);
- what IRDL cannot say about typed operands (`check_types`): a value read from or written to a plane, sink or
  cell has the type its argument's hawk type holds (element and payload shape), a scatter has one key per sink
  axis, a `.at` one coordinate per indexed axis.
"""

from __future__ import annotations

from mlir import ir

from hawk.errors import KernelError
from hawk.ir.access import (
    at_coords,
    coord_axes,
    enclosing_func,
    func_name,
    kernel_axes,
    lane_axis,
    plane_name,
    plane_type,
    reduce_kind,
    scatter_keys,
    stored_value,
)
from hawk.ir.dialect import is_hawk
from hawk.passes.stages import block_span


def error_at(op, message: str) -> KernelError:
    """A KernelError at the op's source line, naming its kernel."""
    loc = op.location
    file = line = None
    try:
        if loc.is_a_file():
            file, line = loc.filename, loc.start_line
    except Exception:  # an unknown location has no file
        pass
    func_op = enclosing_func(op)
    kernel = None if func_op is None else func_name(func_op)
    return KernelError(message, file=file, line=line, kernel=kernel)


SCATTER_IN_IF = ("hawk.scatter(...) may not sit inside an if: scatter at the top level (or in a for over range) "
                 "and add m.where(cond, v, 0.0) instead")


def reduction_nested(kind: str, where: str) -> str:
    return (f"hawk.{kind}(...) reduces over the lanes, a collective every lane must reach: it may not sit inside "
            f"{'a for loop' if where == 'for' else 'an if'}; reduce at the top level of the body and fold the "
            "condition into where=")


def _enclosing(op) -> list[str]:
    names = []
    p = op.operation.parent
    while p is not None and p.name != "func.func":
        names.append(p.name)
        p = p.parent
    return names


_VALUE_OUT = {"load": "reads", "param": "reads", "at": "reads", "cut_read": "reads"}
_VALUE_IN = {"store": "stores", "cell": "hands out", "scatter": "scatters"}


def check_axis(op) -> None:
    """Raise when a hawk.lane or hawk.extent names an axis that is not one of its kernel func's lane axes."""
    if not (is_hawk(op, "lane") or is_hawk(op, "extent")):
        return
    func = enclosing_func(op)
    if func is None or "hawk.axes" not in func.attributes:
        return
    axes = kernel_axes(func)
    if lane_axis(op) not in axes:
        raise error_at(op, f"internal error: {op.operation.name} names axis '{lane_axis(op)}'; the kernel's lane "
                           f"axes are {axes}")


def check_types(op) -> None:
    """Raise when a hawk op's values do not match the hawk type of the plane, sink or cell it names."""
    check_axis(op)
    short = op.operation.name[5:]
    if short not in _VALUE_OUT and short not in _VALUE_IN:
        return
    pt = plane_type(op)
    name = plane_name(op)
    want = pt.value_type() if not (short == "at" and pt.kind == "table") else pt.elem
    got = op.results[0].type if short in _VALUE_OUT else stored_value(op).type
    if got != want:
        raise error_at(op, f"internal error: hawk.{short} {_VALUE_OUT.get(short) or _VALUE_IN[short]} a {got} "
                           f"value but '{name}' ({pt.kind}) holds {want}")
    if short == "scatter" and len(scatter_keys(op)) != len(pt.axes):
        raise error_at(op, f"internal error: a scatter into sink '{name}' has {len(scatter_keys(op))} keys; the "
                           f"sink has {len(pt.axes)} axes {list(pt.axes)}")
    if short == "at":
        axes = coord_axes(op)
        if len(at_coords(op)) != len(axes) or (pt.kind == "table" and len(axes) != len(pt.axes)):
            raise error_at(op, f"internal error: '{name}'.at(...) has {len(at_coords(op))} coordinates for axes "
                               f"{axes} of a {pt.kind} with axes {list(pt.axes)}")


def verify_hawk(module: ir.Module) -> None:
    """Raise a KernelError at the first op that breaks a rule above."""
    every: list = []
    module.operation.walk(lambda op: (every.append(op), ir.WalkResult.ADVANCE)[1])
    for op in every:  # (an exception raised inside a walk's callback would come out as a RuntimeError)
        check_types(op)
    groups: list[tuple[str, object]] = []
    found: list[object] = []

    def visit(op):
        if is_hawk(op, "reduce") or is_hawk(op, "scatter") or is_hawk(op, "scan"):
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    for op in found:
        around = _enclosing(op)
        if is_hawk(op, "scan"):
            if around:
                raise error_at(op, "hawk.scan(...) runs over every lane in order: it may not sit inside "
                                   f"{'a for loop' if 'scf.for' in around else 'an if'}; hoist it to the top level")
            extra = list(op.operands)[1:]  # (KEYSCAN) an i1 reset flag, or a keyed scan's i64 key
            if extra and isinstance(extra[0].type, ir.IntegerType) and \
                    (ir.IntegerType(extra[0].type).width == 64) != ("keys" in op.attributes):
                raise error_at(op, "hawk.scan: the operand after the value is an i1 reset flag, or the i64 key of a "
                                   "keyed scan (one with the attribute keys)")
            continue
        if is_hawk(op, "reduce"):
            kind = reduce_kind(op)
            if around:
                raise error_at(op, reduction_nested(kind, "for" if "scf.for" in around else "if"))
            if block_span(op) is not None and all(not is_hawk(u.owner, "cell") for u in op.results[0].uses):
                continue  # a block reduction, read in its own stage only: no part of the stage's reductions
            group = "sum" if kind in ("sum", "mean") else kind
            if groups and groups[0][0] != group:
                first = groups[0][1]
                said = {"fold": "reduce"}  # a fold is written hawk.reduce(op, x)
                before = reduce_kind(first)
                raise error_at(op, f"this kernel already reduces with hawk.{said.get(before, before)}; one kernel "
                                   f"reduces with one operation (sum and mean together, or max, or min, or "
                                   f"hawk.reduce folds): split the kernel and put hawk.{said.get(kind, kind)} in a "
                                   "kernel of its own")
            groups.append((group, op))
        elif "scf.if" in around:
            raise error_at(op, SCATTER_IN_IF)
