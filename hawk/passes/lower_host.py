"""lower-host-lanes: turn one lane's hawk code into a loop over a chunk of lanes, for the CPU.

The kernel func becomes two functions:
  @<k>_lanes(buffers..., scratch, meta, err)  runs lanes [meta[0], meta[1]) and writes per-lane outputs, reduced
      outputs with kept axes and sinks in place, and the partial totals of every-lane reductions to
      scratch[meta[2] * width ...];
  @<k>_finish(buffers..., scratch, meta, err)  combines meta[2] chunks' partials in chunk order into the cells
      and divides means by their counts.
Buffers are flat `memref<?xT>` in the order of `analysis.Layout.buffers`. meta = [lo, hi, chunk, L, extents...].
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import func, memref, scf, vector

from hawk.ir.build import create
from hawk.ir.dialect import attr_str, attr_strs, is_hawk
from hawk.passes.analysis import Layout, key_source, payload_of

_FAST = "#arith.fastmath<reassoc,contract>"


def _size(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


class _Emit:
    """Small op-building helpers bound to one float type."""

    def __init__(self, ftype: ir.Type):
        self.f = ftype
        self.index = ir.IndexType.get()
        self.i64 = ir.IntegerType.get_signless(64)
        self.i1 = ir.IntegerType.get_signless(1)

    def c(self, v: int, t=None) -> ir.Value:
        t = t or self.index
        return create("arith.constant", [], [t], {"value": ir.IntegerAttr.get(t, v)}).result

    def cf(self, v: float) -> ir.Value:
        return create("arith.constant", [], [self.f], {"value": ir.FloatAttr.get(self.f, v)}).result

    def op(self, name: str, *args, t=None, attrs=None) -> ir.Value:
        return create(name, list(args), [t or args[0].type], attrs).result

    def to_index(self, v: ir.Value) -> ir.Value:
        return v if v.type == self.index else self.op("arith.index_cast", v, t=self.index)

    def to_i64(self, v: ir.Value) -> ir.Value:
        return v if v.type == self.i64 else self.op("arith.index_cast", v, t=self.i64)

    def load(self, buf: ir.Value, i: ir.Value) -> ir.Value:
        return memref.load(buf, [i])

    def store(self, v: ir.Value, buf: ir.Value, i: ir.Value):
        memref.store(v, buf, [i])

    def clamp(self, i: ir.Value, n: ir.Value) -> ir.Value:
        """Clamp an index into [0, n - 1] so that an out-of-range read never leaves the buffer."""
        zero, one = self.c(0), self.c(1)
        i = self.op("arith.maxsi", i, zero)
        return self.op("arith.minsi", i, self.op("arith.subi", n, one))

    def elems(self, v: ir.Value, shape) -> list[ir.Value]:
        if not shape:
            return [v]
        out = []
        for k in range(_size(shape)):
            pos, r = [], k
            for d in reversed(shape):
                pos.append(r % d)
                r //= d
            out.append(vector.extract(v, [], list(reversed(pos))))
        return out

    def pack(self, vals: list[ir.Value], shape) -> ir.Value:
        if not shape:
            return vals[0]
        t = ir.VectorType.get(list(shape), vals[0].type)
        return create("vector.from_elements", vals, [t]).result

    def identity(self, kind: str) -> ir.Value:
        return self.cf({"sum": 0.0, "mean": 0.0, "max": float("-inf"), "min": float("inf")}[kind])

    def combine(self, kind: str, a: ir.Value, b: ir.Value, fast: bool) -> ir.Value:
        if kind in ("sum", "mean"):
            attrs = {"fastmath": ir.Attribute.parse(_FAST)} if fast else None
            return self.op("arith.addf", a, b, attrs=attrs)
        return self.op("arith.maximumf" if kind == "max" else "arith.minimumf", a, b)


class HostLowering:
    def __init__(self, module: ir.Module, layout: Layout, ftype: ir.Type, itypes: dict[str, ir.Type]):
        self.module, self.lay, self.e = module, layout, _Emit(ftype)
        self.itypes = itypes
        self.axes = [a.label for a in layout.sig.lane_axes()]

    # ---- types and arguments ----------------------------------------------------------------------
    def arg_types(self) -> list[ir.Type]:
        dyn = ir.ShapedType.get_dynamic_size()
        out = []
        for b in self.lay.buffers:
            elem = {"f": self.e.f, "i32": ir.IntegerType.get_signless(32),
                    "i64": ir.IntegerType.get_signless(64)}[b.dtype]
            out.append(ir.MemRefType.get([dyn], elem))
        return out

    def run(self):
        kfunc = next(op for op in self.module.body.operations if "hawk.kernel" in op.attributes)
        name = self.lay.name
        with ir.InsertionPoint(self.module.body), kfunc.location:
            lanes = func.FuncOp(f"{name}_lanes", (self.arg_types(), []))
            finish = func.FuncOp(f"{name}_finish", (self.arg_types(), []))
        self.build_lanes(lanes, kfunc)
        self.build_finish(finish)
        kfunc.operation.erase()

    def args(self, f) -> dict[tuple[str, str], ir.Value]:
        block = f.regions[0].blocks[0]
        return {(b.name, b.role): block.arguments[k] for k, b in enumerate(self.lay.buffers)}

    def buf(self, name: str, roles=("in", "index", "param", "table", "out", "cell", "sink")) -> ir.Value:
        for r in roles:
            if (name, r) in self.bufs:
                return self.bufs[(name, r)]
        raise KeyError(name)

    def read_meta(self):
        e = self.e
        meta = self.bufs[("#meta", "meta")]
        vals = [e.to_index(e.load(meta, e.c(k))) for k in range(4 + len(self.axes))]
        self.lo, self.hi, self.chunk, self.L = vals[:4]
        self.ext = vals[4:]
        self.stride = [None] * len(self.axes)
        s = e.c(1)
        for k in reversed(range(len(self.axes))):
            self.stride[k] = s
            s = e.op("arith.muli", s, self.ext[k])

    # ---- the lane loop ------------------------------------------------------------------------------
    def build_lanes(self, lanes, kfunc):
        e = self.e
        entry = lanes.add_entry_block()
        self.bufs = self.args(lanes)
        full = [r for r in self.lay.reductions if not r.kept]
        with ir.InsertionPoint(entry), kfunc.location:
            self.read_meta()
            inits = []
            for r in full:
                inits += [e.identity(r.kind)] * _size(r.payload) + ([e.cf(0.0)] if r.kind == "mean" else [])
            nred = len(inits)
            self.runs = []  # (scatter op, first slot): sorted keys add each run of equal keys once
            for op in kfunc.regions[0].blocks[0].operations:
                if self.is_sorted_scatter(op):
                    self.runs.append((op, len(inits)))
                    inits += [e.c(-1, e.i64)] + [e.cf(0.0)] * _size(payload_of(op.operands[0].type))
            loop = scf.ForOp(self.lo, self.hi, e.c(1), inits)
            with ir.InsertionPoint(loop.body):
                anchor = scf.YieldOp(list(loop.inner_iter_args))
            body = kfunc.regions[0].blocks[0]
            for op in list(body.operations):
                if op.operation.name != "func.return":
                    op.move_before(anchor)
            self.lane = loop.induction_variable
            self.accs = list(loop.inner_iter_args)
            self.rewrite(loop)
            anchor.operation.erase()
            with ir.InsertionPoint(loop.body):
                scf.YieldOp(self.accs)
            scratch = self.bufs[("#scratch", "scratch")]
            width = e.c(max(self.lay.width, 1))
            base = e.op("arith.muli", self.chunk, width)
            for k, v in enumerate(list(loop.results)[:nred]):
                e.store(v, scratch, e.op("arith.addi", base, e.c(k)))
            for op, slot in self.runs:
                n = _size(payload_of(op.operands[0].type))
                self.flush_run(op, loop.results[slot], list(loop.results)[slot + 1:slot + 1 + n])
            func.ReturnOp([])

    def is_sorted_scatter(self, op) -> bool:
        if not is_hawk(op, "scatter") or attr_str(op, "mode") != "add" or len(op.operands) != 2:
            return False
        src = key_source(op.operands[1])
        spec = self.lay.sig.get(src) if src else None
        return spec is not None and spec.kind == "index" and spec.sorted

    def flush_run(self, op, key: ir.Value, run: list[ir.Value]):
        """Add a finished run of equal keys into the sink (nothing when no run has started: key -1)."""
        e = self.e
        sink = attr_str(op, "sink")
        buf = self.buf(sink, ("sink",))
        n = e.c(self.lay.sig.get(sink).axes[0].extent)
        started = e.op("arith.cmpi", key, e.c(0, e.i64), t=e.i1, attrs={"predicate": ir.IntegerAttr.get(e.i64, 5)})
        branch = scf.IfOp(started, [], has_else=False)
        with ir.InsertionPoint(branch.then_block):
            idx = e.to_index(key)
            for c, x in enumerate(run):
                at = e.op("arith.addi", e.op("arith.muli", e.c(c), n), idx) if len(run) > 1 else idx
                e.store(e.combine("sum", e.load(buf, at), x, False), buf, at)
            scf.YieldOp([])

    def lower_sorted_scatter(self, op, slot: int):
        e = self.e
        v, key = op.operands[0], op.operands[1]
        shape = payload_of(v.type)
        n = _size(shape)
        cur, run = self.accs[slot], self.accs[slot + 1:slot + 1 + n]
        same = e.op("arith.cmpi", cur, key, t=e.i1, attrs={"predicate": ir.IntegerAttr.get(e.i64, 0)})
        differs = e.op("arith.xori", same, e.c(1, e.i1))
        branch = scf.IfOp(differs, [], has_else=False)
        with ir.InsertionPoint(branch.then_block):
            self.flush_run(op, cur, run)
            scf.YieldOp([])
        xs = e.elems(v, shape)
        self.accs[slot] = key
        for c in range(n):
            added = e.combine("sum", run[c], xs[c], False)
            self.accs[slot + 1 + c] = e.op("arith.select", same, added, xs[c], t=e.f)

    def rewrite(self, loop):
        ops = []

        def visit(op):
            if is_hawk(op):
                ops.append(op)
            return ir.WalkResult.ADVANCE

        loop.operation.walk(visit)
        cells = [op for op in ops if is_hawk(op, "cell")]
        ops = [op for op in ops if not is_hawk(op, "cell")]
        for op in cells:  # a cell only names where a reduction lands; the lowered reduction writes it
            op.operation.erase()
        full_slot = 0
        reductions = iter(self.lay.reductions)
        for op in ops:
            name = op.operation.name[5:]
            with ir.InsertionPoint(op), op.location:
                if name == "reduce":
                    r = next(reductions)
                    if r.kept:
                        self.reduce_kept(op, r)
                    else:
                        full_slot = self.reduce_full(op, r, full_slot)
                    continue
                slot = next((k for o, k in self.runs if o == op), None) if name == "scatter" else None
                if slot is not None:
                    self.lower_sorted_scatter(op, slot)
                    op.operation.erase()
                    continue
                new = getattr(self, f"lower_{name}")(op)
                if new is not None:
                    op.results[0].replace_all_uses_with(new)
                op.operation.erase()

    # ---- one op each ----------------------------------------------------------------------------------
    def coord(self, axis: str) -> ir.Value:
        k = self.axes.index(axis)
        e = self.e
        q = e.op("arith.divui", self.lane, self.stride[k]) if k < len(self.axes) - 1 else self.lane
        return q if k == 0 else e.op("arith.remui", q, self.ext[k])

    def lower_lane(self, op):
        return self.e.to_i64(self.coord(attr_str(op, "axis")))

    def plane_read(self, name: str, lane: ir.Value, t: ir.Type) -> ir.Value:
        e = self.e
        buf = self.buf(name)
        shape = payload_of(t)
        if not shape:
            return e.load(buf, lane)
        vals = [e.load(buf, e.op("arith.addi", e.op("arith.muli", e.c(c), self.L), lane)) for c in range(_size(shape))]
        return e.pack(vals, shape)

    def lower_load(self, op):
        return self.plane_read(attr_str(op, "plane"), self.lane, op.results[0].type)

    def lower_param(self, op):
        return self.e.load(self.buf(attr_str(op, "plane")), self.e.c(0))

    def lower_at(self, op):
        e = self.e
        plane = attr_str(op, "plane")
        axes = attr_strs(op, "axes")
        coords = [e.to_index(v) for v in op.operands]
        spec = self.lay.sig.get(plane)
        if spec.kind == "table":
            idx, stride = e.c(0), 1
            for a, cv in reversed(list(zip(spec.axes, coords, strict=True))):
                cv = e.clamp(cv, e.c(a.extent))
                idx = e.op("arith.addi", idx, e.op("arith.muli", cv, e.c(stride)))
                stride *= a.extent
            return e.load(self.buf(plane), idx)
        if axes == ["#"]:
            lane = coords[0]
        else:
            lane = e.c(0)
            for a, cv in zip(axes, coords, strict=True):
                k = self.axes.index(a)
                lane = e.op("arith.addi", lane, e.op("arith.muli", e.clamp(cv, self.ext[k]), self.stride[k]))
        return self.plane_read(plane, e.clamp(lane, self.L), op.results[0].type)

    def lower_store(self, op):
        e = self.e
        buf = self.buf(attr_str(op, "plane"), ("out",))
        v = op.operands[0]
        shape = payload_of(v.type)
        for c, x in enumerate(e.elems(v, shape)):
            e.store(x, buf, e.op("arith.addi", e.op("arith.muli", e.c(c), self.L), self.lane) if shape else self.lane)

    def masked(self, op, kind: str) -> ir.Value:
        v = op.operands[0]
        if len(op.operands) == 1:
            return v
        e = self.e
        ident = e.identity(kind)
        if isinstance(v.type, ir.VectorType):
            ident = create("vector.broadcast", [ident], [v.type]).result
            mask = create("vector.broadcast", [op.operands[1]], [ir.VectorType.get(payload_of(v.type), e.i1)]).result
        else:
            mask = op.operands[1]
        return e.op("arith.select", mask, v, ident, t=v.type)

    def count_term(self, op) -> ir.Value:
        e = self.e
        if len(op.operands) == 1:
            return e.cf(1.0)
        return e.op("arith.select", op.operands[1], e.cf(1.0), e.cf(0.0), t=e.f)

    def reduce_full(self, op, r, slot: int) -> int:
        e = self.e
        v = self.masked(op, r.kind)
        fast = r.policy == "auto"
        for k, x in enumerate(e.elems(v, r.payload)):
            self.accs[slot + k] = e.combine(r.kind, self.accs[slot + k], x, fast)
        slot += _size(r.payload)
        if r.kind == "mean":
            self.accs[slot] = e.combine("sum", self.accs[slot], self.count_term(op), fast)
            slot += 1
        op.operation.erase()
        return slot

    def kept_index(self, kept) -> tuple[ir.Value, ir.Value]:
        """Linear index of this lane's kept coordinates, and the number of kept positions."""
        e = self.e
        idx, n = e.c(0), e.c(1)
        for a in reversed(kept):
            k = self.axes.index(a)
            idx = e.op("arith.addi", idx, e.op("arith.muli", self.coord(a), n))
            n = e.op("arith.muli", n, self.ext[k])
        return idx, n

    def reduce_kept(self, op, r):
        e = self.e
        out = self.buf(r.cell, ("cell",))
        idx, n = self.kept_index(r.kept)
        v = self.masked(op, r.kind)
        for c, x in enumerate(e.elems(v, r.payload)):
            at = e.op("arith.addi", e.op("arith.muli", e.c(c), n), idx)
            e.store(e.combine(r.kind, e.load(out, at), x, False), out, at)
        if r.kind == "mean":
            cnt = self.bufs[(r.cell, "count")]
            e.store(e.combine("sum", e.load(cnt, idx), self.count_term(op), False), cnt, idx)
        op.operation.erase()

    def lower_scatter(self, op):
        e = self.e
        sink = attr_str(op, "sink")
        spec = self.lay.sig.get(sink)
        buf = self.buf(sink, ("sink",))
        v, keys = op.operands[0], list(op.operands)[1:]
        ok, idx, stride = None, e.c(0), 1
        for a, kv in reversed(list(zip(spec.axes, keys, strict=True))):
            lo = e.op("arith.cmpi", kv, e.c(0, e.i64), t=e.i1, attrs={"predicate": ir.IntegerAttr.get(e.i64, 5)})
            hi = e.op("arith.cmpi", kv, e.c(a.extent, e.i64), t=e.i1,
                      attrs={"predicate": ir.IntegerAttr.get(e.i64, 2)})
            both = e.op("arith.andi", lo, hi)
            ok = both if ok is None else e.op("arith.andi", ok, both)
            idx = e.op("arith.addi", idx, e.op("arith.muli", e.to_index(kv), e.c(stride)))
            stride *= a.extent
        shape = payload_of(v.type)
        mode = attr_str(op, "mode")
        branch = scf.IfOp(ok, [], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            for c, x in enumerate(e.elems(v, shape)):
                at = e.op("arith.addi", e.op("arith.muli", e.c(c), e.c(stride)), idx) if shape else idx
                new = e.combine("sum", e.load(buf, at), x, False) if mode == "add" else x
                e.store(new, buf, at)
            scf.YieldOp([])
        with ir.InsertionPoint(branch.else_block):
            err = self.bufs[("#err", "err")]
            e.store(e.op("arith.addi", e.load(err, e.c(0)), e.c(1, e.i64)), err, e.c(0))
            e.store(keys[0], err, e.c(1))
            e.store(e.c(self.lay.buffer_index(sink, "sink"), e.i64), err, e.c(2))
            scf.YieldOp([])
        return None

    # ---- the finish function -------------------------------------------------------------------------
    def build_finish(self, finish):
        e = self.e
        entry = finish.add_entry_block()
        self.bufs = self.args(finish)
        with ir.InsertionPoint(entry), finish.location:
            self.read_meta()
            nchunks = self.chunk
            scratch = self.bufs[("#scratch", "scratch")]
            width = e.c(max(self.lay.width, 1))
            slot = 0
            for r in self.lay.reductions:
                if r.kept:
                    if r.kind == "mean":
                        self.finish_kept_mean(r)
                    continue
                n = _size(r.payload) + (r.kind == "mean")
                inits = [e.identity(r.kind)] * _size(r.payload) + ([e.cf(0.0)] if r.kind == "mean" else [])
                loop = scf.ForOp(e.c(0), nchunks, e.c(1), inits)
                with ir.InsertionPoint(loop.body):
                    base = e.op("arith.muli", loop.induction_variable, width)
                    outs = []
                    for k, acc in enumerate(loop.inner_iter_args):
                        x = e.load(scratch, e.op("arith.addi", base, e.c(slot + k)))
                        outs.append(e.combine(r.kind if k < _size(r.payload) else "sum", acc, x, False))
                    scf.YieldOp(outs)
                vals = list(loop.results)
                if r.kind == "mean":
                    vals = [e.op("arith.divf", v, vals[-1]) for v in vals[:-1]]
                cell = self.bufs[(r.cell, "cell")]
                for k, v in enumerate(vals):
                    e.store(v, cell, e.c(k))
                slot += n
            func.ReturnOp([])

    def finish_kept_mean(self, r):
        e = self.e
        out, cnt = self.bufs[(r.cell, "cell")], self.bufs[(r.cell, "count")]
        _, n = self.kept_index_sizes(r.kept)
        loop = scf.ForOp(e.c(0), n, e.c(1), [])
        with ir.InsertionPoint(loop.body):
            i = loop.induction_variable
            c = e.load(cnt, i)
            for p in range(_size(r.payload)):
                at = e.op("arith.addi", e.op("arith.muli", e.c(p), n), i)
                e.store(e.op("arith.divf", e.load(out, at), c), out, at)
            scf.YieldOp([])

    def kept_index_sizes(self, kept):
        e = self.e
        n = e.c(1)
        for a in kept:
            n = e.op("arith.muli", n, self.ext[self.axes.index(a)])
        return None, n


def lower_host(module: ir.Module, layout: Layout, ftype: ir.Type, itypes: dict[str, ir.Type]) -> None:
    HostLowering(module, layout, ftype, itypes).run()
