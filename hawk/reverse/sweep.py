"""The reverse sweep: a forward kernel's hawk IR becomes its adjoint's hawk IR, in one function.

The adjoint function starts with the forward body (recomputed: its values, reductions included, are what the
reverse reads), with the forward's side effects removed, then walks the forward ops backwards and accumulates a
cotangent per float value (hawk/reverse/rules.py has the derivative of each op):

- `if`/`else` bodies are hoisted to the top level (they are lane-local and pure, so computing the untaken side is
  harmless) with their results chosen by selects; their reverse runs under an `scf.if` on the same condition, so
  the untaken side gets exactly zero, and never a NaN from a derivative the lane did not need (a loop with `.at`
  reads, whose reverse scatters, stays outside: hawk/reverse/branches.py);
- a cotangent is either per lane or *uniform* (the same in every lane: a cell's cotangent, flowing back through
  ops on reduced values). The cotangent of a reduced value is the sum over lanes of the per-lane shares (an
  ordered sum, exact, so the bits never depend on the split) plus its uniform part, which is added once (as the
  share of the first lane). That sum reads lanes, so split-stages turns it into a stage of its own: the reverse of
  a staged kernel is staged, in reverse order;
- `.at` reads and Table lookups scatter their cotangent (ordered) into the plane's gradient sink at the clamped
  coordinates the forward read; Param cotangents are ordered sums over lanes.

Loops are reversed in hawk/reverse/loops.py; the forward's outputs seed the sweep and the gradients leave it in
hawk/reverse/outputs.py; each op's derivative is in hawk/reverse/rules.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mlir import ir
from mlir.dialects import vector

from hawk.frontend.scan_keyed import MAX_KEYS
from hawk.ir.access import (
    at_coords,
    coord_axes,
    kernel_func,
    plane_name,
    reduce_kind,
    reduce_over,
    scan_key,
    scan_keys,
    scan_mode,
    scan_op,
    scan_order,
    scan_reset,
    scan_reverse,
    scan_value,
    set_policy,
)
from hawk.ir.build import create, strs
from hawk.ir.dialect import is_hawk
from hawk.ir.types import drop_unused_args, find_arg, hawk_type, parts, retype_arg
from hawk.passes.verify import error_at
from hawk.reverse.branches import BranchesMixin, If
from hawk.reverse.chains import ChainsMixin
from hawk.reverse.folds import fold_form, keeps_leading
from hawk.reverse.keyed import KeyedScansMixin
from hawk.reverse.loops import LoopsMixin, dce, nested_ops
from hawk.reverse.outputs import OutputsMixin
from hawk.reverse.rules import LEAVES, RULES, Emit, is_float
from hawk.reverse.store_numbers import WinnersMixin

_EFFECTS = ("hawk.store", "hawk.cell", "hawk.scatter")


@dataclass
class Design:
    """What the adjoint's planes are called (hawk/reverse/design.py decides them)."""

    kernel: str  # the forward kernel's name, for errors
    name: str  # the adjoint function's name
    axes: list[str]  # lane axes, in grid order
    extents: tuple[int, ...] | None  # lane extents when the adjoint needs them (sinks over lanes), else None
    ct: dict[str, str]  # forward output, cell or sink -> its cotangent plane
    ct_kind: dict[str, str]  # ... -> "lane" | "param" | "table" (a Table for vector cells and sinks)
    payload: dict[str, tuple[int, ...]]  # ... -> payload shape of the cotangent
    grad: dict[str, str]  # forward input -> its gradient plane
    grad_kind: dict[str, str]  # ... -> "lane" (a per-lane output) | "sink" (a scatter sink) | "cell"
    win: dict[str, str]  # stored sink -> the table that holds its winning lane per slot
    tables: dict[str, list[tuple[str, int]]]  # forward Table -> its axes (label, extent)
    float_dtype: str = "float64"
    kept: dict = field(default_factory=dict)  # cell -> lane axes its reduction keeps (its cotangent: a Table)
    stores: dict = field(default_factory=dict)  # stored sink -> its `=` statements
    init: tuple = ()  # forward outputs whose initial contents the adjoint reads, as input planes of their names
    positions: dict = field(default_factory=dict)  # float output written by key -> its length (its cotangent's)
    declared: dict = field(default_factory=dict)  # lane axis -> its extent, where the signature fixes it
    passes: dict = field(default_factory=dict)  # stored sink -> the for loops around its deepest `=` store


class Sweep(BranchesMixin, LoopsMixin, OutputsMixin, WinnersMixin, ChainsMixin, KeyedScansMixin, Emit):
    """Builds the adjoint inside a parsed forward module (the current MLIR context)."""

    def __init__(self, module: ir.Module, plan: Design):
        self.module, self.p = module, plan
        self.func = kernel_func(module)
        self.block = self.func.regions[0].blocks[0]
        self.ret = self.block.operations[len(self.block.operations) - 1]
        self.adj: dict = {}  # value -> (cotangent, uniform)
        self.local: dict[str, tuple] = {}  # lane plane / param -> accumulated cotangent
        self.ftype = ir.F64Type.get() if plan.float_dtype == "float64" else ir.F32Type.get()
        self._first = None
        self._linear = None
        self.barrier: list = []  # results of the forward's max/min reductions
        self.number_stores()
        self.in_if = 0  # reverse-ifs around the code being built (a scatter may not sit in one)
        self.scattered: set[str] = set()  # gradient sinks a scatter adds into

    # ---- cotangents -----------------------------------------------------------------------------------
    def first(self) -> ir.Value:
        """True in the first lane (every coordinate 0): a uniform cotangent is added there, once."""
        return self._first

    def linear(self) -> ir.Value:
        """This lane's linear index (row-major over the lane axes)."""
        if self._linear is None:
            with ir.InsertionPoint(self.block.operations[0]), self.func.location:
                self._linear = self._coords_linear([self.lane(a) for a in self.p.axes], clamp=False)
        return self._linear

    def lane(self, axis: str, own: bool = False) -> ir.Value:
        """This lane's coordinate on `axis`; `own`: it only keys a table of the run's own slots (a cotangent of a
        cell keeping that axis), so a shard's own numbering serves (hawk.ir.reach does not count it)."""
        attrs = {"axis": axis} | ({"own": ir.UnitAttr.get()} if own else {})
        return create("hawk.lane", [], [ir.IntegerType.get_signless(64)], attrs).result

    def _coords_linear(self, coords: list, clamp: bool) -> ir.Value:
        ext = self.p.extents
        if len(coords) == 1 and not clamp:
            return coords[0]
        lin, stride = None, 1
        for k in reversed(range(len(coords))):
            c = coords[k]
            if clamp:
                c = self.clamp_i(c, ext[k])
            term = c if stride == 1 else self.op("arith.muli", c, self.iconst(stride))
            lin = term if lin is None else self.op("arith.addi", lin, term)
            stride *= ext[k]
        return lin

    def clamp_i(self, c: ir.Value, n: int) -> ir.Value:
        return self.op("arith.minsi", self.op("arith.maxsi", c, self.iconst(0)), self.iconst(n - 1))

    def share(self, entry) -> ir.Value:
        """A cotangent as a per-lane share: a uniform one counts in the first lane only."""
        v, uni = entry
        return self.where(self.first(), v) if uni else v

    def acc(self, v: ir.Value, c: ir.Value, uni: bool, table: dict | None = None) -> None:
        table = self.adj if table is None else table
        if not is_float(v.type):
            return
        old = table.get(v)
        if old is None:
            table[v] = (c, uni)
        elif old[1] == uni:
            table[v] = (self.add(old[0], c), uni)
        else:
            table[v] = (self.add(self.share(old), self.share((c, uni))), False)

    # ---- the sweep --------------------------------------------------------------------------------------
    def reverse(self, items: list, adj: dict) -> None:
        for item in reversed(items):
            if isinstance(item, If):
                self.reverse_if(item, adj)
            else:
                self.reverse_op(item, adj)

    def reverse_op(self, op, adj: dict) -> None:
        name = op.operation.name
        if name in _EFFECTS:
            self.seed(op, adj)
            return
        if name == "scf.for":
            self.reverse_for(op, adj)
            return
        if not op.results or not any(r in adj for r in op.results):
            return
        if len(op.results) != 1:
            raise error_at(op, f"the reverse does not know the op {name}")
        g, uni = adj.pop(op.results[0])
        if name.startswith("hawk."):
            self.reverse_hawk(op, g, uni, adj)
            return
        if name in LEAVES:
            return
        rule = RULES.get(name)
        if rule is None:
            raise error_at(op, f"the reverse has no derivative for {name} (used on "
                               "this line); rewrite it with differentiable hawk.math functions")
        try:
            parts = rule(self, op, g)
        except NotImplementedError as exc:
            raise error_at(op, f"the reverse cannot differentiate {exc}") from None
        for pos, c in parts:
            self.acc(op.operands[pos] if isinstance(pos, int) else pos, c, uni, adj)

    def reverse_hawk(self, op, g, uni: bool, adj: dict) -> None:
        if is_hawk(op, "load") or is_hawk(op, "param"):
            plane = plane_name(op)
            if plane in self.p.grad:
                self.acc(op.results[0], g, uni, self.local.setdefault(plane, {}))
        elif is_hawk(op, "at"):
            self.reverse_at(op, self.share((g, uni)))
        elif is_hawk(op, "reduce"):
            self.reverse_reduce(op, g, uni, adj)
        elif is_hawk(op, "scan"):
            self.reverse_scan(op, self.share((g, uni)), adj)

    def reverse_at(self, op, g) -> None:
        plane = plane_name(op)
        if plane not in self.p.grad:
            return
        if self.in_if:
            raise error_at(op, "internal error: a .at read's scatter reversed inside an if (split_if takes "
                               "loops with .at reads out of ifs)")
        axes = coord_axes(op)
        coords = at_coords(op)
        if plane in self.p.tables:
            keys = [self.clamp_i(c, n) for c, (_, n) in zip(coords, self.p.tables[plane], strict=True)]
        elif axes == ["#"]:
            keys = [self.clamp_i(coords[0], _prod(self.p.extents))]
        else:
            keys = [self._coords_linear(coords, clamp=True)]
        self.scatter(self.p.grad[plane], g, keys)

    def scatter(self, sink: str, v, keys) -> None:
        self.scattered.add(sink)
        arg = self.arg(sink, "sink", v.type, [f"k{n}" for n in range(len(keys))])
        create("hawk.scatter", [arg, v, *keys], [], {"mode": "add", "policy": "ordered"})

    def total(self, value, over: list[str]) -> ir.Value:
        """An ordered sum over the lanes of `over` (read back, per kept slot, by the lanes after a stage).

        A launch reduces with one operation (sum, or max, or min), so when the forward takes maxima or minima each
        of these sums is made to read all of them (a select whose two sides are the same value): split-stages
        then puts it in a stage after theirs, and the select costs nothing once compiled."""
        for r in self.barrier:
            if isinstance(r.type, ir.VectorType):
                r = vector.extract(r, [], [0] * len(ir.VectorType(r.type).shape))
            value = create("arith.select", [self.cmp("oeq", r, r), value, value], [value.type]).result
        return create("hawk.reduce", [value], [value.type],
                      {"kind": "sum", "over": strs(over), "policy": "ordered"}).result

    def reverse_reduce(self, op, g, uni: bool, adj: dict) -> None:
        kind, over = reduce_kind(op), reduce_over(op)
        if kind == "fold":
            self.reverse_fold(op, g, uni, adj)
            return
        t = g if uni else self.total(g, over)
        v = op.operands[0]
        mask = op.operands[1] if len(op.operands) > 1 else None
        one = self.const(1.0, v.type)
        if kind == "sum":
            dv = t
        elif kind == "mean":
            n = self.total(self.where(mask, one) if mask is not None else one, over)
            dv = self.div(t, n)
        else:  # max/min: ties share the cotangent equally (as jax.grad does)
            tie = self.cmp("oeq", v, op.results[0])
            if mask is not None:
                tie = self.land(tie, vector.broadcast(tie.type, mask) if isinstance(v.type, ir.VectorType) else mask)
            n = self.total(self.where(tie, one), over)
            dv = self.where(tie, self.div(t, n))
        if mask is not None and kind in ("sum", "mean"):
            dv = self.where(mask, dv)
        self.acc(v, dv, False, adj)

    def reverse_fold(self, op, g, uni: bool, adj: dict) -> None:
        """A fold's shares (hawk/reverse/folds.py): a product's lane gets t times the product of the other kept
        lanes of its slice (the exclusive running products from either end of the slice, per component of a
        vector or matrix payload); a sum's kept lane gets t; a fold of converted truth values nothing. t, the
        slice's cotangent: g where uniform, else the ordered sum of the lanes' shares (hawk.sum's rule), but for a
        product keeping (leading) axes the running sums of the shares from either end of its slice (scans, like
        the product's own: no row cell, which sharded runs beside scans could not place)."""
        form = fold_form(self.module, op)
        if form == "constant":
            return
        v = op.operands[0]
        mask = op.operands[1] if len(op.operands) > 1 else None
        over = reduce_over(op)
        leading = keeps_leading(over, self.p.axes)
        start = self.slice_start(over) if form in ("product", "func") and leading else None
        if uni:
            t = g
        elif start is None:
            t = self.total(g, over)
        else:
            t = self.per_component(g, lambda c: self.add(self.scan(c, "add", start, False),
                                                         self.scan(c, "add", start, True, exclusive=True)))
        if form == "func":  # another operator: its chain's partials (hawk/reverse/chains.py)
            self.reverse_func_fold(op, t, mask, start, adj)
            return
        if form == "product":
            x = self.select(self._spread(mask, v.type), v, self.const(1.0, v.type)) if mask is not None else v
            slot = None if leading else self.slot_key([a for a in self.p.axes if a not in over])
            t = self.mul(t, self.per_component(x, lambda c: self.others(c, start, slot)))
        if mask is not None:
            t = self.where(self._spread(mask, v.type), t)
        self.acc(v, t, False, adj)

    def others(self, x: ir.Value, start: ir.Value | None, slot: tuple | None = None) -> ir.Value:
        """Per lane, the product of x over the other lanes of its slice: slices of leading kept axes start where
        `start` holds; `slot` (key, keys): slices of trailing kept axes, one key each (keyed scans, lane order)."""
        keyed = None if slot is None else (*slot, "lane")
        return self.mul(self.scan(x, "mul", start, False, exclusive=True, keyed=keyed),
                        self.scan(x, "mul", start, True, exclusive=True, keyed=keyed))

    def slot_key(self, kept: list[str]) -> tuple[ir.Value, int]:
        """(this lane's slot among those of the kept axes, row-major, and their count): the key of a product's
        keyed scans when the kept axes are not leading (their extents are declared: hawk/reverse/kernel.py)."""
        key, keys = None, 1
        for a in reversed(kept):
            c = self.lane(a)
            term = c if keys == 1 else self.op("arith.muli", c, self.iconst(keys))
            key = term if key is None else self.op("arith.addi", key, term)
            keys *= self.p.declared[a]
        return key, keys

    def per_component(self, x: ir.Value, f) -> ir.Value:
        """f applied to each scalar component of x (a scan takes one number per lane), put back together."""
        if not isinstance(x.type, ir.VectorType):
            return f(x)
        vt = ir.VectorType(x.type)
        out = self.zero(x.type)
        for pos in _positions(list(vt.shape)):
            c = vector.extract(x, [], pos)
            out = vector.insert(f(c), out, [], pos)
        return out

    def slice_start(self, over: list[str]) -> ir.Value | None:
        """Whether this lane is the first of its slice of a reduction over `over` keeping leading axes (every
        reduced coordinate 0); None over every lane (one slice)."""
        if all(a in over for a in self.p.axes):
            return None
        first = None
        for a in over:
            z = self.icmp_eq(self.lane(a), self.iconst(0))
            first = z if first is None else self.land(first, z)
        return first

    def _spread(self, mask: ir.Value, t: ir.Type) -> ir.Value:
        """A lane's truth value, as the mask of a value of type t."""
        return vector.broadcast(self.bool_type(t), mask) if isinstance(t, ir.VectorType) else mask

    def reverse_scan(self, op, g, adj: dict) -> None:
        """An add scan's adjoint is the add scan of its cotangent in the other lane order, with the same mode and
        segments: inclusive y[j] = x[0] + ... + x[j] gives dx[i] = dy[i] + ... + dy[n-1] (the suffix sums stop
        at the end of i's segment; exclusive: from i+1). A keyed one (order="lane") runs per key the same way: the
        keyed scan of the cotangent, by the same keys, in the other lane order (a key -1 lane gets the identity)."""
        x, reset = scan_value(op), scan_reset(op)
        if scan_op(op) == "func":
            self.reverse_func_scan(op, g, adj)
            return
        if not is_float(x.type):
            return
        if scan_op(op) == "mul":
            self.reverse_product_scan(op, g, adj)
            return
        if scan_op(op) != "add":
            self.reverse_extreme_scan(op, g, adj)
            return
        if scan_order(op) == "key":
            self.key_order_scan(op, g, adj)
            return
        dx = self.scan(g, "add", reset, not scan_reverse(op), scan_mode(op) == "exclusive", keyed=_keyed(op))
        self.acc(x, dx, False, adj)

    def reverse_extreme_scan(self, op, g, adj: dict) -> None:
        """A min/max scan. Inclusive, forward or reverse: lane j's cotangent goes to the lanes of its segment
        that y[j] ranges over (i <= j; reverse=True: i >= j) with x[i] == y[j], split equally (hawk.max's rule).
        Those lanes lie in j's plateau (a run of lanes with one y), where a lane whose own x is y is a tie.
        Forward: a plateau starts where y changes (start = y differs from the exclusive scan, or reset), c = the
        running count of ties since the last start, and dx = where(tie, the reverse add scan of dy / c with the
        same starts). Reverse: the mirror; a plateau starts after a lane where y changes, found from the lane
        before's y, which the exclusive scan of y with the other operator gives (y is monotone within a
        segment), and the counts run downwards, the shares upwards.
        Exclusive: y[j] is the inclusive scan's value one lane back (reverse=True: one lane on), or the identity
        at its segment's first (last) lane, a constant. So the rule above runs on the inclusive scan with the
        cotangent moved one lane over (`shifted`), the identity lanes' cotangents dropped.
        Keyed (order="lane"): the same on each key's lanes (hawk/reverse/keyed.py)."""
        if scan_keys(op) is not None:
            self.keyed_extreme_scan(op, g, adj, _keyed(op))
            return
        y, g = self.inclusive_view(op, g)
        self.extreme_rule(scan_value(op), y, scan_reset(op), scan_reverse(op), scan_op(op), g, adj)

    def inclusive_view(self, op, g) -> tuple[ir.Value, ir.Value]:
        """A scan's inclusive values and their cotangent: the scan's own for an inclusive one; for an exclusive
        one the recomputed inclusive scan, with g moved one lane over (`shifted`) and the identity lanes'
        cotangents (a segment's first lane; reverse=True: its last) dropped."""
        if scan_mode(op) != "exclusive":
            return op.results[0], g
        x, reset = scan_value(op), scan_reset(op)
        rev = scan_reverse(op)
        y = self.scan(x, scan_op(op), reset, rev)
        if reset is not None and not rev:
            g = self.where(self.lnot(reset), g)
        g = self.shifted(g, back=not rev)
        if reset is not None and rev:  # (the lane after a segment's last is the next segment's first)
            g = self.where(self.lnot(reset), g)
        return y, g

    def scan(self, x: ir.Value, opname: str, reset: ir.Value | None, reverse: bool,
             exclusive: bool = False, keyed: tuple | None = None, combine: str | None = None) -> ir.Value:
        """A hawk.scan of x in the adjoint (its result has x's type), segmented by `reset` or, `keyed`, by
        (the i64 key, how many keys, order) (`_keyed`: a forward keyed scan's); opname "func": by the combiner
        `combine`, an exclusive one starting from the identity 0.0 (chains.py). More keys than one keyed scan
        takes (a fold's slots): one scan per group of keys (KeyedScansMixin.grouped_scan)."""
        if keyed is not None and keyed[1] > MAX_KEYS:
            return self.grouped_scan(x, opname, reset, reverse, exclusive, keyed, combine)
        attrs = {"op": opname, "mode": "exclusive" if exclusive else "inclusive"}
        if combine is not None:
            attrs |= {"combine": combine, "identity": ir.FloatAttr.get(ir.F64Type.get(), 0.0)}
        attrs |= {"reverse": ir.UnitAttr.get()} if reverse else {}
        extra = [reset] if reset is not None else []
        if keyed is not None:
            key, keys, order = keyed
            attrs |= {"keys": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), keys), "order": order}
            extra = [key]
        return create("hawk.scan", [x, *extra], [x.type], attrs).result

    def reverse_product_scan(self, op, g, adj: dict) -> None:
        """A running product (op=m.mul; torch.cumprod's rule), in any mode and direction, segmented or keyed
        (order="lane"). Lane j's share is the sum over the lanes k whose product holds x[j] (k >= j, or k > j
        exclusive; reverse=True: k <= j, k < j) of g[k] times that product without x[j]. Before its segment's
        (key's) first zero, in the scan's direction, that is the running sum of g * y in the other direction
        (the same mode), divided by x[j]. At the first zero it is the product of the factors before it (the
        exclusive scan) times the running sum of g * R, R the product of the factors after the zero (the scan of
        x with every factor up to and with the zero set to 1). After it every share is 0 (each product holds
        that zero). So no value moves between lanes but through scans with the forward's own segments or keys."""
        x, reset, rev = scan_value(op), scan_reset(op), scan_reverse(op)
        excl = scan_mode(op) == "exclusive"

        def scan(v, opname, reverse, exclusive):
            if reverse and scan_order(op) == "key":  # (sums only: key order has no reverse scan)
                return self.key_order_suffix(v, scan_key(op), scan_keys(op), exclusive)
            return self.scan(v, opname, reset, reverse, exclusive, keyed=_keyed(op))

        i64 = ir.IntegerType.get_signless(64)
        one = self.const(1.0, x.type)
        zero = self.cmp("oeq", x, self.zero(x.type))
        zeros = scan(self.op("arith.extui", zero, t=i64), "add", rev, False)
        first = self.land(zero, self.icmp_eq(zeros, self.iconst(1)))
        none = self.icmp_eq(zeros, self.iconst(0))
        before = self.div(scan(self.mul(g, op.results[0]), "add", not rev, excl), x)
        after = scan(self.select(self.op("arith.ori", none, first), one, x), "mul", rev, excl)
        on_zero = self.mul(scan(x, "mul", rev, True), scan(self.mul(g, after), "add", not rev, excl))
        dx = self.select(none, before, self.select(first, on_zero, self.zero(x.type)))
        if scan_keys(op) is not None:  # a lane of key -1 took no part (its value is the identity)
            dx = self.where(self.keyed_kept(_keyed(op)), dx)
        self.acc(x, dx, False, adj)

    def shifted(self, g: ir.Value, back: bool) -> ir.Value:
        """Each lane's g one lane on (`back`: lane i gets g[i + 1]; else g[i - 1]); the identity -0.0 past the
        run's ends. Moving a per-lane value needs no new op: an exclusive add scan over segments of two lanes
        holds its partner's value (-0.0 + v is v exactly, NaN, inf and zeros' signs included); segments that
        start on even lanes serve one parity, those that start on odd lanes the other."""
        odd = self.op("arith.trunci", self.op("arith.andi", self.flat_lane(), self.iconst(1)),
                      t=ir.IntegerType.get_signless(1))
        even = self.lnot(odd)
        on_even = self.scan(g, "add", even, back, exclusive=True)  # segments [2k, 2k+1]
        on_odd = self.scan(g, "add", odd, back, exclusive=True)  # segments [2k+1, 2k+2] (and [0])
        # back: an even lane's partner (2k + 1) is in its even-started segment; else an odd lane's (2k) is
        return self.select(even, on_even, on_odd) if back else self.select(odd, on_even, on_odd)

    def flat_lane(self) -> ir.Value:
        """This lane's flat index, the scans' lane order, from the run's extents (hawk.extent: the adjoint need
        not be specialised to them, as `linear` needs)."""
        i64 = ir.IntegerType.get_signless(64)
        lin = stride = None
        for k, a in reversed(list(enumerate(self.p.axes))):
            c = self.lane(a)
            term = c if stride is None else self.op("arith.muli", c, stride)
            lin = term if lin is None else self.op("arith.addi", lin, term)
            if k:  # (the outermost axis's extent multiplies nothing)
                e = create("hawk.extent", [], [i64], {"axis": a}).result
                stride = e if stride is None else self.op("arith.muli", stride, e)
        return lin

    def extreme_rule(self, x, y, reset, reverse: bool, opname: str, g, adj: dict, keyed: tuple | None = None) -> None:
        """The inclusive min/max scan's rule (reverse_extreme_scan) for x, its inclusive scan y and y's
        cotangent g; `keyed` (a keyed scan's key, keys, "lane"): on each key's lanes, a lane of key -1 getting
        nothing."""
        i64 = ir.IntegerType.get_signless(64)
        if reverse:
            before = self.scan(y, "min" if opname == "max" else "max", reset, False, exclusive=True, keyed=keyed)
        else:
            before = self.scan(x, opname, reset, False, exclusive=True, keyed=keyed)
        start = self.cmp("une", before, y)
        if reset is not None:
            start = self.op("arith.ori", start, reset)
        tie = self.cmp("oeq", x, y)
        one = self.const(1.0, x.type)
        # reverse=True: the counts run downwards and the shares upwards; else the other way
        if keyed is None:
            count = self.scan(self.op("arith.extui", tie, t=i64), "add", start, reverse)
            c = self.op("arith.sitofp", count, t=x.type)
        else:  # (keyed scans take no reset=: sums along a key's plateaus are keyed scans by a func)
            tie = self.land(tie, self.keyed_kept(keyed))
            c = self.runs_sum(self.select(tie, one, self.zero(x.type)), start, reverse, keyed)
        c = self.select(self.cmp("olt", c, one), one, c)  # (c >= 1 wherever a tie exists; NaN runs have none)
        if keyed is None:
            share = self.scan(self.div(g, c), "add", start, not reverse)
        else:
            share = self.runs_sum(self.div(g, c), start, not reverse, keyed)
        self.acc(x, self.where(tie, share), False, adj)

    # ---- the whole adjoint ------------------------------------------------------------------------------
    _READS = ("hawk.load", "hawk.param", "hawk.lane", "hawk.extent", "arith.constant")  # (of arguments only)

    def read_initial(self) -> None:
        """Outputs read before they are assigned: the adjoint reads the same values, as input planes."""
        for y in self.p.init:
            arg = find_arg(self.func, y)
            if arg is not None:
                t = parts(arg.type)
                retype_arg(arg, hawk_type("plane", t.elem, t.shape, t.axes))

    def build(self) -> None:
        self.read_initial()
        entry = self.block.operations[0]
        for op in nested_ops(self.func)[1:]:  # reads with no operands: to the entry, so every region sees them
            if op.name in self._READS and op != entry.operation:
                op.move_before(entry)
        effects = [op for op in nested_ops(self.func) if op.name in _EFFECTS]
        # (a fold's rule never reads its result: a fold only an output reads is dead in the adjoint, no barrier)
        self.barrier = [op.results[0] for op in nested_ops(self.func)
                        if op.name == "hawk.reduce" and (reduce_kind(op) in ("max", "min") or _read_fold(op))]
        items = self.hoist(self.block)
        for op in items:  # recomputed sums are ordered: the point the reverse linearises at has the same bits
            if not isinstance(op, If) and is_hawk(op, "reduce") and reduce_kind(op) in ("sum", "mean"):
                set_policy(op, "ordered")
        with ir.InsertionPoint(self.ret), self.func.location:
            lanes = [self.lane(a) for a in self.p.axes]
            first = None
            for c in lanes:
                z = self.icmp_eq(c, self.iconst(0))
                first = z if first is None else self.land(first, z)
            self._first = first
            self.reverse(items, self.adj)
            self.finish()
        for op in effects:
            op.erase()
        self.func.attributes["sym_name"] = ir.StringAttr.get(self.p.name)
        dce(self.func)
        self.untag()
        drop_unused_args(self.func)  # the forward's outputs and the planes only the forward read


def _keyed(op) -> tuple | None:
    """A forward scan's keys as Sweep.scan takes them: (its i64 key, how many keys, its order), or None."""
    return None if scan_keys(op) is None else (scan_key(op), scan_keys(op), scan_order(op))


def _read_fold(op) -> bool:
    """Whether `op` is a fold the body reads (not only an output): a fold's rule never reads its result, so a fold
    only outputs read is dead in the adjoint and needs no barrier."""
    return reduce_kind(op) == "fold" and any(u.owner.name not in _EFFECTS for u in op.results[0].uses)


def _positions(shape: list[int]) -> list[list[int]]:
    """Every static position of a vector of `shape`, in row-major order."""
    if not shape:
        return [[]]
    return [[i, *rest] for i in range(shape[0]) for rest in _positions(shape[1:])]


def _prod(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
