"""The ends of the reverse sweep (hawk/reverse/sweep.py): where cotangents enter (the forward's outputs: stores,
cells and scatters) and where gradients leave (per-lane outputs, gradient sinks, Param cells)."""

from __future__ import annotations

from mlir import ir

from hawk.ir.build import create, strs
from hawk.ir.dialect import attr_str, is_hawk


def _prod(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


class OutputsMixin:
    """Sweep.seed (the cotangent of each forward effect) and Sweep.finish (the gradients handed out)."""

    # ---- seeds: the cotangents of the forward's outputs -------------------------------------------------
    def seed(self, op, adj: dict) -> None:
        if is_hawk(op, "store"):
            out = attr_str(op, "plane")
            v = op.operands[0]
            ct = create("hawk.load", [], [v.type], {"plane": self.p.ct[out]}).result
            self.acc(v, ct, False, adj)
        elif is_hawk(op, "cell"):
            out = attr_str(op, "name")
            v = op.operands[0]
            kept = self.p.kept.get(out)
            if not kept:
                self.acc(v, self.read_ct(out, v.type, []), True, adj)
                return
            # a cotangent per kept slot: the first lane of each slot holds it, so the sum over the slot is it
            first = None
            for a in self.p.axes:
                if a not in kept:
                    z = self.icmp_eq(self.lane(a), self.iconst(0))
                    first = z if first is None else self.land(first, z)
            self.acc(v, self.where(first, self.read_ct(out, v.type, [self.lane(a) for a in kept])), False, adj)
        else:
            sink = attr_str(op, "sink")
            v, keys = op.operands[0], list(op.operands)[1:]
            ok = None
            for k in keys:
                valid = self.op("arith.xori", self.icmp_eq(k, self.iconst(-1)), self.true())
                ok = valid if ok is None else self.land(ok, valid)
            if attr_str(op, "mode") == "set":
                win = create("hawk.at", keys, [self.ftype_of(v.type)],
                             {"plane": self.p.win[sink], "axes": strs([f"a{k}" for k in range(len(keys))])}).result
                mine = self.cmp("oeq", win, self.store_number(op))
                ok = self.land(ok, mine)
            self.acc(v, self.where(ok, self.read_ct(sink, v.type, keys)), False, adj)

    def true(self) -> ir.Value:
        i1 = ir.IntegerType.get_signless(1)
        return create("arith.constant", [], [i1], {"value": ir.IntegerAttr.get(i1, 1)}).result

    def ftype_of(self, t: ir.Type) -> ir.Type:
        return ir.VectorType(t).element_type if isinstance(t, ir.VectorType) else t

    def read_ct(self, out: str, t: ir.Type, keys: list) -> ir.Value:
        """The cotangent of a cell (a Param, or a Table of its components) or of a sink's slot at `keys`."""
        plane, kind = self.p.ct[out], self.p.ct_kind[out]
        if kind == "param":
            return create("hawk.param", [], [t], {"plane": plane}).result
        ft = self.ftype_of(t)
        size = _prod(self.p.payload[out])
        labels = (["p"] if size > 1 or not keys else []) + [f"a{k}" for k in range(len(keys))]
        parts = []
        for c in range(size):
            coords = ([self.iconst(c)] if size > 1 or not keys else []) + list(keys)
            parts.append(create("hawk.at", coords, [ft], {"plane": plane, "axes": strs(labels)}).result)
        if not isinstance(t, ir.VectorType):
            return parts[0]
        return create("vector.from_elements", parts, [t]).result


    def finish(self) -> None:
        """Hand out each gradient: per-lane planes as outputs (or into their sink, with the `.at` scatters),
        Params as ordered sums over lanes."""
        for plane, out in self.p.grad.items():
            kind = self.p.grad_kind[plane]
            acc = self.local.get(plane, {})
            entry = next(iter(acc.values()), None) if len(acc) <= 1 else None
            if len(acc) > 1:  # loads of one plane are one value per lane: add their cotangents
                total = None
                for e in acc.values():
                    total = self.share(e) if total is None else self.add(total, self.share(e))
                entry = (total, False)
            if kind == "cell":
                t = self.ftype
                share = self.share(entry) if entry is not None else self.zero(t)
                r = self.total(share, self.p.axes)
                create("hawk.cell", [r], [], {"name": out})
            elif kind == "lane" and entry is not None:
                create("hawk.store", [self.share(entry)], [], {"plane": out})
            elif kind == "lane":
                create("hawk.store", [self.zero(self.lane_type(plane))], [], {"plane": out})
            elif kind == "sink" and entry is not None:
                self.scatter(out, self.share(entry), [self.linear()])

    def lane_type(self, plane: str) -> ir.Type:
        shape = self.p.payload.get(plane, ())
        return ir.VectorType.get(list(shape), self.ftype) if shape else self.ftype
