"""Spellings that hawk no longer accepts, each with the form that replaces it.

The messages are kept in one place so that the module-level refusals (``hawk.all_samples``) and the ones found
inside kernel bodies say the same thing.
"""

from __future__ import annotations

import ast

ALL_SAMPLES = (
    "hawk.all_samples is gone. Reduce with hawk.sum(x) (likewise hawk.max/min/mean; over=\"<axis>\" keeps the "
    "other lane axes); a masked reduction is hawk.sum(x, where=mask); one row of a matrix is "
    "hawk.sum(m.rows[0]); accumulate by key with hawk.scatter(y)[key] += v; store by key with "
    "hawk.scatter(y)[key] = v; a masked store is y = m.where(mask, v, y); another lane's input is u.at(i)"
)

ALL_SAMPLES_STORE = (
    "hawk.all_samples is gone: store by key with hawk.scatter(y)[key] = v (or add with += v); to keep the old "
    "value where a mask is false write y = m.where(mask, v, y)"
)

ACCUM = "Accum is gone: declare the sink as Mutable[\"bin\":n] and add to it with hawk.scatter(bins)[key] += term"

REDUCE = "Reduce is gone: declare Mutable[Scalar] and assign y = hawk.sum(v) (or hawk.max/min/mean)"

CONTRIBUTE = "'{name}.contribute(v)' is gone: write {name} = hawk.sum(v) (or hawk.max/min/mean)"

ADD_AT = ("'{name}.add(v, at=key)' is gone: write hawk.scatter({name})[key] += v to accumulate by key, or "
          "hawk.scatter({name})[key] = v to store by key")

WRITE_AT = "'{name}.write(v, at=key)' is gone: write hawk.scatter({name})[key] = v"

OWN_SUM = ("{expr}.sum(): a scalar belongs to this lane and has no axis to fold; the sum over the lanes is "
           "hawk.sum({expr})")

SAMPLES_AXIS = ("{expr}.sum(axis='samples') is gone: the sum over every lane is hawk.sum({expr}); over some lane "
                "axes it is hawk.sum({expr}, over=...)")

MODULE_NAMES = {"all_samples": ALL_SAMPLES, "Accum": ACCUM, "Reduce": REDUCE}


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _is_all_samples(node: ast.AST) -> bool:
    f = node.func if isinstance(node, ast.Call) else None
    return (isinstance(f, ast.Attribute) and f.attr == "all_samples") or (isinstance(f, ast.Name)
                                                                          and f.id == "all_samples")


def all_samples_message(stmt: ast.stmt) -> str | None:
    """The rewrite of the hawk.all_samples form used in `stmt` (None when it uses none)."""
    call = next((n for n in ast.walk(stmt) if _is_all_samples(n)), None)
    if call is None:
        return None
    if len(call.args) != 1:
        return ALL_SAMPLES
    x = ast.unparse(call.args[0])
    up = _parents(stmt)
    parent = up.get(call)
    grand = up.get(parent) if parent is not None else None
    great = up.get(grand) if grand is not None else None
    fix = None
    if isinstance(parent, ast.Attribute) and isinstance(grand, ast.Call) and grand.func is parent:
        op = parent.attr
        axis = next((k for k in grand.keywords if k.arg == "axis"), None)
        if op in ("sum", "max", "min", "mean") and axis is None:
            fix = f"hawk.all_samples({x}).{op}() is hawk.{op}({x})"
        elif op == "sum" and axis is not None:
            fix = (f"hawk.all_samples({x}).sum(axis={ast.unparse(axis.value)}) is hawk.sum({x}), or "
                   f"hawk.sum({x}, over=...) naming the lane axes to add over")
    elif isinstance(parent, ast.Attribute) and parent.attr in ("rows", "columns", "components") \
            and isinstance(grand, ast.Subscript):
        part = f"{x}.{parent.attr}[{ast.unparse(grand.slice)}]"
        fix = f"hawk.all_samples({x}).{parent.attr}[{ast.unparse(grand.slice)}].sum() is hawk.sum({part})"
    elif isinstance(parent, ast.Subscript) and parent.value is call:
        key = ast.unparse(parent.slice)
        masky = isinstance(parent.slice, (ast.Compare, ast.BoolOp, ast.UnaryOp))
        old = f"hawk.all_samples({x})[{key}]"
        if isinstance(grand, ast.Attribute) and isinstance(great, ast.Call) and grand.attr == "sum":
            fix = f"{old}.sum() is hawk.sum({x}, where={key})"
        elif isinstance(grand, ast.AugAssign) and grand.target is parent:
            op = _AUG.get(type(grand.op), "+")
            v = ast.unparse(grand.value)
            fix = f"{old} {op}= {v} is hawk.scatter({x})[{key}] += {v}"
            if op != "+":
                fix += f" (a scatter adds; there is no by-key {op}=)"
        elif isinstance(grand, ast.Assign) and parent in grand.targets:
            v = ast.unparse(grand.value)
            if masky:
                fix = (f"a masked store {old} = {v} is {x} = m.where({key}, {v}, {x}) (the old value stays where "
                       f"{key} is false)")
            else:
                fix = (f"{old} = {v} is hawk.scatter({x})[{key}] = {v}; if {key} is a mask rather than a key, it "
                       f"is {x} = m.where({key}, {v}, {x})")
        else:
            fix = f"{old} reads another lane: write {x}.at({key})"
    if fix is None:
        return ALL_SAMPLES
    return f"hawk.all_samples is gone: {fix}"


_AUG = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
