"""`hawk.scan(x, exclusive=False, op=m.add, reset=flag, reverse=False)`: a running total over the lanes, in lane
order (reverse=True: from the last lane down). op= may be a `@hawk.func` of two values (`identity=` gives what an
exclusive scan starts a run from): the op is then "func" and names its combiner, as a fold's does.

The call becomes one `hawk.scan {op, mode}` op on the lane's scalar value (and its reset flag); reverse=True adds
the unit attribute `reverse`. Its result is a per-lane value like any other, but reading it needs every earlier
lane (every later one, reversed), so split-stages treats it as a reduction: the stage of the scan writes what the
next stage needs (block totals turned into offsets; reversed: the lanes' values, turned into the running totals by
that stage's finish) (hawk/passes/stages.py, hawk/passes/lower/scan.py; the bits contract is in
docs/semantics.md, "Scans").

x is a float (the run's float type) or an integer (int64 arithmetic, wrapping as NumPy's int64 does); a truth
value counts as an integer 0 or 1 (a running count of the lanes where a condition holds).
"""

from __future__ import annotations

import ast

from mlir import ir

from hawk.frontend.funcs import Func
from hawk.frontend.reduce import combiner, constant_identity, operator_name
from hawk.frontend.values import HVal
from hawk.ir.build import create

_OPS = ("add", "mul", "min", "max")


def scan_operator(f) -> str | None:
    """The scan operator a value names: m.add, m.mul (a running product), m.min, m.max (Python's min and max
    too), or None."""
    name = operator_name(f)
    return name if name in _OPS else None


def lane_number(kb, x_node: ast.expr, shaped: bool = False) -> HVal:
    """A scan's operand: a per-lane value (not a reduced one), one number unless `shaped` (a func's scan)."""
    x = kb.value(kb.expr(x_node), x_node)
    if x.reduced is not None:
        raise kb.error("hawk.scan of a value that is already reduced over lanes: every lane holds the same value; "
                       "scan a per-lane value", x_node)
    if x.shape and not shaped:
        raise kb.error(f"hawk.scan runs over one number per lane; '{ast.unparse(x_node)}' has shape {x.shape}: "
                       "scan each component on its own (x[0], x[1], ...), or scan it with a @hawk.func operator "
                       "(op=f), which takes Vector and Matrix values", x_node)
    return x


def scan_operand(kb, e: ast.Call, kw: dict) -> tuple[str, HVal]:
    """A scan's operator (op=, default add) and its per-lane scalar operand, checked; a truth value becomes a 0/1
    integer (a running count) and a constant a value of its own (shared by plain and keyed scans)."""
    op = "add"
    if "op" in kw:
        f = kb.expr(kw["op"])
        op = scan_operator(f)
        if op is None:
            raise kb.error(f"hawk.scan(x, op=...): op '{ast.unparse(kw['op'])}' is not a scan operator; use m.add "
                           "(the default), m.mul, m.min or m.max (import hawk.math as m), or a @hawk.func of two "
                           "values returning one", kw["op"])
    x_node = e.args[0]
    x = lane_number(kb, x_node)
    if x.kind == "b":
        x = kb.sem.to_int(x)  # a running count
    if x.is_const:
        x = HVal(kb.sem.mlir(x), x.kind)
    return op, x


def scan_call(kb, e: ast.Call) -> HVal:
    """Read `hawk.scan(x, ...)` in a kernel body (`kb`: the KernelBuilder)."""
    kb.lane_local("hawk.scan", "scan in the kernel and pass the values a func needs as arguments")
    if kb.nesting:
        where = "a for loop" if kb.nesting[-1] == "for" else "an if"
        raise kb.error(f"hawk.scan(...) runs over every lane in order, a collective every lane must reach: it may "
                       f"not sit inside {where}; hoist it to the top level of the body (y = hawk.scan(x) before "
                       "the " + ("loop" if kb.nesting[-1] == "for" else "if") + ") and select the lanes' values "
                       "with m.where(cond, x, 0.0) or reset=")
    if len(e.args) != 1 or any(isinstance(a, ast.Starred) for a in e.args):
        raise kb.error("hawk.scan takes one value: hawk.scan(x, exclusive=False, op=m.add, reset=flag, "
                       "reverse=False)")
    kw = {k.arg: k.value for k in e.keywords}
    if "by" in kw or "keys" in kw or "order" in kw:  # per-key running totals (scan_keyed.py)
        from hawk.frontend.scan_keyed import keyed_scan_call
        return keyed_scan_call(kb, e, kw)
    bad = [k for k in kw if k not in ("exclusive", "op", "reset", "reverse", "identity")]
    if bad:
        raise kb.error(f"hawk.scan takes exclusive=, op=, reset=, reverse= and identity=, not {bad[0]}=")
    mode = "exclusive" if _constant_flag(kb, kw, "exclusive") else "inclusive"
    reverse = _constant_flag(kb, kw, "reverse")
    op, x, attrs = scan_any(kb, e, kw, mode)
    s = kb.sem
    operands = [s.mlir(x)]
    if "reset" in kw:
        r = kb.value(kb.expr(kw["reset"]), kw["reset"])
        if r.kind != "b" or r.shape:
            raise kb.error("reset= takes one truth value per lane (a lane where it is true starts a new run), e.g. "
                           f"reset=key != key.at(i - 1); got '{ast.unparse(kw['reset'])}'", kw["reset"])
        operands.append(s.mlir(r))
    attrs |= {"op": op, "mode": mode} | ({"reverse": ir.UnitAttr.get()} if reverse else {})
    v = create("hawk.scan", operands, [operands[0].type], attrs).result
    return HVal(v, x.kind, x.shape)


def scan_any(kb, e: ast.Call, kw: dict, mode: str, keyed_order: str | None = None) -> tuple[str, HVal, dict]:
    """A scan's operator, operand and the attributes a func operator adds (shared by plain and keyed scans;
    `keyed_order`: a keyed scan's order=)."""
    f = kb.expr(kw["op"]) if "op" in kw else None
    if isinstance(f, Func):  # a user operator: one fold in lane order (scan_func)
        if keyed_order == "key":
            raise kb.error(f"a keyed scan by a @hawk.func runs each key's lanes in lane order: order=\"lane\", not "
                           f"\"key\" (fold the keys' results with hawk.scan(..., op={f.name}) over a plane "
                           "sorted by key instead)", kw["order"])
        return "func", *scan_func(kb, e, kw, f, mode)
    if "identity" in kw:
        raise kb.error("identity= is for a @hawk.func operator (op=f); m.add, m.mul, m.min and m.max have their own",
                       kw["identity"])
    return *scan_operand(kb, e, kw), {}


def scan_func(kb, e: ast.Call, kw: dict, f: Func, mode: str) -> tuple[HVal, dict]:
    """A scan by a @hawk.func operator: its float operand and the attributes naming the combiner (the func's
    code, as hawk.reduce's: hawk/frontend/reduce.py) and the identity an exclusive scan starts a run from."""
    x_node = e.args[0]
    x = lane_number(kb, x_node, shaped=True)
    if x.kind != "f":
        raise kb.error(f"hawk.scan(x, op={f.name}): a @hawk.func operator scans floats; '{ast.unparse(x_node)}' "
                       f"is {'a truth value' if x.kind == 'b' else 'an integer'}: write m.to_float(...) around it",
                       x_node)
    if x.is_const:
        x = HVal(kb.sem.mlir(x), x.kind)
    attrs = {}
    if "identity" in kw:
        ident = constant_identity(kb, kw["identity"], "what an exclusive scan gives at a run's first lane")
        attrs["identity"] = ir.FloatAttr.get(ir.F64Type.get(), ident)
    elif mode == "exclusive":
        raise kb.error(f"hawk.scan(x, op={f.name}, exclusive=True) needs identity=v: a run's first lane has no "
                       "earlier lanes, and a func has no identity of its own (write identity=0.0, or whatever "
                       f"{f.name}(v, x) == x for)")
    value = kb.sem.mlir(x)
    attrs["combine"] = combiner(kb, f, value.type, x.shape, e, "hawk.scan", kw["op"])
    return x, attrs


def _constant_flag(kb, kw: dict, key: str) -> bool:
    """exclusive= / reverse=: a constant True or False (False when left out)."""
    if key not in kw:
        return False
    ex = kb.expr(kw[key])
    flag = ex.value if isinstance(ex, HVal) and ex.is_const and ex.kind == "b" else ex
    if not isinstance(flag, bool):
        raise kb.error(f"{key}= takes True or False (a constant), not '{ast.unparse(kw[key])}'", kw[key])
    return flag
