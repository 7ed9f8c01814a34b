"""`hawk.reduce(op, x, over=..., where=..., identity=...)`: a reduction over lanes with an operator of the user's.

The operator is a hawk.math built-in or a `@hawk.func` of two values. `m.add`, `m.min` and `m.max` become the
reductions they already are (`m.add` is the exact sum, policy="ordered"); every other operator becomes a
`hawk.reduce` of kind "fold" whose combiner is a private `func.func` of the module (attribute `hawk.combiner`,
named by the reduce's `combine` attribute) holding the operator's code in upstream dialects: the func is
inlined into it once here, typed by the reduced values, and the lowering (hawk/passes/lower/folds.py) copies that code
wherever two values are combined, in the lane code and in the finish. The combine order is fixed (docs/
semantics.md, "Custom reductions"): it never depends on threads, chunks or target.
"""

from __future__ import annotations

import ast
import builtins

from mlir import ir
from mlir.dialects import func

from hawk.frontend.funcs import Func
from hawk.frontend.values import HVal
from hawk.ir.access import is_combiner
from hawk.ir.build import create, strs

# built-in operators: (reduction kind, identity for a fold) -- a kind other than "fold" is an existing reduction
_BUILTINS = {"add": ("sum", None), "min": ("min", None), "max": ("max", None), "mul": ("fold", 1.0),
             "land": ("fold", 1.0), "lor": ("fold", 0.0)}


def operator_name(f) -> str | None:
    """The hawk.math built-in an operator stands for (Python's min and max too), or None."""
    if f is builtins.min or f is builtins.max:
        return f.__name__
    tag = getattr(f, "_hawk_builtin", None)
    if isinstance(tag, tuple) and tag[0] == "math" and tag[1] in _BUILTINS:
        return tag[1]
    return None


def custom_reduce(kb, e: ast.Call) -> HVal:
    """Read `hawk.reduce(op, x, ...)` in a kernel body (`kb`: the KernelBuilder)."""
    kb.lane_local("hawk.reduce", "reduce in the kernel and pass the result in as an argument")
    if kb.nesting:
        from hawk.passes.verify import reduction_nested
        raise kb.error(reduction_nested("reduce", kb.nesting[-1]))
    if len(e.args) != 2 or any(isinstance(a, ast.Starred) for a in e.args):
        raise kb.error("hawk.reduce takes the operator and one value: hawk.reduce(op, x, where=mask, over=axes, "
                       "identity=value), with op a @hawk.func of two values or m.add, m.mul, m.min, m.max, m.land, "
                       "m.lor")
    kw = {k.arg: k.value for k in e.keywords}
    bad = [k for k in kw if k not in ("where", "over", "identity")]
    if bad:
        raise kb.error(f"hawk.reduce takes where=, over= and identity=, not {bad[0]}=")
    op_node, x_node = e.args
    f = kb.expr(op_node)
    builtin = operator_name(f)
    if builtin is None and not isinstance(f, Func):
        what = getattr(f, "__name__", None) or ast.unparse(op_node)
        raise kb.error(f"hawk.reduce(op, x): op '{what}' is not an operator it can use; pass a @hawk.func of two "
                       "values returning one (decorate the def with @hawk.func), or one of m.add, m.mul, m.min, "
                       "m.max, m.land, m.lor (import hawk.math as m)", op_node)
    x = kb.value(kb.expr(x_node), x_node)
    if x.reduced is not None:
        raise kb.error("hawk.reduce of a value that is already reduced over lanes has nothing to combine", x_node)
    if builtin in ("land", "lor") and (x.kind != "b"):
        raise kb.error(f"m.{builtin} folds truth values (e.g. x > 0.0); '{ast.unparse(x_node)}' is not one: "
                       f"compare it first, or use m.{'min' if builtin == 'land' else 'max'}", x_node)
    if builtin is not None and builtin not in ("land", "lor") and x.kind == "b":
        raise kb.error(f"m.{builtin} folds numbers; '{ast.unparse(x_node)}' is a truth value: fold it with "
                       f"m.land or m.lor", x_node)
    identity = None
    if "identity" in kw:
        if builtin is not None:
            raise kb.error(f"m.{builtin} has its own identity; identity= is for a @hawk.func operator",
                           kw["identity"])
        identity = constant_identity(kb, kw["identity"], "what an empty slice gives, broadcast over a vector or "
                                     "matrix payload")
    x = kb.sem.to_float(x)
    over = kb.over(kb.expr(kw["over"]) if "over" in kw else None, "reduce")
    kind = _BUILTINS[builtin][0] if builtin is not None else "fold"
    value = kb.sem.mlir(x)
    operands = [value]
    if "where" in kw:
        m = kb.value(kb.expr(kw["where"]), kw["where"])
        if m.kind != "b" or m.shape:
            raise kb.error(f"where= takes one truth value per lane, e.g. where=x > 0.0 (got "
                           f"{ast.unparse(kw['where'])})", kw["where"])
        operands.append(kb.sem.mlir(m))
    attrs = {"kind": kind, "over": strs(over), "policy": "ordered" if kind in ("sum", "fold") else "auto"}
    if kind == "fold":
        attrs["combine"] = combiner(kb, f if builtin is None else builtin, value.type, x.shape, e)
        ident = identity if builtin is None else _BUILTINS[builtin][1]
        if ident is not None:
            attrs["identity"] = ir.FloatAttr.get(ir.F64Type.get(), ident)
    r = create("hawk.reduce", operands, [value.type], attrs).result
    kept = tuple(a.label for a in kb.sig.lane_axes() if a.label not in over)
    return HVal(r, "f", x.shape, reduced=(kind, kept))


def constant_identity(kb, node: ast.expr, meaning: str) -> float:
    """An operator's identity= value: a constant number (`meaning`: what it is used for, for the error)."""
    iv = kb.expr(node)
    if not (isinstance(iv, HVal) and iv.is_const and iv.kind in ("f", "i", "b")) and \
            not isinstance(iv, (int, float)):
        raise kb.error(f"identity= takes a constant number ({meaning}), not '{ast.unparse(node)}'", node)
    return float(iv.value if isinstance(iv, HVal) else iv)


def _module_body(kb) -> ir.Block:
    """The module's block, found from the current insertion point (the kernel func sits in it)."""
    op = ir.InsertionPoint.current.block.owner
    while op.name != "builtin.module":
        op = op.parent
    return op.regions[0].blocks[0]


def combiner(kb, f, t: ir.Type, shape: tuple[int, ...], node: ast.Call, user: str = "hawk.reduce",
             at: ast.AST | None = None) -> str:
    """A private func of two values of type `t` returning one: the operator's code, its symbol name. `user`:
    the call that takes the operator (for errors), `at`: the operator's node (default: the call's first
    argument)."""
    if isinstance(f, Func):
        _check_arity(kb, f, node, user, node.args[0] if at is None else at)
    body = _module_body(kb)
    n = sum(1 for op in body.operations if is_combiner(op))
    name = f"{kb.kernel_name}.fold{n}"
    with ir.InsertionPoint.at_block_begin(body):
        fn = func.FuncOp(name, ([t, t], [t]), visibility="private")
        fn.attributes["hawk.combiner"] = ir.UnitAttr.get()
        block = fn.add_entry_block()
    a, b = (HVal(v, "f", shape) for v in block.arguments)
    with ir.InsertionPoint(block):
        if isinstance(f, Func):
            r = kb.inline(f, [a, b], {}, node)
            if r.shape != shape:
                raise kb.error(f"func '{f.name}' as the operator of {user} gets two values of shape {shape} "
                               f"and must return one of that shape, but returns shape {r.shape}", node)
            r = kb.sem.to_float(r)
        else:
            s = kb.sem
            if f == "mul":
                r = s.binop("*", a, b)
            else:  # land / lor of 0.0 / 1.0 truth values: the smaller or the larger
                r = s.minmax("min" if f == "land" else "max", a, b)
        if r.is_const and shape:
            r = kb.sem.broadcast(r, shape)
        func.ReturnOp([kb.sem.mlir(r)])
    return name


def _check_arity(kb, f: Func, node: ast.Call, user: str, at: ast.AST) -> None:
    """An operator is called with two values by position: refuse a func that cannot take exactly that."""
    p = f.params
    required = [n for n in p.positional if n not in p.defaults]
    kw_required = [n for n in p.keyword_only if n not in p.defaults]
    if len(p.positional) < 2 or len(required) > 2 or kw_required:
        raise kb.error(f"func '{f.name}({p.describe()})' cannot be the operator of {user}: the operator is "
                       "called with two values (the running result, then the next lane's value) and returns "
                       f"one; write def {f.name}(a, b): ...", at)
