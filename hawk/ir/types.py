"""The hawk dialect's types: what a kernel func's block arguments are, and helpers to make and read them.

Every plane, sink and cell a kernel touches is a typed block argument of its func, named by the argument
attribute `hawk.name`. A type says the kind, the element type, the payload shape and, where it matters, axes:

  !hawk.plane<elem, shape, axes>   a per-lane input plane (float, or an Index plane's integer); axes: lane axes
  !hawk.scalar<elem, shape>        a run-wide number (a Param)
  !hawk.table<elem, shape, axes>   a table read by its own axes (`.at`)
  !hawk.output<elem, shape, axes>  a per-lane output
  !hawk.sink<elem, shape, axes>    a sink written by scatters, one key per axis
  !hawk.total<elem, shape, axes>   a reduced value handed out (a cell, a result, a cut between stages); axes:
                                   the lane axes its reduction keeps
(A type cannot share a name with an op in IRDL, hence `scalar` for hawk.param's and `total` for hawk.cell's.)

`shape` is a `array<i64: ...>` (empty for a scalar payload), `axes` an array of axis names. The types are
IRDL dynamic types: MLIR's Python bindings give no accessors for their parameters, so `parts` reads them back
from the printed form (a small, fixed grammar).
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

KINDS = ("plane", "scalar", "table", "output", "sink", "total")
NAME = "hawk.name"  # the argument attribute that names a plane


@dataclass(frozen=True)
class PlaneType:
    """A hawk type's parameters, read back as Python values."""
    kind: str
    elem: ir.Type
    shape: tuple[int, ...]
    axes: tuple[str, ...]

    def value_type(self) -> ir.Type:
        """The type of one lane's value: the element, or a vector of the payload shape."""
        return ir.VectorType.get(list(self.shape), self.elem) if self.shape else self.elem


def _shape_text(shape) -> str:
    return "array<i64: " + ", ".join(str(int(d)) for d in shape) + ">" if len(shape) else "array<i64>"


def _axes_text(axes) -> str:
    return "[" + ", ".join(f'"{a}"' for a in axes) + "]"


def hawk_type(kind: str, elem: ir.Type, shape=(), axes=()) -> ir.Type:
    """The hawk type of a plane (in the current context)."""
    if kind not in KINDS:
        raise ValueError(f"unknown hawk type kind {kind!r}; one of {KINDS}")
    params = [str(elem), _shape_text(shape)] + ([] if kind == "scalar" else [_axes_text(axes)])
    return ir.Type.parse(f"!hawk.{kind}<{', '.join(params)}>")


def of_value(kind: str, value_type: ir.Type, axes=()) -> ir.Type:
    """The hawk type whose lane values have `value_type` (a scalar or a vector payload)."""
    if isinstance(value_type, ir.VectorType):
        vt = ir.VectorType(value_type)
        return hawk_type(kind, vt.element_type, tuple(vt.shape), axes)
    return hawk_type(kind, value_type, (), axes)


def _split_top(text: str) -> list[str]:
    """Split at the commas that are not inside <>, [] or quotes."""
    out, depth, cur, quoted = [], 0, [], False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch in "<[(":
            depth += 1
        elif not quoted and ch in ">])":
            depth -= 1
        if ch == "," and depth == 0 and not quoted:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur).strip())
    return out


def is_hawk_type(t: ir.Type) -> bool:
    return str(t).startswith("!hawk.")


def parts(t: ir.Type) -> PlaneType:
    """A hawk type's kind, element type, payload shape and axes."""
    text = str(t)
    if not text.startswith("!hawk.") or not text.endswith(">"):
        raise ValueError(f"{text} is not a hawk plane type")
    kind, _, inner = text[len("!hawk."):-1].partition("<")
    params = _split_top(inner)
    elem = ir.Type.parse(params[0])
    shape = tuple(ir.DenseI64ArrayAttr(ir.Attribute.parse(params[1])))
    axes = tuple(ir.StringAttr(a).value for a in ir.ArrayAttr(ir.Attribute.parse(params[2]))) \
        if len(params) > 2 else ()
    return PlaneType(kind, elem, shape, axes)


# ---- a func's named arguments -------------------------------------------------------------------------------
def arg_names(func_op) -> list[str]:
    """The `hawk.name` of each argument of a func (the empty string for one without)."""
    attrs = func_op.operation.attributes
    if "arg_attrs" not in attrs:
        return [""] * len(func_op.regions[0].blocks[0].arguments)
    out = []
    for d in ir.ArrayAttr(attrs["arg_attrs"]):
        d = ir.DictAttr(d)
        out.append(ir.StringAttr(d[NAME]).value if NAME in d else "")
    return out


def _set_signature(func_op, names: list[str]) -> None:
    block = func_op.regions[0].blocks[0]
    ftype = ir.FunctionType(ir.TypeAttr(func_op.operation.attributes["function_type"]).value)
    func_op.operation.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get([a.type for a in block.arguments], list(ftype.results)))
    func_op.operation.attributes["arg_attrs"] = ir.ArrayAttr.get(
        [ir.DictAttr.get({NAME: ir.StringAttr.get(n)}) for n in names])


def sync_signature(func_op) -> None:
    """Make a func's type and argument names follow its entry block (after arguments change type)."""
    _set_signature(func_op, arg_names(func_op))


def retype_arg(v: ir.Value, t: ir.Type) -> None:
    """Give a func's argument another type (and the func's type with it)."""
    if v.type != t:
        a = ir.BlockArgument(v)
        a.set_type(t)
        sync_signature(a.owner.owner)


def find_arg(func_op, name: str) -> ir.Value | None:
    """The argument named `name`, if the func has one."""
    for a, n in zip(func_op.regions[0].blocks[0].arguments, arg_names(func_op), strict=True):
        if n == name:
            return a
    return None


def add_arg(func_op, name: str, t: ir.Type) -> ir.Value:
    """The argument named `name` of type `t`, appended when the func has none yet."""
    found = find_arg(func_op, name)
    if found is not None:
        if found.type != t:
            raise ValueError(f"plane '{name}' is used as {found.type} and as {t}")
        return found
    names = arg_names(func_op)
    a = func_op.regions[0].blocks[0].add_argument(t, func_op.location)
    _set_signature(func_op, [*names, name])
    return a


def drop_unused_args(func_op) -> None:
    """Remove the arguments nothing uses."""
    block = func_op.regions[0].blocks[0]
    names = arg_names(func_op)
    for k in reversed(range(len(block.arguments))):
        if not list(block.arguments[k].uses):
            block.erase_argument(k)
            del names[k]
    _set_signature(func_op, names)


def arg_name(v: ir.Value) -> str:
    """The `hawk.name` of a value that is a func's block argument."""
    a = ir.BlockArgument(v)
    return arg_names(a.owner.owner)[a.arg_number]


def is_named_arg(v: ir.Value) -> bool:
    """True for a block argument of a func whose type is a hawk type."""
    return isinstance(v, ir.BlockArgument) and is_hawk_type(v.type)
