"""Per-op lowering of hawk ops for the host lane loop: lane coordinates, plane reads and writes, `.at`,
scatters (sorted runs too) and reductions that keep some lane axes (a scatter into the reduced output by kept
index). Wide payloads (host_emit.WIDE_PAYLOAD) move between memory and values through loops over components
(`gather`, `components`), so code size and compile time grow linearly with the payload.

Mixed into HostLowering, which provides the loop state: `self.lane` (this lane's index), `self.L`, `self.ext`
and `self.stride` (lane extents and strides) and `self.bufs` (function arguments by (name, role)).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import memref, scf

from hawk.ir.build import create
from hawk.ir.dialect import attr_str, attr_strs
from hawk.layout import sum_policy
from hawk.passes import exact_emit
from hawk.passes.analysis import key_source, payload_of
from hawk.passes.host_emit import _EQ, _SGE, _SLT, size

_UGT = 8
_NE = 1  # arith.cmpi "ne"
_OEQ = 1  # arith.cmpf "oeq"


class HostOps:
    # ---- lanes and planes ---------------------------------------------------------------------------
    known_coords: dict = {}  # coordinates a driver's loops already hold (no division needed)
    interior: dict = {}  # axis -> margin: the driver runs lanes at least this far from both edges of the axis
    wide_ok = True  # wide payloads (host_emit.WIDE_PAYLOAD) go through component loops; False: per component
    wide_sums = True  # and sums over every lane and sorted runs of them keep their state in memory (host_wide.py)
    entry: ir.Block | None = None  # the function's entry block, where component buffers are allocated

    # ---- wide payloads: loops over components -----------------------------------------------------------
    def is_wide(self, shape) -> bool:
        return self.wide_ok and self.e.wide(shape)

    def temp(self, n: int, elem: ir.Type, tag: str = "") -> ir.Value:
        """A buffer of n components in the function's entry block, shared by every wide read and write of that
        size and type (and tag): each fills it and empties it before the next one starts."""
        key = (n, str(elem), tag)
        if key not in self.temps:
            with ir.InsertionPoint.at_block_begin(self.entry):
                self.temps[key] = memref.AllocaOp(ir.MemRefType.get([n], elem), [], []).result
        return self.temps[key]

    def gather(self, shape, elem: ir.Type, at) -> ir.Value:
        """A wide payload read component by component in a loop: component c from `at(c)` (buffer, index)."""
        e = self.e
        n = size(shape)
        tmp = self.temp(n, elem)
        loop = scf.ForOp(e.c(0), e.c(n), e.c(1), [])
        with ir.InsertionPoint(loop.body):
            c = loop.induction_variable
            buf, i = at(c)
            e.store(e.load(buf, i), tmp, c)
            scf.YieldOp([])
        return e.shaped(e.vload(tmp, e.c(0), n, elem), shape)

    def components(self, v: ir.Value, shape):
        """(component index, value) of each component of v in row-major order: unrolled for a narrow payload;
        for a wide one, a single step inside a loop over components (v is parked in a buffer first), so the
        caller's code for one component is emitted once."""
        e = self.e
        if not self.is_wide(shape):
            for c, x in enumerate(e.elems(v, shape)):
                yield e.c(c), x
            return
        n = size(shape)
        elem = ir.VectorType(v.type).element_type
        tmp = self.temp(n, elem)
        e.vstore(e.flat(v), tmp, e.c(0))
        loop = scf.ForOp(e.c(0), e.c(n), e.c(1), [])
        with ir.InsertionPoint(loop.body):
            c = loop.induction_variable
            yield c, e.load(tmp, c)
            scf.YieldOp([])

    def coord(self, axis: str) -> ir.Value:
        if axis in self.known_coords:
            return self.known_coords[axis]
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
        if self.is_wide(shape):
            return self.gather(shape, ir.VectorType(t).element_type,
                               lambda c: (buf, e.add_i(e.mul_i(c, self.L), lane)))
        return e.pack([e.load(buf, e.add_i(e.mul_i(e.c(c), self.L), lane)) for c in range(size(shape))], shape)

    def lower_load(self, op):
        return self.plane_read(attr_str(op, "plane"), self.lane, op.results[0].type)

    def lower_cut_read(self, op):
        """A total an earlier stage wrote: the same value on every lane."""
        e = self.e
        buf = self.bufs[(attr_str(op, "name"), "cut")]
        shape = payload_of(op.results[0].type)
        kept = attr_strs(op, "axes")
        elem = ir.VectorType(op.results[0].type).element_type if shape else None
        if not kept:
            if self.is_wide(shape):
                return self.gather(shape, elem, lambda c: (buf, c))
            return e.pack([e.load(buf, e.c(c)) for c in range(size(shape))], shape)
        idx, n = self.kept_index(kept)  # a total per kept position: this lane's one
        if self.is_wide(shape):
            return self.gather(shape, elem, lambda c: (buf, e.add_i(e.mul_i(c, n), idx)))
        return e.pack([e.load(buf, e.add_i(e.mul_i(e.c(c), n), idx)) for c in range(size(shape))], shape)

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
                idx = e.add_i(idx, e.mul_i(e.clamp(cv, e.c(a.extent)), e.c(stride)))
                stride *= a.extent
            return e.load(self.buf(plane), idx)
        if axes == ["#"]:
            return self.plane_read(plane, e.clamp(coords[0], self.L), op.results[0].type)
        own = list(ir.DenseI64ArrayAttr(op.attributes["hawk.own_offsets"])) if "hawk.own_offsets" in \
            op.attributes else [None] * len(axes)
        lane = e.c(0)
        for a, cv, off in zip(axes, coords, own, strict=True):  # each coordinate clamped: the lane is in range too
            k = self.axes.index(a)
            if off is not None and a in self.interior and abs(off) <= self.interior[a]:
                inside = cv  # own coordinate + off, off no further than the margin the driver keeps: in range
            else:
                inside = e.clamp(cv, self.ext[k])
            lane = e.add_i(lane, e.mul_i(inside, self.stride[k]))
        return self.plane_read(plane, lane, op.results[0].type)

    def lower_store(self, op):
        e = self.e
        buf = self.buf(attr_str(op, "plane"), ("out",))
        v = op.operands[0]
        shape = payload_of(v.type)
        for c, x in self.components(v, shape):
            e.store(x, buf, e.add_i(e.mul_i(c, self.L), self.lane) if shape else self.lane)

    # ---- adding into a slot under a policy -----------------------------------------------------------
    def add_into(self, policy: str, name: str, at: ir.Value, x: ir.Value, role: str):
        """Add x into slot `at` of buffer (name, role): plain, compensated or ordered (into the slot's exact
        accumulator: this chunk's copy, or the one copy every chunk shares, added into atomically)."""
        e = self.e
        if policy == "plain" and name in self.lay.private:  # this chunk's own copy of the sink
            buf = self.bufs[(name, "priv")]
            at = e.add_i(at, self.copy_start(name))
            e.store(e.add(e.load(buf, at), x), buf, at)
        elif policy == "plain":
            buf = self.bufs[(name, role)]
            e.store(e.add(e.load(buf, at), x), buf, at)
        elif policy == "compensated":
            self.comp_add(name, at, e.widen(x, e.f64))
        else:
            self.exact_add(name, at, x)

    def exact_add(self, name: str, at: ir.Value, x: ir.Value, live: ir.Value | None = None) -> None:
        """x into slot `at` of an ordered sink or kept cell: on the host, into this chunk's (high, low) pair of
        the slot by two error-free TwoSums, and only a term the pair cannot take exactly (the second TwoSum
        errs, or a sum is not finite) into the slot's shared exact accumulator, counted in its last word; on a
        GPU (and for a sink also stored into) every term into the accumulator."""
        e = self.e
        buf = self.bufs[(name, "exact")]
        w = exact_emit.words_of(e.f)
        shared = name not in self.lay.stored  # every chunk adds into the one accumulator
        if not (self.exact_pairs and name in self.lay.private):
            exact_emit.deposit(e, buf, e.mul_i(at, e.c(w)), x, live, atomic=shared)
            return
        pairs = self.bufs[(name, "pairs")]
        p = e.mul_i(e.add_i(at, self.copy_start(name)), e.c(2))
        q = e.add_i(p, e.c(1))
        zero = e.cf(0.0)
        if live is not None:
            x = e.select(live, x, zero)
        hi, lo = e.load(pairs, p), e.load(pairs, q)
        s1, e1 = e.two_sum(hi, x)
        s2, e2 = e.two_sum(lo, e1)
        ok = e.cmpf(_OEQ, e2, zero)  # false for NaN too: a sum that is inf or NaN makes the error NaN
        keep = scf.IfOp(ok, [], has_else=True)
        with ir.InsertionPoint(keep.then_block):
            e.store(s1, pairs, p)
            e.store(s2, pairs, q)
            scf.YieldOp([])
        with ir.InsertionPoint(keep.else_block):
            exact_emit.deposit(e, buf, e.mul_i(at, e.c(w)), x, atomic=True)
            count = e.dim(buf)
            spill = e.op("arith.subi", count, e.c(1))
            create("memref.atomic_rmw", [e.c(1, e.i64), buf, spill], [e.i64],
                   {"kind": ir.IntegerAttr.get(e.i64, 1)})  # addi
            scf.YieldOp([])

    def comp_add(self, name: str, at: ir.Value, x: ir.Value, carry: ir.Value | None = None):
        """Neumaier-add x (float64) into the companion's (sum, correction) pair of slot `at`; `carry` is a
        correction already gathered elsewhere (a sorted run's)."""
        e = self.e
        if name in self.lay.private:  # this chunk's own (sums, corrections) pair block
            comp = self.bufs[(name, "priv")]
            half = e.c(self.lay.private[name])
            at = e.add_i(at, self.copy_start(name, 2))
        else:
            comp = self.bufs[(name, "comp")]
            half = self.slots_of(name)
        at_c = e.add_i(at, half)
        s, c = e.neumaier(e.load(comp, at), e.load(comp, at_c), x)
        e.store(s, comp, at)
        e.store(c if carry is None else e.add(c, carry), comp, at_c)

    def slots_of(self, name: str) -> ir.Value:
        """Slots of a sink (static) or of a cell kept by a reduction over some axes (from the lane extents)."""
        e = self.e
        spec = self.lay.sig.get(name)
        if spec is not None and spec.kind == "sink":
            return e.c(size(self.lay.sinks.get(name, ())) * size(tuple(a.extent for a in spec.axes)))
        r = next(r for r in self.lay.reductions if r.cell == name)
        n = e.c(size(r.payload))
        for a in r.kept:
            n = e.mul_i(n, self.ext[self.axes.index(a)])
        return n

    # ---- scatter ------------------------------------------------------------------------------------------
    def key_index(self, spec, keys: list[ir.Value]) -> tuple[ir.Value, ir.Value, ir.Value, int]:
        """(in range, any key is -1, linear slot, number of slots) of a key tuple."""
        e = self.e
        ok = skip = None
        idx, stride = e.c(0), 1
        for a, kv in reversed(list(zip(spec.axes, keys, strict=True))):
            inside = e.op("arith.andi", e.cmpi(_SGE, kv, e.c(0, e.i64)), e.cmpi(_SLT, kv, e.c(a.extent, e.i64)))
            minus = e.cmpi(_EQ, kv, e.c(-1, e.i64))
            ok = inside if ok is None else e.op("arith.andi", ok, inside)
            skip = minus if skip is None else e.op("arith.ori", skip, minus)
            idx = e.add_i(idx, e.mul_i(e.to_index(kv), e.c(stride)))
            stride *= a.extent
        return ok, skip, idx, stride

    def lower_scatter(self, op):
        e = self.e
        sink = attr_str(op, "sink")
        spec = self.lay.sig.get(sink)
        v, keys = op.operands[0], list(op.operands)[1:]
        ok, skip, idx, n = self.key_index(spec, keys)
        shape = payload_of(v.type)
        mode = attr_str(op, "mode")
        policy = self.lay.sink_policy.get(sink, "plain")
        branch = scf.IfOp(ok, [], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            buf = self.bufs[(sink, "sink")]
            for c, x in self.components(v, shape):
                at = e.add_i(e.mul_i(c, e.c(n)), idx) if shape else idx
                if mode == "add":
                    self.add_into(policy, sink, at, x, "sink")
                elif (sink, "mark") in self.bufs:  # this chunk's copy, and a mark: the finish takes the last chunk's
                    at = e.add_i(at, self.copy_start(sink))
                    e.store(x, self.bufs[(sink, "priv")], at)
                    e.store(e.c(1, e.i64), self.bufs[(sink, "mark")], at)
                else:
                    e.store(x, buf, at)
            scf.YieldOp([])
        with ir.InsertionPoint(branch.else_block):
            # a key of -1 (on any axis) adds and stores nothing under every policy; any other key outside is
            # reported below, by sink, through the #err buffer
            self.report_bad_key(sink, keys[0], e.op("arith.xori", skip, e.c(1, e.i1)))
            scf.YieldOp([])

    def report_bad_key(self, sink: str, key: ir.Value, bad: ir.Value) -> None:
        """When `bad`, count a key outside `sink` in this chunk's three slots of the #err buffer (count, first bad
        key, sink): chunks never race, and the runtime reads the first bad key of the earliest chunk, which is the
        earliest bad lane's."""
        e = self.e
        report = scf.IfOp(bad, [], has_else=False)
        with ir.InsertionPoint(report.then_block):
            err = self.bufs[("#err", "err")]
            base = e.mul_i(self.chunk, e.c(3))
            count_at, key_at, sink_at = base, e.add_i(base, e.c(1)), e.add_i(base, e.c(2))
            first = e.cmpi(_EQ, e.load(err, count_at), e.c(0, e.i64))
            e.store(e.op("arith.addi", e.load(err, count_at), e.c(1, e.i64)), err, count_at)
            e.store(e.select(first, key, e.load(err, key_at)), err, key_at)
            e.store(e.c(self.lay.buffer_index(sink, "sink"), e.i64), err, sink_at)
            scf.YieldOp([])

    # ---- sorted runs (lower_host._Run: a run of equal keys summed in registers) -------------------------
    def sorted_step(self, run, op):
        e = self.e
        s = self.accs
        key, v = op.operands[1], op.operands[0]
        state = s[run.slot:run.slot + run.width]
        same = e.cmpi(_EQ, state[0], key)
        differs = e.op("arith.xori", same, e.c(1, e.i1))
        branch = scf.IfOp(differs, [], has_else=False)
        with ir.InsertionPoint(branch.then_block):
            self.flush_run(run, state)
            scf.YieldOp([])
        xs = [e.flat(v)] if run.wide else e.elems(v, payload_of(v.type))
        s[run.slot] = key
        for c in range(run.k):
            if run.policy == "compensated":
                x = e.widen(xs[c], e.f64)
                ns, nc = e.neumaier(state[1 + c], state[1 + run.k + c], x)
                s[run.slot + 1 + c] = e.select(same, ns, x)
                s[run.slot + 1 + run.k + c] = e.select(same, nc, e.splat(0.0, x.type) if run.wide else e.cf(0.0, e.f64))
            else:
                s[run.slot + 1 + c] = e.select(same, e.add(state[1 + c], xs[c]), xs[c])

    def flush_run(self, run, state: list[ir.Value]):
        """Add a finished run of equal keys into its slot (nothing before the first run, or for key -1). A key
        outside the sink is reported, never written: the binder checks the keys before a run, but a bound launch
        reads its Index plane again at every launch, and the caller may have changed it since."""
        e = self.e
        sink = run.sink
        extent = self.lay.sig.get(sink).axes[0].extent
        n = e.c(extent)
        started = e.op("arith.andi", e.cmpi(_SGE, state[0], e.c(0, e.i64)),
                       e.cmpi(_SLT, state[0], e.c(extent, e.i64)))
        self.report_bad_key(sink, state[0], e.op("arith.andi", e.op("arith.xori", started, e.c(1, e.i1)),
                                                 e.cmpi(_NE, state[0], e.c(-1, e.i64))))
        branch = scf.IfOp(started, [], has_else=False)
        with ir.InsertionPoint(branch.then_block):
            idx = e.to_index(state[0])
            comp = run.policy == "compensated"
            if run.wide:  # the run's sums in a loop over components (corrections parked in a second buffer)
                carry = self.temp(run.n, e.f64, tag="carry") if comp else None
                if comp:
                    e.vstore(state[2], carry, e.c(0))
                parts = ((c, x, e.load(carry, c) if comp else None) for c, x in self.components(state[1], (run.n,)))
            else:
                parts = ((e.c(c), state[1 + c], state[1 + run.n + c] if comp else None) for c in range(run.n))
            for c, x, extra in parts:
                at = e.add_i(e.mul_i(c, n), idx) if run.n > 1 else idx
                if comp:
                    self.comp_add(sink, at, x, carry=extra)
                else:
                    self.add_into(run.policy, sink, at, x, "sink")
            scf.YieldOp([])

    # ---- reductions that keep some lane axes ---------------------------------------------------------
    def copy_start(self, name: str, width: int = 1) -> ir.Value:
        """Where this chunk's private copy of a sink or cell starts in its "priv" buffer (copies of `width`
        values per slot: 2 for compensated pairs)."""
        return self.e.mul_i(self.copy, self.e.c(width * self.lay.private[name]))

    def kept_out(self, r) -> tuple[ir.Value, ir.Value | None]:
        """Where a kept-axis reduction accumulates: its cell, or this chunk's copy of it (and the copy's start)."""
        if r.cell in self.lay.private:
            return self.bufs[(r.cell, "priv")], self.copy_start(r.cell)
        return self.bufs[(r.cell, "cell")], None

    def count_at(self, r, idx: ir.Value, n: ir.Value) -> tuple[ir.Value, ir.Value]:
        """Where a kept mean counts this lane: its count plane, or the counts after the values in this chunk's
        copy of the cell."""
        if r.cell in self.lay.private:
            e = self.e
            return self.bufs[(r.cell, "priv")], e.add_i(self.copy_start(r.cell), e.mul_i(e.c(size(r.payload)), n), idx)
        return self.bufs[(r.cell, "count")], idx

    def reduce_kept_branchless(self, op, r, idx, n):
        """out[slot] op= v with the mask folded in by selects: a straight-line update LLVM can vectorize."""
        e = self.e
        out, base = self.kept_out(r)
        mask = op.operands[1] if len(op.operands) > 1 else None
        for c, x in self.components(op.operands[0], r.payload):
            at = e.add_i(e.mul_i(c, n), idx)
            at = at if base is None else e.add_i(at, base)
            old = e.load(out, at)
            if r.kind in ("max", "min"):
                new = e.extremum(r.kind, old, x)
                new = new if mask is None else e.select(mask, new, old)
            else:
                new = e.add(old, x if mask is None else e.select(mask, x, e.cf(0.0)))
            e.store(new, out, at)
        if r.kind == "mean":
            cnt, at = self.count_at(r, idx, n)
            one = e.cf(1.0) if mask is None else e.select(mask, e.cf(1.0), e.cf(0.0))
            e.store(e.add(e.load(cnt, at), one), cnt, at)

    def kept_index(self, kept) -> tuple[ir.Value, ir.Value]:
        """Linear index of this lane's kept coordinates, and the number of kept positions."""
        e = self.e
        if getattr(self, "kept_slot", None) is not None:  # the column driver knows it: lane - row * span
            return self.kept_slot, self.kept_count
        idx, n = e.c(0), e.c(1)
        for a in reversed(kept):
            k = self.axes.index(a)
            idx = e.add_i(idx, e.mul_i(self.coord(a), n))
            n = e.mul_i(n, self.ext[k])
        return idx, n

    def reduce_kept(self, op, r):
        e = self.e
        idx, n = self.kept_index(r.kept)
        v = op.operands[0]
        if getattr(self, "kept_slot", None) is not None and (r.kind in ("max", "min") or r.policy == "auto"):
            self.reduce_kept_branchless(op, r, idx, n)
            return
        if r.kind in ("sum", "mean") and r.policy == "ordered":  # exact accumulators; a mean counts in one more
            mask = op.operands[1] if len(op.operands) > 1 else None
            for c, x in self.components(v, r.payload):
                self.exact_add(r.cell, e.add_i(e.mul_i(c, n), idx), x, mask)
            if r.kind == "mean":
                self.exact_add(r.cell, e.add_i(e.mul_i(e.c(size(r.payload)), n), idx), e.cf(1.0), mask)
            return
        where = scf.IfOp(op.operands[1], [], has_else=False) if len(op.operands) > 1 else None
        with ir.InsertionPoint(where.then_block) if where is not None else _Here():
            out, base = self.kept_out(r)
            policy = "fast" if r.policy == "auto" else sum_policy(r.policy, True)
            for c, x in self.components(v, r.payload):
                at = e.add_i(e.mul_i(c, n), idx)
                if r.kind in ("max", "min"):
                    at = at if base is None else e.add_i(at, base)
                    e.store(e.extremum(r.kind, e.load(out, at), x), out, at)
                else:  # (a private cell's copy through add_into, like a private sink's)
                    self.add_into("plain" if policy == "fast" else policy, r.cell, at, x, "cell")
            if r.kind == "mean":
                cnt, at = self.count_at(r, idx, n)
                e.store(e.add(e.load(cnt, at), e.cf(1.0)), cnt, at)
            if where is not None:
                scf.YieldOp([])


class SplitScatters:
    """Scatter-adds with computed keys (`hawk.scatter(counts)[m.index(t * 256.0, 256)] += 1.0`) in two passes per
    block of lanes: the first computes every lane's keys and values into small buffers with no store into a sink,
    so LLVM vectorizes it; the second adds them into the sink lane by lane, in lane order (the same adds, in the
    same order, as one pass). Fused, the sink's loads and stores sit between the key computations and the loop
    stays scalar. Host only, for kernels whose only effects are plain adds of scalars into sinks."""

    SPLIT_BLOCK = 256  # lanes per block: the key and value buffers stay in L1

    def split_scatters(self, body: ir.Block) -> list | None:
        """The body's scatters when the two-pass form applies (else None): every effect a top-level plain add of
        a scalar into a sink no lane stores into, at least one with a key computed in the kernel (a key read
        straight from an Index plane gains nothing), and no reduction."""
        from hawk.ir.dialect import is_hawk

        if not self.exact_pairs or self.lay.reductions or len(self.axes) != 1:
            return None
        scatters, ok = [], [True]

        def visit(op):
            if is_hawk(op, "reduce") or is_hawk(op, "store") or op.name.startswith("scf.") or \
                    (is_hawk(op) and op.name[5:] not in ("load", "param", "lane", "at", "scatter", "cell")):
                ok[0] = False
            return ir.WalkResult.ADVANCE

        for op in body.operations:
            op.operation.walk(visit)
            if op.operation.name == "hawk.scatter":
                scatters.append(op)
        if not ok[0] or not scatters:
            return None
        computed = False
        for op in scatters:
            sink = attr_str(op, "sink")
            if attr_str(op, "mode") != "add" or self.lay.sink_policy.get(sink) != "plain" or \
                    sink in self.lay.stored or payload_of(op.operands[0].type):
                return None
            computed = computed or any(key_source(k) is None for k in list(op.operands)[1:])
        return scatters if computed else None

    def split_driver(self, body: ir.Block, chunk0: list[ir.Value]) -> list[ir.Value]:
        """for block: for lane: keys and values into buffers; for lane: the scatter-adds from the buffers."""
        e = self.e
        B = self.SPLIT_BLOCK
        outer = scf.ForOp(self.lo, self.hi, e.c(B), chunk0)
        with ir.InsertionPoint(outer.body):
            start = outer.induction_variable
            end = e.op("arith.minui", e.add_i(start, e.c(B)), self.hi)
            first = scf.ForOp(start, end, e.c(1), [])
            with ir.InsertionPoint(first.body):
                anchor = scf.YieldOp([])
            copies = self.clone_body(body, anchor)
            # each scatter's operands: constants are made again in the second pass, the rest go through buffers
            parked = []
            with ir.InsertionPoint(anchor), body.owner.location:
                at = e.op("arith.subi", first.induction_variable, start)
                for n, op in enumerate(c for c in copies if c.operation.name == "hawk.scatter"):
                    slots = []
                    for k, v in enumerate(op.operands):
                        if not isinstance(v.owner, ir.Block) and v.owner.name == "arith.constant":
                            slots.append(("const", v.owner))
                        else:
                            buf = self.temp(B, v.type, tag=f"split{n}.{k}")
                            e.store(v, buf, at)
                            slots.append(("buf", buf))
                    parked.append((op, slots))
            self.lane, self.accs, self.j = first.induction_variable, [], None
            self.rewrite_ops([c for c in copies if c.operation.name != "hawk.scatter"])
            second = scf.ForOp(start, end, e.c(1), [])
            with ir.InsertionPoint(second.body), body.owner.location:
                at = e.op("arith.subi", second.induction_variable, start)
                again = []
                for op, slots in parked:
                    vals = [slot.operation.clone().results[0] if how == "const" else e.load(slot, at)
                            for how, slot in slots]
                    new = op.operation.clone()
                    for k, v in enumerate(vals):
                        new.operands[k] = v
                    again.append(new)
                    op.operation.erase()
                self.lane = second.induction_variable
                self.rewrite_ops(again)
                scf.YieldOp([])
            anchor.operation.erase()
            with ir.InsertionPoint(first.body):
                scf.YieldOp([])
            scf.YieldOp(list(outer.inner_iter_args))
        return list(outer.results)


class _Here:
    """A no-op context manager: stay at the current insertion point."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
