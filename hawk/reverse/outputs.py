"""The ends of the reverse sweep (hawk/reverse/sweep.py): where cotangents enter (the forward's outputs: stores,
cells and scatters) and where gradients leave (per-lane outputs, gradient sinks, Param cells)."""

from __future__ import annotations

from mlir import ir

from hawk.ir.access import cell_name, plane_name, scatter_keys, scatter_mode, sink_name, store_key, stored_value
from hawk.ir.build import create, strs
from hawk.ir.dialect import is_hawk
from hawk.ir.types import add_arg, of_value


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
            out = plane_name(op)
            if out not in self.p.ct:  # an integer output (Mutable[Index]): no cotangent enters there
                return
            v, key = stored_value(op), store_key(op)
            if key is not None:  # written by key: the cotangent at its position (a key of -1 wrote nothing)
                self.acc(v, self.where(self.wrote([key]), self.read_ct(out, v.type, [key])), False, adj)
                return
            ct = create("hawk.load", [self.arg(self.p.ct[out], "plane", v.type, self.p.axes)], [v.type]).result
            self.acc(v, ct, False, adj)
        elif is_hawk(op, "cell"):
            out = cell_name(op)
            v = stored_value(op)
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
            # (keyed by the run's own coordinates: a shard of rows holds its rows' cotangents, eagle/distributed)
            ct = self.read_ct(out, v.type, [self.lane(a, own=True) for a in kept])
            self.acc(v, self.where(first, ct), False, adj)
        else:
            sink = sink_name(op)
            v, keys = stored_value(op), scatter_keys(op)
            ok = self.wrote(keys)
            if scatter_mode(op) == "set":  # this store won the slot: the winners kernel left its number there
                ok = self.land(ok, self.won(op, sink, keys))
            self.acc(v, self.where(ok, self.read_ct(sink, v.type, keys)), False, adj)

    def wrote(self, keys: list) -> ir.Value:
        """Whether a scatter or store by these keys wrote anything: a key of -1 (on any axis) writes nothing."""
        ok = None
        for k in keys:
            valid = self.lnot(self.icmp_eq(k, self.iconst(-1)))
            ok = valid if ok is None else self.land(ok, valid)
        return ok

    def arg(self, name: str, kind: str, value_type: ir.Type, axes=()) -> ir.Value:
        """The adjoint func's argument for plane `name` (added on first use), typed by the values it holds."""
        return add_arg(self.func, name, of_value(kind, value_type, axes))

    def ftype_of(self, t: ir.Type) -> ir.Type:
        return ir.VectorType(t).element_type if isinstance(t, ir.VectorType) else t

    def read_ct(self, out: str, t: ir.Type, keys: list) -> ir.Value:
        """The cotangent of a cell (a Param, or a Table of its components) or of a sink's slot at `keys`."""
        plane, kind = self.p.ct[out], self.p.ct_kind[out]
        if kind == "param":
            return create("hawk.param", [self.arg(plane, "scalar", t)], [t]).result
        ft = self.ftype_of(t)
        size = _prod(self.p.payload[out])
        labels = (["p"] if size > 1 or not keys else []) + [f"a{k}" for k in range(len(keys))]
        parts = []
        for c in range(size):
            coords = ([self.iconst(c)] if size > 1 or not keys else []) + list(keys)
            table = self.arg(plane, "table", ft, labels)
            parts.append(create("hawk.at", [table, *coords], [ft], {"axes": strs(labels)}).result)
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
                self.cell_out(out, self.share(entry) if entry is not None else self.zero(t))
            elif kind == "lane" and entry is not None:
                v = self.share(entry)
                create("hawk.store", [self.arg(out, "output", v.type, self.p.axes), v], [])
            elif kind == "lane":
                v = self.zero(self.lane_type(plane))
                create("hawk.store", [self.arg(out, "output", v.type, self.p.axes), v], [])
            elif kind == "sink" and entry is not None:
                self.own_share(plane, out, self.share(entry))
            elif kind == "sink" and out not in self.scattered and self.p.payload.get(plane):
                # no cotangent reached a vector plane's gradient sink: a scatter that adds nothing (key -1) still
                # gives the sink its payload, so the gradient comes back shaped like the plane (all zero)
                self.scatter(out, self.zero(self.lane_type(plane)), [self.iconst(-1)])

    def cell_out(self, out: str, share: ir.Value) -> None:
        """A Param's gradient: the ordered sum over lanes of each lane's share."""
        r = self.total(share, self.p.axes)
        create("hawk.cell", [self.arg(out, "total", r.type), r], [])

    def own_share(self, plane: str, out: str, v: ir.Value) -> None:
        """The cotangent of a `.at`-read plane's own-lane loads: one more term of its gradient sink, at this lane
        (hawk/reverse/gather.py hands it out as a share plane instead)."""
        self.scatter(out, v, [self.linear()])

    def lane_type(self, plane: str) -> ir.Type:
        shape = self.p.payload.get(plane, ())
        return ir.VectorType.get(list(shape), self.ftype) if shape else self.ftype
