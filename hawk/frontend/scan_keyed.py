"""`hawk.scan(x, by=key, keys=n, order="lane"|"key", exclusive=False, op=m.add)`: running totals per key (op= a
@hawk.func too, order="lane": one fold per key in lane order, run by the finish as an unkeyed func scan is).

Each lane's result folds x over the lanes whose key equals its own: order="lane" (the default) runs over the
earlier lanes (and the lane itself unless exclusive; reverse=True: the later lanes, from the last down);
order="key" runs over every (key, lane) pair before it in (key, lane) order, so
`hawk.scan(1, by=k, keys=n, order="key", exclusive=True)` is each lane's position in a stable sort by key (a
counting sort's destination). `keys=n` is a constant (1..MAX_KEYS); a key of -1 leaves
the lane out (it adds nothing and gets the identity); any other key outside 0..n-1 refuses the run.

The call becomes a `hawk.scan {op, mode, keys, order}` whose second operand is the i64 key; split-stages splits it
as any scan, and hawk/passes/lower/scan_keyed.py lowers it (per-block, per-key totals; offsets per key); a reversed
one (attribute reverse) runs as a reverse scan does, its keys in the "rscan" buffer's second plane and per-key
running values in its finish (hawk/passes/lower/scan.py).
"""

from __future__ import annotations

import ast

from mlir import ir

from hawk.frontend.values import HVal
from hawk.ir.build import create

MAX_KEYS = 4096  # keys of one keyed scan: each block of SCAN_BLOCK lanes keeps 2 * keys running values


def keyed_scan_call(kb, e: ast.Call, kw: dict) -> HVal:
    """Read `hawk.scan(x, by=key, keys=n, ...)` (`kw`: the call's keywords by name; scan.py checked the rest)."""
    from hawk.frontend.scan import _constant_flag, scan_any

    bad = [k for k in kw if k not in ("exclusive", "op", "by", "keys", "order", "reverse", "identity")]
    if bad:
        why = {"reset": "segments and keys do not mix: give each segment its own key"}.get(bad[0], "")
        raise kb.error(f"hawk.scan(x, by=key, keys=n) takes exclusive=, op=, order=, reverse= and identity=, not "
                       f"{bad[0]}=" + (f" ({why})" if why else ""), kw[bad[0]])
    if "by" not in kw or "keys" not in kw:
        raise kb.error("a keyed scan needs both by= (one integer key per lane) and keys= (how many keys, a constant): "
                       "hawk.scan(x, by=key, keys=n)")
    n = _constant_int(kb, kw["keys"])
    if not 1 <= n <= MAX_KEYS:
        raise kb.error(f"keys= takes the number of keys, 1..{MAX_KEYS}; got {n}", kw["keys"])
    order = "lane"
    if "order" in kw:
        node = kw["order"]
        order = node.value if isinstance(node, ast.Constant) else None
        if order not in ("lane", "key"):
            raise kb.error(f"order= takes \"lane\" (per key, in lane order) or \"key\" (in (key, lane) order, a "
                           f"stable sort's positions), not '{ast.unparse(node)}'", node)
    mode = "exclusive" if _constant_flag(kb, kw, "exclusive") else "inclusive"
    reverse = _constant_flag(kb, kw, "reverse")
    if reverse and order == "key":
        raise kb.error("a keyed scan with order=\"key\" runs forwards only (reverse=True takes order=\"lane\": "
                       "each key's lanes from the last down)", kw["reverse"])
    op, x, extra = scan_any(kb, e, kw, mode, order)
    s = kb.sem
    k_node = kw["by"]
    key = kb.value(kb.expr(k_node), k_node)
    if key.kind == "f" or key.shape or key.reduced is not None:
        raise kb.error(f"by= takes one integer key per lane (0..{n - 1}, or -1 to leave the lane out); "
                       f"'{ast.unparse(k_node)}' is not one: convert a float with int(...)", k_node)
    key = s.to_int(key)
    if key.is_const:
        key = HVal(s.mlir(key), "i")
    operands = [s.mlir(x), s.mlir(key)]
    i64 = ir.IntegerType.get_signless(64)
    attrs = extra | {"op": op, "mode": mode, "keys": ir.IntegerAttr.get(i64, n), "order": order} | \
        ({"reverse": ir.UnitAttr.get()} if reverse else {})
    v = create("hawk.scan", operands, [operands[0].type], attrs).result
    return HVal(v, x.kind, x.shape)


def _constant_int(kb, node: ast.expr) -> int:
    """keys=: a constant integer (a literal or a name bound to an int outside the kernel)."""
    v = kb.expr(node)
    v = v.value if isinstance(v, HVal) and v.is_const else v
    if isinstance(v, bool) or not isinstance(v, int):
        raise kb.error(f"keys= takes a constant integer (the number of keys), not '{ast.unparse(node)}'", node)
    return v
