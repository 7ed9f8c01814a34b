"""verify-hawk: the rules a kernel must keep that are about where cross-lane ops sit.

- a reduction is a collective every lane reaches: not under an `if`, not in a `for`;
- a scatter may sit in a `for` over range (each pass is its own scatter) but not under an `if`;
- one kernel reduces with one operation: sum and mean together, or max, or min.
"""

from __future__ import annotations

from mlir import ir

from hawk.errors import KernelError
from hawk.ir.dialect import attr_str, is_hawk


def error_at(op, message: str) -> KernelError:
    """A KernelError at the op's source line, naming its kernel."""
    loc = op.location
    file = line = None
    try:
        if loc.is_a_file():
            file, line = loc.filename, loc.start_line
    except Exception:  # an unknown location has no file
        pass
    kernel = None
    p = op.operation
    while p is not None:
        if p.name == "func.func":
            kernel = ir.StringAttr(p.attributes["sym_name"]).value
            break
        p = p.parent
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


def verify_hawk(module: ir.Module) -> None:
    groups: list[tuple[str, object]] = []
    found: list[object] = []

    def visit(op):
        if is_hawk(op, "reduce") or is_hawk(op, "scatter"):
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    for op in found:
        around = _enclosing(op)
        if is_hawk(op, "reduce"):
            kind = attr_str(op, "kind")
            if around:
                raise error_at(op, reduction_nested(kind, "for" if "scf.for" in around else "if"))
            group = "sum" if kind in ("sum", "mean") else kind
            if groups and groups[0][0] != group:
                first = groups[0][1]
                said = {"fold": "reduce"}  # a fold is written hawk.reduce(op, x)
                before = attr_str(first, "kind")
                raise error_at(op, f"this kernel already reduces with hawk.{said.get(before, before)}; one kernel "
                                   f"reduces with one operation (sum and mean together, or max, or min, or "
                                   f"hawk.reduce folds): split the kernel and put hawk.{said.get(kind, kind)} in a "
                                   "kernel of its own")
            groups.append((group, op))
        elif "scf.if" in around:
            raise error_at(op, SCATTER_IN_IF)
