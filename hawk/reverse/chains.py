"""The reverse of chains of a user's operator: scans by a @hawk.func (docs/reverse.md, "Scans by a func").

A scan by f holds s[i] = f(s[i-1], x[i]) along each run (a run's first lane: s = x). With the partials of f at
lane i, a[i] = df/da(s[i-1], x[i]) and b[i] = df/db(s[i-1], x[i]) (a run's first lane: b = 1), the cotangent of
s[i] is the linear recurrence lam[i] = G[i] + a[i+1] * lam[i+1] down the run (G: the cotangent the scan's own
outputs give s[i]), and x[i]'s share is b[i] * lam[i]. That recurrence is itself a scan by a func, over the
pairs (a, G) in the other lane order with the forward's segments: f'((a', lam'), (a, G)) = (a, G + a' * lam')
keeps the lane's partial for the next step and folds the one before, so the adjoint is a hawk kernel with
scans in it like any other (one sequential fold in a stage's finish each: the same bits on every thread count,
target and shard split). The partials come from the sweep's own rules, run over a copy of f's code at
(s[i-1], x[i]), where s[i-1] is the forward's exclusive scan, recomputed.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import func, vector

from hawk.ir.access import combiner_name, combiners, scan_mode, scan_reset, scan_reverse, scan_value
from hawk.ir.build import create


class ChainsMixin:
    """Sweep.reverse_func_scan and the pieces it is built from."""

    def reverse_func_scan(self, op, g, adj: dict) -> None:
        x, reset, rev = scan_value(op), scan_reset(op), scan_reverse(op)
        name = combiner_name(op)
        count = self.scan(self.iconst(1), "add", reset, rev, exclusive=True)  # (an integer scan: exact)
        start = self.icmp_eq(count, self.iconst(0))  # a run's first lane (the lane before nothing)
        prev = self.func_scan(x, name, reset, rev, exclusive=True)  # s[i-1] (a run's first lane: unused)
        da, db = self.partials(combiners(self.module)[name], prev, x)
        one = self.const(1.0, x.type)
        a = self.select(start, self.zero(x.type), da)
        b = self.select(start, one, db)
        if scan_mode(op) == "exclusive":  # y[i] = s[i-1] (a run's first lane: the identity, a constant)
            g = self.shifted(self.where(self.lnot(start), g), back=not rev)
        pair = create("vector.from_elements", [a, g], [ir.VectorType.get([2], x.type)]).result
        lam = vector.extract(self.func_scan(pair, self.recurrence(x.type), reset, not rev), [], [1])
        self.acc(x, self.mul(b, lam), False, adj)

    def func_scan(self, x: ir.Value, name: str, reset: ir.Value | None, reverse: bool,
                  exclusive: bool = False) -> ir.Value:
        """A hawk.scan of x by the combiner `name` (exclusive: from the identity 0.0, which the rules here never
        read), segmented by `reset`."""
        f64 = ir.F64Type.get()
        attrs = {"op": "func", "mode": "exclusive" if exclusive else "inclusive", "combine": name,
                 "identity": ir.FloatAttr.get(f64, 0.0)}
        attrs |= {"reverse": ir.UnitAttr.get()} if reverse else {}
        return create("hawk.scan", [x, *([reset] if reset is not None else [])], [x.type], attrs).result

    def partials(self, fn, a: ir.Value, b: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(df/da, df/db) of the combiner `fn` at (a, b): a copy of its code here, reversed by the sweep's rules
        from a cotangent of 1.0 on its result."""
        from hawk.passes.lower.context import clone_ops

        block = fn.regions[0].blocks[0]
        mapping = {block.arguments[0]: a, block.arguments[1]: b}
        body = [o for o in block.operations if o.operation.name != "func.return"]
        ret = next(o for o in block.operations if o.operation.name == "func.return")
        copies = clone_ops(body, ir.InsertionPoint.current, mapping)
        user = create("arith.negf", [mapping.get(ret.operands[0], ret.operands[0])], [a.type])  # (holds the
        items = self.hoist_ops(copies)  # result while hoisting replaces an if's results by selects)
        out = user.operands[0]
        user.operation.erase()
        local: dict = {}
        self.acc(out, self.const(1.0, out.type), False, local)
        self.reverse(items, local)
        return tuple(local[v][0] if v in local else self.zero(v.type) for v in (a, b))

    def recurrence(self, t: ir.Type) -> str:
        """The combiner of lam's scan, over pairs of type t: f'(p, q) = (q[0], q[1] + p[0] * p[1]) (made once per
        module)."""
        name = f"{self.p.name}.chain"
        if name in combiners(self.module):
            return name
        vt = ir.VectorType.get([2], t)
        with ir.InsertionPoint.at_block_begin(self.module.body), self.func.location:
            fn = func.FuncOp(name, ([vt, vt], [vt]), visibility="private")
            fn.attributes["hawk.combiner"] = ir.UnitAttr.get()
            entry = fn.add_entry_block()
        with ir.InsertionPoint(entry), self.func.location:
            p, q = entry.arguments
            p0, p1, q0, q1 = (vector.extract(v, [], [k]) for v in (p, q) for k in (0, 1))
            lam = self.add(q1, self.mul(p0, p1))
            func.ReturnOp([create("vector.from_elements", [q0, lam], [vt]).result])
        return name
