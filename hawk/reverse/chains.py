"""The reverse of chains of a user's operator: scans by a @hawk.func and hawk.reduce folds by one (docs/reverse.md,
"Scans by a func" and "Folds").

A scan by f holds s[i] = f(s[i-1], x[i]) along each run (a run's first lane: s = x). With f's Jacobians at lane
i, a[i] = df/da(s[i-1], x[i]) and b[i] = df/db(s[i-1], x[i]) (a run's first lane: a = 0, b = I; for numbers they
are the partials), the cotangent of s[i] is the linear recurrence lam[i] = G[i] + a[i+1]^T lam[i+1] down the run
(G: the cotangent the scan's own outputs give s[i]), and x[i]'s share is b[i]^T lam[i]. That recurrence is itself
a scan by a func, over (a, G) in the other lane order with the forward's segments: f'((a', lam'), (a, G)) =
(a, G + a'^T lam') keeps the lane's Jacobian for the next step and folds the one before, so the adjoint is a hawk
kernel with scans in it like any other (one sequential fold in a stage's finish each: the same bits on every
thread count, target and shard split). The Jacobians come from the sweep's own rules, run over a copy of f's
code at (s[i-1], x[i]) once per component of the result, where s[i-1] is the forward's exclusive scan,
recomputed.

A fold is one such chain per slice (keeping leading axes: a row) or, over every lane, one per block of
ORDERED_BLOCK lanes and a chain of the blocks' results (docs/semantics.md, "Custom reductions"). Its only output
is the chain's end, so G is the slice's cotangent at the slice's last lane and 0 elsewhere. The states come from a
scan by f that skips the lanes where= leaves out (its combiner wraps f's: `skipping`; a skipped lane has a = I);
the chain of the blocks runs the same way over the blocks' last lanes, and gives each block's chain its G there.
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
    scan_key,
    scan_keys,
    scan_mode,
    scan_reset,
    scan_reverse,
    scan_value,
)
from hawk.ir.build import create
from hawk.reverse.folds import keeps_leading


class ChainsMixin:
    """Sweep.reverse_func_scan and Sweep.reverse_func_fold, and the pieces they are built from."""

    def reverse_func_scan(self, op, g, adj: dict) -> None:
        """A scan by a func: x of n components (a number, or a Vector's or Matrix's entries in row-major order);
        a and b are then f's Jacobians (a[k][j] = df_k/da_j), lam[i] = G[i] + a[i+1]^T lam[i+1] and x[i]'s share
        b[i]^T lam[i], the recurrence a scan over n * n + n values a lane."""
        x, reset, rev = scan_value(op), scan_reset(op), scan_reverse(op)
        keyed = None if scan_keys(op) is None else (scan_key(op), scan_keys(op), "lane")  # (runs: a key's lanes)
        name = combiner_name(op)
        start = self.run_start(reset, rev, keyed)  # a run's first lane (the lane before nothing)
        prev = self.func_scan(x, name, reset, rev, exclusive=True, keyed=keyed)  # s[i-1] (a run's first: unused)
        a, b = self.jacobians(combiners(self.module)[name], prev, x, start)
        if scan_mode(op) == "exclusive":  # y[i] = s[i-1] (a run's first lane: the identity, a constant)
            g = _pack([self.where(self.lnot(start), v) for v in _comps(g)], x.type)
        lam = self.lam(a, g, reset, not rev, keyed=keyed, before=scan_mode(op) == "exclusive")
        dx = _pack(self.shares(b, lam), x.type)
        if keyed is not None:  # a lane of key -1 took no part
            dx = self.where(self._spread(self.lnot(self.icmp_eq(scan_key(op), self.iconst(-1))), x.type), dx)
        self.acc(x, dx, False, adj)

    def reverse_func_fold(self, op, t: ir.Value, mask: ir.Value | None, start: ir.Value | None, adj: dict) -> None:
        """A fold by a func (hawk/reverse/folds.py: form "func"): `t` is each lane's slice cotangent, `start` whether
        a lane starts its slice (keeping leading axes; None: over every lane, in blocks). The chain's only output
        is its end, so its recurrence gets G = t at the chain's last lane and nothing elsewhere; over every lane
        the blocks' chain runs first, over each block's last lane, and hands each block's share of t to that
        lane as the block chain's G."""
        x = reduce_value(op)
        name = combiner_name(op)
        over = reduce_over(op)
        whole = all(a in over for a in self.p.axes)
        reset, keyed = self.block_start() if whole else start, None
        if not whole and not keeps_leading(over, self.p.axes):  # a slot's lanes are no run: one key each
            keyed = (*self.slot_key([a for a in self.p.axes if a not in over]), "lane")
        a, b, val, has = self.chain(x, mask, reset, name, keyed)
        end = self.last_lane(reset, keyed)
        if whole:  # the blocks' results, folded in block order, then each block's share of t at its last lane
            keep = end if has is None else self.land(end, has)
            at, bt, _, _ = self.chain(val, keep, None, name)
            lam = self.lam(at, self.where(self.last_lane(None), t), None)
            t = _pack(self.shares(bt, lam), x.type)
        lam = self.lam(a, self.where(end, t), reset, keyed=keyed)
        dx = _pack(self.shares(b, lam), x.type)
        self.acc(x, dx if mask is None else self.where(self._spread(mask, x.type), dx), False, adj)

    def jacobians(self, fn, prev: ir.Value, x: ir.Value, first: ir.Value) -> tuple[list, list]:
        """(a, b): the Jacobians of fn(prev, x) by prev and by x, as rows of components (a[k][j] = df_k/dprev_j),
        one reverse pass over fn's code per component; where `first` holds the lane takes x as it is: a = 0,
        b = I."""
        ft = _element(x.type)
        one, zero = self.const(1.0, ft), self.zero(ft)
        rows = [self.partials(fn, prev, x, _unit(self, x.type, k)) for k in range(len(_comps(x)))]
        a = [[self.select(first, zero, v) for v in _comps(da)] for da, _ in rows]
        b = [[self.select(first, one if j == k else zero, v) for j, v in enumerate(_comps(db))]
             for k, (_, db) in enumerate(rows)]
        return a, b

    def last_lane(self, reset: ir.Value | None, keyed: tuple | None = None) -> ir.Value:
        """Whether this lane is the last of its segment (of its key; of the run when neither): no lane after it."""
        return self.run_start(reset, True, keyed)

    def run_start(self, reset: ir.Value | None, reverse: bool, keyed: tuple | None = None) -> ir.Value:
        """Whether this lane comes first in its segment (its key's lanes; the run when neither) in the lane order
        a scan with `reverse` takes: no lane before it there (reverse=True: the segment's last lane)."""
        before = self.scan(self.iconst(1), "add", reset, reverse, exclusive=True, keyed=keyed)  # (integer: exact)
        return self.icmp_eq(before, self.iconst(0))

    def lam(self, a: list, g: ir.Value, reset: ir.Value | None, reverse: bool = True, keyed: tuple | None = None,
            before: bool = False) -> list[ir.Value]:
        """The recurrence lam[i] = G[i] + a[i+1]^T lam[i+1] along the segments (or keys), from their last lanes
        down (reverse=False: from their first lanes up, a[i-1]), as a scan over (a, G): lam's components.
        `before`: g is what an exclusive scan's outputs send to the state before each lane, so G[i] = g[i+1]
        and lam[i] = nu[i+1] with nu[i] = g[i] + a[i]^T nu[i+1]: the exclusive scan of nu, whose combiner
        takes the lane's own a (no lane moves, which keys would not allow)."""
        n = len(a)
        ft = _element(g.type)
        state = [v for row in a for v in row] + _comps(g)
        pair = create("vector.from_elements", state, [ir.VectorType.get([len(state)], ft)]).result
        out = self.func_scan(pair, self.recurrence(ft, n, own=before), reset, reverse, exclusive=before, keyed=keyed)
        return [vector.extract(out, [], [n * n + k]) for k in range(n)]

    def shares(self, b: list, lam: list) -> list[ir.Value]:
        """b^T lam, component by component."""
        out = []
        for j in range(len(b)):
            total = None
            for k in range(len(b)):
                term = self.mul(b[k][j], lam[k])
                total = term if total is None else self.add(total, term)
            out.append(total)
        return out

    def chain(self, x: ir.Value, keep: ir.Value | None, reset: ir.Value | None, name: str,
              keyed: tuple | None = None) -> tuple:
        """A fold's chain over the lanes (restarting where `reset` holds, or one per key, skipping lanes where
        `keep` does not): per lane, (a, b: the Jacobians of the state after the lane by the state before and by
        x, as rows of components; the state after; whether the chain holds a value after the lane, None when
        every lane is kept). A chain's first lane takes x as it is (a = 0, b = I); a skipped lane passes the
        state on (a = I, b = 0 once masked)."""
        fn = combiners(self.module)[name]
        ft = _element(x.type)
        one, zero = self.const(1.0, ft), self.zero(ft)
        n = len(_comps(x))
        if keep is None:
            prev = self.func_scan(x, name, reset, False, exclusive=True, keyed=keyed)
            first = self.run_start(reset, False, keyed)
            val, has = self.func_scan(x, name, reset, False, keyed=keyed), None
        else:
            parts = _comps(x) + [self.select(keep, one, zero)]
            pair = create("vector.from_elements", parts, [ir.VectorType.get([n + 1], ft)]).result
            skip = self.skipping(name, x.type)
            before = self.func_scan(pair, skip, reset, False, exclusive=True, keyed=keyed)
            upto = self.func_scan(pair, skip, reset, False, keyed=keyed)
            prev = _pack([vector.extract(before, [], [k]) for k in range(n)], x.type)
            first = self.cmp("oeq", vector.extract(before, [], [n]), zero)
            val = _pack([vector.extract(upto, [], [k]) for k in range(n)], x.type)
            has = self.cmp("une", vector.extract(upto, [], [n]), zero)
        a, b = self.jacobians(fn, prev, x, first)
        if keep is not None:
            a = [[self.select(keep, v, one if j == k else zero) for j, v in enumerate(row)] for k, row in enumerate(a)]
        return a, b, val, has

    def block_start(self) -> ir.Value:
        """Whether this lane starts a block of ORDERED_BLOCK lanes (a fold over every lane's chains)."""
        low = self.op("arith.andi", self.flat_lane(), self.iconst(ORDERED_BLOCK - 1))
        return self.icmp_eq(low, self.iconst(0))

    def skipping(self, name: str, t: ir.Type) -> str:
        """A combiner over (value's components, kept) that folds f's where the lane is kept and passes the state on
        where it is not: g((s, h), (x, k)) = (f(s, x) if h else x, 1) if k else (s, h) (made once per operator)."""
        from hawk.passes.lower.folds import call_combiner

        skip = f"{name}.skipping"
        if skip in combiners(self.module):
            return skip
        ft, n = _element(t), (math.prod(ir.VectorType(t).shape) if isinstance(t, ir.VectorType) else 1)
        vt = ir.VectorType.get([n + 1], ft)
        entry = self.new_combiner(skip, vt)
        with ir.InsertionPoint(entry), self.func.location:
            p, q = entry.arguments
            ps, qs = ([vector.extract(v, [], [j]) for j in range(n + 1)] for v in (p, q))
            zero = self.zero(ft)
            has, kept = self.cmp("une", ps[n], zero), self.cmp("une", qs[n], zero)
            s, x = _pack(ps[:n], t), _pack(qs[:n], t)
            value = _comps(self.select(has, call_combiner(combiners(self.module)[name], s, x), x))
            out = [self.select(kept, v, w) for v, w in zip(value, ps[:n], strict=True)] + \
                [self.select(kept, qs[n], ps[n])]
            func.ReturnOp([create("vector.from_elements", out, [vt]).result])
        return skip

    def new_combiner(self, name: str, vt: ir.Type) -> ir.Block:
        """A private combiner func `name` of two values of type vt returning one, at the module's start (as the
        front end makes a fold's: hawk/frontend/reduce.py): its entry block, for the caller to fill."""
        with ir.InsertionPoint.at_block_begin(self.module.body), self.func.location:
            fn = func.FuncOp(name, ([vt, vt], [vt]), visibility="private")
            fn.attributes["hawk.combiner"] = ir.UnitAttr.get()
            return fn.add_entry_block()

    def func_scan(self, x: ir.Value, name: str, reset: ir.Value | None, reverse: bool,
                  exclusive: bool = False, keyed: tuple | None = None) -> ir.Value:
        """A hawk.scan of x by the combiner `name` (exclusive: from the identity 0.0), segmented by `reset` or,
        `keyed`, run per key by (the i64 key, how many keys, "lane")."""
        return self.scan(x, "func", reset, reverse, exclusive, keyed, combine=name)

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

    def recurrence(self, t: ir.Type, n: int = 1, own: bool = False) -> str:
        """The combiner of lam's scan over n * n + n values of type t, (a, lam) with a an n x n Jacobian, row-major:
        f'(p, q) = (q.a, q.lam + p.a^T p.lam), so lam[j] = G[j] + sum over k of a'[k][j] * lam'[k]; `own`: the
        lane's own a instead, q.lam + q.a^T p.lam (made once per module, n and form)."""
        name = f"{self.p.name}.chain{n}{'own' if own else ''}"
        if name in combiners(self.module):
            return name
        vt = ir.VectorType.get([n * n + n], t)
        entry = self.new_combiner(name, vt)
        with ir.InsertionPoint(entry), self.func.location:
            p, q = entry.arguments
            pv = [vector.extract(p, [], [k]) for k in range(n * n + n)]
            qv = [vector.extract(q, [], [k]) for k in range(n * n + n)]
            out = qv[:n * n]
            jac = qv if own else pv
            for j in range(n):
                acc = qv[n * n + j]
                for k in range(n):
                    acc = self.add(acc, self.mul(jac[k * n + j], pv[n * n + k]))
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
