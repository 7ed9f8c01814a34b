"""The reverse of chains of a user's operator: scans by a @hawk.func and hawk.reduce folds by one (docs/reverse.md,
"Scans by a func" and "Folds").

A scan by f holds s[i] = f(s[i-1], x[i]) along each run (a run's first lane: s = x). With the partials of f at
lane i, a[i] = df/da(s[i-1], x[i]) and b[i] = df/db(s[i-1], x[i]) (a run's first lane: b = 1), the cotangent of
s[i] is the linear recurrence lam[i] = G[i] + a[i+1] * lam[i+1] down the run (G: the cotangent the scan's own
outputs give s[i]), and x[i]'s share is b[i] * lam[i]. That recurrence is itself a scan by a func, over the
pairs (a, G) in the other lane order with the forward's segments: f'((a', lam'), (a, G)) = (a, G + a' * lam')
keeps the lane's partial for the next step and folds the one before, so the adjoint is a hawk kernel with
scans in it like any other (one sequential fold in a stage's finish each: the same bits on every thread count,
target and shard split). The partials come from the sweep's own rules, run over a copy of f's code at
(s[i-1], x[i]), where s[i-1] is the forward's exclusive scan, recomputed.

A fold is one such chain per slice (keeping leading axes: a row) or, over every lane, one per block of
ORDERED_BLOCK lanes and a chain of the blocks' results (docs/semantics.md, "Custom reductions"); its only output
is the chain's end, so the cotangent of the state after lane i is the slice's cotangent times the product of the
later lanes' factors c (a kept lane's a, 1 for a lane where= leaves out, 0 at a chain's first lane, which takes
x as it is): a reverse product scan. The states come from a scan by f that skips the lanes where= leaves out (its
combiner wraps f's: `skipping`); the chain of the blocks is the same over the blocks' last lanes, and each block's
cotangent reaches its lanes through a reverse add scan within the block.
"""

from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import func, vector

from hawk.abi.layout import ORDERED_BLOCK
from hawk.ir.access import (
    combiner_name,
    combiners,
    reduce_over,
    reduce_value,
    scan_mode,
    scan_reset,
    scan_reverse,
    scan_value,
)
from hawk.ir.build import create


class ChainsMixin:
    """Sweep.reverse_func_scan and the pieces it is built from."""

    def reverse_func_scan(self, op, g, adj: dict) -> None:
        """A scan by a func: x of n components (a number, or a Vector's or Matrix's entries in row-major order);
        a and b are then f's Jacobians (a[k][j] = df_k/da_j), lam[i] = G[i] + a[i+1]^T lam[i+1] and x[i]'s share
        b[i]^T lam[i], the recurrence a scan over n * n + n values a lane."""
        x, reset, rev = scan_value(op), scan_reset(op), scan_reverse(op)
        name = combiner_name(op)
        count = self.scan(self.iconst(1), "add", reset, rev, exclusive=True)  # (an integer scan: exact)
        start = self.icmp_eq(count, self.iconst(0))  # a run's first lane (the lane before nothing)
        prev = self.func_scan(x, name, reset, rev, exclusive=True)  # s[i-1] (a run's first lane: unused)
        fn = combiners(self.module)[name]
        ft = _element(x.type)
        n = len(_comps(x))
        one, zero = self.const(1.0, ft), self.zero(ft)
        rows = [self.partials(fn, prev, x, _unit(self, x.type, k)) for k in range(n)]  # row k: df_k/d(a, b)
        a = [[self.select(start, zero, v) for v in _comps(da)] for da, _ in rows]
        b = [[self.select(start, one if j == k else zero, v) for j, v in enumerate(_comps(db))]
             for k, (_, db) in enumerate(rows)]
        gs = _comps(g)
        if scan_mode(op) == "exclusive":  # y[i] = s[i-1] (a run's first lane: the identity, a constant)
            gs = [self.shifted(self.where(self.lnot(start), v), back=not rev) for v in gs]
        state = [v for row in a for v in row] + gs
        st = ir.VectorType.get([len(state)], ft)
        pair = create("vector.from_elements", state, [st]).result
        lam = self.func_scan(pair, self.recurrence(ft, n), reset, not rev)
        lams = [vector.extract(lam, [], [n * n + k]) for k in range(n)]
        dx = []
        for j in range(n):
            total = None
            for k in range(n):
                term = self.mul(b[k][j], lams[k])
                total = term if total is None else self.add(total, term)
            dx.append(total)
        self.acc(x, _pack(dx, x.type), False, adj)

    def reverse_func_fold(self, op, t: ir.Value, mask: ir.Value | None, start: ir.Value | None, adj: dict) -> None:
        """A fold by a func of numbers (hawk/reverse/folds.py: form "func"): `t` is each lane's slice cotangent,
        `start` whether a lane starts its slice (keeping leading axes; None: over every lane, in blocks)."""
        x = reduce_value(op)
        name = combiner_name(op)
        whole = all(a in reduce_over(op) for a in self.p.axes)
        reset = self.block_start() if whole else start
        c, b, val, has = self.chain(x, mask, reset, name)
        after = self.scan(c, "mul", reset, True, exclusive=True)  # the later lanes' factors, to the chain's end
        if whole:  # the blocks' results, folded in block order: their chain's shares, spread over each block
            last = self.icmp_eq(self.scan(self.iconst(1), "add", reset, True, exclusive=True), self.iconst(0))
            keep = last if has is None else self.land(last, has)
            ct, bt, _, _ = self.chain(val, keep, None, name)
            share = self.where(keep, self.mul(self.mul(bt, self.scan(ct, "mul", None, True, exclusive=True)), t))
            t = self.scan(share, "add", reset, True)
        dx = self.mul(self.mul(b, after), t)
        self.acc(x, dx if mask is None else self.where(mask, dx), False, adj)

    def chain(self, x: ir.Value, keep: ir.Value | None, reset: ir.Value | None, name: str) -> tuple:
        """A fold's chain over the lanes (restarting where `reset` holds, skipping lanes where `keep` does not):
        per lane, (c: the factor d(state after)/d(state before), b: d(state after)/dx, the state after, whether
        the chain holds a value after the lane)."""
        fn = combiners(self.module)[name]
        one, zero = self.const(1.0, x.type), self.zero(x.type)
        if keep is None:
            prev = self.func_scan(x, name, reset, False, exclusive=True)
            held = self.scan(self.iconst(1), "add", reset, False, exclusive=True)
            seen, val, has = self.lnot(self.icmp_eq(held, self.iconst(0))), self.func_scan(x, name, reset, False), None
        else:
            pt = ir.VectorType.get([2], x.type)
            pair = create("vector.from_elements", [x, self.select(keep, one, zero)], [pt]).result
            skip = self.skipping(name, x.type)
            before = self.func_scan(pair, skip, reset, False, exclusive=True)
            upto = self.func_scan(pair, skip, reset, False)
            prev = vector.extract(before, [], [0])
            seen = self.cmp("une", vector.extract(before, [], [1]), zero)
            val, has = vector.extract(upto, [], [0]), self.cmp("une", vector.extract(upto, [], [1]), zero)
        da, db = self.partials(fn, prev, x)
        c = self.select(seen, da, zero)
        b = self.select(seen, db, one)
        if keep is not None:
            c = self.select(keep, c, one)
        return c, b, val, has

    def block_start(self) -> ir.Value:
        """Whether this lane starts a block of ORDERED_BLOCK lanes (a fold over every lane's chains)."""
        low = self.op("arith.andi", self.flat_lane(), self.iconst(ORDERED_BLOCK - 1))
        return self.icmp_eq(low, self.iconst(0))

    def skipping(self, name: str, t: ir.Type) -> str:
        """A combiner over pairs (value, kept) that folds f's where the lane is kept and passes the state on where
        it is not: g((s, h), (x, k)) = (f(s, x) if h else x, 1) if k else (s, h) (made once per operator)."""
        from hawk.passes.lower.folds import call_combiner

        skip = f"{name}.skipping"
        if skip in combiners(self.module):
            return skip
        vt = ir.VectorType.get([2], t)
        with ir.InsertionPoint.at_block_begin(self.module.body), self.func.location:
            fn = func.FuncOp(skip, ([vt, vt], [vt]), visibility="private")
            fn.attributes["hawk.combiner"] = ir.UnitAttr.get()
            entry = fn.add_entry_block()
        with ir.InsertionPoint(entry), self.func.location:
            p, q = entry.arguments
            s, h, x, k = (vector.extract(v, [], [j]) for v in (p, q) for j in (0, 1))
            zero = self.zero(t)
            has, kept = self.cmp("une", h, zero), self.cmp("une", k, zero)
            value = self.select(has, call_combiner(combiners(self.module)[name], s, x), x)
            out = create("vector.from_elements", [self.select(kept, value, s), self.select(kept, k, h)], [vt]).result
            func.ReturnOp([out])
        return skip

    def func_scan(self, x: ir.Value, name: str, reset: ir.Value | None, reverse: bool,
                  exclusive: bool = False) -> ir.Value:
        """A hawk.scan of x by the combiner `name` (exclusive: from the identity 0.0, which the rules here never
        read), segmented by `reset`."""
        f64 = ir.F64Type.get()
        attrs = {"op": "func", "mode": "exclusive" if exclusive else "inclusive", "combine": name,
                 "identity": ir.FloatAttr.get(f64, 0.0)}
        attrs |= {"reverse": ir.UnitAttr.get()} if reverse else {}
        return create("hawk.scan", [x, *([reset] if reset is not None else [])], [x.type], attrs).result

    def partials(self, fn, a: ir.Value, b: ir.Value, seed: ir.Value | None = None) -> tuple[ir.Value, ir.Value]:
        """(df/da, df/db) of the combiner `fn` at (a, b), for a cotangent `seed` on its result (1.0 when None: a
        number's partials; a unit vector: one row of the Jacobians): a copy of its code here, reversed by the
        sweep's rules."""
        from hawk.passes.lower.context import clone_ops

        block = fn.regions[0].blocks[0]
        mapping = {block.arguments[0]: a, block.arguments[1]: b}
        body = [o for o in block.operations if o.operation.name != "func.return"]
        ret = next(o for o in block.operations if o.operation.name == "func.return")
        copies = clone_ops(body, ir.InsertionPoint.current, mapping)
        held = mapping.get(ret.operands[0], ret.operands[0])
        user = create("arith.negf", [held], [held.type])  # (holds the result while hoisting replaces an if's
        items = self.hoist_ops(copies)  # results by selects)
        out = user.operands[0]
        user.operation.erase()
        local: dict = {}
        self.acc(out, self.const(1.0, out.type) if seed is None else seed, False, local)
        self.reverse(items, local)
        return tuple(local[v][0] if v in local else self.zero(v.type) for v in (a, b))

    def recurrence(self, t: ir.Type, n: int = 1) -> str:
        """The combiner of lam's scan over n * n + n values of type t, (a, lam) with a an n x n Jacobian, row-major:
        f'(p, q) = (q.a, q.lam + p.a^T p.lam), so lam[j] = G[j] + sum over k of a'[k][j] * lam'[k] (made once per
        module and n)."""
        name = f"{self.p.name}.chain{n}"
        if name in combiners(self.module):
            return name
        vt = ir.VectorType.get([n * n + n], t)
        with ir.InsertionPoint.at_block_begin(self.module.body), self.func.location:
            fn = func.FuncOp(name, ([vt, vt], [vt]), visibility="private")
            fn.attributes["hawk.combiner"] = ir.UnitAttr.get()
            entry = fn.add_entry_block()
        with ir.InsertionPoint(entry), self.func.location:
            p, q = entry.arguments
            pv = [vector.extract(p, [], [k]) for k in range(n * n + n)]
            qv = [vector.extract(q, [], [k]) for k in range(n * n + n)]
            out = qv[:n * n]
            for j in range(n):
                acc = qv[n * n + j]
                for k in range(n):
                    acc = self.add(acc, self.mul(pv[k * n + j], pv[n * n + k]))
                out.append(acc)
            func.ReturnOp([create("vector.from_elements", out, [vt]).result])
        return name


def _element(t: ir.Type) -> ir.Type:
    return ir.VectorType(t).element_type if isinstance(t, ir.VectorType) else t


def _comps(v: ir.Value) -> list[ir.Value]:
    """A value's components: itself for a number, a Vector's or Matrix's entries in row-major order."""
    if not isinstance(v.type, ir.VectorType):
        return [v]
    shape = list(ir.VectorType(v.type).shape)
    out = []
    for k in range(math.prod(shape)):
        pos, r = [], k
        for d in reversed(shape):
            pos.append(r % d)
            r //= d
        out.append(vector.extract(v, [], pos[::-1]))
    return out


def _pack(vals: list[ir.Value], t: ir.Type) -> ir.Value:
    """Components back into a value of type t (_comps' inverse)."""
    return create("vector.from_elements", vals, [t]).result if isinstance(t, ir.VectorType) else vals[0]


def _unit(e, t: ir.Type, k: int) -> ir.Value:
    """The value of type t whose component k is 1.0 and every other 0.0."""
    if not isinstance(t, ir.VectorType):
        return e.const(1.0, t)
    ft = _element(t)
    n = math.prod(ir.VectorType(t).shape)
    return _pack([e.const(1.0 if j == k else 0.0, ft) for j in range(n)], t)
