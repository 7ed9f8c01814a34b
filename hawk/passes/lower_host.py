"""lower-host-lanes: turn one lane's hawk code into loops over a chunk of lanes, for the CPU.

The kernel func becomes two functions with the same arguments (flat `memref<?xT>` buffers in the order of
`Layout.buffers`; meta = [lo, hi, chunk, L, extents...]):

  @<k>_lanes   runs lanes [lo, hi): per-lane outputs, kept-axis reductions and sinks are written in place; the
               partials of every-lane reductions go to #scratch[chunk * width ...] (f64) and, for "ordered" sums,
               into the chunk's exact accumulators in #exact (hawk/exact.py, hawk/passes/exact_emit.py).
  @<k>_finish  (meta[2] = number of chunks) combines chunk partials in chunk order, adds up and rounds the exact
               accumulators, folds companions into sinks and divides means by their counts
               (hawk/passes/host_finish.py).

Loop shapes ("drivers"): a flat loop over lanes (two passes per block of lanes when its only effects are
scatter-adds with computed keys: host_ops.SplitScatters); a loop over blocks with ORDERED_CHAINS interleaved
chains inside each block when the kernel has a compensated sum over every lane; register
accumulators per kept slot (nested) or rows of lanes (column) for reductions that keep lane axes. Sums of wide
payloads keep their state in memory instead of registers (hawk/passes/host_wide.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import func, scf, vector

from hawk.ir.build import create
from hawk.ir.dialect import attr_str, is_hawk
from hawk.layout import ORDERED_BLOCK, ORDERED_CHAINS, Layout, Reduction, sum_policy
from hawk.passes import exact_emit
from hawk.passes.analysis import key_source, payload_of
from hawk.passes.fold import HostFold
from hawk.passes.grid_interior import GridInterior, own_offsets
from hawk.passes.host_emit import Emit, size
from hawk.passes.host_finish import HostFinish
from hawk.passes.host_ops import HostOps, SplitScatters
from hawk.passes.host_wide import HostWide
from hawk.passes.speculate import NO_SPECULATE

_UNE = 13  # arith.cmpf "une": unordered or not equal
_UNO, _OEQ, _UEQ = 14, 1, 8  # arith.cmpf "uno" (either is NaN), "oeq", "ueq" (equal or either is NaN)


@dataclass
class _Acc:
    """Where one every-lane reduction keeps its running state among the loop's iter_args."""

    r: Reduction
    policy: str  # fast | compensated | ordered | max | min
    n: int  # components
    chunk: int  # where its chunk partials start in #scratch: [values (n)] [corrections (n) if compensated] [count]
    slot: int  # its first chunk-state slot among the iter_args (the same layout; a wide one: only its count)
    wide: bool = False  # a wide payload: its chunk and chain state live in `mem` (hawk/passes/host_wide.py)
    chain: int = -1  # compensated: first chain-state slot, ORDERED_CHAINS x 2n
    exact_at: int = 0  # ordered: where its accumulators (one per component) start in a chunk's #exact words
    pairs: bool = False  # ordered, host: full blocks keep two-float chains (ordered_chain_step), exact or redone
    term_at: int = 0  # pairs: where its components' terms start in the block's term buffer (x ORDERED_BLOCK)
    mem: ir.Value | None = None  # wide: [chunk state (values, corrections)] [chain state (CHAINS x ...)]
    chain_at: int = 0  # wide: where the chain state starts in `mem`
    flags: int = -1  # max/min, host: its sums of NaN and zero lanes (n, float64) among the iter_args


@dataclass
class _Run:
    """A scatter whose keys come sorted: each run of equal keys is added into its slot once."""

    sink: str
    policy: str
    n: int
    slot: int  # [key] [run sums (k)] [run corrections (k) if compensated]
    wide: bool = False  # a wide payload: the run's sums (and corrections) are one vector each (k = 1)

    @property
    def k(self) -> int:
        return 1 if self.wide else self.n

    @property
    def width(self) -> int:
        return 1 + self.k * (2 if self.policy == "compensated" else 1)


class HostLowering(HostOps, HostFinish, GridInterior, HostWide, HostFold, SplitScatters):
    # Ordered sums over every lane keep error-free two-float chains in full blocks (exact, or the block's terms
    # are deposited one by one): host only; GPU threads deposit every term.
    exact_pairs = True
    n_flags = 0  # iter_args after the sorted runs' that track NaNs and zeros of max/min (plan_extremum_flags)

    def __init__(self, module: ir.Module, layout: Layout, ftype: ir.Type, itypes: dict[str, ir.Type]):
        self.module, self.lay, self.e = module, layout, Emit(ftype)
        self.itypes = itypes
        self.axes = [a.label for a in layout.sig.lane_axes()]

    # ---- arguments ---------------------------------------------------------------------------------
    def arg_types(self) -> list[ir.Type]:
        dyn = ir.ShapedType.get_dynamic_size()
        elem = {"f": self.e.f, "f64": self.e.f64, "i32": ir.IntegerType.get_signless(32), "i64": self.e.i64}
        return [ir.MemRefType.get([dyn], elem[b.dtype]) for b in self.lay.buffers]

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
        self.copy = self.chunk  # which private copy of a sink or kept cell this chunk adds into
        self.ext = vals[4:]
        self.stride = [None] * len(self.axes)
        s = e.c(1)
        for k in reversed(range(len(self.axes))):
            self.stride[k] = s
            s = e.mul_i(s, self.ext[k])

    def run(self):
        kfunc = next(op for op in self.module.body.operations if "hawk.kernel" in op.attributes)
        self.collect_folds(kfunc)  # hawk.reduce with a user's operator: hawk/passes/fold.py
        with ir.InsertionPoint(self.module.body), kfunc.location:
            lanes = self.lanes_func()
            finish = func.FuncOp(f"{self.lay.name}_finish", (self.arg_types(), []))
        self.build_lanes(lanes, kfunc)
        self.build_finish(finish)
        kfunc.operation.erase()
        self.drop_combiners()

    def lanes_func(self):
        return func.FuncOp(f"{self.lay.name}_lanes", (self.arg_types(), []))

    def lanes_return(self):
        func.ReturnOp([])

    # ---- state ---------------------------------------------------------------------------------------
    def plan_state(self, body: ir.Block) -> tuple[list[ir.Value], list[ir.Value]]:
        """Initial chunk state and chain state, and the slots each reduction and sorted scatter uses."""
        e = self.e
        chunk, chain = [], []
        self.full: list[_Acc] = []
        self.scratch_at: list[int] = []  # where each chunk-state slot's value (or vector's first entry) is stored
        off = exact_off = 0
        self.n_terms = 0  # components of ordered sums kept in pairs: their terms' block buffer
        for r in self.lay.reductions:
            if r.kept or r.kind == "fold":  # a fold keeps its state in its buffer (hawk/passes/fold.py)
                continue
            n = size(r.payload)
            pol = r.kind if r.kind in ("max", "min") else sum_policy(r.policy, False)
            acc = _Acc(r, pol, n, off, len(chunk), pol != "ordered" and self.wide_sums and self.is_wide(r.payload))
            if acc.wide:
                off += self.plan_wide(acc)  # its state in memory; only its count below is an iter_arg
            elif pol == "ordered":  # exact accumulators in #exact; only a mean's count is an iter_arg
                acc.exact_at = exact_off
                exact_off += n * exact_emit.words_of(e.f)
                if self.exact_pairs and not self.is_wide(r.payload):
                    acc.pairs, acc.chain, acc.term_at = True, len(chain), self.n_terms
                    lanes = ir.VectorType.get([ORDERED_CHAINS], e.f)  # the chains side by side
                    chain += [e.splat(0.0, lanes)] * (2 * n)  # (high, low) per component
                    self.n_terms += n
            else:
                t = e.f64  # chunk partials are float64 (ordered chains stay in the kernel's type)
                if self.exact_pairs and pol in ("max", "min") and not acc.wide:
                    t = e.f  # (widened when stored: a max is one of its operands, so exact; plan_extremum_flags)
                chunk += [e.identity(r.kind, t)] * n
                if pol == "compensated":
                    chunk += [e.cf(0.0, t)] * n
                    acc.chain = len(chain)  # CHAINS x (sums (n), corrections (n)), merged at each block's end
                    chain += [e.cf(0.0, t)] * (ORDERED_CHAINS * 2 * n)
                self.scratch_at += range(off, off + len(chunk) - acc.slot)
                off += len(chunk) - acc.slot
            if r.kind == "mean":
                chunk.append(e.c(0, e.i64))  # lanes counted exactly as an integer
                self.scratch_at.append(off)
                off += 1
            self.full.append(acc)
        self.exact_flag = None
        if self.n_terms:  # whether a chain lost a bit in this block (then its terms are deposited one by one)
            self.exact_flag = len(chain)
            chain.append(e.c(0, e.i1))
        self.nchunk_red = len(chunk)
        self.runs: list[_Run] = []
        for op in body.operations:
            if self.is_sorted_scatter(op):
                pol = self.lay.sink_policy[attr_str(op, "sink")]
                shape = payload_of(op.operands[0].type)
                n = size(shape)
                sink = attr_str(op, "sink")
                # copies of the body keep the mark, so every copy's scatter finds its run (ops are not compared:
                # a moved op is erased once lowered, a cloned one is another op)
                op.attributes["hawk.run"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), len(self.runs))
                run = _Run(sink, pol, n, len(chunk), self.wide_sums and self.is_wide(shape))
                self.runs.append(run)
                t = e.f64 if pol == "compensated" else e.f

                def init(v: float, t, run=run):
                    return e.splat(v, ir.VectorType.get([run.n], t)) if run.wide else e.cf(v, t)

                k = run.k
                chunk += [e.c(-1, e.i64)] + [init(-0.0, t)] * k + ([init(0.0, t)] * k if pol == "compensated" else [])
        self.n_flags = self.plan_extremum_flags(chunk)
        return chunk, chain

    def plan_extremum_flags(self, chunk: list[ir.Value]) -> int:
        """State that lets a max/min over every lane run as a plain packed max (host_emit.fast_extremum): per
        component, a flag that starts at -0.0 and takes the lanes that are NaN or zero: max adds them (and -0.0 for
        every other lane), min subtracts them (and +0.0). In any order of the adds it ends NaN when a NaN was met
        (x86 keeps a NaN operand's bits), else +0.0 exactly when a zero of the winning sign was met (+0.0 for max,
        -0.0 for min). All in the kernel's type. Host only: GPU lowerings keep arith.maximumf in float64."""
        if not self.exact_pairs:
            return 0
        e, before = self.e, len(chunk)
        for acc in self.full:
            if acc.policy in ("max", "min") and not acc.wide:
                acc.flags = len(chunk)
                chunk += [e.cf(-0.0)] * acc.n
        return len(chunk) - before

    def extremum_step(self, acc: _Acc, c: int, x: ir.Value, mask: ir.Value | None) -> None:
        """One lane into a max/min with flags: the packed max and the sum of NaNs and zeros (both masked)."""
        e, s = self.e, self.accs
        k, nk = acc.slot + c, acc.flags + c
        new = e.fast_extremum(acc.policy, s[k], x)
        s[k] = new if mask is None else e.select(mask, new, s[k])
        special = e.cmpf(_UEQ, x, e.cf(0.0))  # NaN, +0.0 or -0.0
        if mask is not None:
            special = e.op("arith.andi", special, mask)
        if acc.policy == "max":
            s[nk] = e.fast_add(s[nk], e.select(special, x, e.cf(-0.0)))
        else:  # (not an add of -x: LLVM may turn that into a subtraction, which keeps a NaN's sign)
            s[nk] = e.fast_sub(s[nk], e.select(special, x, e.cf(0.0)))

    def finish_extrema(self, final: list[ir.Value]) -> None:
        """A chunk's max/min as arith.maximumf/minimumf would give it: a NaN met wins; a zero result is +0.0 for
        max when a +0.0 was met, else -0.0 (min: -0.0 when a -0.0 was met). Both come from the flag sum."""
        e = self.e
        for acc in self.full:
            for c in range(acc.n) if acc.flags >= 0 else ():
                m, flag = final[acc.slot + c], final[acc.flags + c]
                zero = flag if acc.policy == "max" else e.op("arith.negf", flag)
                m = e.select(e.cmpf(_OEQ, m, e.cf(0.0)), zero, m)
                final[acc.slot + c] = e.select(e.cmpf(_UNO, flag, flag), flag, m)

    def is_sorted_scatter(self, op) -> bool:
        """A += scatter keyed by a Sorted[Index] plane: runs of equal keys are summed in registers (not into an
        ordered sink: each of its terms goes into the slot's exact accumulator as it is)."""
        if not is_hawk(op, "scatter") or attr_str(op, "mode") != "add" or len(op.operands) != 2:
            return False
        if self.lay.sink_policy.get(attr_str(op, "sink")) == "ordered":
            return False
        src = key_source(op.operands[1])
        spec = self.lay.sig.get(src) if src else None
        return spec is not None and spec.kind == "index" and spec.sorted

    # ---- the lane loops --------------------------------------------------------------------------------
    def build_lanes(self, lanes, kfunc):
        entry = lanes.add_entry_block()
        self.bufs = self.args(lanes)
        self.entry, self.temps = entry, {}
        body = kfunc.regions[0].blocks[0]
        self._in_lanes = True
        with ir.InsertionPoint(entry), kfunc.location:
            self.read_meta()
            live = self.chunk_guard()
            if live is not None:  # a GPU thread past the last chunk does nothing
                with ir.InsertionPoint(live.then_block):
                    self.lanes_body(body)
                    scf.YieldOp([])
            else:
                self.lanes_body(body)
            self.lanes_return()

    def chunk_guard(self):
        return None

    def lanes_body(self, body: ir.Block):
        e = self.e
        chunk0, chain0 = self.plan_state(body)
        self.nested = None
        if any(a.policy == "compensated" or a.pairs for a in self.full):
            final = self.blocked_driver(body, chunk0, chain0)
        elif self.nest_span() is not None:
            final = self.nested_driver(body, chunk0)
        elif self.column_span() is not None:
            final = self.column_driver(body, chunk0, self.column_span())
        elif len(self.axes) > 1 and not any(r.kept for r in self.lay.reductions):
            final = self.column_driver(body, chunk0, None)  # rows of a grid: coordinates without div/mod
        else:
            final = self.flat_driver(body, chunk0)
        final = list(final)
        self.finish_extrema(final)
        scratch = self.bufs[("#scratch", "scratch")]
        base = e.mul_i(self.chunk, e.c(max(self.lay.width, 1)))
        for k, v in enumerate(final[:self.nchunk_red]):
            v = e.op("arith.sitofp", v, t=e.f64) if v.type == e.i64 else e.widen(v, e.f64)
            e.store(v, scratch, e.add_i(base, e.c(self.scratch_at[k])))
        self.wide_chunk_partials(scratch, base)
        for run in self.runs:
            self.flush_run(run, final[run.slot:run.slot + run.width])

    def lane_guard(self, lane: ir.Value, lo: ir.Value, hi: ir.Value, cur: list[ir.Value]):
        """An if that runs one lane's body only when lo <= lane < hi, never speculated (a lane past the end must
        not read): (the if, the placeholder yield of `cur` ending its then-block, for lower_body to fill); its
        else-block yields `cur` unchanged."""
        e = self.e
        live = e.op("arith.andi", e.cmpi(6, lane, hi), e.cmpi(9, lane, lo))  # ult, uge
        guard = scf.IfOp(live, [v.type for v in cur], has_else=True)
        guard.operation.attributes[NO_SPECULATE] = ir.UnitAttr.get()
        with ir.InsertionPoint(guard.else_block):
            scf.YieldOp(cur)
        with ir.InsertionPoint(guard.then_block):
            anchor = scf.YieldOp(cur)
        return guard, anchor

    def move_body(self, body: ir.Block, anchor) -> None:
        for op in list(body.operations):
            if op.operation.name != "func.return":
                op.move_before(anchor)

    def lower_body(self, body: ir.Block, anchor, region_op, lane: ir.Value, accs, j=None) -> None:
        """Move the kernel body before `anchor` (a placeholder yield), lower it for `lane` with the accumulators
        `accs` (and chain `j`), and end the anchor's block with a yield of the updated accumulators."""
        block = anchor.operation.block
        self.move_body(body, anchor)
        self.lane, self.accs, self.j = lane, list(accs), j
        self.rewrite(region_op)
        anchor.operation.erase()
        with ir.InsertionPoint(block):
            scf.YieldOp(self.accs)

    def flat_driver(self, body: ir.Block, chunk0: list[ir.Value]) -> list[ir.Value]:
        e = self.e
        if self.split_scatters(body):  # computed keys in a vectorized pass first (host_ops.SplitScatters)
            return self.split_driver(body, chunk0)
        loop = scf.ForOp(self.lo, self.hi, e.c(1), chunk0)
        with ir.InsertionPoint(loop.body):
            anchor = scf.YieldOp(list(loop.inner_iter_args))
        self.lower_body(body, anchor, loop, loop.induction_variable, loop.inner_iter_args)
        return list(loop.results)

    def clone_body(self, body: ir.Block, anchor) -> list:
        """Copy the kernel body's ops before `anchor` (values remapped); the copies' top-level ops."""
        ops = [op for op in body.operations if op.operation.name != "func.return"]
        return self.clone_ops(ops, ir.InsertionPoint(anchor), {})

    @staticmethod
    def clone_ops(ops, ip, mapping: dict) -> list:
        """Copy `ops` at `ip`, each use of a value in `mapping` (and of an earlier op's result) replaced by its
        copy; `mapping` gains the copies' results. The copies' top-level ops."""
        out = []
        for op in ops:
            new = op.clone(ip=ip)
            nested = []

            def visit(o, nested=nested):
                nested.append(o)
                return ir.WalkResult.ADVANCE

            new.operation.walk(visit)
            for o in nested:
                for v in list(o.operands):
                    if v in mapping:
                        o.operation.replace_uses_of_with(v, mapping[v])
            for old_r, new_r in zip(op.results, new.results, strict=True):
                mapping[old_r] = new_r
            out.append(new)
        return out

    def nest_span(self) -> int | None:
        """Lanes per kept slot when every reduction keeping axes keeps the same leading lane axes with a sum
        ("auto"), max or min: those lanes are contiguous, so one register accumulator serves each slot."""
        kept = [r for r in self.lay.reductions if r.kept]
        if not kept or len({r.kept for r in kept}) != 1 or any(r.kind == "fold" for r in self.lay.reductions):
            return None
        k = kept[0].kept
        if list(k) != self.axes[:len(k)] or any(r.kind in ("sum", "mean") and r.policy != "auto" for r in kept) \
                or any(self.is_wide(r.payload) for r in kept):  # wide: the component loops of reduce_kept
            return None
        span = 1
        for a in self.lay.sig.lane_axes()[len(k):]:
            if a.extent is None:
                return None
            span *= a.extent
        return span

    def column_span(self) -> int | None:
        """Kept slots when every reduction keeping axes keeps the same trailing lane axes (a sum "auto", max or
        min): lane = row * span + slot, so the slot is affine in the lane and the update loop vectorizes."""
        kept = [r for r in self.lay.reductions if r.kept]
        if not kept or len({r.kept for r in kept}) != 1 or any(r.kind == "fold" for r in self.lay.reductions):
            return None
        k = kept[0].kept
        if list(k) != self.axes[len(self.axes) - len(k):] or len(k) == len(self.axes) or \
                any(r.kind in ("sum", "mean") and r.policy != "auto" for r in kept) or \
                any(self.is_wide(r.payload) for r in kept):
            return None
        span = 1
        for a in self.lay.sig.lane_axes()[len(self.axes) - len(k):]:
            span *= a.extent
        return span

    def column_driver(self, body: ir.Block, chunk0: list[ir.Value], kept_span: int | None) -> list[ir.Value]:
        """for each row: for its `span` lanes: body. With kept_span, the rows are those of the reduced axes and
        each lane updates its own kept slot (lane - row start); else the rows are the grid's first axis, whose
        coordinate (and, on a 2-D grid, the second's) the loops give without a division."""
        e = self.e
        span = kept_span
        if span is None:
            span = 1
            for a in self.lay.sig.lane_axes()[1:]:
                span *= a.extent
        rlo = e.op("arith.divui", self.lo, e.c(span))
        rhi = e.op("arith.divui", e.add_i(self.hi, e.c(span - 1)), e.c(span))
        outer = scf.ForOp(rlo, rhi, e.c(1), chunk0)
        with ir.InsertionPoint(outer.body):
            row0 = e.mul_i(outer.induction_variable, e.c(span))
            start = e.op("arith.maxui", row0, self.lo)
            end = e.op("arith.minui", e.add_i(row0, e.c(span)), self.hi)
            count = e.c(span)  # defined before the loop that uses it
            inner = scf.ForOp(start, end, e.c(1), list(outer.inner_iter_args))
            with ir.InsertionPoint(inner.body):
                offset = e.op("arith.subi", inner.induction_variable, row0)
                anchor = scf.YieldOp(list(inner.inner_iter_args))
            if kept_span is not None:
                self.kept_slot, self.kept_count = offset, count
            else:
                self.known_coords = {self.axes[0]: outer.induction_variable}
                if len(self.axes) == 2:
                    self.known_coords[self.axes[1]] = offset
            margins = own_offsets(body, self.axes) if kept_span is None and len(self.axes) == 2 else {}
            if any(margins.values()):  # neighbour reads: the interior of the grid runs without their clamps
                inner.operation.erase()
                results = self.interior_rows(body, outer, row0, start, end, span, margins)
            else:
                self.lower_body(body, anchor, inner, inner.induction_variable, inner.inner_iter_args)
                results = list(inner.results)
            self.kept_slot, self.known_coords = None, {}
            scf.YieldOp(results)
        return list(outer.results)

    def nested_driver(self, body: ir.Block, chunk0: list[ir.Value]) -> list[ir.Value]:
        """for each kept slot: for its contiguous lanes: body, the kept totals in registers; then into the slot."""
        e = self.e
        span = self.nest_span()
        kept = [r for r in self.lay.reductions if r.kept]
        klo = e.op("arith.divui", self.lo, e.c(span))
        khi = e.op("arith.divui", e.add_i(self.hi, e.c(span - 1)), e.c(span))
        outer = scf.ForOp(klo, khi, e.c(1), chunk0)
        with ir.InsertionPoint(outer.body):
            slot = outer.induction_variable
            start = e.op("arith.maxui", e.mul_i(slot, e.c(span)), self.lo)
            end = e.op("arith.minui", e.add_i(e.mul_i(slot, e.c(span)), e.c(span)), self.hi)
            inits = list(outer.inner_iter_args)
            self.nested = {}
            for r in kept:
                self.nested[r.cell] = len(inits)
                inits += [e.identity(r.kind)] * size(r.payload) + ([e.c(0, e.i64)] if r.kind == "mean" else [])
            inner = scf.ForOp(start, end, e.c(1), inits)
            with ir.InsertionPoint(inner.body):
                anchor = scf.YieldOp(list(inner.inner_iter_args))
            self.lower_body(body, anchor, inner, inner.induction_variable, inner.inner_iter_args)
            res = list(inner.results)
            n = e.c(1)
            for a in kept[0].kept:
                n = e.mul_i(n, self.ext[self.axes.index(a)])
            for r in kept:
                at0 = self.nested[r.cell]
                out = self.bufs[(r.cell, "cell")]
                for c in range(size(r.payload)):
                    at = e.add_i(e.mul_i(e.c(c), n), slot)
                    e.store(e.combine_kind(r.kind, e.load(out, at), res[at0 + c]), out, at)
                if r.kind == "mean":
                    cnt = self.bufs[(r.cell, "count")]
                    got = e.op("arith.uitofp", res[at0 + size(r.payload)], t=e.f)
                    e.store(e.add(e.load(cnt, slot), got), cnt, slot)
            scf.YieldOp(res[:len(chunk0)])
        self.nested = None
        return list(outer.results)

    def blocked_driver(self, body: ir.Block, chunk0: list[ir.Value], chain0: list[ir.Value]) -> list[ir.Value]:
        """for block: full blocks run groups of CHAINS lanes as CHAINS straight-line copies of the body (lane j
        of a group feeds chain j; LLVM's SLP vectorizer packs the copies); a partial block runs lane by lane
        under a guard."""
        e = self.e
        B, W = ORDERED_BLOCK, ORDERED_CHAINS
        blo = e.op("arith.divui", self.lo, e.c(B))
        bhi = e.op("arith.divui", e.add_i(self.hi, e.c(B - 1)), e.c(B))
        nchunk = len(chunk0)
        outer = scf.ForOp(blo, bhi, e.c(1), chunk0)
        with ir.InsertionPoint(outer.body):
            blk = outer.induction_variable
            self.wide_block_start()
            start = e.mul_i(blk, e.c(B))
            end = e.op("arith.minui", e.add_i(start, e.c(B)), self.hi)
            inits = list(outer.inner_iter_args) + list(chain0)  # every block's chains start afresh
            self.block_start = start
            full = e.op("arith.andi", e.cmpi(9, start, self.lo), e.cmpi(0, e.op("arith.subi", end, start), e.c(B)))
            split = scf.IfOp(full, [v.type for v in inits], has_else=True)
            with ir.InsertionPoint(split.then_block):
                fast = scf.ForOp(e.c(0), e.c(B // W), e.c(1), inits)
                with ir.InsertionPoint(fast.body):
                    fast_anchor = scf.YieldOp(list(fast.inner_iter_args))
                self.flush_pairs(list(fast.results), nchunk)
                scf.YieldOp(list(fast.results))
            with ir.InsertionPoint(split.else_block):
                groups = scf.ForOp(e.c(0), e.c(B // W), e.c(1), inits)
                with ir.InsertionPoint(groups.body):
                    inner = scf.ForOp(e.c(0), e.c(W), e.c(1), list(groups.inner_iter_args))
                    with ir.InsertionPoint(inner.body):
                        j = inner.induction_variable
                        lane = e.add_i(start, e.mul_i(groups.induction_variable, e.c(W)), j)
                        cur = list(inner.inner_iter_args)
                        guard, anchor = self.lane_guard(lane, self.lo, end, cur)
                        scf.YieldOp(list(guard.results))
                    scf.YieldOp(list(inner.results))
                scf.YieldOp(list(groups.results))
            # full blocks: CHAINS copies, lane j feeding chain j
            self.accs = list(fast.inner_iter_args)
            self.pending = {}
            for jj in range(W):
                with ir.InsertionPoint(fast_anchor), body.owner.location:
                    self.lane = e.add_i(start, e.mul_i(fast.induction_variable, e.c(W)), e.c(jj))
                self.j = jj
                self.rewrite_ops(self.clone_body(body, fast_anchor))
            with ir.InsertionPoint(fast_anchor), body.owner.location:
                self.ordered_chains_step()
            fast_anchor.operation.erase()
            with ir.InsertionPoint(fast.body):
                scf.YieldOp(self.accs)
            # the partial block: one lane at a time, guarded
            self.lower_body(body, anchor, guard, lane, cur, j)
            res = list(split.results)
            for acc in self.full:
                if acc.policy != "compensated":
                    continue
                if acc.wide:
                    self.wide_merge_chains(acc)
                    continue
                for c in range(acc.n):
                    for w in range(W):
                        ks = nchunk + acc.chain + w * 2 * acc.n + c
                        ns, nc = e.neumaier(res[acc.slot + c], res[acc.slot + acc.n + c], res[ks])
                        res[acc.slot + c], res[acc.slot + acc.n + c] = ns, e.add(nc, res[ks + acc.n])
            scf.YieldOp(res[:nchunk])
        return list(outer.results)

    # ---- rewriting the moved body -----------------------------------------------------------------------
    def rewrite(self, region_op):
        self.rewrite_ops([region_op])

    def rewrite_ops(self, roots: list):
        """Lower every hawk op in (and under) `roots`, with the current lane, chain and accumulators."""
        ops = []

        def visit(op):
            if is_hawk(op):
                ops.append(op)
            return ir.WalkResult.ADVANCE

        for root in roots:
            root.operation.walk(visit)
        cells = [op for op in ops if is_hawk(op, "cell")]
        ops = [op for op in ops if not is_hawk(op, "cell")]
        for op in cells:  # a cell only names where a reduction lands; the lowered reduction writes it
            op.operation.erase()
        reductions = iter(self.lay.reductions)
        full = iter(self.full)
        for op in ops:
            name = op.operation.name[5:]
            with ir.InsertionPoint(op), op.location:
                if name == "reduce":
                    r = next(reductions)
                    if r.kind == "fold":
                        self.reduce_fold(op, r)
                    elif r.kept and self.nested is not None:
                        self.reduce_nested(op, r)
                    elif r.kept:
                        self.reduce_kept(op, r)
                    else:
                        self.reduce_full(op, next(full))
                    op.operation.erase()
                    continue
                run = self.runs[ir.IntegerAttr(op.attributes["hawk.run"]).value] \
                    if name == "scatter" and "hawk.run" in op.attributes else None
                if run is not None:
                    self.sorted_step(run, op)
                    op.operation.erase()
                    continue
                new = getattr(self, f"lower_{name}")(op)
                if new is not None:
                    op.results[0].replace_all_uses_with(new)
                op.operation.erase()

    def reduce_full(self, op, acc: _Acc):
        e = self.e
        r, s = acc.r, self.accs
        v = op.operands[0]
        mask = op.operands[1] if len(op.operands) > 1 else None
        if acc.wide:
            self.reduce_wide(acc, v, mask)
            xs = []
        elif acc.policy != "ordered":
            xs = e.elems(v, r.payload)

        def keep(new, old):  # a masked lane adds nothing
            return new if mask is None else e.select(mask, new, old)

        if acc.policy == "ordered" and acc.pairs and isinstance(self.j, int):  # a full block: chain j
            self.ordered_chain_step(acc, v, mask)
        elif acc.policy == "ordered":  # each component into this chunk's exact accumulator for it
            exact = self.bufs[("#exact", "exact")]
            w = exact_emit.words_of(e.f)
            base = e.add_i(e.mul_i(self.chunk, e.c(self.lay.exact_width(exact_emit.fmt(e.f)))), e.c(acc.exact_at))
            for c, x in self.components(v, r.payload):
                exact_emit.deposit(e, exact, e.add_i(base, e.mul_i(c, e.c(w))), x, mask)
        elif acc.policy == "compensated":
            for c, x in enumerate(xs):
                x = e.widen(x, e.f64)
                if isinstance(self.j, int):  # a straight-line copy: its own chain
                    ks = self.nchunk_red_total() + acc.chain + self.j * 2 * acc.n + c
                    kc = ks + acc.n
                else:
                    ks, kc = acc.slot + c, acc.slot + acc.n + c
                ns, nc = e.neumaier(s[ks], s[kc], x)
                s[ks] = keep(ns, s[ks])
                s[kc] = keep(nc, s[kc])
        else:
            for c, x in enumerate(xs):
                if acc.flags >= 0:  # in the kernel's type (plan_state)
                    self.extremum_step(acc, c, x, mask)
                    continue
                x = e.widen(x, e.f64)
                if acc.policy == "fast":
                    if mask is not None:
                        x = e.select(mask, x, e.cf(0.0, e.f64))
                    s[acc.slot + c] = e.fast_add(s[acc.slot + c], x)
                else:
                    s[acc.slot + c] = keep(e.extremum(acc.policy, s[acc.slot + c], x), s[acc.slot + c])
        if r.kind == "mean":
            k = acc.slot + (0 if acc.policy == "ordered" or acc.wide else
                            acc.n * (2 if acc.policy == "compensated" else 1))
            one = e.c(1, e.i64) if mask is None else e.op("arith.extui", mask, t=e.i64)
            s[k] = e.op("arith.addi", s[k], one)

    def term_buffer(self) -> ir.Value:
        """The current block's terms of the ordered sums kept in pairs (component-major, ORDERED_BLOCK each)."""
        return self.temp(self.n_terms * ORDERED_BLOCK, self.e.f, tag="terms")

    def ordered_chain_step(self, acc: _Acc, v: ir.Value, mask: ir.Value | None) -> None:
        """Copy j of a group in a full block: the lane's terms into the block's term buffer, and kept for
        ordered_chains_step, which adds the group's terms to the chains once every copy has run."""
        e = self.e
        at = e.op("arith.subi", self.lane, self.block_start)
        for c, x in enumerate(e.elems(v, acc.r.payload)):
            if mask is not None:
                x = e.select(mask, x, e.cf(0.0))
            e.store(x, self.term_buffer(), e.add_i(at, e.c((acc.term_at + c) * ORDERED_BLOCK)))
            self.pending.setdefault((acc.chain, c), [None] * ORDERED_CHAINS)[self.j] = x

    def ordered_chains_step(self) -> None:
        """A group's terms (one per chain) into the chains' (high, low) pairs: two error-free TwoSums on
        vectors of ORDERED_CHAINS lanes. When the second TwoSum's error is not zero a pair no longer holds its
        chain's exact sum: the block's flag is set and flush_pairs deposits the block's terms instead (as it does
        when a sum overflowed: once inf or NaN, a pair stays so to the block's end)."""
        e = self.e
        s = self.accs
        lanes = ir.VectorType.get([ORDERED_CHAINS], e.f)
        zero = e.splat(0.0, lanes)
        bad = None
        for acc in self.full:
            if not acc.pairs:
                continue
            for c in range(acc.n):
                xv = create("vector.from_elements", self.pending[(acc.chain, c)], [lanes]).result
                k = self.nchunk_red_total() + acc.chain + 2 * c
                s1, e1 = e.two_sum(s[k], xv)
                s2, e2 = e.two_sum(s[k + 1], e1)
                s[k], s[k + 1] = s1, s2
                lost = e.cmpf(_UNE, e2, zero)  # (a sum that overflows stays inf or NaN: flush_pairs looks)
                bad = lost if bad is None else e.op("arith.ori", bad, lost)
        if bad is None:
            return
        k = self.nchunk_red_total() + self.exact_flag
        anyv = create("vector.reduction", [bad], [e.i1], {"kind": ir.Attribute.parse("#vector.kind<or>")}).result
        s[k] = e.op("arith.ori", s[k], anyv)

    def flush_pairs(self, res: list[ir.Value], nchunk: int) -> None:
        """The end of a full block: deposit each chain's (high, low) pair into the chunk's exact accumulators,
        or, when a chain lost a bit, the block's terms one by one. Either way the accumulators gain exactly
        the block's terms."""
        if self.exact_flag is None:
            return
        e = self.e
        exact = self.bufs[("#exact", "exact")]
        w = exact_emit.words_of(e.f)
        chunk_base = e.mul_i(self.chunk, e.c(self.lay.exact_width(exact_emit.fmt(e.f))))
        redo = res[nchunk + self.exact_flag]
        lanes = ir.VectorType.get([ORDERED_CHAINS], e.f)
        for acc in self.full:
            for k in range(acc.chain, acc.chain + 2 * acc.n) if acc.pairs else ():
                v = res[nchunk + k]  # v - v is NaN where v is inf or NaN
                odd = e.cmpf(_UNE, e.op("arith.subf", v, v), e.splat(0.0, lanes))
                redo = e.op("arith.ori", redo, create("vector.reduction", [odd], [e.i1],
                                                      {"kind": ir.Attribute.parse("#vector.kind<or>")}).result)
        branch = scf.IfOp(redo, [], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            for acc in self.full:
                if not acc.pairs:
                    continue
                for c in range(acc.n):
                    base = e.add_i(chunk_base, e.c(acc.exact_at + c * w))
                    each = scf.ForOp(e.c(0), e.c(ORDERED_BLOCK), e.c(1), [])
                    with ir.InsertionPoint(each.body):
                        at = e.add_i(each.induction_variable, e.c((acc.term_at + c) * ORDERED_BLOCK))
                        exact_emit.deposit(e, exact, base, e.load(self.term_buffer(), at))
                        scf.YieldOp([])
            scf.YieldOp([])
        with ir.InsertionPoint(branch.else_block):
            for acc in self.full:
                if not acc.pairs:
                    continue
                for c in range(acc.n):
                    base = e.add_i(chunk_base, e.c(acc.exact_at + c * w))
                    for k in (nchunk + acc.chain + 2 * c, nchunk + acc.chain + 2 * c + 1):
                        for j in range(ORDERED_CHAINS):
                            exact_emit.deposit(e, exact, base, vector.extract(res[k], [], [j]))
            scf.YieldOp([])

    def reduce_nested(self, op, r):
        """A kept-axis total of this slot's lanes, in registers (fast sums may be reassociated)."""
        e = self.e
        s, at0 = self.accs, self.nested[r.cell]
        mask = op.operands[1] if len(op.operands) > 1 else None
        for c, x in enumerate(e.elems(op.operands[0], r.payload)):
            k = at0 + c
            if r.kind in ("sum", "mean"):
                if mask is not None:
                    x = e.select(mask, x, e.cf(0.0))
                s[k] = e.fast_add(s[k], x)
            else:
                new = e.extremum(r.kind, s[k], x)
                s[k] = new if mask is None else e.select(mask, new, s[k])
        if r.kind == "mean":
            k = at0 + size(r.payload)
            one = e.c(1, e.i64) if mask is None else e.op("arith.extui", mask, t=e.i64)
            s[k] = e.op("arith.addi", s[k], one)

    def nchunk_red_total(self) -> int:
        """Chain state follows the whole chunk state (reductions and sorted runs) in the iter_args."""
        return self.nchunk_red + sum(r.width for r in self.runs) + self.n_flags


def lower_host(module: ir.Module, layout: Layout, ftype: ir.Type, itypes: dict[str, ir.Type]) -> None:
    HostLowering(module, layout, ftype, itypes).run()
