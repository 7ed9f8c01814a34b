"""The reverse of keyed scans that need more than a keyed scan of the cotangent: running min/max by key, and add
scans in key order (docs/reverse.md, "Scans").

A keyed min/max scan (order="lane") is, per key, the unkeyed one over that key's lanes, so its rule is hawk.max's
(Sweep.extreme_rule) on each key's lanes: the plateaus of y are found from the keyed exclusive scan, and the tie
counts and the shares are sums along a plateau. Keyed scans take no reset=, so those sums within a key are
keyed scans by a func over (value, plateau flag) pairs that restart at a plateau's edge (`runs_sum`), the same
sequential fold per key as every keyed func scan. An exclusive one reads the inclusive scan one lane of its key
back; its cotangent moves to that lane by a keyed scan that keeps the lane's value (`keyed_shifted`).

An add scan in key order (order="key") sums, at each lane, every lane of a smaller key and the lanes of its own
key up to it. Lane j's share is then the sum of g over the lanes after it in that order: the lanes of its own
key from j on (a keyed reverse scan in lane order) and every lane of a larger key (each key's total, carried by
its last lane, summed over the larger keys by a key-order exclusive scan with the keys reversed). A product in
key order takes the running product's rule (Sweep.reverse_product_scan) with those sums in place of the reverse
scans that key order does not have.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import func, vector

from hawk.frontend.scan_keyed import MAX_KEYS
from hawk.ir.access import combiners, scan_key, scan_keys, scan_mode, scan_op, scan_reverse, scan_value
from hawk.ir.build import create

_SGE, _SLT = 5, 2


class KeyedScansMixin:
    """Sweep's rules for keyed min/max scans and key-order add scans, and the keyed scans they are built from."""

    def keyed_kept(self, keyed: tuple) -> ir.Value:
        """Whether the lane takes part in a keyed scan (its key is not -1)."""
        i64 = ir.IntegerType.get_signless(64)
        return create("arith.cmpi", [keyed[0], self.iconst(0)], [ir.IntegerType.get_signless(1)],
                      {"predicate": ir.IntegerAttr.get(i64, _SGE)}).result

    def runs_sum(self, v: ir.Value, start: ir.Value, reverse: bool, keyed: tuple) -> ir.Value:
        """The sum of v along runs of each key's lanes, a run beginning (in lane order) at a lane where `start`
        holds: from the run's first lane up to this one, or (reverse=True) from this lane to the run's last. A
        keyed scan by a func over (v, start) pairs, in lane order within each key."""
        ft = v.type
        flag = self.select(start, self.const(1.0, ft), self.zero(ft))
        pair = create("vector.from_elements", [v, flag], [ir.VectorType.get([2], ft)]).result
        out = self.func_scan(pair, self.runs_combiner(ft, reverse), None, reverse, keyed=keyed)
        return vector.extract(out, [], [0])

    def runs_combiner(self, t: ir.Type, reverse: bool) -> str:
        """f((s, h), (x, k)) over (running sum, flag of the lane folded last) and (lane's value, its flag): the sum
        restarts at x where the run begins. Upwards a run begins at a flagged lane (k); downwards after one (h:
        the lane folded before this one, the next in lane order, began a run). Made once per module, form and type."""
        name = f"{self.p.name}.runs{'down' if reverse else 'up'}.{t}"
        if name in combiners(self.module):
            return name
        vt = ir.VectorType.get([2], t)
        entry = self.new_combiner(name, vt)
        with ir.InsertionPoint(entry), self.func.location:
            p, q = entry.arguments
            s, h = vector.extract(p, [], [0]), vector.extract(p, [], [1])
            x, k = vector.extract(q, [], [0]), vector.extract(q, [], [1])
            restart = self.cmp("une", h if reverse else k, self.zero(t))
            total = self.select(restart, x, self.add(s, x))
            func.ReturnOp([create("vector.from_elements", [total, k], [vt]).result])
        return name

    def keyed_shifted(self, g: ir.Value, back: bool, keyed: tuple) -> ir.Value:
        """Each lane's g from the next lane of its key (`back`; else from the one before), 0.0 where there is
        none: an exclusive keyed scan by a func that keeps the lane's value, run from the other end."""
        name = f"{self.p.name}.take.{g.type}"
        if name not in combiners(self.module):
            entry = self.new_combiner(name, g.type)
            with ir.InsertionPoint(entry), self.func.location:
                func.ReturnOp([entry.arguments[1]])
        return self.func_scan(g, name, None, back, exclusive=True, keyed=keyed)

    def keyed_extreme_scan(self, op, g, adj: dict, keyed: tuple) -> None:
        """A keyed min/max scan (order="lane"): hawk.max's rule on each key's lanes (Sweep.extreme_rule, with
        plateaus and their sums kept within a key); an exclusive one through the inclusive scan recomputed,
        its cotangent moved to the lane of the same key one step back (reverse=True: one on)."""
        x, rev = scan_value(op), scan_reverse(op)
        y = op.results[0]
        if scan_mode(op) == "exclusive":
            y = self.scan(x, scan_op(op), None, rev, keyed=keyed)
            g = self.keyed_shifted(g, not rev, keyed)
        self.extreme_rule(x, y, None, rev, scan_op(op), g, adj, keyed=keyed)

    def key_order_scan(self, op, g, adj: dict) -> None:
        """An add scan in key order (forward): lane j's share is g summed over the lanes at or after it in
        (key, lane) order (exclusive: after it)."""
        share = self.key_order_suffix(g, scan_key(op), scan_keys(op), scan_mode(op) == "exclusive")
        self.acc(scan_value(op), share, False, adj)

    def key_order_suffix(self, v: ir.Value, key: ir.Value, n: int, exclusive: bool) -> ir.Value:
        """v summed over the lanes at or after this one in (key, lane) order (exclusive: after it), 0 for a lane of
        key -1: its own key's lanes in lane order (a keyed scan from the last lane down) plus every larger key's
        total (carried by each key's last lane, summed by an exclusive key-order scan with the keys reversed)."""
        lane = (key, n, "lane")
        own = self.scan(v, "add", None, True, exclusive, keyed=lane)
        total = self.scan(v, "add", None, False, keyed=lane)  # (a key's total at its last lane)
        carried = self.where(self.last_lane(None, lane), total)
        flipped = self.select(self.keyed_kept(lane), self.op("arith.subi", self.iconst(n - 1), key), key)
        larger = self.scan(carried, "add", None, False, exclusive=True, keyed=(flipped, n, "key"))
        return self.where(self.keyed_kept(lane), self.add(own, larger))

    def grouped_scan(self, x: ir.Value, opname: str, reset, reverse: bool, exclusive: bool, keyed: tuple,
                     combine: str | None) -> ir.Value:
        """A keyed scan over more keys than one hawk.scan takes (MAX_KEYS: a fold keeping more slots of trailing
        axes), as one scan per group of MAX_KEYS consecutive keys: in group g's scan a lane keeps its key less
        the group's first when the key is in the group, else -1 (it takes no part), and each lane takes the
        result of its own group's scan. Each key's lanes fold exactly as in one scan; the cost is one pass per
        group."""
        key, keys, order = keyed
        i1, i64 = ir.IntegerType.get_signless(1), ir.IntegerType.get_signless(64)

        def icmp(pred: int, a, b):
            return create("arith.cmpi", [a, b], [i1], {"predicate": ir.IntegerAttr.get(i64, pred)}).result

        out = None
        for lo in range(0, keys, MAX_KEYS):
            n = min(MAX_KEYS, keys - lo)
            inside = self.land(icmp(_SGE, key, self.iconst(lo)), icmp(_SLT, key, self.iconst(lo + n)))
            k = self.select(inside, self.op("arith.subi", key, self.iconst(lo)), self.iconst(-1))
            got = self.scan(x, opname, reset, reverse, exclusive, (k, n, order), combine)
            out = got if out is None else self.select(inside, got, out)  # (key -1: group 0's identity)
        return out
